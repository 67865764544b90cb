package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// Fencing tokens only increase per resource, through any restarts of the
// masters that the quarantine admits, without persistence on the masters:
//
//   - A token is one more than the highest value a quorum reported, and a
//     second round raises the counters of a quorum to it before the lease
//     is handed out, only on masters where the key is still ours. A later
//     holder's SET on such a master can succeed only after our key left it,
//     so after the raise; its quorum shares a master with ours, and while
//     that master keeps its counter the later token is larger.
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
	cmd := le.call(fenceScript, tok, le.value)
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
// there reads the raised counter.
var fenceScript = multiplex.NewScript(`local token, value = ARGV[1], ARGV[2]
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
  return t
end
return c`).Coalesce()

// maxClockSkew is how far a master's clock may be from the others' when
// a new connection measures it (a restart, a reconnect), with Fencing:
// MaxTTL/2, as New checks at start. Farther, its votes are kept out
// until it comes back within: a restarted master forgot its counters, and
// its clock alone then stands for them (see the top of this file).
// Without fencing nothing depends on the masters' wall clocks.
func maxClockSkew(cfg Config) time.Duration {
	if !cfg.Fencing {
		return 0
	}
	return cfg.MaxTTL / 2
}

// checkClocks holds the clock assumption of fencing (see the top of this
// file) to a margin: the masters' wall clocks, as measured at connect,
// must agree within MaxTTL/2, half of what the argument needs, leaving
// the rest for drift while the Locker runs.
func checkClocks(pool *multiplex.Pool, maxTTL time.Duration) error {
	var lo, hi *multiplex.NodeStatus
	var loOff, hiOff time.Duration
	for _, n := range pool.Status() {
		if !n.ClockKnown {
			continue
		}
		off := time.Duration(n.ClockOffsetMS * float64(time.Millisecond))
		if lo == nil || off < loOff {
			lo, loOff = &n, off
		}
		if hi == nil || off > hiOff {
			hi, hiOff = &n, off
		}
	}
	if lo != nil && hiOff-loOff >= maxTTL/2 {
		return fmt.Errorf("engine: Config.Fencing: the masters' clocks differ by %s (%s is %s from this host, %s is %s): fencing tokens need them within MaxTTL/2 (%s)",
			hiOff-loOff, hi.Addr, hiOff, lo.Addr, loOff, maxTTL/2)
	}
	return nil
}
