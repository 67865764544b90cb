package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// The progress line is rewritten in place only on a terminal: /dev/null
// is a character device but not a terminal, and neither is a pipe, a file
// or a buffer. A pseudo-terminal's master side is one.
func TestIsTerminal(t *testing.T) {
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, c := range []struct {
		name string
		w    io.Writer
	}{
		{"/dev/null", devNull}, {"pipe", pw}, {"file", file}, {"buffer", &bytes.Buffer{}},
	} {
		if isTerminal(c.w) {
			t.Errorf("%s: taken for a terminal", c.name)
		}
	}
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to check the positive case on: %v", err)
	}
	defer pty.Close()
	if !isTerminal(pty) {
		t.Error("a pseudo-terminal is not taken for a terminal")
	}
}
