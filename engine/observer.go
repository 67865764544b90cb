package engine

import (
	"context"
	"errors"
	"math/bits"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/multiplex"
)

// Observer receives the engine's events, for metrics and traces (package
// otelredlock turns them into OpenTelemetry instruments and spans). Set
// Config.Observer; every field is optional. A Locker without an Observer
// pays one nil check per operation and nothing else.
//
// Every event carries a duration and an outcome:
//
//	event      duration                               outcome
//	Acquire    Duration: the call, waits included     Result (and Err)
//	Release    Duration: the call                     Result (and Err)
//	Extend     Duration: the call or auto-extension   Result (and Err)
//	Wait       Duration: the wait                     Cause, and Err if the context or Close ended it
//	Handoff    Held: since the keys were set, across  passed on; Validity: what the successor gets
//	           the hand-offs in a row
//	Lost       Held: since the keys were set          Result: ResultNotHeld (lock lost) or ResultExpired
//	NodeState  Duration: time in the Previous state   State
//
// The contract:
//   - Each function is called synchronously, on the goroutine that did the
//     work, after the work is done and before the call that did it
//     returns: Acquire, Release, Extend and Wait on the caller's goroutine;
//     Handoff on the goroutine whose Release passed the lease on; an
//     auto-extension's Extend on a timer goroutine; Lost on whichever
//     goroutine noticed the loss (a timer, an extension, or a caller of
//     Done, Err, Context or Validity); NodeState on the Locker's own node
//     watcher goroutine, one event at a time, in order.
//   - A function must not block: it runs on the lock's hot path. It must
//     be safe for concurrent use. NodeState must not call Locker.Close,
//     which waits for the watcher that calls it.
//   - Events report what already happened: a lease's Done closes, and
//     the caller of Lock may proceed, before its Lost or Acquire event
//     has returned.
//   - Events are values and cost the engine no allocation. Their Masters
//     slice is the Locker's own: read it, never modify it.
type Observer struct {
	// Acquire: a Lock or TryLock call ended. ctx is the caller's, so that a
	// tracer can parent a span on it (the span's start is AcquireEvent.Start).
	Acquire func(ctx context.Context, e AcquireEvent)
	// Release: a Release call ended, with the lease deleted on the
	// masters or handed on to a goroutine queued at the gate.
	Release func(ctx context.Context, e ReleaseEvent)
	// Extend: an Extend call or an auto-extension ended.
	Extend func(ctx context.Context, e ExtendEvent)
	// Wait: a Lock caller's wait ended: its turn at the in-process gate, or
	// a sleep between two attempts on the masters.
	Wait func(e WaitEvent)
	// Handoff: a lease was passed to the next goroutine queued at the gate,
	// without a round trip.
	Handoff func(e HandoffEvent)
	// Lost: a lease ended for a reason other than its release: an
	// extension found the lock gone or missed the quorum (ErrLockLost), or
	// its validity ran out while held (ErrLeaseExpired). Expiry is seen
	// when the engine looks: at once for leases whose Done, Context or
	// auto-extension is in use and for leases queued behind at the gate,
	// otherwise at the next Err, Validity or Release.
	Lost func(e LostEvent)
	// NodeState: a master's state changed (up, down, quarantined). Each
	// master's first event, from the empty state, comes at New. Changes
	// are polled every NodeWatchInterval, so a state that lasts less may
	// go unseen.
	NodeState func(e NodeStateEvent)
}

// NodeWatchInterval is how often a Locker with an Observer.NodeState
// polls its masters' states.
const NodeWatchInterval = 250 * time.Millisecond

// Result is how an observed operation ended.
type Result uint8

const (
	// ResultAcquired: Lock or TryLock returned a lease.
	ResultAcquired Result = iota + 1
	// ResultContended: the resource was held by another owner
	// (ErrNotAcquired), for Lock until its context ended.
	ResultContended
	// ResultNoQuorum: too many masters failed (ErrNoQuorum).
	ResultNoQuorum
	// ResultError: any other failure (the context ended before an attempt
	// was decided, ErrWrongType, ErrClosed, a bad name).
	ResultError
	// ResultReleased: Release deleted the lock on a quorum.
	ResultReleased
	// ResultHandedOff: Release passed the lease to a goroutine queued at
	// the gate.
	ResultHandedOff
	// ResultExtended: Extend succeeded.
	ResultExtended
	// ResultNotHeld: the lock was not ours on a quorum (ErrNotHeld,
	// ErrLockLost, ErrReleased).
	ResultNotHeld
	// ResultExpired: the lease's validity had run out (ErrLeaseExpired).
	ResultExpired
)

func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "unknown"
}

