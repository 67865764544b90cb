package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/spf13/pflag"
)

const listUsage = `Usage: redlock list [flags]

Lists the names of the locks, semaphores and read/write locks that a
quorum of the masters holds a key for, starting with --prefix, sorted,
one per line: at most --limit of them, then, on stderr, how to ask for
the next page (--after the last name shown). It walks each master's keys
with SCAN (never KEYS), a batch at a time, so that a master with millions
of keys keeps answering its other clients meanwhile; 'redlock status'
tells what holds each name.

Flags:
%s
Exit status:
  0    listed (none, if nothing matches)
  64   usage: bad flags, arguments or addresses
  69   unavailable: fewer than a quorum of the masters could be walked
  70   any other failure of redlock's own
  78   the masters cannot be used as configured (not independent)
`

// maxListLimit bounds --limit: what one page holds in memory and prints.
const maxListLimit = 1_000_000

type listOptions struct {
	masterOptions
	prefix  string
	after   string
	limit   int
	json    bool
	timeout time.Duration
}

func parseList(args []string, stdout io.Writer) (*listOptions, error) {
	fs := pflag.NewFlagSet("redlock list", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	mf := registerMasters(fs)
	prefix := fs.String("prefix", "", "list the names that start with this")
	after := fs.String("after", "", "list the names that sort after this one: the last of the previous page")
	limit := fs.Int("limit", 1000, fmt.Sprintf("list at most this many names (1 to %d)", maxListLimit))
	asJSON := fs.Bool("json", false, `print a JSON object: {"names": [...], "more": true if --limit cut the list}`)
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for the masters' walk, connecting included")
	mf.registerConn()
	if ok, err := parseFlags(fs, "list", listUsage, args, stdout); !ok {
		return nil, err
	}
	o := &listOptions{prefix: *prefix, after: *after, limit: *limit, json: *asJSON, timeout: *timeout}
	var err error
	if o.masterOptions, err = mf.parse("list"); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, usageErrorf("list: takes no arguments, got %s (a prefix is --prefix)", quoteAll(fs.Args()))
	case o.limit < 1 || o.limit > maxListLimit:
		return nil, usageErrorf("list: --limit %d is out of range: want 1 to %d", o.limit, maxListLimit)
	case o.timeout <= 0:
		return nil, usageErrorf("list: --timeout must be > 0, got %s", o.timeout)
	}
	return o, nil
}

func listCommand(args []string, stdout, stderr io.Writer) error {
	o, err := parseList(args, stdout)
	if err != nil || o == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	l, err := opsConnect(ctx, "list", o.masterOptions, o.timeout, stderr)
	if err != nil {
		return err
	}
	defer closeWithin(l)
	// One more than a page tells whether there is a next one. Past
	// --after, the names before it count too: List pages by count only.
	want := o.limit + 1
	if o.after != "" {
		want = 0
	}
	names, err := l.List(ctx, o.prefix, want)
	switch {
	case err == nil:
	case errors.Is(err, engine.ErrNoQuorum):
		return statusErrorf(exitUnavailable, "list: %s", engineText(err))
	case ctx.Err() != nil:
		return statusErrorf(exitUnavailable, "list: the masters' walk did not end within --timeout %s", shortDuration(o.timeout))
	default:
		return fmt.Errorf("list: %s", engineText(err))
	}
	if o.after != "" {
		i := 0
		for i < len(names) && names[i] <= o.after {
			i++
		}
		names = names[i:]
	}
	more := len(names) > o.limit
	if more {
		names = names[:o.limit]
	}
	if o.json {
		if names == nil {
			names = []string{}
		}
		b, _ := json.Marshal(struct {
			Names []string `json:"names"`
			More  bool     `json:"more"`
		}{names, more})
		fmt.Fprintf(stdout, "%s\n", b)
		return nil
	}
	for _, n := range names {
		fmt.Fprintln(stdout, quoteName(n))
	}
	if more {
		fmt.Fprintf(stderr, "redlock: list: --limit %d reached: the next page is --after %s\n", o.limit, shellQuote(names[len(names)-1]))
	}
	return nil
}

// shellQuote is s as one shell word.
func shellQuote(s string) string {
	safe := s != ""
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ':' || c == '.' || c == '/' || c == '=' || c == ',' || c == '@' || c == '+') {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	var b []byte
	b = append(b, '\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			b = append(b, `'\''`...)
			continue
		}
		b = append(b, s[i])
	}
	return string(append(b, '\''))
}
