package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// skipHandoffEndCheck is set only by tests, to show that the lifecycle
// tests catch a lease that is handed on after it ended.
var skipHandoffEndCheck atomic.Bool

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
	// broken: unsure masters whose connection failed under the acquire;
	// the SET may still run after a delete sent on a new connection.
	broken uint64
	// undoAgain: masters still owed the later pass of an undo (see
	// undoNodes).
	undoAgain uint64
	// kept: masters where the acquiring waiter (queue id queueID) stayed
	// in the queue behind a marked lock of someone else (see leaveScript);
	// the release takes it out there, in case no release there popped it.
	kept        uint64
	queueID     string
	failed      bool // the attempt did not acquire
	released    bool
	endErr      error // why the lease stopped being trustworthy
	endedAt     time.Time
	successor   *Lease // the lease was passed on: late replies go there
	gateDone    bool   // this lease's turn at the gate was handed on
	w           *watch
	extendTimer *time.Timer
	extensions  int
	// capTTL, when set, is the shortest TTL of an Extend that a master
	// did not answer: its PEXPIRE may still run, after a later, longer
	// one (a connection that broke under it may deliver it late), so no
	// later Extend is trusted for longer than capTTL from its start.
	capTTL time.Duration
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

// A nil *Lease, what a failed Lock or TryLock returns, is a lease that
// is not held: its methods do not panic. Validity is 0, Done is closed,
// Err and Context's cause are ErrNotHeld, Release and Extend fail with
// ErrNotHeld.

// errNilLease is a nil *Lease's Err.
var errNilLease = fmt.Errorf("engine: nil *Lease: %w", ErrNotHeld)

// closedChan is a nil *Lease's Done.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Resource is the name the lease was acquired for.
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
// holder of the resource. Zero when Config.Fencing is off. Pass it to the
// protected resource and have it reject tokens lower than one it has seen.
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
// validity ran out, an extension found the lock gone or an auto-extension
// missed the quorum, or it was released. Err says which. A first call
// made after the validity ran out returns a closed channel.
func (le *Lease) Done() <-chan struct{} {
	if le == nil {
		return closedChan
	}
	var done chan struct{}
	le.inspect(func() { done = le.watchLocked().done })
	return done
}

// Context returns a context that is cancelled when Done closes, with Err
// as its cause (context.Cause). Pass it to the work the lock protects.
func (le *Lease) Context() context.Context {
	if le == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errNilLease)
		return ctx
	}
	var ctx context.Context
	le.inspect(func() {
		w := le.watchLocked()
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
	le.observeEnd(expired, ErrLeaseExpired)
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
		// A handed-off lease has less validity than a fresh one: extend
		// while as much is left as a fresh lease has at its first
		// extension, or ExtendEvery could outlast it.
		d := min(cfg.ExtendEvery, max(time.Until(le.validUntil)-(cfg.TTL-cfg.ExtendEvery), 0))
		le.extendTimer = time.AfterFunc(d, le.autoExtend)
	}
}

func (le *Lease) autoExtend() {
	le.mu.Lock()
	ended := le.endErr != nil
	le.mu.Unlock()
	if ended {
		return
	}
	// No deadline from the validity read here: an Extend of the holder's
	// may move it on before this one gets opMu. extend bounds its round by
	// the validity it finds then.
	err := le.extend(context.Background(), le.l.cfg.TTL, true)
	if err != nil {
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
	first := le.endErr == nil
	leave := le.endLocked(err, leaveGate)
	le.mu.Unlock()
	if leave {
		le.l.gate.leave(le.resource)
	}
	le.observeEnd(first, err)
}

// endLocked is end under le.mu; it reports whether the caller must hand
// on the gate once it has let go of le.mu.
func (le *Lease) endLocked(err error, leaveGate bool) (leave bool) {
	if le.endErr != nil {
		return false
	}
	le.endErr = err
	le.endedAt = time.Now()
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
			if _, reply := rueidis.IsRedisErr(v.Err); !reply {
				le.broken |= bit
			}
		}
	}
	le.answered |= bit
	return (le.failed || le.released) && (le.held|le.unsure)&bit != 0
}

// mayHaveRun: an error that is not a reply from Redis (a dropped
// connection, a quarantined node's discounted yes) leaves it open whether
// the command ran. An error reply means it did not: the scripts check
// everything that can fail before their first write, and a write refused
// (OOM, READONLY) writes nothing, since Redis does not roll a script back.
func mayHaveRun(err error) bool {
	if err == nil || notSent(err) {
		return false
	}
	_, isReply := rueidis.IsRedisErr(err)
	return !isReply
}

