package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/spf13/pflag"
)

const unlockUsage = `Usage: redlock unlock [flags] RESOURCE --value VALUE
       redlock unlock [flags] RESOURCE --token TOKEN
       redlock unlock [flags] RESOURCE --force RESOURCE

Releases the lock RESOURCE for its holder, as the holder's own release
would: on every master where that holder's lease still holds, and only
there, so that it never deletes another holder's lock; the first waiter
queued is woken at once. It is how an operator clears a lock whose holder
is stuck or gone: first make sure the holder has stopped, or that what
the lock protects checks fencing tokens, since the holder is not told.

The holder is named by its lease value (--value: the HOLDER column of
'redlock status', $REDLOCK_LEASE_VALUE in the COMMAND of 'redlock exec'),
or by its fencing token (--token: the TOKEN column; a holder that took
no token shows the last one issued, so name such a holder by --value).
Without either, unlock refuses, unless --force names RESOURCE a second
time: then it releases whoever 'redlock status' shows holding it.
Each master's outcome is printed (--json: as a JSON object). Only a
lock's holder (a mutex) can be released this way: a semaphore's permits
and a read/write lock's holders expire within their TTL.

Flags:
%s
Exit status:
  0    released on a quorum of the masters
  64   usage: bad flags, arguments or addresses; no --value, --token or
       --force RESOURCE; --force naming another resource; RESOURCE not a
       lock
  66   no such holder: VALUE (or TOKEN) holds RESOURCE on no quorum, or
       nothing holds it (--force): released already, expired, or another
       holder's now; what it held on fewer masters was released there
  69   unavailable: fewer than a quorum of the masters answered (those
       that did released what VALUE held there)
  70   any other failure of redlock's own
  78   the masters cannot be used as configured (not independent)
`

type unlockOptions struct {
	masterOptions
	resource string
	value    string
	token    int64
	byToken  bool
	force    bool
	json     bool
	timeout  time.Duration
}

