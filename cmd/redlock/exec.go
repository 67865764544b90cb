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

	"github.com/redlock-bench/redlock/cmd/internal/connflags"
	"github.com/redlock-bench/redlock/engine"
	"github.com/spf13/pflag"
)

const execUsage = `Usage: redlock exec [flags] RESOURCE -- COMMAND [ARG...]

Acquires the lock RESOURCE on a quorum of the masters, runs COMMAND while
extending the lock, and releases it when COMMAND exits. A distributed
flock(1): at most one COMMAND per RESOURCE runs at a time across every host
that uses the same masters. Processes that COMMAND leaves running in the
background when it exits are not waited for: they run on without the lock.
The release waits at most 1s for the masters: what a stalled master still
holds expires within --ttl.

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
  REDLOCK_FENCING_TOKEN   set for COMMAND with --fencing: the lock's fencing
                          token, larger than that of every earlier holder;
                          pass it to what the lock protects, and have that
                          reject a token lower than one it has seen

Exit status:
  COMMAND's status, or 128+N if COMMAND died of signal N, or one of:
  64   usage: bad flags, arguments, addresses or TTL
  69   unavailable: too many masters unreachable (down, or refusing the
       credentials or TLS), failing or in restart quarantine for a quorum
       (no lock taken; the message says which, until when, and the flags
       that change it)
  70   any other failure of redlock's own
  75   not acquired: RESOURCE is held by another owner (after --wait)
  78   the masters or the key cannot be used as configured: masters that
       are not independent, clocks too far apart for --fencing, a key
       holding another type
  124  the lock was lost: COMMAND was stopped (or had finished after the
       loss)
  126  COMMAND cannot be run
  127  COMMAND not found
  128+N  redlock got signal N before COMMAND started

Example (crontab: one run at a time across hosts, skipped while another runs):
  */5 * * * * REDLOCK_MASTERS=r1:6379,r2:6379,r3:6379 redlock exec --ttl 30s backup -- /usr/local/bin/backup.sh
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
	masters     []string
	ttl         time.Duration
	maxTTL      time.Duration
	wait        time.Duration
	grace       time.Duration
	extendEvery time.Duration
	fencing     bool
	quarantine  engine.QuarantinePolicy
	conn        connflags.Settings
	authWarning string // printed before anything else (see connflags.Flags.Warning)
	passFrom    string // where the password came from: "-a/--pass", "REDISCLI_AUTH" or ""
	resource    string
	argv        []string
}

// parseExec reads the flags; it returns nil options after printing --help.
func parseExec(args []string, stdout io.Writer) (*execOptions, error) {
	fs := pflag.NewFlagSet("redlock exec", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	masters := fs.String("masters", "", "comma-separated host:port of the independent Redis masters (default $REDLOCK_MASTERS)")
	ttl := fs.Duration("ttl", 30*time.Second, "the lock's lifetime on the masters, renewed while COMMAND runs (100ms to 24h, whole milliseconds)")
	longest := fs.Duration("max-ttl", 0, "the longest --ttl of any run on these masters, which the restart quarantine lasts (default --ttl)")
	wait := fs.Duration("wait", 0, "how long to wait for RESOURCE while it is held, or for the masters' restart quarantine to end (0: one attempt)")
	grace := fs.Duration("grace", 10*time.Second, "time between SIGTERM (or the forwarded signal) and SIGKILL")
	extendEvery := fs.Duration("extend-every", 0, "how often the lock is renewed, from TTL/100 (default TTL/3)")
	fencing := fs.Bool("fencing", false, "give COMMAND a fencing token in $REDLOCK_FENCING_TOKEN")
	quarantine := fs.String("quarantine", "always", "votes of a master younger than --max-ttl: always ignored until it is --max-ttl old, after an observed restart only (observed), or counted (off)")
	conn := connflags.Register(fs)
	// Taken before the flags are parsed (see run); listed here.
	fs.Bool("version", false, "print redlock's version and exit, whatever the other flags")
	fs.SetInterspersed(true)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, execUsage, fs.FlagUsages())
			return nil, nil
		}
		// pflag quotes no argument: one with a line break would split
		// the message.
		msg := strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(err.Error())
		return nil, usageErrorf("exec: %s (see 'redlock exec --help')", msg)
	}
	o := &execOptions{ttl: *ttl, maxTTL: *longest, wait: *wait, grace: *grace, extendEvery: *extendEvery, fencing: *fencing}

	list, from := *masters, "--masters"
	if !fs.Changed("masters") {
		list, from = os.Getenv("REDLOCK_MASTERS"), "REDLOCK_MASTERS"
		if strings.TrimSpace(list) == "" {
			return nil, usageErrorf("exec: no masters: give --masters host:port,... or set REDLOCK_MASTERS")
		}
	}
	var err error
	if o.masters, err = engine.ParseMasters(list); err != nil {
		return nil, usageErrorf("exec: %s: %v", from, err)
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
	if o.conn, err = conn.Settings(true); err != nil {
		return nil, usageErrorf("exec: %v", err)
	}
	o.authWarning = conn.Warning()
	switch {
	case fs.Changed("pass"):
		o.passFrom = "-a/--pass"
	case o.conn.Password != "":
		o.passFrom = connflags.EnvPassword
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
	cfg.Conn.Username, cfg.Conn.Password, cfg.Conn.TLS = o.conn.Username, o.conn.Password, o.conn.TLS
	if err := cfg.Validate(); err != nil {
		return nil, nil, usageErrorf("exec: %s", engineText(err))
	}
	l, err := engine.New(ctx, cfg)
	if err != nil {
		switch {
		case errors.Is(err, engine.ErrUnreachable):
			msg := engineText(err)
			if fix := connectionFix(msg, o.conn.Username, o.passFrom); fix != "" {
				msg += "; " + fix
			}
			return nil, nil, statusErrorf(exitUnavailable, "exec: %s", msg)
		case ctx.Err() != nil:
			return nil, nil, err // interrupted: the caller reports the signal
		}
		return nil, nil, statusErrorf(exitConfig, "exec: masters cannot be used: %s", engineText(err))
	}
	// --wait bounds the wait for a holder, not the first attempt, which a
	// --wait shorter than a round trip would cut short ("no quorum
	// answered") however free the resource.
	deadline := time.Now().Add(o.wait)
	waited := false // the wait went on past the first attempt
	le, err := l.TryLock(ctx, o.resource)
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
				lle, lerr := l.Lock(wctx, o.resource)
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
	case errors.Is(err, engine.ErrWrongType):
		return nil, nil, statusErrorf(exitConfig, "exec: %q cannot be a lock: %s", o.resource, engineText(err))
	case errors.Is(err, engine.ErrNotAcquired):
		return nil, nil, statusErrorf(exitNotAcquired, "exec: not acquired: %q is held by another owner%s", o.resource, after)
	case errors.Is(err, engine.ErrNoQuorum):
		return nil, nil, statusErrorf(exitUnavailable, "exec: no quorum for %q%s: %s", o.resource, after, detail)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, nil, statusErrorf(exitUnavailable, "exec: no quorum answered for %q within --wait %s", o.resource, shortDuration(o.wait))
	case errors.Is(err, engine.ErrReservedResource) || errors.Is(err, engine.ErrEmptyResource):
		return nil, nil, usageErrorf("exec: RESOURCE %q: %s", o.resource, detail)
	}
	return nil, nil, fmt.Errorf("exec: acquire %q: %s", o.resource, detail)
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
	cmd.Env = commandEnv(os.Environ(), o.resource, le.Token(), o.fencing)
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

// commandEnv is env with REDLOCK_RESOURCE and, with fencing, the token;
// values inherited from an enclosing redlock are dropped.
func commandEnv(env []string, resource string, token int64, fencing bool) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if strings.HasPrefix(kv, "REDLOCK_RESOURCE=") || strings.HasPrefix(kv, "REDLOCK_FENCING_TOKEN=") {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "REDLOCK_RESOURCE="+resource)
	if fencing {
		out = append(out, "REDLOCK_FENCING_TOKEN="+strconv.FormatInt(token, 10))
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
