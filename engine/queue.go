package engine

import (
	"context"
	"strconv"
	"time"

	"github.com/redlock-bench/redlock/multiplex"
)

// The masters' waiter queue. Waiters of different Lockers (processes)
// that Lock a held resource queue on every master, in ticket order, and a
// release gives the resource to the first of them only:
//
//   - A waiter subscribes to the resource's release channel (notify.go),
//     then attempts with acquireMarkScript (or acquireFenceScript): where
//     the key is free, or holds its own turn token, it takes it; where it
//     is taken, it marks the holder's value (waitMark) and joins the queue
//     (queuePrefix), scored by its ticket.
//   - The release (or undo) of a marked value pops the lowest ticket and
//     leaves that waiter's turn token (turnPrefix) in place of the lock,
//     then publishes its id (giveTurnLua): only that waiter wakes, and
//     nobody else's SET NX takes the resource from under it.
//   - A waiter that acquires leaves the queue with its release, and at
//     once where its attempt did not set the key (leaveScript); one that
//     gives up leaves it and passes on a turn that may have been its own
//     (quitScript), as Close does for its waiters.
//
// The queue and the tokens are hints that order wake-ups. SET NX on a
// quorum alone decides who holds the lock; a waiter not woken retries
// after its fallback delay.

// waitMark is appended to a lock's value on a master by a waiter that
// found it taken there (see acquireMarkScript). Lock values are base64url,
// which has no '+', so a marked value is told from any lock value. It asks
// the holder's release to publish: a release of an unmarked value, which
// nobody waits for, publishes nothing, and PUBLISH (with its Lua call)
// is a fifth of what a release costs a master.
const waitMark = "+"

// idEnd ends the waiter id that starts a queued waiter's lock value; the
// scripts' Lua patterns know it.
const idEnd = "."

// turnPrefix starts a turn token: the value a release (or undo) of a
// marked key leaves in its place, "~" and the id of the waiter it wakes,
// for turnGraceMS. Until it expires, only that waiter's attempt may
// replace it (see acquireMarkScript); anyone else is refused as by a lock,
// so a newcomer does not take the resource from under the waiter it was
// given to, or split the vote with it. A token is not a lock: nobody holds
// it, no lease value starts with "~" (they are base64url), and it is
// replaced only where no lock is, so that a lock is still held where its
// SET NX (or this replacement) set its value, on a quorum. If the waiter
// is gone, the token expires, and the other waiters' fallback retries find
// the key free.
const (
	turnPrefix  = "~"
	turnGraceMS = "50"
	turnGrace   = 50 * time.Millisecond
)

// giveTurnLua hands the key to queued waiter w[1]: its turn token in
// place of the lock, and a PUBLISH of its id, which wakes it only. It is
// the one way the scripts (release, undo, quit) pass the turn on.
const giveTurnLua = `    redis.call("SET", KEYS[1], "` + turnPrefix + `" .. w[1], "PX", ` + turnGraceMS + `)
    redis.call("PUBLISH", "` + releasedPrefix + `" .. KEYS[1], w[1])
`

// ownIDLua is the waiter id the lock value `value` starts with (nil for a
// value that was not queued).
const ownIDLua = `string.match(value, "^([^` + idEnd + `]*)%` + idEnd + `")`

