package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// Every way of asking for help or the version, and the malformed ones:
// help goes to stdout with status 0; a bad form is one line on stderr with
// status 64 and nothing on stdout; bare 'redlock' prints the help on
// stderr with 64, as a usage error.
func TestHelpPaths(t *testing.T) {
	t.Parallel()
	const (
		top      = "redlock runs commands under a distributed lock"
		execHelp = "Usage: redlock exec [flags] RESOURCE -- COMMAND [ARG...]"
		ver      = "redlock "
	)
	for _, c := range []struct {
		args   []string
		status int
		stdout string // its start; "" for none
		stderr string // a part of its one line; "" for none
	}{
		{[]string{"help"}, 0, top, ""},
		{[]string{"-h"}, 0, top, ""},
		{[]string{"--help"}, 0, top, ""},
		{[]string{"help", "exec"}, 0, execHelp, ""},
		{[]string{"-h", "exec"}, 0, execHelp, ""},
		{[]string{"--help", "exec"}, 0, execHelp, ""},
		{[]string{"exec", "--help"}, 0, execHelp, ""},
		{[]string{"exec", "-h"}, 0, execHelp, ""},
		{[]string{"exec", "--masters", "a:1", "--help", "r", "--", "true"}, 0, execHelp, ""},
		{[]string{"help", "help"}, 0, top, ""},
		{[]string{"help", "status"}, 0, "Usage: redlock status [flags] RESOURCE...", ""},
		{[]string{"status", "--help"}, 0, "Usage: redlock status [flags] RESOURCE...", ""},
		{[]string{"help", "list"}, 0, "Usage: redlock list [flags]", ""},
		{[]string{"list", "-h"}, 0, "Usage: redlock list [flags]", ""},
		{[]string{"help", "unlock"}, 0, "Usage: redlock unlock [flags] RESOURCE --value VALUE", ""},
		{[]string{"unlock", "--masters", "a:1", "--help"}, 0, "Usage: redlock unlock [flags] RESOURCE --value VALUE", ""},
		{[]string{"help", "bogus"}, exitUsage, "", `unknown help topic "bogus" (known: exec, status, list, unlock)`},
		{[]string{"help", "exec", "extra"}, exitUsage, "", "help takes one topic"},
		{[]string{"help", "--version"}, exitUsage, "", `unknown help topic "--version"`},
		{[]string{"-h", "bogus"}, exitUsage, "", `unknown help topic "bogus"`},
		{[]string{"version"}, 0, ver, ""},
		{[]string{"--version"}, 0, ver, ""},
		{[]string{"exec", "--version"}, 0, ver, ""},
		{[]string{"version", "--bogus"}, exitUsage, "", `version takes no arguments, got "--bogus"`},
		{[]string{"version", "exec"}, exitUsage, "", "version takes no arguments"},
		{[]string{"--version", "--bogus"}, exitUsage, "", "--version takes no arguments"},
		{[]string{"--version", "exec"}, exitUsage, "", "--version takes no arguments"},
		{[]string{"--bogus"}, exitUsage, "", `unknown command "--bogus" (known: exec, status, list, unlock, help, version)`},
		{[]string{"bogus"}, exitUsage, "", `unknown command "bogus"`},
		{[]string{"exec", "--bogus"}, exitUsage, "", "unknown flag: --bogus"},
	} {
		var stdout, stderr bytes.Buffer
		status := run(c.args, &stdout, &stderr)
		ok := status == c.status
		if c.stdout == "" {
			ok = ok && stdout.Len() == 0
		} else {
			ok = ok && strings.HasPrefix(stdout.String(), c.stdout)
		}
		if c.stderr == "" {
			ok = ok && stderr.Len() == 0
		} else {
			ok = ok && strings.HasPrefix(stderr.String(), "redlock: ") && strings.Contains(stderr.String(), c.stderr) &&
				strings.Count(stderr.String(), "\n") == 1
		}
		if !ok {
			t.Errorf("redlock %q: status %d, stdout %.80q, stderr %q; want %d, stdout starting %q, stderr with %q",
				c.args, status, stdout.String(), stderr.String(), c.status, c.stdout, c.stderr)
		}
	}

	// Bare redlock: the help, as a usage error.
	var stdout, stderr bytes.Buffer
	if status := run(nil, &stdout, &stderr); status != exitUsage || stdout.Len() != 0 || !strings.HasPrefix(stderr.String(), top) {
		t.Errorf("redlock: status %d, stdout %q, stderr %.80q; want %d and the help on stderr", status, stdout.String(), stderr.String(), exitUsage)
	}
}

// The help says where --version is taken, and exec's help lists it among
// its flags, as it is accepted there.
func TestHelpListsVersion(t *testing.T) {
	t.Parallel()
	var top, ex, stderr bytes.Buffer
	run([]string{"help"}, &top, &stderr)
	run([]string{"help", "exec"}, &ex, &stderr)
	for _, s := range []string{"redlock version", "--version", "redlock help exec"} {
		if !strings.Contains(top.String(), s) {
			t.Errorf("redlock help does not mention %q:\n%s", s, top.String())
		}
	}
	if !strings.Contains(ex.String(), "\n      --version ") {
		t.Errorf("redlock help exec does not list --version among its flags:\n%s", ex.String())
	}
	var v bytes.Buffer
	run([]string{"--version"}, &v, &stderr)
	if !strings.Contains(v.String(), runtime.Version()) {
		t.Errorf("--version: %q", v.String())
	}
}
