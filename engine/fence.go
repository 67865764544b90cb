package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// Fencing tokens only increase per resource, through any restarts of the
// masters that the quarantine admits, and through the expiry of their
// counters, without persistence on the masters:
//
//   - A token is one more than the highest value a quorum reported, and a
//     second round raises the counters of a quorum to it before the lease
//     is handed out, only on masters where the key is still ours. A later
//     holder's SET on such a master can succeed only after our key left it,
//     so after the raise; its quorum shares a master with ours, and every
//     report of that master after the raise is at least our token (see
//     the next two points), so the later token is larger.
//   - Each master reports max(counter, its clock in microseconds). If every
//     shared master restarted (and forgot its counters) since the earlier
//     token was written, each sat out MaxTTL in quarantine before its vote
//     counted again, so the later acquisition reads clocks at least MaxTTL
//     past the moment the earlier token was issued. The earlier token was
//     at most the highest master clock then (plus one per acquisition
//     faster than a microsecond, which a round trip rules out). So the
//     later token is larger as long as the masters' clocks differ by less
//     than MaxTTL and never step back by more: the clock assumption, which
//     New checks (see Config.Fencing).
//   - A counter expires (see fenceScript): each raise to token t sets its
//     deadline to the instant the master's own clock reads t, as
//     microseconds, plus MaxTTL (PEXPIREAT ⌊t/1000⌋ + 1 + MaxTTL in ms,
//     the +1 for the truncation to milliseconds). A counter only rises
//     while it lives, and its deadline with it; so while it lives it is at
//     least every token raised there, and once it is gone that master's
//     clock has passed every such token by MaxTTL: its floor, read from
//     the same clock that expired the key, exceeds them all unless the
//     clock stepped back by MaxTTL or more since, which the assumption
//     above rules out. A counter created again after that (a raise whose
//     token was computed without this master's report) only adds to the
//     max. Tokens and floors are microseconds of one master's TIME, and
//     its deadlines milliseconds of the same clock, so the argument needs
//     nothing of the other masters' clocks nor of any drift rate: only that
//     no master's clock steps back by MaxTTL or more. A counter so lives
//     about MaxTTL after its name's last fenced acquisition (plus how far
//     ahead of this master's clock the token was: the masters' skew, below
//     MaxTTL by the assumption), or MaxTTL past the TTL of the lease's
//     last extension, whichever is later (fenceHoldLua), instead of
//     forever; the deadline costs one more write in the fence round's
//     script, no round trip. Lockers that
//     share masters set each other's deadlines: each one's MaxTTL must
//     cover the clocks' steps back.
//   - As a second line: a fenced lease is handed out only if more validity
//     is left, once its counters are raised, than a round can go on
//     counting votes (NodeTimeout plus the watchdog's lateness), so that no
//     competing round spans both the raise and the expiry of our keys.

// fence sets the lease's token to one more than the highest value the
// quorum reported (counters, or the masters' clocks), and raises the
// counter to it on a quorum before the lease is handed out.
func (le *Lease) fence(ctx context.Context, acquired multiplex.Tally) error {
	var top int64
	for _, v := range acquired.Votes {
		if v.Outcome == multiplex.OK && v.Value > top {
			top = v.Value
		}
	}
	le.token = top + 1
	tok := itoa(le.token)
	cmd := le.call(fenceScript, tok, le.value, le.l.fenceKeep())
	cmd.SkipIfFailed = true
	votes := make([]multiplex.Vote, len(le.votes))
	want := le.token
	t := le.l.pool.Fanout(ctx, cmd, func(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
		n, err := res.AsInt64()
		switch {
		case err != nil:
			return multiplex.Failed, 0, err
		case n == want:
			return multiplex.OK, n, nil
		}
		// A higher counter (our token is stale), 0 (another's value holds
		// the key) or fenceGone (no key there).
		return multiplex.Refused, n, nil
	}, nil, votes)
	if !t.Reached() || t.Err != nil {
		kind := ErrNoQuorum
		switch {
		case t.Err != nil:
			// The context ended (or Close began) before the round was
			// decided: its error alone, as an acquire's, not an outage.
			kind = nil
		case contended(&t) || faults.FenceRefusalIsContention.On() && t.Refused > 0:
			// A refusal is contention only where it shows another
			// holder: a higher counter, or another's value in the key.
			// Where our key is merely gone (a master back empty from a
			// restart, one the acquire never reached, a key expired),
			// the masters lost the quorum, not a competitor.
			kind = ErrNotAcquired
		}
		return newVotesError("fence", le.resource, kind, &t, le.l.addrs)
	}
	le.mu.Lock()
	until := le.validUntil
	le.mu.Unlock()
	if span := le.l.roundSpan(); !time.Now().Add(span).Before(until) {
		return fmt.Errorf("engine: fence %q: %w: the counters were raised with less validity left than a round can last (%s); a competing round could have read the old ones", le.resource, ErrNoQuorum, span)
	}
	return nil
}

