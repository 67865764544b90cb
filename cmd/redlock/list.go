package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/spf13/pflag"
)

const listUsage = `Usage: redlock list [flags]

Lists the names of the locks, semaphores and read/write locks that a
quorum of the masters holds a key for, starting with --prefix, one per
line, as it finds them (in the masters' order, not sorted): at most
--limit of them, then, on stderr, how to ask for the next page
(--cursor, naming where the walk was). It walks the masters' keys with
SCAN (never KEYS), a batch at a time, so that a master with millions of
keys keeps answering its other clients meanwhile, and it holds a few
batches of names at a time, however many there are. --sorted (or
--after) lists them sorted instead, after --after: it walks every key
before it prints, and holds up to twice --limit names. 'redlock status'
tells what holds each name.

Each name is printed once, even one held both as a lock and as a
semaphore, and one a master's SCAN answers twice (after its key table
shrank: caught unless its keys fell more than about 1000-fold between
two SCAN calls). It may come twice when a master fails during the walk
and another takes its place (the names printed are not kept: memory
stays a few batches), or when its keys change as the walk goes by;
--sorted prints each once regardless.

--json prints one JSON object, on one line, whatever happens once the
masters answered: {"names": [...], "more": true if --limit cut the
list, "cursor": the next page's}. A walk that fails ends it with the
names printed so far, "more": false, "error": what stderr says, and
(unsorted, after a name) "cursor": the last name's, which resumes the
walk after it; the exit status is the failure's (69 or 70). So
'redlock list --json | jq' always parses, and a listing cut short has
an "error" (jq -e '.error == null' fails on it).

Flags:
%s
Exit status:
  0    listed (none, if nothing matches)
  64   usage: bad flags, arguments or addresses, or a --cursor of another listing
  69   unavailable: fewer than a quorum of the masters could be walked,
       or a master failed during the walk, so that a name a bare quorum
       held with it may be missing (the names printed stand)
  70   any other failure of redlock's own
  78   the masters cannot be used as configured (not independent)
`

// maxListLimit bounds --limit: what one page prints (and, sorted, holds
// in memory).
const maxListLimit = 1_000_000

type listOptions struct {
	masterOptions
	prefix  string
	after   string
	cursor  string
	sorted  bool
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
	cursor := fs.String("cursor", "", "go on where the previous page stopped (stderr named it)")
	sorted := fs.Bool("sorted", false, "list the names sorted: after a walk of every key")
	after := fs.String("after", "", "list the names that sort after this one, sorted: the last of the previous page")
	limit := fs.Int("limit", 1000, fmt.Sprintf("list at most this many names (1 to %d)", maxListLimit))
	asJSON := fs.Bool("json", false, `print a JSON object: {"names": [...], "more": true if --limit cut the list, "cursor": the next page's}`)
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for the masters' walk, connecting included")
	mf.registerConn()
	if ok, err := parseFlags(fs, "list", listUsage, args, stdout); !ok {
		return nil, err
	}
	o := &listOptions{prefix: *prefix, after: *after, cursor: *cursor, sorted: *sorted || *after != "",
		limit: *limit, json: *asJSON, timeout: *timeout}
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
	case o.cursor != "" && o.sorted:
		return nil, usageErrorf("list: --cursor pages the listing in the masters' order, --sorted and --after sorted: take one")
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
	failed := func(err error) error { return listError(ctx, o, err) }
	if o.sorted {
		return listSorted(ctx, l, o, stdout, stderr, failed)
	}
	return listStream(ctx, l, o, stdout, stderr, failed)
}

// listError is the walk's failure err in redlock's words, with its exit
// status.
func listError(ctx context.Context, o *listOptions, err error) error {
	// One line: the engine joins the masters' failures with newlines.
	text := strings.ReplaceAll(engineText(err), "\n", "; ")
	// The engine's walk errors begin "list PREFIX:" already.
	if !strings.HasPrefix(text, "list ") {
		text = "list: " + text
	}
	switch {
	case errors.Is(err, engine.ErrNoQuorum), errors.Is(err, engine.ErrIncomplete):
		return statusErrorf(exitUnavailable, "%s", text)
	case errors.Is(err, engine.ErrBadCursor):
		return usageErrorf("list: --cursor: %s", engineText(err))
	case ctx.Err() != nil:
		return statusErrorf(exitUnavailable, "list: the masters' walk did not end within --timeout %s", shortDuration(o.timeout))
	default:
		return statusErrorf(exitSoftware, "%s", text)
	}
}

