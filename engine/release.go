package engine

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/redlock-bench/redlock/internal/enginelua"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// Release deletes the lock on every master where it is ours. It returns
// nil if a quorum deleted it; otherwise a *VotesError whose Kind is
// ErrLeaseExpired (validity had run out), ErrNotHeld (enough masters said
// the key was gone or another owner's) or ErrNoQuorum (too many masters
// failed to answer to tell). Done closes at once, with Err ErrReleased.
// The deletes are sent even if ctx has ended; then Release does not wait
// for them.
func (le *Lease) Release(ctx context.Context) (err error) {
	if le != nil && le.joined() {
		return le.releaseJoined(ctx)
	}
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
	if le.l.cfg.Observer != nil && !le.isBase() {
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
	kept, tk := le.kept, le.tk
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
		// Close takes the lease's place out of the queues.
		return fmt.Errorf("engine: release %q: %w", le.resource, ErrClosed)
	}
	// The release script takes the lease out of the queue, and passes on
	// a turn it may hold where the key is no longer ours. Forgotten only
	// now: Close, had it begun, would not have left the place for us.
	le.l.dropTicket(tk)
	if kept != 0 && !faults.SplitVoteStaleEntry.On() {
		le.l.quitKept(le.resource, tk, kept)
	}
	if nodes == 0 { // every master still to answer: late releases them
		return le.l.leaseError("release", le.resource, multiplex.Tally{Votes: le.votes, Quorum: le.l.Quorum(), Pending: len(le.votes)}, validUntil)
	}
	script := releaseScript
	if faults.GhostInQueue.On() {
		script = releaseScriptGhost
	}
	if le.permit != 0 {
		script = semReleaseScript
	}
	cmd := le.releaseCommand(nodes, script)
	cmd.MustSend = true
	r := le.l.resender(cmd)
	t := le.l.pool.Fanout(ctx, cmd, classifyInt, r.handler(), le.votes)
	r.decided(t.Votes)
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
	return le.l.leaseError("release", le.resource, t, validUntil)
}

// The scripts compare the value before acting, so that a lease only ever
// touches its own key, marked by a waiter or not; extend never re-creates a
// missing key. Each body is one key's logic: it runs as it is for one key,
// and once per key in a coalesced call over many (Script.Coalesce), so
// that a change to a body applies to both.

// releaseScript deletes our key. If a waiter marked it, the release
// gives the turn to the waiter with the lowest ticket instead of
// leaving the key free for whoever comes first: it takes the releasing
// waiter out of the queue (a waiter's value starts with its id), pops
// the lowest id, replaces the key with that waiter's turn token (see
// turnPrefix) and publishes the id, which wakes that waiter only. So
// one release hands the resource to one waiter, instead of a crowd, or
// a newcomer, that splits the vote with it. Where the key is no longer
// ours (the lease expired), a waiter's release still leaves the queue as
// a waiter that gives up does (quitLua): left there, the next release
// would give the turn to a waiter that waits for nothing.
var releaseScript = multiplex.NewScript(releaseBody(true)).Coalesce()

// releaseScriptGhost is releaseScript without its queue leave where the
// key is no longer ours (mutation.GhostInQueue).
var releaseScriptGhost = multiplex.NewScript(releaseBody(false)).Coalesce()

// releaseBody is releaseScript's Lua; quit: leave the queue where the key
// is no longer ours.
func releaseBody(quit bool) string {
	tail := "return 0"
	if quit {
		tail = "if id then\n" + quitLua + "end\nreturn 0"
	}
	return `local value = ARGV[1]
local v = redis.call("GET", KEYS[1])
if v == value then
  return redis.call("DEL", KEYS[1])
end
local q = "` + queuePrefixLua + `" .. KEYS[1]
local id = ` + ownIDLua + `
if v == value .. "` + waitMark + `" then
  if id then
    redis.call("ZREM", q, id)
  end
  local w = redis.call("ZPOPMIN", q)
  if w[1] then
` + giveTurnLua + `  else
    redis.call("DEL", KEYS[1])
  end
  return 1
end
` + tail
}

// undoScript deletes our key, marked or not. It cleans up after failed
// attempts and late replies. Where a waiter marked the key, it gives
// the turn to the first waiter, as a release does, or the waiters of a
// split vote would sleep until their back-off; unless that is its own
// waiter, which is awake and stays in the queue. (Keeping a turn token
// for its own waiter instead would also block, for the token's life,
// masters where that waiter had merely found the key free.)
var undoScript = multiplex.NewScript(`local value = ARGV[1]
local v = redis.call("GET", KEYS[1])
if v == value then
  return redis.call("DEL", KEYS[1])
end
if v == value .. "` + waitMark + `" then
  local q = "` + queuePrefixLua + `" .. KEYS[1]
  local w = redis.call("ZRANGE", q, 0, 0)
  if w[1] and w[1] ~= ` + ownIDLua + ` then
    redis.call("ZREM", q, w[1])
` + giveTurnLua + `  else
    redis.call("DEL", KEYS[1])
  end
  return 1
end
return 0`).Coalesce()

func init() { enginelua.Release = releaseScript.Body }

