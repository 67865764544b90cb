package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/redlock-bench/redlock/engine"
	"github.com/spf13/pflag"
)

const execUsage = `Usage: redlock exec [flags] RESOURCE -- COMMAND [ARG...]

Acquires the lock RESOURCE on a quorum of the masters, runs COMMAND while
extending the lock, and releases it when COMMAND exits. A distributed
flock(1): at most one COMMAND per RESOURCE runs at a time across every host
that uses the same masters. With --permits P, COMMAND holds one of the P
permits of the semaphore RESOURCE instead, so that at most P run at a
time; with --shared, it holds the read/write lock RESOURCE for reading,
beside any number of other --shared and no --exclusive (a writer, which
excludes both); a waiting --exclusive goes first, before --shared that
come after it. One name is one kind: the lock, a semaphore (of one
permit count) or a read/write lock; a run that meets another kind exits
78. Processes that COMMAND leaves running in the background when it
exits are not waited for: they run on without the lock. The release
waits at most 1s for the masters: what a stalled master still holds
expires within --ttl.

If the lock is lost while COMMAND runs (an extension misses the quorum, or
the lock's validity runs out), COMMAND's process group gets SIGTERM, and
SIGKILL after --grace. SIGINT, SIGTERM, SIGHUP and SIGQUIT to redlock are
forwarded to COMMAND's process group, which gets SIGKILL if it has not
exited after --grace (or at once on a second signal); then the lock is
released. A SIGINT, SIGHUP or SIGTSTP redlock was started ignoring (nohup)
stays ignored; the Go runtime catches SIGTERM and SIGQUIT whatever the
parent did.
COMMAND runs in its own process group, so that its children get these
signals too; it gets no signals from the terminal, and should not read from
it. Ctrl-Z (SIGTSTP) stops COMMAND's process group (SIGSTOP) with redlock;
once continued, COMMAND goes on if the lock is still held, and is stopped
as above if it was lost meanwhile (SIGSTOP to redlock alone stops nothing
else: COMMAND runs on while the lock expires). If redlock itself is killed
with SIGKILL, COMMAND gets SIGTERM (on Linux; not its children), and the
lock's keys expire within --ttl.

A master that restarts without persistence forgets the locks it granted.
redlock cannot tell a master started moments ago from one that restarted,
so by default (--quarantine always) the votes of a master up for less than
--max-ttl count only once it is that old: on masters started moments ago,
exec fails with 69 and says until when. A --wait that covers it waits it
out; --quarantine observed trusts masters that were just started and hold
no locks.

Flags:
%s
Environment:
  REDLOCK_MASTERS         the masters, when --masters is not given
  REDISCLI_AUTH           the masters' password, when -a/--pass is not
                          given (so that it stays out of ps); COMMAND
                          inherits it with the rest of the environment:
                          withhold it with -- env -u REDISCLI_AUTH COMMAND
  REDLOCK_RESOURCE        set for COMMAND: the resource it holds
  REDLOCK_LEASE_VALUE     set for COMMAND: the lease's value on the masters,
                          which 'redlock status' shows as the holder's and
                          'redlock unlock --value' takes; it ends with the
                          owner (--owner) after a '|': quote it
  REDLOCK_PERMIT          set for COMMAND with --permits: the permit's slot,
                          0 to P-1, which no other holder has meanwhile
  REDLOCK_FENCING_TOKEN   set for COMMAND with --fencing: the lock's fencing
                          token, larger than that of every earlier holder;
                          pass it to what the lock protects, and have that
                          reject a token lower than one it has seen
                          (not with --shared: readers get no token)

Exit status:
  COMMAND's status, or 128+N if COMMAND died of signal N, or one of:
  64   usage: bad flags, arguments, addresses or TTL
  69   unavailable: too many masters unreachable (down, or refusing the
       credentials or TLS), failing or in restart quarantine for a quorum
       (no lock taken; the message says which, until when, and the flags
       that change it)
  70   any other failure of redlock's own
  75   not acquired: RESOURCE is held by another owner, all its permits
       are, or a writer holds or awaits it (after --wait)
  78   the masters or the key cannot be used as configured: masters that
       are not independent, clocks too far apart for --fencing, a key
       holding another type, RESOURCE in use as another kind of lock or
       with another --permits
  124  the lock was lost: COMMAND was stopped (or had finished after the
       loss)
  126  COMMAND cannot be run
  127  COMMAND not found
  128+N  redlock got signal N before COMMAND started

Example (crontab: one run at a time across hosts, skipped while another runs):
  */5 * * * * REDLOCK_MASTERS=r1:6379,r2:6379,r3:6379 redlock exec --ttl 30s backup -- /usr/local/bin/backup.sh

Example (at most 4 encoders at a time across hosts):
  redlock exec --permits 4 --wait 1h encoders -- ./encode.sh "$FILE"
`

