package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-bench/redlock/multiplex"
)

// Locker acquires leases on resources across the masters. It is safe for
// concurrent use; one Locker per process is the intended use.
type Locker struct {
	cfg    Config
	pool   *multiplex.Pool
	addrs  []string
	ttlStr string // TTL in ms, formatted once
	drift  time.Duration
	setGet bool // masters support SET NX GET (Redis >= 7.0)
	gate   *gate
	notify *notifier
	closed atomic.Bool
	// done closes with Close: Lock callers asleep between attempts wake.
	done chan struct{}
	// waiting counts Lock callers blocked between attempts on the masters.
	waiting atomic.Int32
	// remote counts Lock callers (at the gate or past it), attempts and
	// Releases handing their lease on, whom Close waits for, bounded, so
	// that their clean-up still reaches the masters.
	remote atomic.Int32
	// tickets are this Locker's waiters' places in the masters' queues,
	// with their resources. Whoever takes a ticket out sends its leave (the
	// waiter, or Close for a waiter it could not wait for), once, and while
	// holding tmu: Close takes tmu before it closes the pool, which then
	// drains what was posted.
	tmu     sync.Mutex
	tickets map[*ticket]string
	nodes   *nodeWatch // for Observer.NodeState
	// id and seq name this Locker's waiters in the masters' queues.
	id  string
	seq atomic.Uint64
}

