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

// FuzzParseOps: any arguments to status, list or unlock give either
// options or help, or a one-line usage error (status 64); never a panic.
// unlock's options always name the holder, or force the resource they
// name twice.
func FuzzParseOps(f *testing.F) {
	for _, s := range []string{
		"status --masters a:1,b:2,c:3 r1 r2",
		"status --masters a:1 --json --timeout 1s r",
		"status --masters a:1",
		"list --masters a:1 --prefix job: --limit 10 --after job:9 --json",
		"list --masters a:1 --limit 0",
		"list --masters a:1 extra",
		"unlock --masters a:1 r --value v",
		"unlock --masters a:1 r --token 12",
		"unlock --masters a:1 r --force r",
		"unlock --masters a:1 r --force s",
		"unlock --masters a:1 r",
		"unlock --masters a:1 r --value v --token 1",
		"unlock --help",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, " ")
		var stdout bytes.Buffer
		var (
			opts any
			err  error
		)
		switch args[0] {
		case "status":
			var o *statusOptions
			o, err = parseStatus(args[1:], &stdout)
			if o != nil {
				opts = o
				if len(o.resources) == 0 || len(o.masters) == 0 || o.timeout <= 0 {
					t.Fatalf("%q: accepted %+v", line, *o)
				}
			}
		case "list":
			var o *listOptions
			o, err = parseList(args[1:], &stdout)
			if o != nil {
				opts = o
				if o.limit < 1 || o.limit > maxListLimit || len(o.masters) == 0 || o.timeout <= 0 {
					t.Fatalf("%q: accepted %+v", line, *o)
				}
			}
		default:
			var o *unlockOptions
			o, err = parseUnlock(args[1:], &stdout)
			if o != nil {
				opts = o
				named := 0
				if o.value != "" {
					named++
				}
				if o.byToken {
					named++
				}
				if o.force {
					named++
				}
				if o.resource == "" || named != 1 || o.byToken && o.token <= 0 || len(o.masters) == 0 {
					t.Fatalf("%q: accepted %+v", line, *o)
				}
			}
		}
		var se *statusError
		switch {
		case err != nil:
			if !errors.As(err, &se) || se.code != exitUsage || se.msg == "" || strings.Contains(se.msg, "\n") {
				t.Fatalf("%q: error %#v, want a one-line usage error", line, err)
			}
		case opts == nil && stdout.Len() == 0:
			t.Fatalf("%q: neither options nor help", line)
		}
	})
}