// Bounds of --ttl. Below the minimum, the default node timeout (TTL/10)
// nears a loaded host's round trip; above the maximum, a redlock killed
// with SIGKILL would block the resource for longer than a day.
const (
	minTTL = 100 * time.Millisecond
	maxTTL = 24 * time.Hour
)

// releaseTimeout bounds what redlock does for the lock after COMMAND (or
// a failed attempt): the release, and closing the connections, which
// waits for the masters still to answer. A master stalled then would hold
// redlock's exit for the connection timeout (3s); whatever it still holds
// expires within --ttl. execUsage states it.
const releaseTimeout = time.Second

type execOptions struct {
	masterOptions
	ttl         time.Duration
	maxTTL      time.Duration
	wait        time.Duration
	grace       time.Duration
	extendEvery time.Duration
	fencing     bool
	mode        lockMode
	permits     int // with modePermit
	owner       string
	quarantine  engine.QuarantinePolicy
	resource    string
	argv        []string
}

// parseExec reads the flags; it returns nil options after printing --help.
func parseExec(args []string, stdout io.Writer) (*execOptions, error) {
	fs := pflag.NewFlagSet("redlock exec", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	mf := registerMasters(fs)
	ttl := fs.Duration("ttl", 30*time.Second, "the lock's lifetime on the masters, renewed while COMMAND runs (100ms to 24h, whole milliseconds)")
	longest := fs.Duration("max-ttl", 0, "the longest --ttl of any run on these masters, which the restart quarantine lasts (default --ttl)")
	wait := fs.Duration("wait", 0, "how long to wait for RESOURCE while it is held, or for the masters' restart quarantine to end (0: one attempt)")
	grace := fs.Duration("grace", 10*time.Second, "time between SIGTERM (or the forwarded signal) and SIGKILL")
	extendEvery := fs.Duration("extend-every", 0, "how often the lock is renewed, from TTL/100 (default TTL/3)")
	fencing := fs.Bool("fencing", false, "give COMMAND a fencing token in $REDLOCK_FENCING_TOKEN")
	permits := fs.Int("permits", 0, fmt.Sprintf("hold one permit of the semaphore RESOURCE of this many permits (1 to %d), instead of the lock", engine.MaxPermits))
	shared := fs.Bool("shared", false, "hold the read/write lock RESOURCE for reading: shared with other --shared, excluding --exclusive")
	exclusive := fs.Bool("exclusive", false, "hold the read/write lock RESOURCE for writing: excluding --shared and other --exclusive")
	owner := fs.String("owner", "", "who holds the lock, as 'redlock status' shows it, at most 256 bytes (default host=HOSTNAME,pid=PID of redlock; --owner= for none)")
	quarantine := fs.String("quarantine", "always", "votes of a master younger than --max-ttl: always ignored until it is --max-ttl old, after an observed restart only (observed), or counted (off)")
	mf.registerConn()
	// Taken before the flags are parsed (see run); listed here.
	fs.Bool("version", false, "print redlock's version and exit, whatever the other flags")
	fs.SetInterspersed(true)
	if ok, err := parseFlags(fs, "exec", execUsage, args, stdout); !ok {
		return nil, err
	}
	o := &execOptions{ttl: *ttl, maxTTL: *longest, wait: *wait, grace: *grace, extendEvery: *extendEvery, fencing: *fencing, owner: *owner}
	if !fs.Changed("owner") {
		o.owner = defaultOwner()
	}
	if len(o.owner) > engine.MaxOwnerLen || !utf8.ValidString(o.owner) {
		return nil, usageErrorf("exec: --owner: want at most %d bytes of UTF-8, got %d bytes", engine.MaxOwnerLen, len(o.owner))
	}
	var modes []string
	if fs.Changed("permits") {
		o.mode, o.permits = modePermit, *permits
		modes = append(modes, "--permits")
	}
	if *shared {
		o.mode = modeShared
		modes = append(modes, "--shared")
	}
	if *exclusive {
		o.mode = modeExclusive
		modes = append(modes, "--exclusive")
	}
	switch {
	case len(modes) > 1:
		return nil, usageErrorf("exec: %s: give one at most", strings.Join(modes, " and "))
	case o.mode == modePermit && (o.permits < 1 || o.permits > engine.MaxPermits):
		return nil, usageErrorf("exec: --permits %d is out of range: want 1 to %d", o.permits, engine.MaxPermits)
	case o.mode == modeShared && o.fencing:
		// A reader's lease has token 0: readers write nothing a fence
		// protects, so the engine issues them none.
		return nil, usageErrorf("exec: --fencing with --shared: readers get no fencing token (only --exclusive writers do)")
	}

	var err error
	if o.masterOptions, err = mf.parse("exec"); err != nil {
		return nil, err
	}
	switch {
	case o.ttl < minTTL || o.ttl > maxTTL:
		return nil, usageErrorf("exec: --ttl %s is out of range: want 100ms to 24h", o.ttl)
	case o.ttl%time.Millisecond != 0:
		return nil, usageErrorf("exec: --ttl %s: want whole milliseconds", o.ttl)
	case o.maxTTL != 0 && o.maxTTL < o.ttl:
		return nil, usageErrorf("exec: --max-ttl %s is below --ttl %s", o.maxTTL, o.ttl)
	case o.maxTTL > maxTTL:
		return nil, usageErrorf("exec: --max-ttl %s is out of range: want --ttl to 24h", o.maxTTL)
	case o.wait < 0:
		return nil, usageErrorf("exec: --wait must be >= 0, got %s", o.wait)
	case o.grace < 0:
		return nil, usageErrorf("exec: --grace must be >= 0, got %s", o.grace)
	case o.extendEvery < 0 || o.extendEvery >= o.ttl:
		return nil, usageErrorf("exec: --extend-every %s: want more than 0 and less than --ttl %s", o.extendEvery, o.ttl)
	case o.extendEvery != 0 && o.extendEvery < o.ttl/100:
		// Each extension renews only what elapsed since the last one: a
		// shorter period is load on the masters (tens of thousands of
		// scripts a second at 1ns), not safety.
		return nil, usageErrorf("exec: --extend-every %s: want %s (--ttl/100) to less than --ttl %s", o.extendEvery, o.ttl/100, o.ttl)
	}
	if o.quarantine, err = engine.ParseQuarantinePolicy(*quarantine); err != nil {
		return nil, usageErrorf("exec: --quarantine: %v", err)
	}

	rest, dash := fs.Args(), fs.ArgsLenAtDash()
	switch {
	case dash < 0 && len(rest) == 0:
		return nil, usageErrorf("exec: missing RESOURCE -- COMMAND (see 'redlock exec --help')")
	case dash < 0:
		return nil, usageErrorf("exec: missing -- between RESOURCE and COMMAND: redlock exec [flags] RESOURCE -- COMMAND [ARG...]")
	case dash == 0:
		return nil, usageErrorf("exec: missing RESOURCE before --")
	case dash > 1:
		return nil, usageErrorf("exec: one RESOURCE before --, got %d: %q", dash, rest[:dash])
	case len(rest) == dash:
		return nil, usageErrorf("exec: missing COMMAND after --")
	}
	o.resource, o.argv = rest[0], rest[dash:]
	if o.resource == "" {
		return nil, usageErrorf("exec: RESOURCE is empty")
	}
	return o, nil
}

func execCommand(args []string, stdout, stderr io.Writer) error {
	o, err := parseExec(args, stdout)
	if err != nil || o == nil {
		return err
	}
	if o.authWarning != "" {
		fmt.Fprintf(stderr, "redlock: %s\n", o.authWarning)
	}
	// Find COMMAND before taking the lock, as a shell would.
	path, err := exec.LookPath(o.argv[0])
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return statusErrorf(exitNotFound, "exec: %s: command not found", o.argv[0])
		}
		return statusErrorf(exitCannotRun, "exec: %s: %v", o.argv[0], err)
	}

	sigs := make(chan os.Signal, 4)
	// Unhandled, SIGQUIT (Ctrl-\) would dump redlock's goroutines and end
	// it without a release, as the runtime does.
	for _, s := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		// A SIGINT or SIGHUP redlock was started ignoring (nohup, a
		// background job of a script) stays ignored, for COMMAND too;
		// the runtime took SIGTERM and SIGQUIT over before main.
		if !signal.Ignored(s) {
			signal.Notify(sigs, s)
		}
	}
	defer signal.Stop(sigs)

	l, le, err := acquireOrInterrupt(o, sigs, stderr)
	if err != nil {
		return err
	}
	return runHolding(o, path, l, le, sigs, stderr)
}

