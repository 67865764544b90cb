package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-bench/redlock/multiplex"
)

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
	if le != nil && le.joined() {
		return le.extendJoined(ctx, ttl)
	}
	return le.extend(ctx, ttl, false)
}

// extend is Extend; auto, for auto-extension, also ends the lease on any
// failure but a release, before a Release can see it (under opMu): a lease
// whose extension missed the quorum must not be handed on as sound.
func (le *Lease) extend(ctx context.Context, ttl time.Duration, auto bool) (err error) {
	if err := le.checkTTL(ttl); err != nil {
		return err
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
	start := time.Now()
	validUntil, capTTL, err := le.extendable(start)
	if err != nil {
		return err
	}
	until := le.shortenFirst(start, ttl, capTTL, validUntil)
	limit := validUntil
	if until.Before(limit) {
		limit = until
	}
	t := le.extendRound(ctx, ttl, auto, start, limit)
	le.capAfter(t, ttl)
	return le.applyExtend(t, until, validUntil)
}

// checkTTL refuses what no Extend may ask: a nil lease, a ttl that PX
// cannot carry, one past Config.MaxTTL.
func (le *Lease) checkTTL(ttl time.Duration) error {
	switch {
	case le == nil:
		return fmt.Errorf("engine: extend of a nil *Lease: %w", ErrNotHeld)
	case ttl <= 0 || ttl%time.Millisecond != 0:
		return fmt.Errorf("engine: extend %q: ttl must be > 0 and whole milliseconds, got %s", le.resource, ttl)
	case ttl > le.l.cfg.MaxTTL:
		return fmt.Errorf("engine: extend %q: ttl %s exceeds Config.MaxTTL %s, which bounds how long a restarted master is kept out of the vote", le.resource, ttl, le.l.cfg.MaxTTL)
	}
	return nil
}

// extendable reports the lease's validity and the cap of an earlier
// unanswered Extend (see capTTL), or why it cannot be extended at start:
// released, ended, expired, or its Locker closed.
func (le *Lease) extendable(start time.Time) (validUntil time.Time, capTTL time.Duration, err error) {
	le.mu.Lock()
	released, validUntil, ended, capTTL := le.released, le.validUntil, le.endErr, le.capTTL
	le.mu.Unlock()
	switch {
	case released:
		err = fmt.Errorf("engine: extend %q: %w", le.resource, ErrReleased)
	case ended != nil:
		err = errorf("extend %q: %v", le.resource, ended)
	case !start.Before(validUntil):
		err = fmt.Errorf("engine: extend %q: %w", le.resource, ErrLeaseExpired)
	case le.l.closed.Load():
		err = fmt.Errorf("engine: extend %q: %w", le.resource, ErrClosed)
	}
	return validUntil, capTTL, err
}

// shortenFirst returns the validity the Extend gives if it succeeds:
// start + ttl − drift, no longer than an earlier unanswered Extend's cap
// allows. A shorter one than the lease has takes effect at once, success
// or not: the PEXPIRE shortens the key on every master it reaches, even
// one that answers too late to count, or in a round that fails.
func (le *Lease) shortenFirst(start time.Time, ttl, capTTL time.Duration, validUntil time.Time) time.Time {
	trusted := ttl
	if capTTL > 0 && capTTL < ttl && !faults.StaleShorterExtend.On() {
		trusted = capTTL
	}
	until := start.Add(trusted - drift(trusted, le.l.cfg.DriftFactor))
	if until.Before(validUntil) {
		le.mu.Lock()
		if le.endErr == nil && until.Before(le.validUntil) {
			le.setValidUntil(until)
		}
		le.mu.Unlock()
	}
	return until
}

// extendRound sends the PEXPIRE to every master and waits for all of
// them (WaitAll): a master still to answer at quorum would cap every
// later Extend (see capTTL); waiting for it, within the node timeout,
// leaves the cap to masters that really timed out or broke. But not
// until the validity (limit) runs out: a master hung for the node timeout
// would fail a round that a quorum answered in time. The wait stops with
// a tenth of the validity left; a master silent by then counts as timed
// out. An auto-extension, which nobody waits on with a deadline, is
// bounded so even in the admission queue.
func (le *Lease) extendRound(ctx context.Context, ttl time.Duration, auto bool, start, limit time.Time) multiplex.Tally {
	cmd := le.extendCommand(ttl)
	cmd.SkipIfFailed, cmd.WaitAll = true, true
	rctx := ctx
	if stop := limit.Add(-limit.Sub(start) / 10); auto || stop.Before(start.Add(le.l.roundSpan())) {
		var cancel context.CancelFunc
		rctx, cancel = context.WithDeadline(ctx, stop)
		defer cancel()
	}
	t := le.l.pool.Fanout(rctx, cmd, classifyInt, nil, le.votes)
	if rctx != ctx && ctx.Err() == nil && errors.Is(t.Err, context.DeadlineExceeded) {
		// Only the wait was cut short: the masters still silent count
		// as timed out, not as having answered (see leaseError).
		t.TimeOutPending()
	}
	return t
}

// capAfter caps later Extends at ttl when a master may still run this
// one's PEXPIRE (see capTTL).
func (le *Lease) capAfter(t multiplex.Tally, ttl time.Duration) {
	if !unanswered(t.Votes) {
		return
	}
	le.mu.Lock()
	if le.capTTL == 0 || ttl < le.capTTL {
		le.capTTL = ttl
	}
	le.mu.Unlock()
}

// applyExtend moves the validity to until if a quorum agreed while the
// lease still stood; otherwise it returns why not, and ends a lease whose
// keys the masters said are no longer ours.
func (le *Lease) applyExtend(t multiplex.Tally, until, validUntil time.Time) error {
	if t.Reached() && t.Err == nil {
		le.mu.Lock()
		// The expiry timer may have fired during the round: an ended
		// lease stays ended, whatever the masters said since. The check
		// of the time itself, for a lease nobody watched, is redundant
		// within the model: extendScript agrees only where the lease's
		// value still stands (it never sets a key, and the value is this
		// lease's alone), and each of its keys was set by the acquire's
		// SET, delivered (late or not) while the validity ran; so a
		// quorum of yeses shows a quorum held the lease without a gap
		// until its PEXPIREs ran, and the keys live ttl past the round's
		// start. It matters only past the model: a round that waited
		// past the validity to be sent (behind MaxRounds of others), on
		// a master where the acquire's SET arrived even later, after
		// another holder came and went. Then the yes there does not
		// show the lease held throughout, and this check refuses it.
		if le.endErr == nil && time.Now().Before(le.validUntil) {
			if le.isBase() {
				le.share.extendedLocked(t.Votes)
			}
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
	err := le.l.leaseError("extend", le.resource, t, validUntil)
	if errors.Is(err, ErrNotHeld) {
		le.end(errorf("%v: %v", ErrLockLost, err), true)
	}
	return err
}

// extendCommand is the extension's script call. A read/write lock's
// reader or writer, and a semaphore's permit, also keep their kind's key
// at the name's permit count (the read/write lock's mark, the
// semaphore's count) for 2 MaxTTL where they extended: while the lease is
// extended the other kind of the name stays out, however long ago its
// handle last checked (see RWMutex, Semaphore).
//
// A fenced lease also passes its token and MaxTTL: its counter is kept
// past the key's new TTL (fenceHoldLua). An unfenced one passes token
// "0", or nothing when no argument follows.
func (le *Lease) extendCommand(ttl time.Duration) multiplex.Command {
	ms := itoa(ttl.Milliseconds())
	token, fenceKeep := "0", ""
	if le.token > 0 {
		token, fenceKeep = itoa(le.token), le.l.fenceKeep()
	}
	if !le.rw && le.permit == 0 {
		if le.token > 0 {
			return le.call(extendScript, le.value, ms, token, fenceKeep)
		}
		return le.call(extendScript, le.value, ms)
	}
	count, keep := le.l.semBase(le.resource)+"permits", itoa((2 * le.l.cfg.MaxTTL).Milliseconds())
	if le.rw {
		return le.call(extendScript, le.value, ms, token, fenceKeep, count, keep)
	}
	return scriptCall(semExtendScript, le.key, le.value, ms, token, fenceKeep, count, keep)
}

// semExtendScript is extendScript for a semaphore's permit: where it
// extended, it keeps the permit count (ARGV[5]) for ARGV[6] ms, unless it
// is missing or a read/write lock's mark, and the permit's fencing
// counter as extendScript does (ARGV[3], ARGV[4]).
var semExtendScript = multiplex.NewScript(`local value, ttl, token, keep, count, ckeep = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local v = redis.call("GET", KEYS[1])
if v ~= value and v ~= value .. "` + waitMark + `" then
  return 0
end
local n = redis.call("PEXPIRE", KEYS[1], ttl)
local have = redis.pcall("GET", count)
if type(have) == "string" and have ~= "` + rwSemMark + `" then
  -- pcall: the key is extended, and the answer must say so.
  redis.pcall("PEXPIRE", count, ckeep)
end
` + fenceHoldLua("KEYS[1]") + `return n`).Coalesce()

// extendScript sets a new TTL (ms, ARGV[2]) on the key where it holds
// our value (ARGV[1]), marked by a waiter or not, and never re-creates a
// missing key. A fenced lease also passes its token and MaxTTL (ARGV[3],
// ARGV[4]): its counter is kept past the key's new TTL (fenceHoldLua).
var extendScript = multiplex.NewScript(`local value, ttl, token, keep = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local v = redis.call("GET", KEYS[1])
if v == value or v == value .. "` + waitMark + `" then
  local n = redis.call("PEXPIRE", KEYS[1], ttl)
` + fenceHoldLua("KEYS[1]") + `  return n
end
return 0`).Coalesce()

// autoExtend is an auto-extension's run: it extends the lease to the TTL
// and schedules the next, up to MaxExtensions.
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
	err := le.extend(context.Background(), le.lifetime(), true)
	if err != nil {
		return
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	le.extensions++
	if le.endErr == nil && (le.l.cfg.MaxExtensions == 0 || le.extensions < le.l.cfg.MaxExtensions) {
		le.extendTimer.Reset(le.extendEvery())
	}
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
