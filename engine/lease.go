package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/multiplex"
)

// Lease is a held lock on one resource. Its validity is measured on the
// monotonic clock from the start of the attempt that acquired it.
type Lease struct {
	l        *Locker
	resource string
	key      string
	value    string
	start    time.Time
	token    int64
	wait     WaitInfo
	handoffs int // hand-offs in a row that led to this lease
	// all are a multi-resource lease's resources and keys (see
	// multi.go); key is then empty and resource a label. nil for a lease
	// on one resource; a pointer, so that such a lease stays small.
	all *resourceSet
	// permit is a semaphore permit's slot + 1, 0 for a lock: its key is
	// the slot's, and its release publishes for the semaphore's waiters.
	permit int
	// votes is scratch space for this lease's rounds, so that a cycle
	// allocates no tally; opMu keeps Release and Extend from sharing it.
	votes   []multiplex.Vote
	voteBuf [5]multiplex.Vote
	opMu    opLock

	mu         sync.Mutex
	validUntil time.Time
	// held: masters that said yes. unsure: masters whose reply was lost
	// to a connection error, where the SET may have run. answered: masters
	// whose reply to the acquire has arrived; the others are sent their
	// release only when it does, so that a delete never overtakes its SET.
	held, unsure, answered uint64
	// broken: unsure masters whose connection failed under the acquire;
	// the SET may still run after a delete sent on a new connection.
	broken uint64
	// undoAgain: masters still owed the later pass of an undo (see
	// undoNodes).
	undoAgain uint64
	// tk is the lease's place in the masters' queue when a waiter
	// acquired it, registered with the Locker until the lease is released
	// or lost, so that it never outlives the lease there (see
	// Locker.tickets). kept: masters where the acquiring waiter stayed
	// in the queue behind a marked lock of someone else (see leaveScript);
	// the release takes it out there, in case no release there popped it.
	kept     uint64
	tk       *ticket
	failed   bool // the attempt did not acquire
	released bool
	gated    bool
	rw       bool // a read/write lock's reader or writer: its scripts are rwForm's
	gateDone bool // this lease's turn at the gate was handed on
	// ttlMS is the lease's TTL in ms when an option (WithTTL) set one
	// other than Config.TTL, 0 for the Locker's: a uint32 beside the
	// bools, where it keeps the Lease in its allocation size class.
	ttlMS     uint32
	endErr    error // why the lease stopped being trustworthy
	endedAt   time.Time
	successor *Lease // the lease was passed on: late replies go there
	// share is a reader's shared entry (see rwShare): set on its base and
	// on each lease joined to it.
	share       *rwShare
	w           *watch
	extendTimer *time.Timer
	extensions  int
	// trk is the lease's state in the Locker's tracker while its keys
	// are watched there (see trackLocked).
	trk *tracked
	// capTTL, when set, is the shortest TTL of an Extend that a master
	// did not answer: its PEXPIRE may still run, after a later, longer
	// one (a connection that broke under it may deliver it late), so no
	// later Extend is trusted for longer than capTTL from its start.
	capTTL time.Duration
}

// opLock serializes a lease's Release and Extend, each of which holds it
// across a round trip to the masters. It is a mutex whose waiters block
// on a channel (made on the first contention) instead of in sync.Mutex:
// a goroutine waiting on a sync.Mutex is not durably blocked in a
// testing/synctest bubble, so a Release waiting for an auto-extension's
// round would stop the simulator's virtual clock, and with it the round.
type opLock struct {
	mu      sync.Mutex // held only briefly, never across a wait
	held    bool
	waiters int
	ch      chan struct{}
}

func (o *opLock) Lock() {
	o.mu.Lock()
	if !o.held {
		o.held = true
		o.mu.Unlock()
		return
	}
	if o.ch == nil {
		o.ch = make(chan struct{})
	}
	o.waiters++
	ch := o.ch
	o.mu.Unlock()
	<-ch // the unlocker hands the lock over
}

func (o *opLock) Unlock() {
	o.mu.Lock()
	if o.waiters == 0 {
		o.held = false
		o.mu.Unlock()
		return
	}
	o.waiters--
	ch := o.ch
	o.mu.Unlock()
	ch <- struct{}{}
}