// acquireOrInterrupt connects and takes the lock; a signal meanwhile
// abandons the attempt, releasing whatever it took.
func acquireOrInterrupt(o *execOptions, sigs <-chan os.Signal, stderr io.Writer) (*engine.Locker, *engine.Lease, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		l   *engine.Locker
		le  *engine.Lease
		err error
	}
	res := make(chan result, 1)
	go func() {
		l, le, err := acquire(ctx, o, stderr)
		res <- result{l, le, err}
	}()
	select {
	case r := <-res:
		return r.l, r.le, r.err
	case s := <-sigs:
		cancel()
		if r := <-res; r.l != nil {
			finish(r.l, r.le)
		}
		return nil, nil, statusErrorf(signalStatus(s), "exec: %s while acquiring %q: COMMAND not run", signalName(s), o.resource)
	}
}

func acquire(ctx context.Context, o *execOptions, stderr io.Writer) (*engine.Locker, *engine.Lease, error) {
	cfg := engine.DefaultConfig(o.masters...)
	cfg.TTL = o.ttl
	cfg.MaxTTL = o.maxTTL
	cfg.AutoExtend = true
	cfg.ExtendEvery = o.extendEvery
	cfg.Fencing = o.fencing
	cfg.Quarantine = o.quarantine
	cfg.Owner = o.owner
	l, err := connect(ctx, "exec", o.masterOptions, cfg)
	if err != nil {
		return nil, nil, err // or, interrupted, the context's: the caller reports the signal
	}
	// --wait bounds the wait for a holder, not the first attempt, which a
	// --wait shorter than a round trip would cut short ("no quorum
	// answered") however free the resource.
	deadline := time.Now().Add(o.wait)
	waited := false // the wait went on past the first attempt
	try, lock, err := o.target(l)
	if err != nil {
		finish(l, nil)
		return nil, nil, usageErrorf("exec: RESOURCE %q: %s", o.resource, engineText(err))
	}
	le, err := try(ctx)
	var ve *engine.VotesError
	if err != nil && o.wait > 0 && ctx.Err() == nil && (errors.Is(err, engine.ErrNotAcquired) || errors.Is(err, engine.ErrNoQuorum)) {
		until := time.Time{}
		if errors.As(err, &ve) {
			until = ve.QuarantinedUntil()
		}
		switch {
		case !until.IsZero() && until.After(deadline) && onlyQuarantined(ve):
			// Nothing can form a quorum before --wait ends: say so now.
		case !until.IsZero():
			// Lock would retry every few milliseconds meanwhile.
			fmt.Fprintf(stderr, "redlock: exec: waiting until %s (%s from now) for the masters' restart quarantine (--max-ttl %s)\n",
				until.Format("15:04:05.000"), time.Until(until).Round(100*time.Millisecond), shortDuration(cmp.Or(o.maxTTL, o.ttl)))
			if deadline.Before(until) {
				until = deadline
			}
			sleep(ctx, time.Until(until))
			fallthrough
		default:
			waited = true
			if rest := time.Until(deadline); rest > 0 && ctx.Err() == nil {
				wctx, cancel := context.WithTimeout(ctx, rest)
				lle, lerr := lock(wctx)
				cancel()
				// A Lock whose deadline came before any verdict says less
				// than the first attempt did.
				if lerr == nil || !errors.Is(lerr, context.DeadlineExceeded) || errors.Is(lerr, engine.ErrNotAcquired) || errors.Is(lerr, engine.ErrNoQuorum) {
					le, err = lle, lerr
				}
			}
		}
	}
	if err == nil {
		return l, le, nil
	}
	// Close waits for the masters still to answer, and deletes a late yes.
	finish(l, nil)
	detail := engineText(err)
	if errors.As(err, &ve) {
		// Without the joined context error, and the engine's advice in
		// terms of its Config.
		detail = votesText(ve) + quarantineAdvice(ve, o.wait)
	}
	after := ""
	if waited {
		after = fmt.Sprintf(" (waited %s)", shortDuration(o.wait))
	}
	switch {
	case ctx.Err() != nil:
		return nil, nil, err
	case errors.Is(err, engine.ErrWrongKind):
		// The engine's message names both uses of the name.
		return nil, nil, statusErrorf(exitConfig, "exec: %s", engineText(err))
	case errors.Is(err, engine.ErrWrongType):
		return nil, nil, statusErrorf(exitConfig, "exec: %q cannot be %s: %s", o.resource, o.mode.noun(), engineText(err))
	case errors.Is(err, engine.ErrPermitCount):
		return nil, nil, statusErrorf(exitConfig, "exec: --permits %d: %s", o.permits, engineText(err))
	case errors.Is(err, engine.ErrNotAcquired):
		return nil, nil, statusErrorf(exitNotAcquired, "exec: not acquired: %s%s", o.heldText(), after)
	case errors.Is(err, engine.ErrNoQuorum):
		return nil, nil, statusErrorf(exitUnavailable, "exec: no quorum for %q%s: %s", o.resource, after, detail)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, nil, statusErrorf(exitUnavailable, "exec: no quorum answered for %q within --wait %s", o.resource, shortDuration(o.wait))
	case errors.Is(err, engine.ErrReservedResource) || errors.Is(err, engine.ErrEmptyResource):
		return nil, nil, usageErrorf("exec: RESOURCE %q: %s", o.resource, detail)
	}
	return nil, nil, fmt.Errorf("exec: acquire %q: %s", o.resource, detail)
}

