package engine

import (
	"strings"

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

// The scripts compare the value before acting, so that a lease only ever
// touches its own key, marked by a waiter or not; extend never re-creates a
// missing key.
var (
	// releaseScript deletes our key; if a waiter marked it, it also tells
	// the waiters which value was released, so that they count one release
	// once, whatever the number of masters that announce it.
	releaseScript = multiplex.NewScript(`local v = redis.call("GET", KEYS[1])
if v == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
if v == ARGV[1] .. "` + waitMark + `" then
  redis.call("DEL", KEYS[1])
  redis.call("PUBLISH", "` + releasedPrefix + `" .. KEYS[1], ARGV[1])
  return 1
end
return 0`)
	// undoScript deletes our key, marked or not, and publishes nothing.
	// It cleans up after failed attempts and late replies: a waiter that
	// marked such a key waits for the holder of the quorum, and waking it
	// for each undo sent every waiter racing to the masters to fail again,
	// undo again, and wake the others (a third of the throughput with
	// fencing and 8 clients on 10 hot keys).
	undoScript = multiplex.NewScript(`local v = redis.call("GET", KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. "` + waitMark + `" then
  return redis.call("DEL", KEYS[1])
end
return 0`)
	extendScript = multiplex.NewScript(`local v = redis.call("GET", KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. "` + waitMark + `" then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`)
	// acquireMarkScript is SET NX PX GET for a waiter already subscribed
	// to the resource's releases: where the key is taken, it marks the
	// holder's value, so that the holder's release publishes. Its answer
	// is SET NX GET's: nil when it set the key, the holder's value (as it
	// was before marking) when taken.
	acquireMarkScript = multiplex.NewScript(`local v = redis.call("GET", KEYS[1])
if not v then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
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
	// that a waiter tells a hold from a split vote. ARGV[3] "1" marks a
	// taken key, as acquireMarkScript does. Every check that can fail
	// comes before the SET: Redis does not undo a script's writes when it
	// fails half-way.
	acquireFenceScript = multiplex.NewScript(`local c = tonumber(redis.call("GET", "` + fencePrefixLua + `" .. KEYS[1]) or "0")
if not c then
  return redis.error_reply("ERR redlock: the fencing counter of this key is not an integer")
end
local t = redis.call("TYPE", KEYS[1]).ok
if t ~= "none" and t ~= "string" then
  return redis.error_reply("WRONGTYPE Operation against a key holding the wrong kind of value")
end
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
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
	releaseScript.Coalesce(1)
	undoScript.Coalesce(1)
	extendScript.Coalesce(2)
	acquireMarkScript.Coalesce(2)
	acquireFenceScript.Coalesce(3)
	fenceScript.Coalesce(2)
}

// ReleaseScriptSource is the Lua every release runs on every master, for
// tools that measure what the masters can sustain.
var ReleaseScriptSource = releaseScript.Body

var allScripts = []*multiplex.Script{releaseScript, undoScript, extendScript, acquireMarkScript, acquireFenceScript, fenceScript}

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

// holderHash is FNV-1a of a lock value without its wait mark, never 0 (0
// means unknown): one holder's value is marked on some masters only.
func holderHash(v string) int64 {
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