// fenceGone is the fence scripts' answer where the key is not there, nor
// any other holder: nobody else holds the resource on that master.
const fenceGone = -1

// contended reports whether a fence round's refusals show another
// holder: a counter above our token (another's token raised it), or the
// key holding another's value (fenceGone is neither).
func contended(t *multiplex.Tally) bool {
	for _, v := range t.Votes {
		if v.Outcome == multiplex.Refused && v.Value != fenceGone {
			return true
		}
	}
	return false
}

// fenceScript raises the counter to the token unless it is already
// higher, and answers the counter's new value; only where the key is
// still ours (else 0 where another value holds it, fenceGone where
// none does), so that every master in the quorum that raised
// it kept our key until after the raise, and any later holder's SET
// there reads the raised counter. A raise sets the counter's deadline
// MaxTTL (ARGV[3], ms) past the instant the master's clock reads the
// token (see the top of this file): fenceExpiryLua.
var fenceScript = multiplex.NewScript(`local token, value, keep = ARGV[1], ARGV[2], ARGV[3]
local v = redis.call("GET", KEYS[1])
if v ~= value and v ~= value .. "` + waitMark + `" then
  if v then
    return 0
  end
  return ` + itoa(fenceGone) + `
end
local k = "` + fencePrefixLua + `" .. KEYS[1]
local c = tonumber(redis.call("GET", k) or "0")
local t = tonumber(token)
if t > c then
  redis.call("SET", k, token)
` + fenceExpiryLua("k") + `  return t
end
return c`).Coalesce()

// fenceExpiryLua sets the deadline of the counter whose key is in the
// Lua variable key, after its raise to token t (a Lua number, µs of the
// master's clock), to keep (ms) past the instant the master's clock reads
// t: PEXPIREAT ⌊t/1000⌋ + 1 + keep, the +1 for the truncation. A deadline
// already past deletes the counter: the master's clock then stands for
// it. Lua's numbers are doubles, exact for µs since 1970 (below 2^53
// until the year 2255).
func fenceExpiryLua(key string) string {
	return `  redis.call("PEXPIREAT", ` + key + `, string.format("%.0f", math.floor(t / 1000) + 1 + tonumber(keep)))
`
}

// fenceHoldLua, in an extension's script where the lease's key (the Lua
// expression key) is ours and its TTL was just set to ttl ms, keeps a
// fenced lease's counter (token set, not "0") past that TTL: raised to
// the token if it expired or fell below it, its deadline is set to keep
// (ms) past the later of the instant the master's clock reads its value
// and the key's new expiry. Without this a counter would expire about
// MaxTTL into a long-held lease, and Inspect and Unlock by token would no
// longer find the holder's token. Both writes keep the argument at the
// top of this file: the deadline is still at least keep past the
// counter's value (a shorter extension may bring it earlier than the
// last one set, never below that), and a raise where the key is ours is
// the fence round's own. It uses no command the fence round does not.
func fenceHoldLua(key string) string {
	return `  if token and token ~= "0" then
    local f = "` + fencePrefixLua + `" .. ` + key + `
    local t = tonumber(token)
    local c = tonumber(redis.call("GET", f) or "0")
    if t > c then
      redis.call("SET", f, token)
      c = t
    end
    local tm = redis.call("TIME")
    local at = math.max(math.floor(c / 1000) + 1, tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000) + tonumber(ttl)) + tonumber(keep)
    redis.call("PEXPIREAT", f, string.format("%.0f", at))
  end
`
}