// defaultOwner is --owner's default: this host and redlock's pid, which
// tell an operator where to look for a holder that seems stuck.
func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "?"
	}
	return fmt.Sprintf("host=%s,pid=%d", host, os.Getpid())
}

// lockMode is what exec holds on RESOURCE.
type lockMode int

const (
	modeLock      lockMode = iota // the lock (Locker.TryLock)
	modePermit                    // a permit of a Semaphore (--permits)
	modeShared                    // an RWMutex, for reading (--shared)
	modeExclusive                 // an RWMutex, for writing (--exclusive)
)

// noun is what the mode holds, for messages.
func (m lockMode) noun() string {
	switch m {
	case modePermit:
		return "a semaphore"
	case modeShared, modeExclusive:
		return "a read/write lock"
	}
	return "a lock"
}

// acquireFunc is an acquisition: Locker.TryLock's, Semaphore.Acquire's...
type acquireFunc = func(context.Context, ...engine.LockOption) (*engine.Lease, error)

// target is the first attempt on what o holds, and the wait for it.
func (o *execOptions) target(l *engine.Locker) (try, lock acquireFunc, err error) {
	switch o.mode {
	case modePermit:
		s, err := l.Semaphore(o.resource, o.permits)
		if err != nil {
			return nil, nil, err
		}
		return s.TryAcquire, s.Acquire, nil
	case modeShared, modeExclusive:
		m, err := l.RWMutex(o.resource)
		if err != nil {
			return nil, nil, err
		}
		if o.mode == modeShared {
			return m.TryRLock, m.RLock, nil
		}
		return m.TryLock, m.Lock, nil
	}
	return func(ctx context.Context, opts ...engine.LockOption) (*engine.Lease, error) {
			return l.TryLock(ctx, o.resource, opts...)
		},
		func(ctx context.Context, opts ...engine.LockOption) (*engine.Lease, error) {
			return l.Lock(ctx, o.resource, opts...)
		}, nil
}