// notSent: the command never left this process.
func notSent(err error) bool {
	return errors.Is(err, multiplex.ErrNotSent) || errors.Is(err, multiplex.ErrClosed)
}

// acquireReplies is the Lease seen as the acquire's multiplex.LateHandler,
// so that the handler is not part of the Lease's API. A conversion of the
// pointer, it costs nothing.
type acquireReplies Lease

func (r *acquireReplies) Late(node int, v multiplex.Vote) { (*Lease)(r).late(node, v) }

// late handles a master's reply to the acquire that arrived after the
// attempt was decided. If the lease has failed or been released by then,
// that master is sent its release now: the reply proves the SET ran first.
func (le *Lease) late(node int, v multiplex.Vote) {
	le.mu.Lock()
	if next := le.successor; next != nil {
		le.mu.Unlock()
		next.late(node, v) // the keys now belong to the successor
		return
	}
	undo := le.record(node, v)
	le.mu.Unlock()
	if undo {
		le.l.undoNodes(le, 1<<node)
	}
}

// releaseCommand deletes the lease's key on nodes with script: releaseScript
// for a Release, undoScript for clean-up.
func (le *Lease) releaseCommand(nodes uint64, script *multiplex.Script) multiplex.Command {
	return multiplex.Command{Script: script, Key: le.key, Args: [multiplex.MaxArgs]string{le.value}, NArgs: 1, Nodes: nodes, WaitAll: true}
}

// toRelease returns the masters a release must go to now: those that took
// the key or may have. Masters still to answer are handled by late. The
// caller holds le.mu.
func (le *Lease) toRelease() uint64 {
	return (le.held | le.unsure) & le.answered
}

// Release deletes the lock on every master where it is ours. It returns
// nil if a quorum deleted it; otherwise a *VotesError whose Kind is
// ErrLeaseExpired (validity had run out), ErrNotHeld (enough masters said
// the key was gone or another owner's) or ErrNoQuorum (too many masters
// failed to answer to tell). Done closes at once, with Err ErrReleased.
// The deletes are sent even if ctx has ended; then Release does not wait
// for them.
func (le *Lease) Release(ctx context.Context) (err error) {
	return le.release(ctx, false)
}

// release is Release; force sends the deletes even once Close has begun,
// for a lease that was being handed on when it did and that nobody holds:
// its Release reported it released.
func (le *Lease) release(ctx context.Context, force bool) (err error) {
	if le == nil {
		return fmt.Errorf("engine: release of a nil *Lease: %w", ErrNotHeld)
	}
	le.opMu.Lock()
	defer le.opMu.Unlock()
	if le.l.cfg.Observer != nil {
		defer le.observeRelease(ctx, time.Now(), &err)
	}
	le.mu.Lock()
	if le.released {
		le.mu.Unlock()
		return fmt.Errorf("engine: release %q: %w: already released", le.resource, ErrNotHeld)
	}
	le.mu.Unlock()
	if le.gated {
		if handed, err := le.handOff(ctx); handed {
			return err
		}
	}
	le.mu.Lock()
	le.released = true
	validUntil := le.validUntil
	nodes := le.toRelease()
	kept := le.kept
	le.mu.Unlock()
	le.end(ErrReleased, false)
	le.mu.Lock()
	leave := le.takeGateLocked()
	le.mu.Unlock()
	if leave {
		// After the delete, so that the next local waiter does not race it.
		defer le.l.gate.leave(le.resource)
	}
	if le.l.closed.Load() && !force {
		return fmt.Errorf("engine: release %q: %w", le.resource, ErrClosed)
	}
	if kept != 0 {
		le.l.leaveQueue(le.resource, &ticket{id: le.queueID}, kept, false)
	}
	if nodes == 0 { // every master still to answer: late releases them
		return le.l.opError("release", le.resource, multiplex.Tally{Votes: le.votes, Quorum: le.l.Quorum(), Pending: len(le.votes)}, validUntil)
	}
	cmd := le.releaseCommand(nodes, releaseScript)
	cmd.MustSend = true
	t := le.l.pool.Fanout(ctx, cmd, classifyInt, nil, le.votes)
	le.mu.Lock()
	broken := nodes & le.broken
	le.mu.Unlock()
	if broken != 0 {
		// The SET may have been still on its way in the broken connection,
		// and run after this delete.
		le.l.undoNodes(le, broken)
	}
	if t.Reached() {
		return nil
	}
	return le.l.opError("release", le.resource, t, validUntil)
}