// watch is the lost-lock signal, started on first use of Done, Context or
// Err, or by auto-extension, so that leases nobody watches cost no timer.
type watch struct {
	done   chan struct{}
	expiry *time.Timer
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// initVotes gives the lease its scratch tally for n masters, inside the
// lease for the usual five.
func (le *Lease) initVotes(n int) {
	if n <= len(le.voteBuf) {
		le.votes = le.voteBuf[:n]
	} else {
		le.votes = make([]multiplex.Vote, n)
	}
}

// A nil *Lease, what a failed Lock or TryLock returns, is a lease that
// is not held: its methods do not panic. Validity is 0, Done is closed,
// Err and Context's cause are ErrNotHeld, Release and Extend fail with
// ErrNotHeld.

// errNilLease is a nil *Lease's Err.
var errNilLease = fmt.Errorf("engine: nil *Lease: %w", ErrNotHeld)

// closedChan is a nil *Lease's Done.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Resource is the name the lease was acquired for; for a lease on several
// resources (TryLockAll, LockAll), a label naming them all for messages
// and telemetry, "{a,b}": their names are Resources. The label does not
// escape the names: with names that hold ',', '{' or '}' two sets can
// share it ("a,b" alone and "a" with "b" are both "{a,b}").
func (le *Lease) Resource() string {
	if le == nil {
		return ""
	}
	return le.resource
}

// Value is the lease's unique value (128 random bits), stored on the
// masters as the key's value.
func (le *Lease) Value() string {
	if le == nil {
		return ""
	}
	return le.value
}

// Token is the lease's fencing token: larger than that of every earlier
// holder of the resource (of each of its resources, for a lease on
// several). Zero when Config.Fencing is off. Pass it to the protected
// resource and have it reject tokens lower than one it has seen.
func (le *Lease) Token() int64 {
	if le == nil {
		return 0
	}
	return le.token
}

// Wait tells how Lock obtained the lease (zero for TryLock).
func (le *Lease) Wait() WaitInfo {
	if le == nil {
		return WaitInfo{}
	}
	return le.wait
}

// Extensions is the number of successful auto-extensions so far.
func (le *Lease) Extensions() int {
	if le == nil {
		return 0
	}
	if le.joined() {
		return le.share.base.Extensions()
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.extensions
}

// ValidUntil is when the lease stops being trustworthy: acquisition start +
// TTL − drift, moved by each successful Extend, or the moment it ended if
// that came first (release, lost lock). It carries a monotonic clock
// reading.
func (le *Lease) ValidUntil() time.Time {
	if le == nil {
		return time.Time{}
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.endErr != nil && le.endedAt.Before(le.validUntil) {
		return le.endedAt
	}
	return le.validUntil
}

// Validity is the time left before ValidUntil, or 0 once the lease ended
// for any reason.
func (le *Lease) Validity() time.Duration {
	if le == nil {
		return 0
	}
	var d time.Duration
	le.inspectAt(func(now time.Time) {
		if le.endErr == nil {
			d = le.validUntil.Sub(now)
		}
	})
	return max(d, 0)
}

// Done is closed the moment the lease can no longer be trusted: its
// validity ran out, its keys were found gone or another's on too many
// masters for a quorum (at once, see Config.DisableTracking; or by an
// extension), an auto-extension missed the quorum, or it was released.
// Err says which. A first call made after the validity ran out returns a
// closed channel.
func (le *Lease) Done() <-chan struct{} {
	if le == nil {
		return closedChan
	}
	if le.joined() {
		le.trackBase()
	}
	var done chan struct{}
	le.inspect(func() {
		done = le.watchLocked().done
		le.trackLocked()
	})
	return done
}

// Context returns a context that is cancelled when Done closes, with Err
// as its cause (context.Cause). It is not derived from any caller's
// context: the work the lock protects usually wants WithContext, which
// stops it on either.
func (le *Lease) Context() context.Context {
	if le == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errNilLease)
		return ctx
	}
	if le.joined() {
		le.trackBase()
	}
	var ctx context.Context
	le.inspect(func() {
		w := le.watchLocked()
		le.trackLocked()
		if w.ctx == nil {
			w.ctx, w.cancel = context.WithCancelCause(context.Background())
			if le.endErr != nil {
				w.cancel(le.endErr)
			}
		}
		ctx = w.ctx
	})
	return ctx
}

// WithContext returns a copy of parent that is also cancelled when the
// lease ends (lost, expired or released), with the lease's Err as its
// cause: the context for the work the lock protects, which then stops
// when its caller gives up (a Ctrl-C, a request's deadline) as well as the
// moment the lock can no longer be trusted. Call cancel once the work is
// done, as for context.WithCancel.
func (le *Lease) WithContext(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	lc := le.Context()
	ctx, cancelCause := context.WithCancelCause(parent)
	stop := context.AfterFunc(lc, func() { cancelCause(context.Cause(lc)) })
	return ctx, func() {
		stop()
		cancelCause(context.Canceled)
	}
}

// Err is nil while the lease is trusted; then ErrReleased, ErrLeaseExpired
// or ErrLockLost (wrapping the failed extension's error).
func (le *Lease) Err() error {
	if le == nil {
		return errNilLease
	}
	var err error
	le.inspect(func() { err = le.endErr })
	return err
}

// inspect runs f under le.mu after ending the lease if its validity ran
// out, so that Validity, Done, Err and Context agree at every instant
// instead of waiting for the expiry timer to fire.
func (le *Lease) inspect(f func()) { le.inspectAt(func(time.Time) { f() }) }

// inspectAt is inspect with the instant it judged the lease at, so that a
// caller reading the validity reads the same clock.
func (le *Lease) inspectAt(f func(now time.Time)) {
	le.mu.Lock()
	leave, expired := false, false
	now := time.Now()
	if le.endErr == nil && !now.Before(le.validUntil) {
		leave, expired = le.endLocked(ErrLeaseExpired, true), true
	}
	f(now)
	le.mu.Unlock()
	if leave {
		le.l.gate.leave(le.resource)
	}
	le.ended(expired, ErrLeaseExpired)
}

// trackLocked has the Locker's tracker watch the lease's keys, once, so
// that a loss on the masters ends it at once (see tracker). Only for
// leases whose Done, Context or auto-extension is in use: the others
// cost the masters nothing. A read/write lock's reader or writer is
// watched by its member in the lock's sorted set, not the key's value:
// other holders coming and going, and its extensions, leave it there.
// The caller holds le.mu.
func (le *Lease) trackLocked() {
	if le.trk == nil && !le.joined() && le.endErr == nil && le.l.track != nil {
		le.trk = le.l.track.add(le)
	}
}

// trackAnswerLocked tells the tracker, if it watches the lease, that the
// acquire's reply from node arrived late. The caller holds le.mu.
func (le *Lease) trackAnswerLocked(node int) {
	if le.trk != nil && le.answered&(1<<node) != 0 {
		le.l.track.answer(le.trk, node)
	}
}

func (le *Lease) watchLocked() *watch {
	if le.w != nil {
		return le.w
	}
	w := &watch{done: make(chan struct{})}
	le.w = w
	if le.endErr != nil {
		close(w.done)
		return w
	}
	w.expiry = time.AfterFunc(time.Until(le.validUntil), func() { le.end(ErrLeaseExpired, true) })
	return w
}

// arm starts what a handed-out lease needs: auto-extension, and the
// expiry watch of a gated lease, which must leave the gate even if its
// holder never releases it, and of one with a place in the masters'
// queue, which must leave it (see ended).
func (le *Lease) arm() {
	if le.joined() {
		return // its base was armed, and carries it
	}
	cfg := &le.l.cfg
	le.mu.Lock()
	defer le.mu.Unlock()
	if !cfg.AutoExtend && !le.gated && le.tk == nil {
		return
	}
	le.watchLocked()
	if cfg.AutoExtend {
		le.trackLocked()
		// A handed-off lease has less validity than a fresh one: extend
		// while as much is left as a fresh lease has at its first
		// extension, or ExtendEvery could outlast it.
		every := le.extendEvery()
		d := min(every, max(time.Until(le.validUntil)-(le.lifetime()-every), 0))
		le.extendTimer = time.AfterFunc(d, le.autoExtend)
	}
}

// end marks the lease untrustworthy once, fires Done, and hands the gate
// on unless the caller will (Release does, after the delete).
func (le *Lease) end(err error, leaveGate bool) {
	le.mu.Lock()
	first := le.endErr == nil
	leave := le.endLocked(err, leaveGate)
	le.mu.Unlock()
	if leave {
		le.l.gate.leave(le.resource)
	}
	le.ended(first, err)
}

// ended does what follows the end of the lease, once (first): a lease
// that expired or was lost frees what it leaves on the masters (see
// freeEnded); the Observer hears of it.
func (le *Lease) ended(first bool, err error) {
	if !first {
		return
	}
	switch {
	case le.joined():
		// Its entry is the base's: nothing of its own on the masters.
		le.observeEnd(true, err)
		if errors.Is(err, ErrLeaseExpired) {
			// The base's validity, which it shares, ran out too: a look
			// ends the base (no timer watches it without auto-extension),
			// whose clean-up frees the entry and wakes the writers, as a
			// lone reader's expiry does.
			le.share.base.Err()
		}
		return
	case le.isBase():
		// Held by no caller: its joined leases end, and report, instead.
		le.share.baseEnded(err)
		if !errors.Is(err, ErrReleased) {
			le.freeEnded()
		}
		return
	}
	if !errors.Is(err, ErrReleased) && !faults.GhostInQueue.On() {
		le.freeEnded()
	}
	le.observeEnd(true, err)
}

// freeEnded runs the release script of a lease that expired or was lost,
// on every master, without waiting: its holder may never call Release
// (and Release after Close sends nothing). Where the key is still ours
// (the masters keep it past our validity by the drift allowance and the
// acquire's time), the script deletes it, or gives the turn to the first
// waiter where one marked it: left to expire, the key would take the
// mark with it, and the next holder's release would wake nobody. Where it
// is not, a queued lease leaves the queue, where it could be given the
// next turn. Deleting our own key after our validity ended takes nothing
// from anyone.
func (le *Lease) freeEnded() {
	le.mu.Lock()
	tk := le.tk
	le.mu.Unlock()
	if faults.ExpiredLeaseKeepsKey.On() {
		if tk != nil {
			le.l.quitQueue(le.resource, tk)
		}
		return
	}
	l := le.l
	// Under tmu, as Close leaves the queued places before it closes the
	// pool: the one that finds the place still registered sends.
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if tk != nil {
		if _, ok := l.tickets[tk]; !ok {
			return // Close took the place out of the queues
		}
		delete(l.tickets, tk)
	} else if l.closed.Load() {
		return
	}
	l.post(le.releaseCommand(uint64(1)<<l.votes-1, releaseScript))
}

// endLocked is end under le.mu; it reports whether the caller must hand
// on the gate once it has let go of le.mu.
func (le *Lease) endLocked(err error, leaveGate bool) (leave bool) {
	if le.endErr != nil {
		return false
	}
	le.endErr = err
	le.endedAt = time.Now()
	if le.trk != nil {
		le.l.track.remove(le.trk)
	}
	if w := le.w; w != nil {
		close(w.done)
		if w.expiry != nil {
			w.expiry.Stop()
		}
		if w.cancel != nil {
			w.cancel(err)
		}
	}
	if le.extendTimer != nil {
		le.extendTimer.Stop()
	}
	return leaveGate && le.takeGateLocked()
}

// takeGateLocked reports whether the caller should hand on this lease's
// turn at the gate, at most once per lease: the expiry watch and a late
// Release must not both do it. The caller holds le.mu.
func (le *Lease) takeGateLocked() bool {
	if !le.gated || le.gateDone {
		return false
	}
	le.gateDone = true
	return true
}

// setValidUntil moves the lease's validity, and its expiry watch with it.
// The caller holds mu.
func (le *Lease) setValidUntil(t time.Time) {
	le.validUntil = t
	if le.trk != nil {
		le.l.track.setUntil(le.trk, t)
	}
	if w := le.w; w != nil && w.expiry != nil {
		w.expiry.Reset(time.Until(t))
	}
	if le.isBase() {
		le.share.followLocked(t)
	}
}

// lifetime is the lease's TTL: WithTTL's, or Config.TTL.
func (le *Lease) lifetime() time.Duration {
	if le.ttlMS != 0 {
		return time.Duration(le.ttlMS) * time.Millisecond
	}
	return le.l.cfg.TTL
}

// ttlArg is lifetime in milliseconds, as PX and the scripts take it.
func (le *Lease) ttlArg() string {
	if le.ttlMS != 0 {
		return itoa(int64(le.ttlMS))
	}
	return le.l.ttlStr
}

// extendEvery is the lease's auto-extension period: Config.ExtendEvery,
// scaled by its TTL's share of Config.TTL when WithTTL set another.
func (le *Lease) extendEvery() time.Duration {
	cfg := &le.l.cfg
	if le.ttlMS == 0 {
		return cfg.ExtendEvery
	}
	return time.Duration(float64(cfg.ExtendEvery) * float64(le.lifetime()) / float64(cfg.TTL))
}