// heldText says who keeps exec from RESOURCE when it is not acquired.
func (o *execOptions) heldText() string {
	switch o.mode {
	case modePermit:
		return fmt.Sprintf("all %d permits of %q are held", o.permits, o.resource)
	case modeShared:
		return fmt.Sprintf("%q is held by a writer, or a writer waits for it", o.resource)
	case modeExclusive:
		return fmt.Sprintf("%q is held by readers or a writer", o.resource)
	}
	return fmt.Sprintf("%q is held by another owner", o.resource)
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// runHolding runs COMMAND while le is held, stops it if le is lost or a
// signal comes, and releases le.
func runHolding(o *execOptions, path string, l *engine.Locker, le *engine.Lease, sigs <-chan os.Signal, stderr io.Writer) error {
	cmd := exec.Command(path, o.argv[1:]...)
	cmd.Args[0] = o.argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = commandEnv(os.Environ(), o, le.Value(), le.Token(), le.Permit())
	cmd.SysProcAttr = commandAttr()
	// Ctrl-Z stops redlock's process group, not COMMAND's: redlock stops
	// COMMAND with itself, or COMMAND would run on while the lease runs
	// out unextended. An inherited ignore stays (signal.Ignored cannot
	// tell it for SIGTSTP).
	tstp, cont := make(chan os.Signal, 1), make(chan os.Signal, 1)
	if !startedIgnoring(syscall.SIGTSTP) {
		signal.Notify(tstp, syscall.SIGTSTP)
		signal.Notify(cont, syscall.SIGCONT)
		defer signal.Stop(tstp)
		defer signal.Stop(cont)
	}
	if err := cmd.Start(); err != nil {
		finish(l, le)
		return statusErrorf(exitCannotRun, "exec: %s: %v", o.argv[0], err)
	}
	pgid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		lost     error       // why the lease ended while COMMAND ran
		stopping bool        // COMMAND was sent a stop signal
		kill     *time.Timer // SIGKILL after the grace period
		killC    <-chan time.Time
		killed   bool
	)
	stop := func(sig syscall.Signal) {
		if stopping {
			return
		}
		stopping = true
		syscall.Kill(-pgid, sig)
		// A stopped COMMAND (Ctrl-Z, or reading the terminal) acts on
		// sig only once continued.
		syscall.Kill(-pgid, syscall.SIGCONT)
		kill = time.NewTimer(o.grace)
		killC = kill.C
	}
	killGroup := func() {
		killed = true
		killC = nil
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	done := le.Done()
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-exited:
			break loop
		case <-done:
			done = nil
			lost = le.Err()
			if stopping {
				fmt.Fprintf(stderr, "redlock: lock on %q lost while COMMAND is being stopped: %s\n", o.resource, endText(lost))
				continue
			}
			fmt.Fprintf(stderr, "redlock: lock on %q lost, stopping COMMAND with SIGTERM: %s\n", o.resource, endText(lost))
			stop(syscall.SIGTERM)
		case s := <-sigs:
			if stopping {
				killGroup()
				continue
			}
			stop(s.(syscall.Signal))
		case <-tstp:
			// SIGSTOP, which COMMAND cannot ignore as it may SIGTSTP;
			// redlock's own SIGTSTP is caught, so it stops itself alike.
			// Another thread may take the SIGSTOP, and this one run on
			// for a moment: SIGCONT says redlock was stopped and is
			// continued (fg, bg).
			select {
			case <-cont:
			default:
			}
			syscall.Kill(-pgid, syscall.SIGSTOP)
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			<-cont
			// COMMAND goes on only under a lease still held; if it was
			// lost meanwhile, done stops COMMAND.
			if stopping || le.Err() == nil {
				syscall.Kill(-pgid, syscall.SIGCONT)
			}
		case <-killC:
			fmt.Fprintf(stderr, "redlock: COMMAND still running %s after the stop signal (--grace): sending SIGKILL\n", o.grace)
			killGroup()
		}
	}
	if kill != nil {
		kill.Stop()
	}
	if stopping && !killed {
		// Children that outlived COMMAND had the stop signal already.
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	if lost == nil {
		// Done may have closed together with COMMAND's exit, or the
		// validity ran out with nobody watching: either way the end of
		// COMMAND was not covered by the lock.
		if err := le.Err(); err != nil {
			lost = err
		}
	}
	status, desc := commandStatus(cmd, waitErr)
	if err := finish(l, le); err != nil && lost == nil {
		why := engineText(err)
		var ve *engine.VotesError
		if errors.As(err, &ve) {
			why = verdictText(ve)
		}
		fmt.Fprintf(stderr, "redlock: release of %q failed, its keys expire within --ttl %s: %s\n", o.resource, shortDuration(o.ttl), why)
	}
	if lost != nil {
		if !stopping {
			return statusErrorf(exitLost, "exec: lock on %q lost before COMMAND finished (%s): %s", o.resource, desc, endText(lost))
		}
		return statusErrorf(exitLost, "exec: lock on %q was lost: COMMAND stopped (%s)", o.resource, desc)
	}
	if status == 0 {
		return nil
	}
	return &statusError{code: status}
}

