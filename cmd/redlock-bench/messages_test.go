package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/internal/redistest"
)

// An error is printed as one line with one prefix, whatever the error's
// own shape: errors.Join and some engine errors (a Lock deadline) hold
// line breaks, which would split the line a script reads.
func TestExitCodePrintsOneLine(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("plain"), "redlock-bench: plain\n"},
		{errors.Join(errors.New("first"), errors.New("second")), "redlock-bench: first; second\n"},
		{fmt.Errorf("acquire: %w", errors.New("context deadline exceeded\nwhile waiting\n")), "redlock-bench: acquire: context deadline exceeded; while waiting\n"},
		{&exitError{code: 1, msg: "line one\r\nline two"}, "redlock-bench: line one; line two\n"},
	} {
		var stderr bytes.Buffer
		exitCode(c.err, &stderr)
		if stderr.String() != c.want {
			t.Errorf("%q: printed %q, want %q", c.err.Error(), stderr.String(), c.want)
		}
	}
	// Informational lines too.
	var stderr bytes.Buffer
	fmt.Fprintf(prefixWriter{w: &stderr}, "warning: removing keys: %v\n", errors.Join(errors.New("a"), errors.New("b")))
	if want := "redlock-bench: warning: removing keys: a; b\n"; stderr.String() != want {
		t.Errorf("log line %q, want %q", stderr.String(), want)
	}
}

// A failure inside package bench reaches the user without the package's
// name stacked after the command's: "redlock-bench: 3 of 3 masters
// unreachable", not "redlock-bench: bench: 3 of 3 ...".
func TestFailureHasNoStackedPrefix(t *testing.T) {
	dead := redistest.DeadAddrs(t, 3)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--masters", strings.Join(dead, ","), "--duration", "1s", "--out", t.TempDir() + "/run"}, &stdout, &stderr)
	last := lastLine(stderr.String())
	if code != 1 || !strings.HasPrefix(last, "redlock-bench: 3 of 3 masters unreachable: ") {
		t.Errorf("exit %d, last line %q", code, last)
	}
	for _, pkg := range []string{"bench: ", "fault: ", "results: "} {
		if strings.Contains(stderr.String(), ": "+pkg) {
			t.Errorf("stderr stacks the prefix %q: %q", pkg, stderr.String())
		}
	}
}

// A failure reported by package results (here, merge on a directory that
// holds no run) carries no "results: " inside the command's message.
func TestResultsFailureHasNoStackedPrefix(t *testing.T) {
	empty := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"merge", empty, empty, "--out", t.TempDir() + "/m"}, &stdout, &stderr)
	if code != 1 || strings.Contains(stderr.String(), ": results: ") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