// ticket is a waiter's place in the resource's queue on the masters (see
// queuePrefix).
type ticket struct {
	score string // wall-clock µs at the start of Lock
	id    string // unique among the waiters of every Locker
	// held: a lease holds this place (its waiter acquired). Under
	// Locker.tmu.
	held bool
	// all are a LockAll waiter's resources, whose place is in each of
	// their queues (see multi.go); nil for Lock's.
	all *resourceSet
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
	return tk, l.notify.subscribe(ctx, l.key(resource), tk.id)
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
	if tk.all != nil {
		l.leaveQueues(tk, nodes, acquired)
		return
	}
	cmd := plainCall("ZREM", queuePrefix+l.key(resource), tk.id)
	if acquired && !faults.LateReleaseWakesNext.On() {
		script := leaveScript
		if faults.LateReleaseWakesOlder.On() {
			script = leaveScriptInLine
		}
		cmd = scriptCall(script, l.key(resource), tk.id)
	}
	cmd.Nodes = nodes
	l.post(cmd)
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

// quitKept takes a released lease's kept places (see leaveScript) out of
// the queues on nodes, without waiting. A late release of the lock before
// it may have popped the place there and given it a turn it no longer
// needs, or may still be on its way: the quit script passes such a turn
// on to the next waiter, where a plain ZREM would leave the token to
// expire while that waiter sleeps until its fallback.
func (l *Locker) quitKept(resource string, tk *ticket, nodes uint64) {
	if faults.ReleaseKeepsTurn.On() {
		l.leaveQueue(resource, tk, nodes, false)
		return
	}
	cmd := scriptCall(quitScript, l.key(resource), tk.id)
	if tk.all != nil {
		cmd = keysCall(allKeysForm[quitScript], tk.all, tk.id)
	}
	cmd.Nodes = nodes
	l.post(cmd)
}

// dropTicket forgets tk (nil: none), whose leave another path sends.
func (l *Locker) dropTicket(tk *ticket) {
	if tk == nil {
		return
	}
	l.tmu.Lock()
	delete(l.tickets, tk)
	l.tmu.Unlock()
}

// postQuit sends tk's quitScript to every master. The caller holds tmu.
func (l *Locker) postQuit(resource string, tk *ticket) {
	cmd := scriptCall(quitScript, l.key(resource), tk.id)
	if faults.QuitKeepsTurn.On() {
		cmd = plainCall("ZREM", queuePrefix+l.key(resource), tk.id)
	}
	if tk.all != nil {
		cmd = l.quitQueuesCall(tk)
	}
	cmd.Nodes = uint64(1)<<l.votes - 1
	l.post(cmd)
}

// leaveScript takes a waiter that has acquired, by its id, out of the
// resource's queue on a master where its attempt did not set the key.
// Where a marked lock of someone else holds the key, it stays, at the
// head of the queue: that lock's release may still be on its way, and
// when it pops the queue it must pop this waiter (whose turn token then
// expires unused) rather than wake another, who would find the resource
// held on a quorum and split the vote for nothing; that includes a
// waiter with an older ticket who joins there first. A lock that expires
// instead leaves the entry to the next release there, which spends one
// turn token on it. pcall: a key of another type is no lock.
var leaveScript = multiplex.NewScript(leaveBody(true)).Coalesce()

// leaveScriptInLine keeps the place at its ticket instead of the head
// (mutation.LateReleaseWakesOlder).
var leaveScriptInLine = multiplex.NewScript(leaveBody(false)).Coalesce()

// leaveBody is leaveScript's Lua; head: keep the place at the head.
func leaveBody(head bool) string {
	keep := "  return 0\n"
	if head {
		keep = `  redis.call("ZADD", "` + queuePrefixLua + `" .. KEYS[1], "XX", 0, id)
  return 0
`
	}
	return `local id = ARGV[1]
local v = redis.pcall("GET", KEYS[1])
if type(v) == "string" and string.sub(v, -1) == "` + waitMark + `" and string.sub(v, 1, 1) ~= "` + turnPrefix + `" and string.sub(v, 1, #id + 1) ~= id .. "` + idEnd + `" then
` + keep + `end
return redis.call("ZREM", "` + queuePrefixLua + `" .. KEYS[1], id)`
}

// quitScript takes a waiter that gives up, by its id, out of the
// resource's queue, and passes on a turn that may have been its own,
// as a release does: where the key holds its turn token, or is free
// and the waiter was first in line or already popped (its undo wakes
// nobody while it is first, see undoScript; a release that popped it
// woke it only). Otherwise the next waiter would sleep until its
// fallback while the resource is free. Where a lock holds the key, or
// a waiter is ahead, the turn is not this waiter's to pass. pcall: a
// key of another type is no lock.
var quitScript = multiplex.NewScript(`local id = ARGV[1]
local q = "` + queuePrefixLua + `" .. KEYS[1]
local v = redis.pcall("GET", KEYS[1])
` + quitLua + `return 1`).Coalesce()

// quitLua takes waiter id out of queue q and passes on a turn that may
// have been its own (see quitScript), v being the key's value. A release
// of a lease that is no longer ours runs it too (see releaseScript).
const quitLua = `local first = redis.call("ZRANGE", q, 0, 0)[1] == id
local queued = redis.call("ZREM", q, id) == 1
local turn = "` + turnPrefix + `" .. id
if v == turn or v == turn .. "` + waitMark + `" or (v == false and (first or not queued)) then
  local w = redis.call("ZPOPMIN", q)
  if w[1] then
` + giveTurnLua + `  elseif v then
    redis.call("DEL", KEYS[1])
  end
end
`
