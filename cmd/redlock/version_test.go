package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"exec", "--version"}, {"exec", "--ttl", "bogus", "--version"}} {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		if code != 0 || !strings.HasPrefix(stdout.String(), "redlock ") || !strings.Contains(stdout.String(), runtime.Version()) || stderr.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
	// After "--", --version belongs to the command.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"exec", "r", "--", "echo", "--version"}, &stdout, &stderr); code == 0 && strings.HasPrefix(stdout.String(), "redlock ") {
		t.Errorf("the command's --version was taken as redlock's: %q", stdout.String())
	}
}
