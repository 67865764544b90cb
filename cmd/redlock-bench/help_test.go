package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Every way of asking for help works, and each command's help is the same
// whichever way it is asked for: "help X", "X --help", "X -h". Each
// command's help lists --version, which every command takes. Before,
// "help --help" failed, and only run's and report's help listed
// --version.
func TestHelpPaths(t *testing.T) {
	help := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	_, top, _ := help("help")
	if !strings.HasPrefix(top, "redlock-bench drives") {
		t.Fatalf("help: %q", top)
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help", "--help"}, {"help", "-h"}, {"help", "help"}, {"help", "help", "--help"}} {
		if code, out, errOut := help(args...); code != 0 || out != top || errOut != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want the usage", args, code, out, errOut)
		}
	}
	for _, cmd := range commandNames() {
		code, want, errOut := help(cmd, "--help")
		if code != 0 || want == "" || errOut != "" || want == top {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q", cmd, code, want, errOut)
			continue
		}
		for _, args := range [][]string{{"help", cmd}, {cmd, "-h"}, {"help", cmd, "--help"}} {
			if code, out, errOut := help(args...); code != 0 || out != want || errOut != "" {
				t.Errorf("%q: exit %d, stderr %q, stdout:\n%s\nwant what %s --help prints:\n%s", args, code, errOut, out, cmd, want)
			}
		}
		if cmd != "version" && !strings.Contains(want, "--version") {
			t.Errorf("%s --help does not list --version:\n%s", cmd, want)
		}
		if !strings.Contains(top, "redlock-bench "+cmd+" ") {
			t.Errorf("the usage does not list %s:\n%s", cmd, top)
		}
	}
}

// version takes no arguments: "version --bogus" was accepted.
func TestVersionTakesNoArguments(t *testing.T) {
	for _, args := range [][]string{{"version", "--bogus"}, {"version", "extra"}} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, &stdout, &stderr)
		if want := "redlock-bench: version: takes no arguments, got \"" + args[1] + "\"\n"; code != 2 || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, %q", args, code, stdout.String(), stderr.String(), want)
		}
	}
}