// fenceKeep is how long (ms, formatted) a fencing counter outlives the
// instant its master's clock reads it: MaxTTL (see the top of this
// file), or with mutation.FenceCounterExpiresEarly no margin at all.
func (l *Locker) fenceKeep() string {
	if faults.FenceCounterExpiresEarly.On() {
		return "-1"
	}
	return l.maxTTLStr
}

// maxClockSkew is how far a master's clock may provably be from the
// others' when a new connection measures it (a restart, a reconnect),
// with Fencing: MaxTTL/2, as New checks at start (see checkClocks).
// Farther, its votes are kept out until a new connection finds it not
// provably so: a restarted master forgot its counters, and its clock
// alone then stands for them (see the top of this file).
// Without fencing nothing depends on the masters' wall clocks.
func maxClockSkew(cfg Config) time.Duration {
	if !cfg.Fencing {
		return 0
	}
	return cfg.MaxTTL / 2
}

// checkClocks holds the clock assumption of fencing (see the top of this
// file) to a margin: the masters' wall clocks, as measured at connect,
// must not be provably MaxTTL/2 or more apart, half of what the argument
// needs, leaving the rest for the readings' uncertainty and for drift
// while the Locker runs.
//
// A reading is off by up to its uncertainty u, half its round trip (the
// master read its clock somewhere within it), so two masters are refused
// only when their readings' difference d is provably MaxTTL/2 or more:
// |d| - (u1 + u2) >= MaxTTL/2. A master whose clock agrees is never
// refused for a slow round trip (a loaded host can take hundreds of ms
// over one at connect). Nor is a far one let through on a reading too
// vague to tell when a sharper one can be had: the pool reads a clock
// again at connect while its reading is uncertain by a quarter of the
// bound or more, and keeps the sharpest. Clocks let through are, in
// truth, less than MaxTTL/2 + 2(u1 + u2) apart: within MaxTTL, as the
// argument needs, while u1 + u2 < MaxTTL/4; round trips on a LAN (µs to
// ms) leave the margin nearly whole for drift. Nodes() shows each
// reading's uncertainty (ClockErrorMS).
func checkClocks(pool *multiplex.Pool, maxTTL time.Duration) error {
	// ahead is the master whose clock is at least latest (the lowest its
	// reading allows is highest), behind the one at most earliest.
	var ahead, behind *multiplex.NodeStatus
	var aheadLo, behindHi time.Duration
	nodes := pool.Status()
	for i := range nodes {
		n := &nodes[i]
		if !n.ClockKnown {
			continue
		}
		off, u := msDuration(n.ClockOffsetMS), msDuration(n.ClockErrorMS)
		if faults.ClockErrorIgnored.On() {
			u = 0
		}
		if ahead == nil || off-u > aheadLo {
			ahead, aheadLo = n, off-u
		}
		if behind == nil || off+u < behindHi {
			behind, behindHi = n, off+u
		}
	}
	if ahead != nil && aheadLo-behindHi >= maxTTL/2 {
		// Not one master: the lowest and highest one reading allows are
		// never apart.
		r := func(ms float64) time.Duration { return msDuration(ms).Round(100 * time.Microsecond) }
		return fmt.Errorf("engine: Config.Fencing: the masters' clocks differ by %s or more (%s is %s ±%s from this host, %s is %s ±%s): fencing tokens need them within MaxTTL/2 (%s)",
			(aheadLo - behindHi).Round(100*time.Microsecond), ahead.Addr, r(ahead.ClockOffsetMS), r(ahead.ClockErrorMS),
			behind.Addr, r(behind.ClockOffsetMS), r(behind.ClockErrorMS), maxTTL/2)
	}
	return nil
}

// msDuration is ms milliseconds.
func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