var resultNames = [...]string{"unknown", "acquired", "contended", "no_quorum", "error", "released",
	"handed_off", "extended", "not_held", "expired"}

// resultOf classifies err, ok being the result of success.
func resultOf(err error, ok Result) Result {
	switch {
	case err == nil:
		return ok
	case errors.Is(err, ErrNotAcquired):
		return ResultContended
	case errors.Is(err, ErrNoQuorum):
		return ResultNoQuorum
	case errors.Is(err, ErrLeaseExpired):
		return ResultExpired
	case errors.Is(err, ErrNotHeld), errors.Is(err, ErrLockLost), errors.Is(err, ErrReleased):
		return ResultNotHeld
	}
	return ResultError
}

// VoteSet is each master's outcome in a round, as bit sets: bit i stands
// for Config.Masters[i]. Masters in none of the sets were still pending
// when the round was decided.
type VoteSet struct {
	N                            int
	OK, Refused, Failed, Timeout uint64
}

// Outcome is master i's outcome.
func (v VoteSet) Outcome(i int) Outcome {
	bit := uint64(1) << i
	switch {
	case v.OK&bit != 0:
		return OutcomeOK
	case v.Refused&bit != 0:
		return OutcomeRefused
	case v.Failed&bit != 0:
		return OutcomeFailed
	case v.Timeout&bit != 0:
		return OutcomeTimeout
	}
	return OutcomePending
}

// Count is the number of masters with outcome o.
func (v VoteSet) Count(o Outcome) int {
	switch o {
	case OutcomeOK:
		return bits.OnesCount64(v.OK)
	case OutcomeRefused:
		return bits.OnesCount64(v.Refused)
	case OutcomeFailed:
		return bits.OnesCount64(v.Failed)
	case OutcomeTimeout:
		return bits.OnesCount64(v.Timeout)
	}
	return v.N - bits.OnesCount64(v.OK|v.Refused|v.Failed|v.Timeout)
}

func (v *VoteSet) add(i int, o Outcome) {
	bit := uint64(1) << i
	switch o {
	case OutcomeOK:
		v.OK |= bit
	case OutcomeRefused:
		v.Refused |= bit
	case OutcomeFailed:
		v.Failed |= bit
	case OutcomeTimeout:
		v.Timeout |= bit
	}
}

func voteSetOf(votes []multiplex.Vote) VoteSet {
	v := VoteSet{N: len(votes)}
	for i, x := range votes {
		v.add(i, Outcome(x.Outcome))
	}
	return v
}

// votesOf is the rounds's votes: err's when it carries them, else those of
// the lease's last round (ok: the round succeeded), else none.
func votesOf(n int, err error, le *Lease, ok bool) VoteSet {
	switch {
	case err != nil:
		return errVotes(n, err)
	case ok && le != nil:
		return voteSetOf(le.votes)
	}
	return VoteSet{N: n}
}

// errVotes is err's votes; apart, because errors.As costs an allocation
// that a success must not pay.
func errVotes(n int, err error) VoteSet {
	ve := findVotes(err)
	if ve == nil {
		return VoteSet{N: n}
	}
	v := VoteSet{N: len(ve.Votes)}
	for i, x := range ve.Votes {
		v.add(i, x.Outcome)
	}
	return v
}

// AcquireOp is the call an AcquireEvent reports.
type AcquireOp uint8

const (
	OpTryLock AcquireOp = iota + 1
	OpLock
)

func (o AcquireOp) String() string {
	if o == OpLock {
		return "lock"
	}
	return "try_lock"
}

// AcquireEvent reports a Lock or TryLock call.
type AcquireEvent struct {
	Op       AcquireOp
	Resource string
	// Start is when the call began; Duration how long it took, waits
	// included.
	Start    time.Time
	Duration time.Duration
	Result   Result
	// Err is the call's error, nil when acquired.
	Err error
	// Attempts on the masters (0 for a lease handed over at the gate).
	Attempts int
	// Votes are the last attempt's; with Handoff, only the masters that
	// hold the inherited lease, as OK.
	Votes   VoteSet
	Quorum  int
	Masters []string
	// Handoff: Lock inherited the lease from a goroutine of this Locker.
	Handoff bool
	// Token is the lease's fencing token (0 without fencing).
	Token int64
}

// ReleaseEvent reports a Release call.
type ReleaseEvent struct {
	Resource string
	Start    time.Time
	Duration time.Duration
	// Result is ResultReleased, ResultHandedOff, ResultNotHeld,
	// ResultExpired, ResultNoQuorum or ResultError.
	Result Result
	Err    error
	// Held is the time from the acquisition's start to the release.
	Held    time.Duration
	Votes   VoteSet
	Quorum  int
	Masters []string
}