// New validates cfg, connects to every master and loads the scripts. A
// minority of masters may be down; if a quorum cannot be reached it fails
// with an error naming every unreachable address and why.
func New(ctx context.Context, cfg Config) (*Locker, error) {
	cfg.Masters = append([]string(nil), cfg.Masters...)
	cfg.fill()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pool, err := multiplex.Dial(ctx, multiplex.Options{
		Addrs:             cfg.Masters,
		NodeTimeout:       cfg.NodeTimeout,
		DialTimeout:       cfg.DialTimeout,
		ConnTimeout:       cfg.ConnTimeout,
		MaxFlushDelay:     cfg.MaxFlushDelay,
		PipelineMultiplex: cfg.PipelineMultiplex,
		Scripts:           allScripts,
		Quarantine:        cfg.Quarantine,
		MaxTTL:            cfg.MaxTTL,
		DisableCoalesce:   cfg.DisableCoalesce,
		Username:          cfg.Username,
		Password:          cfg.Password,
		TLS:               cfg.TLS,
		Tune:              cfg.Tune,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	l := &Locker{
		cfg:     cfg,
		pool:    pool,
		addrs:   cfg.Masters,
		ttlStr:  itoa(cfg.TTL.Milliseconds()),
		drift:   drift(cfg.TTL, cfg.DriftFactor),
		setGet:  true,
		id:      newValue()[:11],
		done:    make(chan struct{}),
		tickets: make(map[*ticket]string),
	}
	for _, n := range pool.Status() {
		if v := n.Version; v != "" && !atLeast(v, 7, 0) {
			l.setGet = false
		}
	}
	if cfg.Fencing {
		if err := checkClocks(pool, cfg.MaxTTL); err != nil {
			pool.Close()
			return nil, err
		}
	}
	if !cfg.DisableGate {
		l.gate = newGate()
	}
	if !cfg.DisableNotify {
		l.notify = newNotifier(pool, cfg.NotifyLinger)
	}
	l.nodes = l.watchNodes()
	return l, nil
}

// Config returns the effective configuration, defaults filled in.
func (l *Locker) Config() Config { return l.cfg }

// Quorum is the number of masters that must agree: N/2+1.
func (l *Locker) Quorum() int { return l.pool.Quorum() }

// Nodes reports each master's state: up, down, or quarantined (and until
// when), with its outcome counts.
func (l *Locker) Nodes() []NodeStatus { return l.pool.Status() }

// NodeState is a master's condition as the Locker sees it.
type NodeState = multiplex.NodeState

// The states of a master.
const (
	StateUp          = multiplex.StateUp
	StateDown        = multiplex.StateDown
	StateQuarantined = multiplex.StateQuarantined
)

// NodeStatus is a snapshot of one master, for operators and the bench.
type NodeStatus = multiplex.NodeStatus

// Subscriptions is the number of resources this Locker is subscribed to
// for release notifications right now: one per resource with waiters, or
// waited for within Config.NotifyLinger.
func (l *Locker) Subscriptions() int {
	if l.notify == nil {
		return 0
	}
	return l.notify.subscriptions()
}

// Close releases the connections. Leases still held are left to expire;
// their Done channels close then. Lock callers still waiting return
// ErrClosed: Close wakes them and waits (at most a few node timeouts) for
// them to undo an attempt that took the key after Close began and to leave
// the masters' queues, passing on a turn that may have been theirs, so
// that the waiters of other Lockers are woken by the next release instead
// of their fallback. A TryLock whose attempt succeeds after Close began
// undoes it too, and returns ErrClosed.
func (l *Locker) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	close(l.done)
	if l.gate != nil {
		l.gate.close()
	}
	// A waiter may be in an attempt (and its fencing round) or
	// subscribing: each is bounded by a round's span.
	deadline := time.Now().Add(3 * l.pool.MaxRoundSpan())
	for l.remote.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	l.tmu.Lock()
	for tk, resource := range l.tickets {
		l.postQuit(resource, tk)
	}
	l.tickets = nil
	l.tmu.Unlock()
	if l.notify != nil {
		l.notify.close()
	}
	l.nodes.close()
	l.pool.Close()
	return nil
}

// TryLock makes one attempt to acquire resource. On failure the attempt is
// undone on every master where it may have taken, and the error says why
// (see VotesError). TryLock does not queue at the in-process gate.
func (l *Locker) TryLock(ctx context.Context, resource string) (*Lease, error) {
	if l.cfg.Observer != nil {
		return l.tryLockObserved(ctx, resource)
	}
	le, err := l.try(ctx, resource, nil)
	if err != nil {
		return nil, err
	}
	le.arm()
	return le, nil
}

// ticket is a waiter's place in the resource's queue on the masters (see
// queuePrefix).
type ticket struct {
	score string // wall-clock µs at the start of Lock
	id    string // unique among the waiters of every Locker
}

// try makes one attempt. tk is for a waiter subscribed to the resource's
// releases: where the key is taken, the attempt marks the holder's value,
// which makes the holder's release publish, and queues the waiter.
func (l *Locker) try(ctx context.Context, resource string, tk *ticket) (*Lease, error) {
	// Close waits for attempts under way (see remote), so that the undo of
	// one that succeeds after Close began reaches the masters.
	l.remote.Add(1)
	defer l.remote.Add(-1)
	if l.closed.Load() {
		return nil, fmt.Errorf("engine: acquire %q: %w", resource, ErrClosed)
	}
	if err := l.checkResource("acquire", resource); err != nil {
		return nil, err
	}
	le := &Lease{
		l:        l,
		resource: resource,
		key:      l.cfg.KeyPrefix + resource,
		value:    newValue(),
	}
	if tk != nil {
		// The release finds the waiter's id in the value (see queuePrefix).
		le.value = tk.id + idEnd + le.value
	}
	// A waiter's attempt goes to every master even once decided, so that
	// it is queued on all of them: masters whose queues differ would each
	// wake a different waiter.
	skip := tk == nil
	le.initVotes(l.pool.Len())
	cmd := multiplex.Command{Name: "SET", Key: le.key, SkipIfFailed: skip}
	classify := classifyAcquireGet
	switch {
	case l.cfg.Fencing:
		cmd.Name, cmd.Script = "", acquireFenceScript
		cmd.Args, cmd.NArgs = [multiplex.MaxArgs]string{le.value, l.ttlStr, "0"}, 3
		if tk != nil {
			cmd.Args[2], cmd.Args[3], cmd.Args[4], cmd.NArgs = "1", tk.score, tk.id, 5
		}
		classify = classifyFenced
	case tk != nil:
		cmd.Name, cmd.Script = "", acquireMarkScript
		cmd.Args, cmd.NArgs = [multiplex.MaxArgs]string{le.value, l.ttlStr, tk.score, tk.id}, 4
	case l.setGet:
		cmd.Args, cmd.NArgs = [multiplex.MaxArgs]string{le.value, "NX", "GET", "PX", l.ttlStr}, 5
	default:
		cmd.Args, cmd.NArgs = [multiplex.MaxArgs]string{le.value, "NX", "PX", l.ttlStr}, 4
		classify = classifyAcquireSet
	}
	le.start = time.Now()
	t := l.pool.Fanout(ctx, cmd, classify, (*acquireReplies)(le), le.votes)

	ok := t.Reached() && t.Err == nil
	le.mu.Lock()
	for i, v := range t.Votes {
		le.record(i, v)
	}
	if ok {
		le.validUntil = le.start.Add(l.cfg.TTL - l.drift)
	}
	le.mu.Unlock()
	var err error
	if ok && l.cfg.Fencing {
		err = le.fence(ctx, t)
	}
	// The lease is not handed out yet: nothing else writes validUntil.
	if ok && err == nil && time.Now().Before(le.validUntil) {
		if !l.closed.Load() {
			return le, nil
		}
		// Close began during the attempt. The lease could not be released
		// (Release after Close deletes nothing), so it would keep the
		// resource, and a waiter's turn, for its TTL: undo it (a waiter's
		// quit then passes the turn on).
		err = fmt.Errorf("engine: acquire %q: %w during the attempt, which was undone", resource, ErrClosed)
	}
	if err == nil {
		err = l.acquireError(resource, t)
	}
	l.undo(le)
	return nil, err
}

// checkResource refuses names that cannot be locks, for op: the empty
// name, and names whose key falls in the engine's internal namespace.
func (l *Locker) checkResource(op, resource string) error {
	if resource == "" {
		return fmt.Errorf("engine: %s: %w", op, ErrEmptyResource)
	}
	return checkKey(l.cfg.KeyPrefix, resource)
}

func (l *Locker) acquireError(resource string, t multiplex.Tally) error {
	return newVotesError("acquire", resource, acquireKind(&t), &t, l.addrs)
}

// acquireKind tells contention from outage for a failed attempt:
// ErrNoQuorum only when failures alone made the quorum impossible, so
// that a resource held elsewhere reads as contention even with a minority
// of masters down; ErrWrongType when masters that answered that the key
// is no lock are what made it impossible, which is neither.
func acquireKind(t *multiplex.Tally) error {
	spare := len(t.Votes) - t.Quorum
	switch {
	case t.Err != nil:
		return nil
	case t.Reached():
		// Reached but too slow: the masters were too slow for the TTL,
		// which is not contention.
		return ErrNoQuorum
	case len(t.Votes) == 0:
		return ErrNoQuorum
	case t.Failed+t.Timeout > spare:
		wrong := 0
		for _, v := range t.Votes {
			if v.Outcome == multiplex.Failed && isWrongType(v.Err) {
				wrong++
			}
		}
		if wrong > 0 && t.Failed-wrong+t.Timeout <= spare {
			return ErrWrongType
		}
		return ErrNoQuorum
	}
	return ErrNotAcquired // refused by enough masters, or a split vote
}

// opError is a failed release or extend, classified: ErrLeaseExpired once
// the validity ran out, ErrNotHeld when the refusals prove the lock is not
// ours, ErrNoQuorum when too few masters answered to tell.
func (l *Locker) opError(op, resource string, t multiplex.Tally, validUntil time.Time) error {
	var kind error
	switch {
	case t.Err != nil:
	case !time.Now().Before(validUntil):
		kind = ErrLeaseExpired
	case t.Refused > len(t.Votes)-t.Quorum, t.Refused > 0 && t.Failed+t.Timeout == 0:
		// The refusals alone prove the lock is not ours on a quorum, or
		// every master asked answered and some said it is not ours.
		kind = ErrNotHeld
	default:
		// Too few answers to tell: the masters failed us.
		kind = ErrNoQuorum
	}
	return newVotesError(op, resource, kind, &t, l.addrs)
}

// Lock acquires resource, waiting as long as ctx allows.
//
// Goroutines of this Locker that Lock the same resource queue at an
// in-process gate in FIFO order; only the head asks the masters. When the
// resource is held elsewhere, the head subscribes to its release channel
// and retries the moment a release is published, or after a random
// fallback delay (FallbackMin..FallbackMax, capped at the TTL) that covers
// expiries and lost notifications. A split vote or an outage backs off for
// a random RetryDelayMin..RetryDelayMax. Lease.Wait tells how the wait
// went.
func (l *Locker) Lock(ctx context.Context, resource string) (*Lease, error) {
	if l.cfg.Observer != nil {
		return l.lockObserved(ctx, resource)
	}
	var w WaitInfo
	return l.lock(ctx, resource, &w)
}

func (l *Locker) lock(ctx context.Context, resource string, w *WaitInfo) (*Lease, error) {
	l.remote.Add(1)
	defer l.remote.Add(-1)
	start := time.Now()
	if err := l.checkResource("lock", resource); err != nil {
		return nil, err
	}
	gated := false
	if l.gate != nil {
		waited, inherited, err := l.gate.enter(ctx, resource)
		l.observeGate(resource, start, waited, inherited != nil, err)
		switch {
		case errors.Is(err, ErrClosed):
			return nil, fmt.Errorf("engine: lock %q: %w", resource, ErrClosed)
		case err != nil:
			// Held by another goroutine of this Locker until the context
			// ended: contention, as when the holder is another process.
			return nil, errorf("lock %q: %v: queued %s behind another goroutine of this Locker, which holds it or waits for it: %v",
				resource, ErrNotAcquired, time.Since(start).Round(time.Millisecond), err)
		}
		if inherited != nil {
			w.Gated, w.Cause, w.Waited = true, WakeHandoff, time.Since(start)
			inherited.wait = *w
			inherited.arm()
			return inherited, nil
		}
		gated, w.Gated = true, waited
	}
	le, err := l.lockRemote(ctx, resource, start, w)
	if err != nil {
		if gated {
			l.gate.leave(resource)
		}
		return nil, err
	}
	w.Waited = time.Since(start)
	le.wait = *w
	le.gated = gated
	le.arm()
	return le, nil
}

func (l *Locker) lockRemote(ctx context.Context, resource string, start time.Time, w *WaitInfo) (le *Lease, err error) {
	var (
		sub   *subscription
		tk    *ticket
		timer *time.Timer
		// settle bounds how long a woken waiter waits for the rest of the
		// masters to give it the turn (see awaitTurns).
		settle *time.Timer
		last   error // the last attempt that was decided, not cut short
	)
	defer func() {
		sub.close()
		if tk != nil && err != nil {
			l.quitQueue(resource, tk)
		}
	}()
	// A resource this Locker waited for lately (its subscription lingers)
	// is likely held: the first attempt already queues, which spares a
	// plain attempt's round trip and a subscription.
	if l.notify != nil && l.notify.listening(l.cfg.KeyPrefix+resource) {
		tk, sub = l.queue(ctx, resource, start)
	}
	for {
		w.Attempts++
		le, err := l.try(ctx, resource, tk)
		if err == nil {
			if tk != nil {
				// Masters where the attempt queued the waiter but did not
				// set its key are not sent its release, which leaves it.
				le.mu.Lock()
				rest := (uint64(1)<<len(le.votes) - 1) &^ le.held
				le.kept, le.queueID = rest, tk.id
				le.mu.Unlock()
				l.tmu.Lock()
				if _, ok := l.tickets[tk]; ok {
					delete(l.tickets, tk)
					l.leaveQueue(resource, tk, rest, true)
				}
				l.tmu.Unlock()
			}
			return le, nil
		}
		if ctx.Err() != nil {
			if last == nil || errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNoQuorum) {
				last = err
			}
			return nil, gaveUp(resource, ctx, w, last)
		}
		last = err
		if errors.Is(err, ErrWrongType) || !(errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNoQuorum)) {
			return nil, err
		}
		var ve *VotesError
		held := errors.As(err, &ve) && ve.Kind == ErrNotAcquired && ve.heldByOne()
		var d time.Duration
		timerCause := WakeBackoff // what the timer's end is counted as
		switch {
		case held && l.notify != nil && sub == nil:
			// Subscribe, then try again at once, marking the holder's
			// value: the release may have come between the refusal and
			// the subscription, and an unmarked release publishes nothing.
			tk, sub = l.queue(ctx, resource, start)
			continue
		case held && ve.onlyTurns():
			// The waiters given the turn may be gone (a killed process):
			// back off until their tokens have expired, rather than wait
			// for the fallback, unless a release wakes us first.
			d = min(turnGrace+jitter(l.cfg.RetryDelayMin, l.cfg.RetryDelayMax), jitter(l.cfg.FallbackMin, min(l.cfg.FallbackMax, l.cfg.TTL)))
		case held:
			d = jitter(l.cfg.FallbackMin, min(l.cfg.FallbackMax, l.cfg.TTL))
			timerCause = WakeFallback
		default:
			// A split vote or an outage: nobody may be holding it, so
			// nothing will be published; back off so competitors drift
			// apart.
			d = jitter(l.cfg.RetryDelayMin, l.cfg.RetryDelayMax)
		}
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
			defer func() {
				if settle != nil {
					settle.Stop()
				}
			}()
		} else {
			timer.Reset(d)
		}
		// A waiter in the queue also listens after a split vote: the
		// undos of the split attempts wake the first waiter.
		var notified <-chan struct{}
		if sub != nil {
			notified = sub.C
		}
		l.waiting.Add(1)
		asleep := l.waitStart()
		select {
		case <-ctx.Done():
			l.waiting.Add(-1)
			l.observeWait(resource, asleep, WakeNone, ctx.Err())
			return nil, gaveUp(resource, ctx, w, last)
		case <-l.done:
			l.waiting.Add(-1)
			l.observeWait(resource, asleep, WakeNone, ErrClosed)
			return nil, fmt.Errorf("engine: lock %q: %w", resource, ErrClosed)
		case <-notified:
			w.Notified++
			w.Cause = WakeNotified
			if !sub.awaitTurns(ctx, l.Quorum(), &settle) {
				l.waiting.Add(-1)
				l.observeWait(resource, asleep, WakeNotified, ctx.Err())
				return nil, gaveUp(resource, ctx, w, last)
			}
		case <-timer.C:
			w.Cause = timerCause
			if timerCause == WakeFallback {
				w.Fallbacks++
			} else {
				w.Backoffs++
			}
		}
		l.waiting.Add(-1)
		l.observeWait(resource, asleep, w.Cause, nil)
	}
}