// jsonError is the "error" member that ends a --json listing the walk's
// failure err cut short: the message stderr shows after "redlock: ".
func jsonError(err error) string {
	return `,"error":` + jsonString(err.Error())
}

// listStream prints the names as the walk finds them, a few at a time
// (see flushing), and stops the walk at --limit. With --json, a walk
// that fails ends the object it began: the names printed, "more"
// false, the last one's cursor, and the error.
func listStream(ctx context.Context, l *engine.Locker, o *listOptions, stdout, stderr io.Writer, failed func(error) error) error {
	w := newFlushing(stdout, 100*time.Millisecond)
	defer w.stop()
	n, last, more := 0, engine.Listed{}, false
	if o.json {
		w.print(`{"names":[`)
	}
	for x, err := range l.WalkFrom(ctx, o.prefix, o.cursor) {
		if err != nil {
			err = failed(err)
			if o.json {
				w.print(`],"more":false`)
				if n > 0 {
					w.print(`,"cursor":`, jsonString(last.Cursor()))
				}
				w.print(jsonError(err), "}\n")
			}
			w.stop()
			return err
		}
		if n == o.limit {
			more = true // one past the page: there is a next one
			break
		}
		switch {
		case !o.json:
			w.print(quoteName(x.Name), "\n")
		case n == 0:
			w.print(jsonString(x.Name))
		default:
			w.print(",", jsonString(x.Name))
		}
		n, last = n+1, x
	}
	next := ""
	if more {
		next = last.Cursor()
	}
	if o.json {
		w.print(`],"more":`, strconv.FormatBool(more))
		if more {
			w.print(`,"cursor":`, jsonString(next))
		}
		w.print("}\n")
	}
	w.stop()
	if more && !o.json {
		fmt.Fprintf(stderr, "redlock: list: --limit %d reached: the next page is --cursor %s\n", o.limit, next)
	}
	return nil
}

// listSorted prints the first --limit names after --after, sorted, once
// the walk has ended, keeping no more than about twice --limit names.
// With --json, a walk that fails prints no names, and the error.
func listSorted(ctx context.Context, l *engine.Locker, o *listOptions, stdout, stderr io.Writer, failed func(error) error) error {
	keep := o.limit + 1 // one more than a page tells whether there is a next one
	var names []string
	for x, err := range l.Walk(ctx, o.prefix) {
		if err != nil {
			err = failed(err)
			if o.json {
				fmt.Fprintf(stdout, `{"names":[],"more":false%s}`+"\n", jsonError(err))
			}
			return err
		}
		if o.after != "" && x.Name <= o.after {
			continue
		}
		names = append(names, x.Name)
		if len(names) >= 2*keep {
			names = firstSorted(names, keep)
		}
	}
	names = firstSorted(names, keep)
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
	w := bufio.NewWriter(stdout)
	for _, n := range names {
		w.WriteString(quoteName(n))
		w.WriteByte('\n')
	}
	w.Flush()
	if more {
		fmt.Fprintf(stderr, "redlock: list: --limit %d reached: the next page is --after %s\n", o.limit, shellQuote(names[len(names)-1]))
	}
	return nil
}

// firstSorted is the first n of names, sorted and each once.
func firstSorted(names []string, n int) []string {
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > n {
		clear(names[n:])
		names = names[:n]
	}
	return names
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// flushing buffers what is printed, and writes it out every period: a
// listing of a million names costs a few hundred writes rather than a
// million, and a name found after a pause in the walk is shown within a
// period all the same.
type flushing struct {
	mu   sync.Mutex
	w    *bufio.Writer
	done chan struct{}
	once sync.Once
}

func newFlushing(out io.Writer, period time.Duration) *flushing {
	f := &flushing{w: bufio.NewWriterSize(out, 64<<10), done: make(chan struct{})}
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				f.mu.Lock()
				f.w.Flush()
				f.mu.Unlock()
			case <-f.done:
				return
			}
		}
	}()
	return f
}

func (f *flushing) print(s ...string) {
	f.mu.Lock()
	for _, x := range s {
		f.w.WriteString(x)
	}
	f.mu.Unlock()
}

// stop writes out what is left and stops the ticker; again, nothing.
func (f *flushing) stop() {
	f.once.Do(func() {
		close(f.done)
		f.mu.Lock()
		f.w.Flush()
		f.mu.Unlock()
	})
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
