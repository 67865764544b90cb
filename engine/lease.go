package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"
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
	gated    bool
	handoffs int // hand-offs in a row that led to this lease
	// votes is scratch space for this lease's rounds, so that a cycle
	// allocates no tally; opMu keeps Release and Extend from sharing it.
	votes   []multiplex.Vote
	voteBuf [5]multiplex.Vote
	opMu    sync.Mutex

	mu         sync.Mutex
	validUntil time.Time
	// held: masters that said yes. unsure: masters whose reply was lost
	// to a connection error, where the SET may have run. answered: masters
	// whose reply to the acquire has arrived; the others are sent their
	// release only when it does, so that a delete never overtakes its SET.
	held, unsure, answered uint64
	failed                 bool // the attempt did not acquire
	released               bool
	endErr                 error  // why the lease stopped being trustworthy
	successor              *Lease // the lease was passed on: late replies go there
	gateDone               bool   // this lease's turn at the gate was handed on
	w                      *watch
	extendTimer            *time.Timer
	extensions             int
}

// watch is the lost-lock signal, started on first use of Done, Context or
// Err, or by auto-extension, so that leases nobody watches cost no timer.
type watch struct {
	done   chan struct{}
	expiry *time.Timer
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// WakeCause is what ended a Lock waiter's last wait before the attempt
// that acquired.
type WakeCause uint8

const (
	// WakeNone: acquired without waiting on the masters.
	WakeNone WakeCause = iota
	// WakeNotified: woken by the holder's release notification.
	WakeNotified
	// WakeFallback: woken by the fallback timer while the resource was held.
	WakeFallback
	// WakeBackoff: woken after backing off from a split vote or an outage.
	WakeBackoff
	// WakeHandoff: handed the lease by the previous holder in this
	// process, without asking the masters.
	WakeHandoff
)

func (c WakeCause) String() string {
	return [...]string{"none", "notified", "fallback", "backoff", "handoff"}[c]
}

// WaitInfo describes how Lock obtained a lease.
type WaitInfo struct {
	// Attempts is the number of attempts on the masters.
	Attempts int
	// Notified, Fallbacks and Backoffs count the waits by how they ended.
	Notified, Fallbacks, Backoffs int
	// Cause ended the last wait.
	Cause WakeCause
	// Gated is true if the caller queued behind another goroutine of this
	// Locker at the in-process gate.
	Gated bool
	// Waited is the time from the Lock call to acquisition.
	Waited time.Duration
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

// Resource is the name the lease was acquired for.
func (le *Lease) Resource() string { return le.resource }

// Value is the lease's unique value (128 random bits), stored on the
// masters as the key's value.
func (le *Lease) Value() string { return le.value }

// Token is the lease's fencing token: larger than that of every earlier
// holder of the resource. Zero when Config.Fencing is off. Pass it to the
// protected resource and have it reject tokens lower than one it has seen.
func (le *Lease) Token() int64 { return le.token }

// Wait tells how Lock obtained the lease (zero for TryLock).
func (le *Lease) Wait() WaitInfo { return le.wait }

// Extensions is the number of successful auto-extensions so far.
func (le *Lease) Extensions() int {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.extensions
}

// ValidUntil is when the lease stops being trustworthy: acquisition start +
// TTL − drift, moved by each successful Extend. It carries a monotonic
// clock reading.
func (le *Lease) ValidUntil() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.validUntil
}

// Validity is the time left before ValidUntil, or 0.
func (le *Lease) Validity() time.Duration {
	return max(time.Until(le.ValidUntil()), 0)
}

// Done is closed the moment the lease can no longer be trusted: its
// validity ran out, an auto-extension missed the quorum, or it was
// released. Err says which.
func (le *Lease) Done() <-chan struct{} {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.watchLocked().done
}

// Context returns a context that is cancelled when Done closes, with Err
// as its cause (context.Cause). Pass it to the work the lock protects.
func (le *Lease) Context() context.Context {
	le.mu.Lock()
	defer le.mu.Unlock()
	w := le.watchLocked()
	if w.ctx == nil {
		w.ctx, w.cancel = context.WithCancelCause(context.Background())
		if le.endErr != nil {
			w.cancel(le.endErr)
		}
	}
	return w.ctx
}

// Err is nil while the lease is trusted; then ErrReleased, ErrLeaseExpired
// or ErrLockLost (wrapping the failed extension's error).
func (le *Lease) Err() error {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.endErr == nil && !time.Now().Before(le.validUntil) {
		return ErrLeaseExpired
	}
	return le.endErr
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
// holder never releases it.
func (le *Lease) arm() {
	cfg := &le.l.cfg
	if !cfg.AutoExtend && !le.gated {
		return
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	le.watchLocked()
	if cfg.AutoExtend {
		le.extendTimer = time.AfterFunc(cfg.ExtendEvery, le.autoExtend)
	}
}

func (le *Lease) autoExtend() {
	le.mu.Lock()
	ended, until := le.endErr != nil, le.validUntil
	le.mu.Unlock()
	if ended {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), until)
	err := le.Extend(ctx, le.l.cfg.TTL)
	cancel()
	if err != nil {
		if errors.Is(err, ErrReleased) {
			return
		}
		le.end(fmt.Errorf("%w: %w", ErrLockLost, err), true)
		return
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	le.extensions++
	if le.endErr == nil && (le.l.cfg.MaxExtensions == 0 || le.extensions < le.l.cfg.MaxExtensions) {
		le.extendTimer.Reset(le.l.cfg.ExtendEvery)
	}
}

// end marks the lease untrustworthy once, fires Done, and hands the gate
// on unless the caller will (Release does, after the delete).
func (le *Lease) end(err error, leaveGate bool) {
	le.mu.Lock()
	if le.endErr != nil {
		le.mu.Unlock()
		return
	}
	le.endErr = err
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
	leave := leaveGate && le.takeGateLocked()
	le.mu.Unlock()
	if leave {
		le.l.gate.leave(le.resource)
	}
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

// record notes the acquire's outcome on one master; it returns whether
// that master must be sent a release now because the lease is already
// failed or released. The caller holds le.mu.
func (le *Lease) record(node int, v multiplex.Vote) (undo bool) {
	bit := uint64(1) << node
	switch v.Outcome {
	case multiplex.Pending, multiplex.Timeout:
		return false
	case multiplex.OK:
		le.held |= bit
	case multiplex.Failed:
		if mayHaveRun(v.Err) {
			le.unsure |= bit
		}
	}
	le.answered |= bit
	return (le.failed || le.released) && (le.held|le.unsure)&bit != 0
}

// mayHaveRun: an error that is not a reply from Redis (a dropped
// connection, a quarantined node's discounted yes) leaves it open whether
// the command ran.
func mayHaveRun(err error) bool {
	if err == nil || errors.Is(err, multiplex.ErrNotSent) || errors.Is(err, multiplex.ErrOverloaded) ||
		errors.Is(err, multiplex.ErrNotConnected) || errors.Is(err, multiplex.ErrClosed) {
		return false
	}
	_, isReply := rueidis.IsRedisErr(err)
	return !isReply
}

// Late handles a master's reply to the acquire that arrived after the
// attempt was decided. If the lease has failed or been released by then,
// that master is sent its release now: the reply proves the SET ran first.
func (le *Lease) Late(node int, v multiplex.Vote) {
	le.mu.Lock()
	if next := le.successor; next != nil {
		le.mu.Unlock()
		next.Late(node, v) // the keys now belong to the successor
		return
	}
	undo := le.record(node, v)
	le.mu.Unlock()
	if undo {
		le.l.pool.Post(le.releaseCommand(1<<node, undoScript), classifyInt)
	}
}

// releaseCommand deletes the lease's key on nodes with script: releaseScript
// for a Release, undoScript for clean-up.
func (le *Lease) releaseCommand(nodes uint64, script *multiplex.Script) multiplex.Command {
	return multiplex.Command{Script: script, Key: le.key, Args: [multiplex.MaxArgs]string{le.value}, NArgs: 1, Nodes: nodes, WaitAll: true}
}

// toRelease returns the masters a release must go to now: those that took
// the key or may have. Masters still to answer are handled by Late. The
// caller holds le.mu.
func (le *Lease) toRelease() uint64 {
	return (le.held | le.unsure) & le.answered
}

// Release deletes the lock on every master where it is ours. It returns
// nil if a quorum deleted it; otherwise a *VotesError whose Kind is
// ErrLeaseExpired (validity had run out), ErrNotHeld (enough masters said
// the key was gone or another owner's) or ErrNoQuorum (too many masters
// failed to answer to tell). Done closes at once, with Err ErrReleased.
func (le *Lease) Release(ctx context.Context) error {
	le.opMu.Lock()
	defer le.opMu.Unlock()
	le.mu.Lock()
	if le.released {
		le.mu.Unlock()
		return fmt.Errorf("engine: release %q: %w: already released", le.resource, ErrNotHeld)
	}
	le.mu.Unlock()
	if le.gated && le.handOff(ctx) {
		return nil
	}
	le.mu.Lock()
	le.released = true
	validUntil := le.validUntil
	nodes := le.toRelease()
	le.mu.Unlock()
	le.end(ErrReleased, false)
	le.mu.Lock()
	leave := le.takeGateLocked()
	le.mu.Unlock()
	if leave {
		// After the delete, so that the next local waiter does not race it.
		defer le.l.gate.leave(le.resource)
	}
	if le.l.closed.Load() {
		return ErrClosed
	}
	if nodes == 0 { // every master still to answer: Late releases them
		return le.l.opError("release", le.resource, multiplex.Tally{Votes: le.votes, Quorum: le.l.Quorum(), Pending: len(le.votes)}, validUntil)
	}
	t := le.l.pool.Fanout(ctx, le.releaseCommand(nodes, releaseScript), classifyInt, nil, le.votes)
	if t.Reached() {
		return nil
	}
	return le.l.opError("release", le.resource, t, validUntil)
}

// handOff passes the lock to the next goroutine of this Locker queued at
// the gate, keeping the keys on the masters: no delete, no new SET, no
// round trip (one, to raise the fencing counter, with Fencing). It
// declines when nobody waits, after MaxHandoffs in a row, or when less
// than half the TTL of validity is left to give.
//
// Mutual exclusion holds because the keys stay ours throughout and this
// lease ends (Done fires) before the successor exists; the successor's
// validity is this lease's, measured from the same acquisition.
func (le *Lease) handOff(ctx context.Context) bool {
	l := le.l
	if l.cfg.MaxHandoffs < 0 || le.handoffs >= l.cfg.MaxHandoffs || l.gate.waiting(le.resource) == 0 {
		return false
	}
	le.mu.Lock()
	validUntil := le.validUntil
	le.mu.Unlock()
	if time.Until(validUntil) < l.cfg.TTL/2 {
		return false
	}
	next := &Lease{
		l:        l,
		resource: le.resource,
		key:      le.key,
		value:    le.value,
		start:    le.start,
		gated:    true,
		handoffs: le.handoffs + 1,
	}
	next.initVotes(len(le.votes))
	if l.cfg.Fencing {
		// Nobody else could take a token while we held the lock, so the
		// counters are at most ours: the successor's is one more.
		ours := multiplex.Tally{Votes: []multiplex.Vote{{Outcome: multiplex.OK, Value: le.token}}}
		if err := next.fence(ctx, ours); err != nil {
			return false
		}
	}
	le.mu.Lock()
	if le.released || !time.Now().Before(le.validUntil) {
		le.mu.Unlock()
		return false
	}
	next.validUntil = le.validUntil
	next.held, next.unsure, next.answered = le.held, le.unsure, le.answered
	le.successor = next
	le.released = true
	le.gateDone = true // the turn goes to the successor with the lease
	le.mu.Unlock()
	le.end(ErrReleased, false)
	if !l.gate.pass(le.resource, next) {
		// The waiter gave up in the meantime: release for real.
		next.gated = true
		next.Release(context.Background())
	}
	return true
}

// Extend sets the lock's TTL to ttl on every master where it is still ours,
// and never re-creates a key that is gone. It counts only if a quorum agreed
// before the current validity ran out; then the validity becomes
// start-of-extend + ttl − drift. On failure the validity is unchanged.
func (le *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 || ttl%time.Millisecond != 0 {
		return fmt.Errorf("engine: extend %q: ttl must be > 0 and whole milliseconds, got %s", le.resource, ttl)
	}
	le.opMu.Lock()
	defer le.opMu.Unlock()
	le.mu.Lock()
	released, validUntil := le.released, le.validUntil
	le.mu.Unlock()
	if released {
		return fmt.Errorf("engine: extend %q: %w", le.resource, ErrReleased)
	}
	start := time.Now()
	if !start.Before(validUntil) {
		return fmt.Errorf("engine: extend %q: %w", le.resource, ErrLeaseExpired)
	}
	if le.l.closed.Load() {
		return ErrClosed
	}
	cmd := multiplex.Command{Script: extendScript, Key: le.key, Args: [multiplex.MaxArgs]string{le.value, itoa(ttl.Milliseconds())}, NArgs: 2, SkipIfFailed: true}
	t := le.l.pool.Fanout(ctx, cmd, classifyInt, nil, le.votes)
	if t.Reached() && t.Err == nil && time.Now().Before(validUntil) {
		le.mu.Lock()
		// A shorter ttl shortens the validity too: the masters now expire
		// the key sooner.
		le.validUntil = start.Add(ttl - drift(ttl, le.l.cfg.DriftFactor))
		if w := le.w; w != nil && w.expiry != nil && le.endErr == nil {
			w.expiry.Reset(time.Until(le.validUntil))
		}
		le.mu.Unlock()
		return nil
	}
	return le.l.opError("extend", le.resource, t, validUntil)
}

func (l *Locker) opError(op, resource string, t multiplex.Tally, validUntil time.Time) error {
	t.Votes = append([]multiplex.Vote(nil), t.Votes...) // the lease reuses its buffer
	e := &VotesError{Op: op, Resource: resource, Tally: t, Addrs: l.addrs}
	switch {
	case t.Err != nil:
	case !time.Now().Before(validUntil):
		e.Kind = ErrLeaseExpired
	case t.Refused > len(t.Votes)-t.Quorum, t.Refused > 0 && t.Failed+t.Timeout == 0:
		// The refusals alone prove the lock is not ours on a quorum, or
		// every master asked answered and some said it is not ours.
		e.Kind = ErrNotHeld
	default:
		// Too few answers to tell: the masters failed us.
		e.Kind = ErrNoQuorum
	}
	return e
}
