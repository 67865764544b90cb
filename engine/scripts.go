package engine

import (
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// releasedPrefix names the channel a release publishes on, so that waiters
// retry at once instead of polling.
const releasedPrefix = "redlock:released:"

// waitMark is appended to a lock's value on a master by a waiter that
// found it taken there (see acquireMarkScript). Lock values are base64url,
// which has no '+', so a marked value is told from any lock value. It asks
// the holder's release to publish: a release of an unmarked value, which
// nobody waits for, publishes nothing, and PUBLISH (with its Lua call)
// is a fifth of what a release costs a master.
const waitMark = "+"

// queuePrefix names each resource's queue of waiters, on every master: a
// sorted set of waiter ids scored by ticket (the wall-clock µs at which
// the waiter's Lock began), ties broken by id, so that every master orders
// it the same way. A subscribed waiter joins it with each attempt; a
// marked release takes its own waiter out (a waiter's lock value is its id,
// idEnd, then the random part), pops the lowest and wakes only that
// waiter. The queue is only a hint of who goes next: SET NX on a quorum
// still decides who holds the lock, and a waiter that is not woken
// retries after its fallback delay. The queue expires two TTLs after a
// waiter last joined it, so that the entries of a waiter that died without
// leaving go. queuePrefixLua is the same in a Lua string literal.
const (
	queuePrefix    = internalPrefix + "queue:"
	queuePrefixLua = `\255redlock:queue:`
	idEnd          = "." // the scripts' Lua patterns know it
)

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

// ownIDLua is the waiter id a lock value ARGV[1] starts with (nil for a
// value that was not queued).
const ownIDLua = `string.match(ARGV[1], "^([^` + idEnd + `]*)%` + idEnd + `")`

// The scripts compare the value before acting, so that a lease only ever
// touches its own key, marked by a waiter or not; extend never re-creates a
// missing key.
var (
	// releaseScript deletes our key. If a waiter marked it, the release
	// gives the turn to the waiter with the lowest ticket instead of
	// leaving the key free for whoever comes first: it takes the releasing
	// waiter out of the queue (a waiter's value starts with its id), pops
	// the lowest id, replaces the key with that waiter's turn token (see
	// turnPrefix) and publishes the id, which wakes that waiter only. So
	// one release hands the resource to one waiter, instead of a crowd, or
	// a newcomer, that splits the vote with it.
	releaseScript = multiplex.NewScript(`local v = redis.call("GET", KEYS[1])
if v == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
if v == ARGV[1] .. "` + waitMark + `" then
  local q = "` + queuePrefixLua + `" .. KEYS[1]
  local id = ` + ownIDLua + `
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
return 0`)
	// undoScript deletes our key, marked or not. It cleans up after failed
	// attempts and late replies. Where a waiter marked the key, it gives
	// the turn to the first waiter, as a release does, or the waiters of a
	// split vote would sleep until their back-off; unless that is its own
	// waiter, which is awake and stays in the queue. (Keeping a turn token
	// for its own waiter instead would also block, for the token's life,
	// masters where that waiter had merely found the key free.)
	undoScript = multiplex.NewScript(`local v = redis.call("GET", KEYS[1])
if v == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
if v == ARGV[1] .. "` + waitMark + `" then
  local q = "` + queuePrefixLua + `" .. KEYS[1]
  local w = redis.call("ZRANGE", q, 0, 0)
  if w[1] and w[1] ~= ` + ownIDLua + ` then
    redis.call("ZREM", q, w[1])
` + giveTurnLua + `  else
    redis.call("DEL", KEYS[1])
  end
  return 1
end
return 0`)
	// leaveScript takes a waiter that has acquired, id ARGV[1], out of the
	// resource's queue on a master where its attempt did not set the key.
	// Where a marked lock of someone else holds the key, it stays: that
	// lock's release may still be on its way, and when it pops the queue it
	// must pop this waiter (whose turn token then expires unused) rather
	// than wake the next one, who would find the resource held on a quorum
	// and split the vote for nothing. A lock that expires instead leaves
	// the entry to the next release there, which spends one turn token on
	// it. pcall: a key of another type is no lock.
	leaveScript = multiplex.NewScript(`local v = redis.pcall("GET", KEYS[1])
if type(v) == "string" and string.sub(v, -1) == "` + waitMark + `" and string.sub(v, 1, 1) ~= "` + turnPrefix + `" and string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. "` + idEnd + `" then
  return 0
end
return redis.call("ZREM", "` + queuePrefixLua + `" .. KEYS[1], ARGV[1])`)
	// quitScript takes a waiter that gives up, id ARGV[1], out of the
	// resource's queue, and passes on a turn that may have been its own,
	// as a release does: where the key holds its turn token, or is free
	// and the waiter was first in line or already popped (its undo wakes
	// nobody while it is first, see undoScript; a release that popped it
	// woke it only). Otherwise the next waiter would sleep until its
	// fallback while the resource is free. Where a lock holds the key, or
	// a waiter is ahead, the turn is not this waiter's to pass. pcall: a
	// key of another type is no lock.
	quitScript = multiplex.NewScript(`local q = "` + queuePrefixLua + `" .. KEYS[1]
local first = redis.call("ZRANGE", q, 0, 0)[1] == ARGV[1]
local queued = redis.call("ZREM", q, ARGV[1]) == 1
local v = redis.pcall("GET", KEYS[1])
local turn = "` + turnPrefix + `" .. ARGV[1]
if v == turn or v == turn .. "` + waitMark + `" or (v == false and (first or not queued)) then
  local w = redis.call("ZPOPMIN", q)
  if w[1] then
` + giveTurnLua + `  elseif v then
    redis.call("DEL", KEYS[1])
  end
end
return 1`)
	extendScript = multiplex.NewScript(`local v = redis.call("GET", KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. "` + waitMark + `" then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`)
	// acquireMarkScript is SET NX PX GET for a waiter already subscribed
	// to the resource's releases, with ticket ARGV[3] and id ARGV[4] (its
	// value starts with the id), that also takes the waiter's turn: it
	// sets the key where it is free or holds this waiter's turn token. It
	// queues the waiter on every master it reaches, keeping the first
	// ticket it queued with, so that the masters' queues agree even after
	// a split vote. Where the key is taken (by a lock or another waiter's
	// turn), it marks it, so that its release gives the turn on; where it
	// sets the key, it sets it marked, so that its own release leaves the
	// queue and gives the turn to the next. Its answer is SET NX GET's:
	// nil when it set the key, the value it found (before marking) when
	// taken.
	acquireMarkScript = multiplex.NewScript(`local v = redis.call("GET", KEYS[1])
local q = "` + queuePrefixLua + `" .. KEYS[1]
redis.call("ZADD", q, "NX", ARGV[3], ARGV[4])
redis.call("PEXPIRE", q, 2 * ARGV[2])
local turn = "` + turnPrefix + `" .. ARGV[4]
if not v or v == turn or v == turn .. "` + waitMark + `" then
  redis.call("SET", KEYS[1], ARGV[1] .. "` + waitMark + `", "PX", ARGV[2])
  return false
end
if string.sub(v, -1) ~= "` + waitMark + `" then
  redis.call("APPEND", KEYS[1], "` + waitMark + `")
end
return v`)
	// acquireFenceScript is SET NX PX that also reads the resource's
	// fencing counter, so that fencing costs one extra round trip, not two.
	// It answers max(counter, this master's clock in µs) when it set the
	// key (see fence.go), and the holder's value (a string) when taken, so
	// that a waiter tells a hold from a split vote. ARGV[3] "1" is a
	// waiter with ticket ARGV[4] and id ARGV[5], which queues and marks as
	// acquireMarkScript does (the TYPE check comes first). Every check that can fail comes before the
	// SET: Redis does not undo a script's writes when it fails half-way.
	acquireFenceScript = multiplex.NewScript(`local c = tonumber(redis.call("GET", "` + fencePrefixLua + `" .. KEYS[1]) or "0")
if not c then
  return redis.error_reply("ERR redlock: the fencing counter of this key is not an integer")
end
local t = redis.call("TYPE", KEYS[1]).ok
if t ~= "none" and t ~= "string" then
  return redis.error_reply("WRONGTYPE Operation against a key holding the wrong kind of value")
end
local m, nx = "", "NX"
if ARGV[3] == "1" then
  local q = "` + queuePrefixLua + `" .. KEYS[1]
  redis.call("ZADD", q, "NX", ARGV[4], ARGV[5])
  redis.call("PEXPIRE", q, 2 * ARGV[2])
  m = "` + waitMark + `"
  if t == "string" then
    local turn = "` + turnPrefix + `" .. ARGV[5]
    local v = redis.call("GET", KEYS[1])
    if v == turn or v == turn .. "` + waitMark + `" then
      nx = "XX"
    end
  end
end
if redis.call("SET", KEYS[1], ARGV[1] .. m, nx, "PX", ARGV[2]) then
  local now = redis.call("TIME")
  local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
  if floor > c then
    return floor
  end
  return c
end
local v = redis.call("GET", KEYS[1])
if ARGV[3] == "1" and string.sub(v, -1) ~= "` + waitMark + `" then
  redis.call("APPEND", KEYS[1], "` + waitMark + `")
end
return v`)
	// fenceScript raises the counter to the token unless it is already
	// higher, and answers the counter's new value; only where the key is
	// still ours (else 0), so that every master in the quorum that raised
	// it kept our key until after the raise, and any later holder's SET
	// there reads the raised counter.
	fenceScript = multiplex.NewScript(`local v = redis.call("GET", KEYS[1])
if v ~= ARGV[2] and v ~= ARGV[2] .. "` + waitMark + `" then
  return 0
end
local k = "` + fencePrefixLua + `" .. KEYS[1]
local c = tonumber(redis.call("GET", k) or "0")
local t = tonumber(ARGV[1])
if t > c then
  redis.call("SET", k, ARGV[1])
  return t
end
return c`)
)

// Each body above is one key's logic. It runs as it is for one key, and
// once per key in a coalesced call over many (multiplex.Script.Coalesce),
// so that a change to a body applies to both.
func init() {
	releaseScript.Coalesce()
	undoScript.Coalesce()
	extendScript.Coalesce()
	leaveScript.Coalesce()
	quitScript.Coalesce()
	acquireMarkScript.Coalesce()
	acquireFenceScript.Coalesce()
	fenceScript.Coalesce()
}

// ReleaseScriptSource is the Lua every release runs on every master, for
// tools that measure what the masters can sustain.
var ReleaseScriptSource = releaseScript.Body

var allScripts = []*multiplex.Script{releaseScript, undoScript, extendScript, leaveScript, quitScript, acquireMarkScript, acquireFenceScript, fenceScript}

func classifyAcquireGet(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	// SET NX GET answers nil when it set the key, and the holder's value
	// when the key was taken; a non-string key is a WRONGTYPE error. A
	// refusal carries a hash of the holder's value, so that a waiter can
	// tell one holder with a quorum from a split vote.
	v, err := res.ToString()
	switch {
	case err == nil:
		return multiplex.Refused, holderHash(v), nil
	case rueidis.IsRedisNil(err):
		return multiplex.OK, 0, nil
	}
	return multiplex.Failed, 0, err
}

// turnHash stands for every turn token in a refusal; holderHash never
// returns it (its results are odd).
const turnHash = 2

// holderHash is FNV-1a of a lock value without its wait mark, never 0 (0
// means unknown): one holder's value is marked on some masters only.
func holderHash(v string) int64 {
	if strings.HasPrefix(v, turnPrefix) {
		return turnHash
	}
	v = strings.TrimSuffix(v, waitMark)
	h := uint64(14695981039346656037)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 1099511628211
	}
	return int64(h | 1)
}

func classifyAcquireSet(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	err := res.Error()
	switch {
	case err == nil:
		return multiplex.OK, 0, nil
	case rueidis.IsRedisNil(err):
		return multiplex.Refused, 0, nil
	}
	return multiplex.Failed, 0, err
}

func classifyInt(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	n, err := res.AsInt64()
	switch {
	case err != nil:
		return multiplex.Failed, 0, err
	case n > 0:
		return multiplex.OK, n, nil
	}
	return multiplex.Refused, n, nil
}

// classifyFenced reads acquireFenceScript's answer: the counter on OK, the
// holder's hash (as classifyAcquireGet) when refused.
func classifyFenced(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	m, err := res.ToMessage()
	if err != nil {
		return multiplex.Failed, 0, err
	}
	if m.IsInt64() {
		n, _ := m.ToInt64()
		return multiplex.OK, n, nil
	}
	v, err := m.ToString()
	if err != nil {
		return multiplex.Failed, 0, err
	}
	return multiplex.Refused, holderHash(v), nil
}