// commandEnv is env with REDLOCK_RESOURCE, the lease's value, with
// fencing its token, and with --permits the permit's slot; values
// inherited from an enclosing redlock are dropped.
func commandEnv(env []string, o *execOptions, value string, token int64, permit int) []string {
	out := make([]string, 0, len(env)+4)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "REDLOCK_RESOURCE", "REDLOCK_LEASE_VALUE", "REDLOCK_FENCING_TOKEN", "REDLOCK_PERMIT":
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "REDLOCK_RESOURCE="+o.resource, "REDLOCK_LEASE_VALUE="+value)
	if o.fencing {
		out = append(out, "REDLOCK_FENCING_TOKEN="+strconv.FormatInt(token, 10))
	}
	if o.mode == modePermit {
		out = append(out, "REDLOCK_PERMIT="+strconv.Itoa(permit))
	}
	return out
}

// commandStatus is COMMAND's exit status as a shell reports it, and how
// it ended in words.
func commandStatus(cmd *exec.Cmd, waitErr error) (int, string) {
	ps := cmd.ProcessState
	if ps == nil {
		return exitSoftware, fmt.Sprintf("wait: %v", waitErr)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return signalStatus(ws.Signal()), "killed by " + signalName(ws.Signal())
	}
	return ps.ExitCode(), fmt.Sprintf("exit status %d", ps.ExitCode())
}

// finish releases le (when not nil) and closes l, within releaseTimeout
// for both. The Close left running then is abandoned to redlock's exit,
// which closes its connections.
func finish(l *engine.Locker, le *engine.Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	var err error
	if le != nil {
		err = le.Release(ctx)
	}
	closed := make(chan struct{})
	go func() {
		l.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	return err
}

func signalStatus(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return exitSoftware
}

func signalName(s os.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGKILL: "SIGKILL",
		syscall.SIGTERM: "SIGTERM", syscall.SIGQUIT: "SIGQUIT", syscall.SIGABRT: "SIGABRT",
		syscall.SIGSEGV: "SIGSEGV", syscall.SIGPIPE: "SIGPIPE", syscall.SIGUSR1: "SIGUSR1",
		syscall.SIGUSR2: "SIGUSR2", syscall.SIGALRM: "SIGALRM",
	}
	if n, ok := s.(syscall.Signal); ok {
		if name, ok := names[n]; ok {
			return name
		}
		return fmt.Sprintf("signal %d", int(n))
	}
	return s.String()
}
