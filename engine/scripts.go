package engine

import (
	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// fencePrefix names each resource's fencing counter. It lives beside the
// lock key on every master and is never expired: tokens must keep growing
// across holders.
const fencePrefix = "redlock:fence:"

// releasedPrefix names the channel a release publishes on, so that waiters
// retry at once instead of polling.
const releasedPrefix = "redlock:released:"

// The scripts compare the value before acting, so that a lease only ever
// touches its own key; extend never re-creates a missing key.
var (
	// releaseScript deletes our key and tells waiters which value was
	// released, so that they count one release once, whatever the number
	// of masters that announce it.
	releaseScript = multiplex.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  redis.call("PUBLISH", "` + releasedPrefix + `" .. KEYS[1], ARGV[1])
  return 1
end
return 0`)
	// releaseQuietScript is for undoing a failed attempt (nobody waits on
	// a split vote) and for Lockers with notifications off.
	releaseQuietScript = multiplex.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)
	extendScript       = multiplex.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`)
	// acquireFenceScript is SET NX PX that also reads the resource's
	// fencing counter, so that fencing costs one extra round trip, not two.
	// It answers the counter (>= 0) when it set the key, -1 when taken.
	acquireFenceScript = multiplex.NewScript(`local t = redis.call("TYPE", KEYS[1]).ok
if t ~= "none" and t ~= "string" then
  return redis.error_reply("WRONGTYPE Operation against a key holding the wrong kind of value")
end
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return tonumber(redis.call("GET", "` + fencePrefix + `" .. KEYS[1]) or "0")
end
return -1`)
	// fenceScript raises the counter to the token unless it is already
	// higher, and answers the counter's new value.
	fenceScript = multiplex.NewScript(`local k = "` + fencePrefix + `" .. KEYS[1]
local c = tonumber(redis.call("GET", k) or "0")
local t = tonumber(ARGV[1])
if t > c then
  redis.call("SET", k, ARGV[1])
  return t
end
return c`)
)

// ReleaseScriptSource is the Lua every release runs on every master, for
// tools that measure what the masters can sustain.
var ReleaseScriptSource = releaseScript.Body

var allScripts = []*multiplex.Script{releaseScript, releaseQuietScript, extendScript, acquireFenceScript, fenceScript}

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

// holderHash is FNV-1a of a lock value, never 0 (0 means unknown).
func holderHash(v string) int64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 1099511628211
	}
	return int64(h | 1)
}

// heldByOne reports whether one owner holds the resource on a quorum of
// the refusing masters: then a release will come and is worth waiting
// for. Otherwise the vote was split between attempts that each undo
// theirs, and nobody will publish anything.
func heldByOne(t *multiplex.Tally) bool {
	if t.Refused < t.Quorum {
		return false
	}
	for i, a := range t.Votes {
		if a.Outcome != multiplex.Refused {
			continue
		}
		same := 0
		for _, b := range t.Votes[i:] {
			if b.Outcome == multiplex.Refused && b.Value == a.Value {
				same++
			}
		}
		if same >= t.Quorum {
			return true
		}
	}
	return false
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

// classifyFenced reads acquireFenceScript's answer: the counter on OK.
func classifyFenced(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	n, err := res.AsInt64()
	switch {
	case err != nil:
		return multiplex.Failed, 0, err
	case n >= 0:
		return multiplex.OK, n, nil
	}
	return multiplex.Refused, n, nil
}