// ExtendEvent reports an Extend call or an auto-extension.
type ExtendEvent struct {
	Resource string
	// Auto: an auto-extension (Config.AutoExtend).
	Auto     bool
	Start    time.Time
	Duration time.Duration
	// Result is ResultExtended, ResultNotHeld, ResultExpired,
	// ResultNoQuorum or ResultError.
	Result  Result
	Err     error
	Votes   VoteSet
	Quorum  int
	Masters []string
}

// WaitKind says what a Lock caller waited for.
type WaitKind uint8

const (
	// WaitGate: its turn at the in-process gate, behind goroutines of
	// this Locker that Lock the same resource.
	WaitGate WaitKind = iota + 1
	// WaitRetry: a sleep between two attempts on the masters, ended by a
	// release notification, the fallback timer or a back-off.
	WaitRetry
)

func (k WaitKind) String() string {
	if k == WaitGate {
		return "gate"
	}
	return "retry"
}

// WaitEvent reports one wait of a Lock caller.
type WaitEvent struct {
	Resource string
	Kind     WaitKind
	// Cause ended the wait: WakeNotified, WakeFallback or WakeBackoff for
	// WaitRetry; WakeHandoff or WakeNone (its turn to compete) for
	// WaitGate. WakeNone with Err set: the context, or Close (ErrClosed),
	// ended the wait.
	Cause    WakeCause
	Duration time.Duration
	Err      error
}

// HandoffEvent reports a lease passed on at the gate.
type HandoffEvent struct {
	Resource string
	// InARow counts the hand-offs in a row, this one included (at most
	// Config.Wait.MaxHandoffs).
	InARow int
	// Held is the time from the start of the acquisition that set the
	// keys to the hand-off: the keys stay, so it spans every hand-off in
	// the row.
	Held time.Duration
	// Validity is what is left of the lease's validity for the successor.
	Validity time.Duration
}

// LostEvent reports a lease that ended without being released.
type LostEvent struct {
	Resource string
	// Result is ResultNotHeld (the lock was lost: Err wraps ErrLockLost)
	// or ResultExpired (Err is ErrLeaseExpired).
	Result Result
	Err    error
	// Held is the time from the acquisition's start to the loss.
	Held time.Duration
}

// NodeStateEvent reports a master's state change.
type NodeStateEvent struct {
	Node            int // index in Config.Masters
	Addr            string
	State, Previous NodeState
	// Duration is how long the master was in Previous, as polled (to
	// within NodeWatchInterval); 0 for the first event.
	Duration         time.Duration
	QuarantinedUntil time.Time // set while quarantined
	Err              string    // the master's last error, if any
}

// findVotes is errors.As for the engine's own errors, without the
// allocation of As's target: the contention path is hot.
func findVotes(err error) *VotesError {
	switch e := err.(type) {
	case *VotesError:
		return e
	case *engineError:
		for _, x := range e.errs {
			if v := findVotes(x); v != nil {
				return v
			}
		}
	}
	return nil
}

// tryLockObserved is TryLock with an Observer.
func (l *Locker) tryLockObserved(ctx context.Context, resource string, o acquireOpts) (*Lease, error) {
	start := time.Now()
	le, err := l.try(ctx, resource, nil, o)
	if err == nil {
		le.arm()
	}
	l.observeAcquire(ctx, OpTryLock, resource, start, le, err, 1)
	return le, err
}

// lockObserved is Lock with an Observer.
func (l *Locker) lockObserved(ctx context.Context, resource string, o acquireOpts) (*Lease, error) {
	start := time.Now()
	var w WaitInfo
	le, err := l.lock(ctx, resource, &w, o)
	l.observeAcquire(ctx, OpLock, resource, start, le, err, w.Attempts)
	return le, err
}

func (l *Locker) observeAcquire(ctx context.Context, op AcquireOp, resource string, start time.Time, le *Lease, err error, attempts int) {
	f := l.cfg.Observer.Acquire
	if f == nil {
		return
	}
	e := AcquireEvent{Op: op, Resource: resource, Start: start, Duration: time.Since(start), Result: resultOf(err, ResultAcquired),
		Err: err, Attempts: attempts, Quorum: l.quorum, Masters: l.addrs}
	if err == nil && le.wait.Cause == WakeHandoff {
		le.mu.Lock()
		e.Handoff, e.Attempts, e.Votes = true, 0, VoteSet{N: len(le.votes), OK: le.held}
		le.mu.Unlock()
	} else {
		e.Votes = votesOf(len(l.addrs), err, le, err == nil)
	}
	if le != nil {
		e.Token = le.token
	}
	f(ctx, e)
}