// gaveUp is the error of a Lock whose context ended: one line, matching
// both the context's error and the last attempt's (ErrNotAcquired for a
// resource held until then).
func gaveUp(resource string, ctx context.Context, w *WaitInfo, last error) error {
	if last == nil {
		return errorf("lock %q: gave up after %d attempts: %v", resource, w.Attempts, ctx.Err())
	}
	return errorf("lock %q: gave up after %d attempts (%v); the last: %v", resource, w.Attempts, ctx.Err(), last)
}

// queue gives a waiter that began at start its ticket and subscribes it
// to the resource's releases.
func (l *Locker) queue(ctx context.Context, resource string, start time.Time) (*ticket, *subscription) {
	tk := &ticket{score: itoa(start.UnixMicro()), id: l.id + ":" + strconv.FormatUint(l.seq.Add(1), 36)}
	l.tmu.Lock()
	if l.tickets != nil {
		l.tickets[tk] = resource
	}
	l.tmu.Unlock()
	return tk, l.notify.subscribe(ctx, l.cfg.KeyPrefix+resource, tk.id)
}

// leaveQueue takes a waiter that has acquired (or its released lease) out
// of the resource's queue on nodes (a bit set), without waiting: otherwise a
// release would wake it instead of a waiter still there, who would sleep
// until its fallback. One that acquired stays where a release may still be
// on its way to pop it (see leaveScript).
func (l *Locker) leaveQueue(resource string, tk *ticket, nodes uint64, acquired bool) {
	if nodes == 0 {
		return
	}
	cmd := multiplex.Command{Name: "ZREM", Key: queuePrefix + l.cfg.KeyPrefix + resource, Args: [multiplex.MaxArgs]string{tk.id}, NArgs: 1, Nodes: nodes}
	if acquired {
		cmd.Name, cmd.Script, cmd.Key = "", leaveScript, l.cfg.KeyPrefix+resource
	}
	l.pool.Post(cmd, classifyInt, nil)
}

// quitQueue takes a waiter that gives up out of the resource's queue on
// every master, and passes on a turn it may have been given (see
// quitScript), without waiting; unless Close has done so.
func (l *Locker) quitQueue(resource string, tk *ticket) {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if _, ok := l.tickets[tk]; ok {
		delete(l.tickets, tk)
		l.postQuit(resource, tk)
	}
}

// postQuit sends tk's quitScript to every master. The caller holds tmu.
func (l *Locker) postQuit(resource string, tk *ticket) {
	cmd := multiplex.Command{Script: quitScript, Key: l.cfg.KeyPrefix + resource, Args: [multiplex.MaxArgs]string{tk.id}, NArgs: 1, Nodes: uint64(1)<<l.pool.Len() - 1}
	l.pool.Post(cmd, classifyInt, nil)
}

func jitter(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + mrand.N(hi-lo)
}

// newValue returns 128 random bits, base64url-encoded (22 bytes).
func newValue() string {
	var b [16]byte
	rand.Read(b[:]) // never fails on Linux (Go 1.24+ crashes instead)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// atLeast compares a "major.minor.patch" version.
func atLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