// releaseCommand deletes the lease's key on nodes with script: releaseScript
// for a Release, undoScript for clean-up.
func (le *Lease) releaseCommand(nodes uint64, script *multiplex.Script) multiplex.Command {
	cmd := le.call(script, le.value)
	cmd.Nodes, cmd.WaitAll = nodes, true
	return cmd
}

// toRelease returns the masters a release must go to now: those that took
// the key or may have. Masters still to answer are handled by late. The
// caller holds le.mu.
func (le *Lease) toRelease() uint64 {
	return (le.held | le.unsure) & le.answered
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
	if l.closed.Load() || l.cfg.Wait.MaxHandoffs < 0 || le.handoffs >= l.cfg.Wait.MaxHandoffs || l.gate.waiting(le.resource) == 0 {
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
	next.kept, next.tk = le.kept, le.tk
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
	if le.endErr != nil && !faults.HandOffEndedLease.On() {
		return false
	}
	return time.Until(le.validUntil) > left
}

// undo releases a failed attempt without waiting: the caller has its
// answer. Masters still to answer are released by Lease.late when they do.
func (l *Locker) undo(le *Lease) {
	le.mu.Lock()
	le.failed = true
	nodes := le.toRelease()
	le.mu.Unlock()
	l.undoNodes(le, nodes)
}

// undoNodes deletes le's key, if it is still ours, on nodes, without
// waiting. A delete that does not reach its master (its connection broke,
// or none could be opened) is sent again until one is answered, within the
// key's lifetime. Where the acquire's own connection broke, one answered
// delete is not enough either: the SET may have been still on its way in
// the broken connection and run after a delete sent on a new one, so those
// masters get one more delete a little later.
func (l *Locker) undoNodes(le *Lease, nodes uint64) {
	if nodes == 0 {
		return
	}
	le.mu.Lock()
	le.undoAgain |= nodes & le.broken
	le.mu.Unlock()
	(*undoReplies)(le).send(nodes)
}

// undoReplies is the Lease seen as the multiplex.LateHandler of its undo
// deletes, as acquireReplies is for its acquire: a pointer conversion, so
// that the late replies of an uncontended cycle, undone on every cycle,
// allocate nothing for it.
type undoReplies Lease

func (u *undoReplies) send(nodes uint64) {
	le := (*Lease)(u)
	script := undoScript
	switch {
	case le.permit != 0:
		script = semReleaseScript
	case le.rw && le.wonQuorum() && !faults.RWWonUndoSilent.On():
		// A read/write attempt that won a quorum and failed after it
		// (its fence round, its validity) was the one holder that the
		// waiters refused by it sleep for: its undo wakes them as a
		// release does. A refused attempt's stays silent (see rwForm).
		script = releaseScript
	}
	le.l.pool.Post(le.releaseCommand(nodes, script), classifyInt, u)
}

// wonQuorum reports whether a quorum of masters said yes to le's attempt.
func (le *Lease) wonQuorum() bool {
	le.mu.Lock()
	defer le.mu.Unlock()
	return bits.OnesCount64(le.held) >= le.l.Quorum()
}

// Late receives each delete's reply.
func (u *undoReplies) Late(node int, v multiplex.Vote) {
	le := (*Lease)(u)
	le.l.retryUndo(le, &le.undoAgain, node, v, u.send)
}

// retryUndo acts on one undo's reply (again: the masters that get one
// more delete a little later, under le.mu): a delete that did not reach
// its master is sent again after a back-off, within the keys' lifetime.
func (l *Locker) retryUndo(le *Lease, again *uint64, node int, v multiplex.Vote, send func(uint64)) {
	// Past the key's lifetime a SET can no longer be waiting to run.
	if l.closed.Load() || time.Since(le.start) > l.cfg.TTL+l.cfg.Conn.ConnTimeout {
		return
	}
	bit := uint64(1) << node
	_, reply := rueidis.IsRedisErr(v.Err)
	if v.Outcome == multiplex.OK || v.Outcome == multiplex.Refused || (v.Outcome == multiplex.Failed && reply) {
		le.mu.Lock()
		later := *again&bit != 0
		*again &^= bit
		le.mu.Unlock()
		if later {
			time.AfterFunc(min(l.cfg.Conn.ConnTimeout, l.cfg.TTL/2), func() { send(bit) })
		}
		return
	}
	time.AfterFunc(l.jitter(l.cfg.Wait.RetryDelayMin, l.cfg.Wait.RetryDelayMax)+l.cfg.NodeTimeout, func() { send(bit) })
}

// mayHaveRun: an error that is not a reply from Redis (a dropped
// connection, a quarantined node's discounted yes) leaves it open whether
// the command ran. An error reply means it did not: the scripts check
// everything that can fail before their first write, and a write refused
// (OOM, READONLY) writes nothing, since Redis does not roll a script back.
// A migrating slot's refusal (TRYAGAIN, wrapped in ErrSlotMigrating) is
// such a reply: the script did not run, and left nothing to release.
func mayHaveRun(err error) bool {
	if err == nil || notSent(err) || errors.Is(err, ErrSlotMigrating) {
		return false
	}
	_, isReply := rueidis.IsRedisErr(err)
	return !isReply
}

// notSent: the command never left this process.
func notSent(err error) bool {
	return errors.Is(err, multiplex.ErrNotSent) || errors.Is(err, multiplex.ErrClosed)
}
