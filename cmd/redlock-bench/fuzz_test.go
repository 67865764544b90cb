package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// FuzzParseRunFlags feeds arbitrary command lines to run's flag parser:
// it must never panic, and every rejection must be one line that names the
// flag at fault (or the stray argument), as the CLI promises for bad input.
func FuzzParseRunFlags(f *testing.F) {
	for _, seed := range []string{
		"--workers 8 --resources 10",
		"--workers 0",
		"--hold exp:1ms --mode wait --ttl 300ms --extend",
		"--distribution zipf:1.1 --rate 2000",
		"--masters 127.0.0.1:1,127.0.0.1:2 --fault stall:0@1s+1s",
		"--fault kill:9@1s --quarantine sometimes",
		"--start-at yesterday --duration -1s",
		"--metrics-addr :99999",
		"--metrics-addr 127.0.0.1:0 --engine redsync-goredis",
		"--nonsense",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		_, _, err := parseRunFlags(strings.Fields(line))
		if err == nil || errors.Is(err, pflag.ErrHelp) {
			return
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Fatalf("%q: error spans lines: %q", line, msg)
		}
		if !strings.Contains(msg, "-") && !strings.HasPrefix(msg, "run: unexpected argument") {
			t.Fatalf("%q: error names no flag: %q", line, msg)
		}
	})
}