// handOff passes the lock to the next goroutine of this Locker queued at
// the gate, keeping the keys on the masters: no delete, no new SET, no
// round trip (one, to raise the fencing counter, with Fencing). It
// declines when nobody waits, after MaxHandoffs in a row, when less than
// half the TTL of validity is left to give, and always when the lease has
// ended: a lease whose extension found the keys gone may already have a
// successor elsewhere, and passing it on would make two holders.
//
// Mutual exclusion holds because the keys stay ours throughout and this
// lease ends (Done fires) before the successor exists; the successor's
// validity is this lease's, measured from the same acquisition.
//
// It reports whether it took the lease off the caller's hands, with the
// error of the release it made instead when the successor was gone.
func (le *Lease) handOff(ctx context.Context) (bool, error) {
	l := le.l
	// Close waits for the hand-off (see Locker.remote): the successor may
	// leave the gate with ErrClosed meanwhile, and then the keys, which
	// nobody holds, must still be deleted before the pool closes.
	l.remote.Add(1)
	defer l.remote.Add(-1)
	if l.closed.Load() || l.cfg.MaxHandoffs < 0 || le.handoffs >= l.cfg.MaxHandoffs || l.gate.waiting(le.resource) == 0 {
		return false, nil
	}
	if !le.canHandOff(l.cfg.TTL / 2) {
		return false, nil
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
	le.mu.Lock()
	next.validUntil = le.validUntil
	le.mu.Unlock()
	next.initVotes(len(le.votes))
	if l.cfg.Fencing {
		// Nobody else could take a token while we held the lock, so the
		// counters are at most ours: the successor's is one more.
		ours := multiplex.Tally{Votes: []multiplex.Vote{{Outcome: multiplex.OK, Value: le.token}}}
		// fence also keeps a round's span of validity in hand.
		if err := next.fence(ctx, ours); err != nil {
			return false, nil
		}
	}
	le.mu.Lock()
	if le.released || !le.canHandOffLocked(0) {
		le.mu.Unlock()
		return false, nil
	}
	next.held, next.unsure, next.answered, next.broken = le.held, le.unsure, le.answered, le.broken
	next.kept, next.queueID = le.kept, le.queueID
	next.capTTL = le.capTTL // the keys, and what may still reach them, are the same
	le.successor = next
	le.released = true
	le.gateDone = true // the turn goes to the successor with the lease
	le.endLocked(ErrReleased, false)
	le.mu.Unlock()
	if !l.gate.pass(le.resource, next) {
		// The waiter gave up in the meantime, or Close made it leave:
		// release for real.
		return true, next.release(context.Background(), true)
	}
	le.observeHandoff()
	return true, nil
}

func (le *Lease) canHandOff(left time.Duration) bool {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.canHandOffLocked(left)
}

// canHandOffLocked: the lease is still trusted and keeps more than left
// of its validity. The caller holds le.mu.
func (le *Lease) canHandOffLocked(left time.Duration) bool {
	if le.endErr != nil && !skipHandoffEndCheck.Load() {
		return false
	}
	return time.Until(le.validUntil) > left
}

// Extend sets the lock's TTL to ttl on every master where it is still ours,
// and never re-creates a key that is gone. It counts only if a quorum agreed
// before the current validity ran out; then the validity becomes
// start-of-extend + ttl − drift. A ttl shorter than the validity left
// shortens the validity at once, success or not: a master may run the
// PEXPIRE and answer too late to count. Otherwise a failure leaves the
// validity unchanged, except when enough masters said the key is no longer
// ours (ErrNotHeld): the lease then ends with ErrLockLost. Extend waits
// for every master, within the node timeout and short of the validity:
// once a quorum agreed, a master hung past that does not fail it. After
// an Extend that a master did not answer in that time (or whose
// connection broke under it), no later Extend is trusted for longer than
// that one's ttl from its start: the earlier PEXPIRE may still run after
// the later one, where a connection broke under it. ttl may not exceed
// Config.MaxTTL, which the restart quarantine relies on.
func (le *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	return le.extend(ctx, ttl, false)
}

// extend is Extend; auto, for auto-extension, also ends the lease on any
// failure but a release, before a Release can see it (under opMu): a lease
// whose extension missed the quorum must not be handed on as sound.
func (le *Lease) extend(ctx context.Context, ttl time.Duration, auto bool) (err error) {
	if le == nil {
		return fmt.Errorf("engine: extend of a nil *Lease: %w", ErrNotHeld)
	}
	if ttl <= 0 || ttl%time.Millisecond != 0 {
		return fmt.Errorf("engine: extend %q: ttl must be > 0 and whole milliseconds, got %s", le.resource, ttl)
	}
	if ttl > le.l.cfg.MaxTTL {
		return fmt.Errorf("engine: extend %q: ttl %s exceeds Config.MaxTTL %s, which bounds how long a restarted master is kept out of the vote", le.resource, ttl, le.l.cfg.MaxTTL)
	}
	le.opMu.Lock()
	defer le.opMu.Unlock()
	if le.l.cfg.Observer != nil {
		defer le.observeExtend(ctx, auto, time.Now(), &err)
	}
	if auto {
		defer func() {
			if err != nil && !errors.Is(err, ErrReleased) {
				le.end(errorf("%v: %v", ErrLockLost, err), true)
			}
		}()
	}
	le.mu.Lock()
	released, validUntil, ended, capTTL := le.released, le.validUntil, le.endErr, le.capTTL
	le.mu.Unlock()
	switch {
	case released:
		return fmt.Errorf("engine: extend %q: %w", le.resource, ErrReleased)
	case ended != nil:
		return errorf("extend %q: %v", le.resource, ended)
	}
	start := time.Now()
	if !start.Before(validUntil) {
		return fmt.Errorf("engine: extend %q: %w", le.resource, ErrLeaseExpired)
	}
	if le.l.closed.Load() {
		return fmt.Errorf("engine: extend %q: %w", le.resource, ErrClosed)
	}
	trusted := ttl
	if capTTL > 0 && capTTL < ttl {
		trusted = capTTL
	}
	until := start.Add(trusted - drift(trusted, le.l.cfg.DriftFactor))
	if until.Before(validUntil) {
		// A shorter ttl shortens the key on every master its PEXPIRE
		// reaches, even one that answers too late to count, or in a
		// round that fails: from now on only the shorter validity holds,
		// whatever the round decides.
		le.mu.Lock()
		if le.endErr == nil && until.Before(le.validUntil) {
			le.setValidUntil(until)
		}
		le.mu.Unlock()
	}
	// WaitAll: a master still to answer at quorum would cap every later
	// Extend (see capTTL); waiting for it, within the node timeout, leaves
	// the cap to masters that really timed out or broke.
	cmd := multiplex.Command{Script: extendScript, Key: le.key, Args: [multiplex.MaxArgs]string{le.value, itoa(ttl.Milliseconds())}, NArgs: 2, SkipIfFailed: true, WaitAll: true}
	// But not until the validity runs out: a master hung for the node
	// timeout would fail a round that a quorum answered in time. The wait
	// stops with a tenth of the validity left; a master silent by then
	// caps later Extends as one that timed out does. An auto-extension,
	// which nobody waits on with a deadline, is bounded so even in the
	// admission queue.
	rctx, limit := ctx, validUntil
	if until.Before(limit) {
		limit = until
	}
	if stop := limit.Add(-limit.Sub(start) / 10); auto || stop.Before(start.Add(le.l.roundSpan())) {
		var cancel context.CancelFunc
		rctx, cancel = context.WithDeadline(ctx, stop)
		defer cancel()
	}
	t := le.l.pool.Fanout(rctx, cmd, classifyInt, nil, le.votes)
	if rctx != ctx && ctx.Err() == nil && errors.Is(t.Err, context.DeadlineExceeded) {
		// Only the wait was cut short: the masters still silent count
		// as timed out, not as having answered (see opError).
		t.TimeOutPending()
	}
	if unanswered(t.Votes) {
		le.mu.Lock()
		if le.capTTL == 0 || ttl < le.capTTL {
			le.capTTL = ttl
		}
		le.mu.Unlock()
	}
	if t.Reached() && t.Err == nil {
		le.mu.Lock()
		// The expiry timer may have fired during the round: an ended
		// lease stays ended, whatever the masters said since.
		if le.endErr == nil && time.Now().Before(le.validUntil) {
			le.setValidUntil(until)
			le.mu.Unlock()
			return nil
		}
		ended := le.endErr
		le.mu.Unlock()
		if ended == nil {
			ended = ErrLeaseExpired
		}
		return errorf("extend %q: %v", le.resource, ended)
	}
	err = le.l.opError("extend", le.resource, t, validUntil)
	if errors.Is(err, ErrNotHeld) {
		le.end(errorf("%v: %v", ErrLockLost, err), true)
	}
	return err
}

// unanswered: a master may still run the command later (no reply yet, a
// timeout, or a connection that broke under it).
func unanswered(votes []multiplex.Vote) bool {
	for _, v := range votes {
		if v.Outcome == multiplex.Pending || v.Outcome == multiplex.Timeout || (v.Outcome == multiplex.Failed && mayHaveRun(v.Err)) {
			return true
		}
	}
	return false
}

// setValidUntil moves the lease's validity, and its expiry watch with it.
// The caller holds mu.
func (le *Lease) setValidUntil(t time.Time) {
	le.validUntil = t
	if w := le.w; w != nil && w.expiry != nil {
		w.expiry.Reset(time.Until(t))
	}
}