func parseUnlock(args []string, stdout io.Writer) (*unlockOptions, error) {
	fs := pflag.NewFlagSet("redlock unlock", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	mf := registerMasters(fs)
	value := fs.String("value", "", "the holder's lease value: release RESOURCE only where it holds")
	token := fs.Int64("token", 0, "the holder's fencing token: release RESOURCE only where the holder of that token holds")
	force := fs.String("force", "", "RESOURCE again: release whoever holds it")
	asJSON := fs.Bool("json", false, "print the outcome as JSON")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the masters, connecting included")
	mf.registerConn()
	if ok, err := parseFlags(fs, "unlock", unlockUsage, args, stdout); !ok {
		return nil, err
	}
	o := &unlockOptions{value: *value, token: *token, json: *asJSON, timeout: *timeout}
	var err error
	if o.masterOptions, err = mf.parse("unlock"); err != nil {
		return nil, err
	}
	switch fs.NArg() {
	case 0:
		return nil, usageErrorf("unlock: missing RESOURCE (see 'redlock unlock --help')")
	case 1:
		o.resource = fs.Arg(0)
	default:
		return nil, usageErrorf("unlock: one RESOURCE, got %d: %s", fs.NArg(), quoteAll(fs.Args()))
	}
	var given []string
	for _, f := range []string{"value", "token", "force"} {
		if fs.Changed(f) {
			given = append(given, "--"+f)
		}
	}
	o.byToken, o.force = fs.Changed("token"), fs.Changed("force")
	switch {
	case o.resource == "":
		return nil, usageErrorf("unlock: RESOURCE is empty")
	case len(given) > 1:
		return nil, usageErrorf("unlock: %s: give one", joinAnd(given))
	case len(given) == 0:
		return nil, usageErrorf("unlock: refused: name the holder of %q with --value (or --token), or release whoever holds it with --force %s",
			o.resource, shellQuote(o.resource))
	case fs.Changed("value") && o.value == "":
		return nil, usageErrorf("unlock: --value is empty")
	case o.byToken && o.token <= 0:
		return nil, usageErrorf("unlock: --token must be > 0, got %d", o.token)
	case o.force && *force != o.resource:
		return nil, usageErrorf("unlock: --force names %q, not RESOURCE %q: --force must name the resource it releases", *force, o.resource)
	case o.timeout <= 0:
		return nil, usageErrorf("unlock: --timeout must be > 0, got %s", o.timeout)
	}
	return o, nil
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := s[0]
	for _, x := range s[1 : len(s)-1] {
		out += ", " + x
	}
	return out + " and " + s[len(s)-1]
}

func unlockCommand(args []string, stdout, stderr io.Writer) error {
	o, err := parseUnlock(args, stdout)
	if err != nil || o == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	l, err := opsConnect(ctx, "unlock", o.masterOptions, o.timeout, stderr)
	if err != nil {
		return err
	}
	defer closeWithin(l)

	// What holds RESOURCE: its kind, and the holder to name for --token
	// and --force.
	in, err := l.Inspect(ctx, o.resource)
	if err != nil {
		return unlockError(o, err)
	}
	switch in.Kind {
	case engine.KindSemaphore, engine.KindRWMutex:
		return usageErrorf("unlock: %q is a %s: unlock releases a lock's holder only; its holders' keys expire within their TTL (see 'redlock status %s')",
			o.resource, in.Kind, shellQuote(o.resource))
	}
	value := fullValue(in, o.value)
	switch {
	case o.byToken:
		for _, h := range in.Holders {
			if h.Token == o.token {
				value = h.Value
			}
		}
		if value == "" {
			return statusErrorf(exitNoHolder, "unlock: no holder of %q has token %d on a quorum (%s): nothing released", o.resource, o.token, holdersText(in))
		}
	case o.force:
		if len(in.Holders) == 0 {
			return statusErrorf(exitNoHolder, "unlock: nothing holds %q on a quorum: nothing released", o.resource)
		}
		value = in.Holders[0].Value
	}

	u, err := l.Unlock(ctx, o.resource, value)
	if u != nil {
		if o.json {
			b, _ := json.Marshal(u)
			fmt.Fprintf(stdout, "%s\n", b)
		} else {
			printUnlocked(stdout, u, in.Quorum)
		}
	}
	if err != nil {
		return unlockError(o, err)
	}
	return nil
}

// fullValue is the value as the masters hold it, owner metadata
// included, of the holder named by v, a value with or without its owner
// (as status's table shows it); v itself when nothing holds such a value.
func fullValue(in *engine.Inspection, v string) string {
	if v == "" || strings.Contains(v, ownerSep) {
		return v
	}
	var views [][]string
	for _, h := range in.Holders {
		views = append(views, []string{h.Value})
	}
	for _, m := range in.Masters {
		var vs []string
		for _, h := range m.Holders {
			vs = append(vs, h.Value)
		}
		views = append(views, vs)
	}
	for _, vs := range views {
		for _, full := range vs {
			if bareValue(full) == v {
				return full
			}
		}
	}
	return v
}

// unlockError is Inspect's or Unlock's failure, in redlock's words.
func unlockError(o *unlockOptions, err error) error {
	var ve *engine.VotesError
	detail := engineText(err)
	if errors.As(err, &ve) {
		detail = votesText(ve)
	}
	switch {
	case errors.Is(err, engine.ErrNotHeld):
		return statusErrorf(exitNoHolder, "unlock: that holder does not hold %q on a quorum (released already, expired, or another's now): %s", o.resource, detail)
	case errors.Is(err, engine.ErrNoQuorum):
		return statusErrorf(exitUnavailable, "unlock: %q: %s", o.resource, detail)
	case errors.Is(err, context.DeadlineExceeded):
		return statusErrorf(exitUnavailable, "unlock: %q: no quorum of the masters answered within --timeout %s", o.resource, shortDuration(o.timeout))
	case errors.Is(err, engine.ErrReservedResource) || errors.Is(err, engine.ErrEmptyResource):
		return usageErrorf("unlock: RESOURCE %q: %s", o.resource, engineText(err))
	}
	return fmt.Errorf("unlock: %q: %s", o.resource, detail)
}

// holdersText names in's holders and their tokens, for a message.
func holdersText(in *engine.Inspection) string {
	if len(in.Holders) == 0 {
		return "it is free"
	}
	s := ""
	for i, h := range in.Holders {
		if i > 0 {
			s += ", "
		}
		if h.Token == 0 {
			s += h.Value + " has no fencing token"
			continue
		}
		s += fmt.Sprintf("%s has token %d", h.Value, h.Token)
	}
	return s
}

// printUnlocked reports each master's outcome of u.
func printUnlocked(w io.Writer, u *engine.Unlocked, quorum int) {
	fmt.Fprintf(w, "%s %s: released on %d of %d masters (quorum %d)\n",
		quoteName(u.Resource), u.Value, u.Released, len(u.Masters), quorum)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	for _, m := range u.Masters {
		what := m.Outcome.String()
		switch m.Outcome {
		case engine.OutcomeOK:
			what = "released"
		case engine.OutcomeRefused:
			what = "not held by " + u.Value
		}
		if m.Err != "" {
			what += ": " + m.Err
		}
		fmt.Fprintf(tw, "  %s\t%s\n", m.Addr, what)
	}
}
