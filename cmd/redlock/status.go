package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/spf13/pflag"
)

const statusUsage = `Usage: redlock status [flags] RESOURCE...

Shows what the masters hold for each RESOURCE, whatever its kind (a lock,
a semaphore's permits, a read/write lock's readers or writer): what a
quorum vouches for. It only reads: it takes, extends, releases and wakes
nothing. One table, a row per holder:

  RESOURCE  the name
  KIND      free, mutex, semaphore #SLOT/PERMITS, rwmutex read or write
  HOLDER    the holder's lease value, without its owner (what 'redlock
            unlock --value' takes; the COMMAND of 'redlock exec' has it, with
            the owner, in $REDLOCK_LEASE_VALUE)
  OWNER     the owner metadata the holder attached, if any ('redlock exec'
            attaches its host and pid: see its --owner)
  TOKEN     the highest fencing token the holder's masters issued: its
            own when it was acquired with fencing ('redlock exec
            --fencing'); -: none issued (an unfenced holder that follows
            a fenced one shows that one's while its counter lives, about
            the TTL)
  VALID     how long a quorum still vouches for the holder: the quorum's
            shortest remaining TTL, less the clock drift allowance
  MASTERS   how many of the masters hold it

then, per RESOURCE, its waiters queued on the masters, first first, with
how long each has waited, and, where the masters disagree, what each
holds. --json prints a JSON array, an object per RESOURCE, with every
duration in nanoseconds (validity_ns, age_ns, ttl_ns), and each value
whole, with its owner.

Flags:
%s
Exit status:
  0    every RESOURCE was read from a quorum (held or free)
  64   usage: bad flags, arguments or addresses
  69   unavailable: fewer than a quorum of the masters answered for some
       RESOURCE (those that did are shown)
  70   any other failure of redlock's own
  78   the masters cannot be used as configured (not independent)
`

type statusOptions struct {
	masterOptions
	json      bool
	timeout   time.Duration
	resources []string
}

func parseStatus(args []string, stdout io.Writer) (*statusOptions, error) {
	fs := pflag.NewFlagSet("redlock status", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	mf := registerMasters(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of the table")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the masters, connecting included")
	mf.registerConn()
	if ok, err := parseFlags(fs, "status", statusUsage, args, stdout); !ok {
		return nil, err
	}
	o := &statusOptions{json: *asJSON, timeout: *timeout, resources: fs.Args()}
	var err error
	if o.masterOptions, err = mf.parse("status"); err != nil {
		return nil, err
	}
	switch {
	case o.timeout <= 0:
		return nil, usageErrorf("status: --timeout must be > 0, got %s", o.timeout)
	case len(o.resources) == 0:
		return nil, usageErrorf("status: missing RESOURCE (see 'redlock status --help')")
	}
	for _, r := range o.resources {
		if r == "" {
			return nil, usageErrorf("status: RESOURCE is empty")
		}
	}
	return o, nil
}

// opsConfig is the Locker configuration of the commands that only look
// at and clear leases. They take none, so the restart quarantine, which
// keeps a master that may have forgotten locks from granting one, has
// nothing to protect: a master that restarted is read, and cleared of
// the holder's keys, like any other.
func opsConfig(masters []string) engine.Config {
	cfg := engine.DefaultConfig(masters...)
	cfg.Quarantine = engine.QuarantineOff
	return cfg
}

// opsConnect connects status, list or unlock (cmd) to the masters
// within ctx, which --timeout bounds, after the connection flags'
// warning.
func opsConnect(ctx context.Context, cmd string, o masterOptions, timeout time.Duration, stderr io.Writer) (*engine.Locker, error) {
	if o.authWarning != "" {
		fmt.Fprintf(stderr, "redlock: %s\n", o.authWarning)
	}
	l, err := connect(ctx, cmd, o, opsConfig(o.masters))
	if err != nil && ctx.Err() != nil {
		return nil, statusErrorf(exitUnavailable, "%s: no quorum of the masters answered within --timeout %s", cmd, shortDuration(timeout))
	}
	return l, err
}

func statusCommand(args []string, stdout, stderr io.Writer) error {
	o, err := parseStatus(args, stdout)
	if err != nil || o == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	l, err := opsConnect(ctx, "status", o.masterOptions, o.timeout, stderr)
	if err != nil {
		return err
	}
	defer closeWithin(l)
	var (
		found []*engine.Inspection
		fails []error
	)
	for _, r := range o.resources {
		in, err := l.Inspect(ctx, r)
		if err != nil {
			fails = append(fails, inspectError(r, err, o.timeout))
			continue
		}
		found = append(found, in)
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if found == nil {
			found = []*engine.Inspection{}
		}
		if err := enc.Encode(found); err != nil {
			return fmt.Errorf("status: %v", err)
		}
	} else if len(found) > 0 {
		printStatus(stdout, found)
	}
	if len(fails) == 0 {
		return nil
	}
	// Each failure on its line; the status is the first's.
	for _, e := range fails[:len(fails)-1] {
		fmt.Fprintf(stderr, "redlock: %s\n", e)
	}
	return fails[len(fails)-1]
}

// inspectError is Inspect's failure for resource, in redlock's words.
func inspectError(resource string, err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, engine.ErrNoQuorum):
		return statusErrorf(exitUnavailable, "status: %q: %s", resource, engineText(err))
	case errors.Is(err, context.DeadlineExceeded):
		return statusErrorf(exitUnavailable, "status: %q: no quorum of the masters answered within --timeout %s", resource, shortDuration(timeout))
	case errors.Is(err, engine.ErrReservedResource) || errors.Is(err, engine.ErrEmptyResource):
		return usageErrorf("status: RESOURCE %q: %s", resource, engineText(err))
	}
	return statusErrorf(exitSoftware, "status: %q: %s", resource, engineText(err))
}

