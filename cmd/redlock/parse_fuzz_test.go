package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/engine"
)

// FuzzParseExec: any arguments give either usable options or a usage
// error (status 64) with a one-line message; never a panic.
func FuzzParseExec(f *testing.F) {
	for _, s := range []string{
		"--masters 127.0.0.1:1,127.0.0.1:2,127.0.0.1:3 r -- true",
		"--masters a:1 --ttl 1s --wait 2s --grace 0s --extend-every 100ms --fencing r -- sh -c x",
		"--masters a:1 --max-ttl 1h --ttl 30s --quarantine observed r -- true",
		"--masters a:1 --user u -a p --tls --cacert /nonexistent r -- true",
		"--masters a:1,a:1 r -- true",
		"--masters a:1 --permits 3 --fencing r -- true",
		"--masters a:1 --shared r -- true",
		"--masters a:1 --exclusive --fencing r -- true",
		"--masters a:1 --shared --permits 2 r -- true",
		"--masters a:1 --ttl 1500100us r -- true",
		"--masters a:1 -- true",
		"--masters a:1 r",
		"--help",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var stdout bytes.Buffer
		o, err := parseExec(strings.Split(line, " "), &stdout)
		var se *statusError
		switch {
		case err != nil:
			if !errors.As(err, &se) || se.code != exitUsage || se.msg == "" || strings.Contains(se.msg, "\n") {
				t.Fatalf("%q: error %#v, want a one-line usage error", line, err)
			}
		case o == nil:
			if stdout.Len() == 0 {
				t.Fatalf("%q: neither options nor help", line)
			}
		default:
			if o.resource == "" || len(o.argv) == 0 || len(o.masters) == 0 || o.ttl < minTTL || o.ttl > maxTTL ||
				o.maxTTL != 0 && o.maxTTL < o.ttl || o.wait < 0 || o.grace < 0 || o.extendEvery < 0 || o.extendEvery >= o.ttl ||
				o.extendEvery != 0 && o.extendEvery < o.ttl/100 ||
				o.mode == modePermit && (o.permits < 1 || o.permits > engine.MaxPermits) || o.mode == modeShared && o.fencing {
				t.Fatalf("%q: accepted %+v", line, *o)
			}
		}
	})
}