// observeGate reports a wait at the gate that began at start.
func (l *Locker) observeGate(resource string, start time.Time, waited, inherited bool, err error) {
	if o := l.cfg.Observer; o != nil && waited {
		o.gate(resource, start, inherited, err)
	}
}

func (o *Observer) gate(resource string, start time.Time, inherited bool, err error) {
	if o.Wait == nil {
		return
	}
	cause := WakeNone
	if inherited {
		cause = WakeHandoff
	}
	o.Wait(WaitEvent{Resource: resource, Kind: WaitGate, Cause: cause, Duration: time.Since(start), Err: err})
}

// waitStart is the start of a wait between attempts, or zero without an
// observer of waits.
func (l *Locker) waitStart() time.Time {
	if o := l.cfg.Observer; o != nil && o.Wait != nil {
		return time.Now()
	}
	return time.Time{}
}

// observeWait reports the wait between attempts begun at start (see
// waitStart).
func (l *Locker) observeWait(resource string, start time.Time, cause WakeCause, err error) {
	if start.IsZero() {
		return
	}
	l.cfg.Observer.Wait(WaitEvent{Resource: resource, Kind: WaitRetry, Cause: cause, Duration: time.Since(start), Err: err})
}

func (le *Lease) observeRelease(ctx context.Context, start time.Time, err *error) {
	f := le.l.cfg.Observer.Release
	if f == nil {
		return
	}
	e := ReleaseEvent{Resource: le.resource, Start: start, Duration: time.Since(start), Result: resultOf(*err, ResultReleased),
		Err: *err, Held: time.Since(le.start), Quorum: le.l.quorum, Masters: le.l.addrs}
	le.mu.Lock()
	if *err == nil && le.successor != nil {
		e.Result = ResultHandedOff
	}
	le.mu.Unlock()
	e.Votes = votesOf(len(le.l.addrs), *err, le, *err == nil && e.Result != ResultHandedOff)
	f(ctx, e)
}

func (le *Lease) observeExtend(ctx context.Context, auto bool, start time.Time, err *error) {
	f := le.l.cfg.Observer.Extend
	if f == nil {
		return
	}
	f(ctx, ExtendEvent{Resource: le.resource, Auto: auto, Start: start, Duration: time.Since(start),
		Result: resultOf(*err, ResultExtended), Err: *err, Votes: votesOf(len(le.l.addrs), *err, le, *err == nil),
		Quorum: le.l.quorum, Masters: le.l.addrs})
}

// observeHandoff reports that le was passed on (the successor, running
// already, is not read: its validity is le's).
func (le *Lease) observeHandoff() {
	if o := le.l.cfg.Observer; o != nil && o.Handoff != nil {
		le.mu.Lock()
		left := time.Until(le.validUntil)
		le.mu.Unlock()
		o.Handoff(HandoffEvent{Resource: le.resource, InARow: le.handoffs + 1, Held: time.Since(le.start), Validity: left})
	}
}

// observeEnd reports a lease's end by err, if it was a loss. first: this
// call ended it.
func (le *Lease) observeEnd(first bool, err error) {
	if o := le.l.cfg.Observer; o != nil && first {
		le.observeLost(o, err)
	}
}

func (le *Lease) observeLost(o *Observer, err error) {
	if o.Lost != nil && !errors.Is(err, ErrReleased) {
		r := ResultNotHeld
		if errors.Is(err, ErrLeaseExpired) {
			r = ResultExpired
		}
		o.Lost(LostEvent{Resource: le.resource, Result: r, Err: err, Held: time.Since(le.start)})
	}
}

// nodeWatch polls the masters' states for Observer.NodeState until close.
type nodeWatch struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

func (l *Locker) watchNodes() *nodeWatch {
	o := l.cfg.Observer
	if o == nil || o.NodeState == nil {
		return nil
	}
	w := &nodeWatch{stop: make(chan struct{})}
	prev := make([]NodeState, l.votes)
	since := make([]time.Time, l.votes)
	poll := func() {
		now := time.Now()
		for i, s := range l.pool.Status() {
			if st := s.State; st != prev[i] {
				var d time.Duration
				if !since[i].IsZero() {
					d = now.Sub(since[i])
				}
				o.NodeState(NodeStateEvent{Node: i, Addr: s.Addr, State: st, Previous: prev[i], Duration: d,
					QuarantinedUntil: s.QuarantinedUntil, Err: s.Err})
				prev[i], since[i] = st, now
			}
		}
	}
	poll() // the first states, before New returns
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(NodeWatchInterval)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				poll()
			}
		}
	}()
	return w
}

func (w *nodeWatch) close() {
	if w != nil {
		close(w.stop)
		w.wg.Wait()
	}
}