// closeWithin closes l, waiting for its masters at most releaseTimeout.
func closeWithin(l *engine.Locker) { finish(l, nil) }

// printStatus writes the table of ins, then each one's waiters and, where
// the masters disagree, each master's view.
func printStatus(w io.Writer, ins []*engine.Inspection) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tKIND\tHOLDER\tOWNER\tTOKEN\tVALID\tMASTERS")
	for _, in := range ins {
		n := len(in.Masters)
		if len(in.Holders) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\n", quoteName(in.Resource), in.Kind)
			continue
		}
		for _, h := range in.Holders {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\n", quoteName(in.Resource), holderKind(in, h), bareValue(h.Value),
				orDash(quoteOwner(h.Owner)), tokenText(h.Token), validityText(h.Validity), h.Masters, n)
		}
	}
	tw.Flush()
	for _, in := range ins {
		if len(in.Waiters) > 0 {
			parts := make([]string, len(in.Waiters))
			for i, wt := range in.Waiters {
				mode := ""
				if wt.Mode != "" {
					mode = wt.Mode + ", "
				}
				parts[i] = fmt.Sprintf("%s (%swaiting %s, on %d/%d)", wt.ID, mode, ageText(wt.Age), wt.Masters, len(in.Masters))
			}
			fmt.Fprintf(w, "%s: %d waiting: %s\n", quoteName(in.Resource), len(in.Waiters), strings.Join(parts, ", "))
		}
		if !in.Agree || anyMasterFailed(in) {
			fmt.Fprintf(w, "%s: the masters disagree:\n", quoteName(in.Resource))
			mw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			for _, m := range in.Masters {
				fmt.Fprintf(mw, "  %s\t%s\n", m.Addr, masterText(m))
			}
			mw.Flush()
		}
	}
}

func anyMasterFailed(in *engine.Inspection) bool {
	for _, m := range in.Masters {
		if m.Err != "" {
			return true
		}
	}
	return false
}

// masterText is what one master holds, on one line.
func masterText(m engine.MasterView) string {
	if m.Err != "" {
		return "error: " + m.Err
	}
	var parts []string
	for _, h := range m.Holders {
		s := bareValue(h.Value)
		switch {
		case h.Permit >= 0:
			s = fmt.Sprintf("#%d %s", h.Permit, s)
		case h.Mode != "":
			s = h.Mode + " " + s
		}
		parts = append(parts, fmt.Sprintf("%s (ttl %s)", s, ttlText(h.TTL)))
	}
	if m.Turn != "" {
		parts = append(parts, "turn handed to "+m.Turn)
	}
	if len(m.Waiters) > 0 {
		parts = append(parts, fmt.Sprintf("%d waiting", len(m.Waiters)))
	}
	if len(parts) == 0 {
		return string(m.Kind)
	}
	return string(m.Kind) + ": " + strings.Join(parts, ", ")
}

// ownerSep starts the owner metadata in a lease value (the engine's
// encoding: lease values are base64url, and the metadata escapes it).
const ownerSep = "|"

// bareValue is a lease value without its owner metadata, which a table
// shows apart. Without it the value is one shell word: "|" would be a
// pipe, pasted unquoted.
func bareValue(v string) string {
	bare, _, _ := strings.Cut(v, ownerSep)
	return bare
}

// holderKind is the KIND column of h's row.
func holderKind(in *engine.Inspection, h engine.Holder) string {
	switch {
	case in.Kind == engine.KindSemaphore && in.Permits > 0:
		return fmt.Sprintf("semaphore #%d/%d", h.Permit, in.Permits)
	case in.Kind == engine.KindSemaphore:
		return fmt.Sprintf("semaphore #%d", h.Permit)
	case h.Mode != "":
		return string(in.Kind) + " " + h.Mode
	}
	return string(in.Kind)
}

// tokenText is a holder's TOKEN: "-" when no token was issued (Holder.Token
// 0, which JSON omits), as for an unfenced holder; 0 is no token.
func tokenText(t int64) string {
	if t == 0 {
		return "-"
	}
	return strconv.FormatInt(t, 10)
}

// validityText is a holder's validity: -1 for a key without a TTL.
func validityText(d time.Duration) string {
	if d < 0 {
		return "no TTL"
	}
	return ageText(d)
}

func ttlText(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return ageText(d)
}

// ageText is d to a tenth of a second below a minute, to the second
// beyond.
func ageText(d time.Duration) string {
	if d < time.Minute {
		return shortDuration(d.Round(100 * time.Millisecond))
	}
	return shortDuration(d.Round(time.Second))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// quoteName quotes a name only when it would not read as one word.
func quoteName(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\r\n\"") || strconv.Quote(s) != `"`+s+`"` {
		return strconv.Quote(s)
	}
	return s
}

// quoteOwner keeps a label with spaces on one line of the table.
func quoteOwner(s string) string {
	if s == "" || strconv.Quote(s) == `"`+s+`"` && !strings.ContainsAny(s, "\t") {
		return s
	}
	return strconv.Quote(s)
}
