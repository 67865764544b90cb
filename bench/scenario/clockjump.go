package scenario

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

// clock-jump: Redlock assumes the masters' clocks run at about the rate of
// real time. A master whose wall clock jumps forward expires its keys
// early: Redis stores each expiry as an absolute time on that clock.
//
// The classic case: the holder sits on exactly a quorum, masters 0-2;
// master 2's clock jumps past the TTL, so the holder's key there expires
// at once; a second client then wins masters 2-4 while the holder's lease
// is valid. A jump on one master matters only when that master is one the
// holder needs: a holder on all five would lose one vote of a spare two. A
// jump on a majority would lose any lock. The scenario takes the one-master
// case, the smallest fault that loses the lock, with the exact quorum set
// up as in restart-amnesia.
//
// The jump is applied by its effect, not by moving a clock: on the master,
// one script shrinks every key's remaining TTL by the jump at once
// (PEXPIRE key max(1, PTTL-jump) over a SCAN), which is what a clock that
// jumps by that much does to keys with an expiry; keys without one, such
// as the fencing counters, are untouched, as they would be. Moving the
// clock of one process needs libfaketime, which is not installed here and
// whose 0.9.10 was found to kill redis-server 7.0 at start; moving the
// host's clock would move every master, and this process's too. Applying
// the effect is also deterministic: the key is gone the moment the script
// returns.
//
// Fencing does not prevent the double grant; it makes it harmless to a
// resource that checks tokens. The jump leaves the fencing counters alone,
// and the second client's quorum overlaps the holder's on master 2, so its
// token is higher and the stale holder's writes after the second's are
// rejected.

const (
	clockMasters  = 5
	clockJumped   = 2 // the master whose clock jumps, in the holder's quorum
	clockResource = "scenario:clock-jump"
	// clockStaleWrites is how many writes the stale holder makes after the
	// second client's first.
	clockStaleWrites = 3
	clockAttempts    = 25
	clockRetry       = 20 * time.Millisecond
)

// clockTTL is the lock's TTL. Nothing waits it out (the jump shortens
// the key at once, and both leases are released), so it can be long
// enough for the holder's lease to outlast, on a loaded machine, its
// acquire, the jump, the second client's grant and every write.
func clockTTL(short bool) time.Duration {
	if short {
		return 6 * time.Second
	}
	return 8 * time.Second
}

// clockJump is how far the master's clock jumps: past the TTL, so that
// every lock on it expires at once.
func clockJump(short bool) time.Duration { return clockTTL(short) + time.Second }

// jumpScript shrinks the remaining TTL of every key with an expiry by
// ARGV[1] milliseconds, to at least 1 ms, and answers how many it changed.
const jumpScript = `local jump = tonumber(ARGV[1])
local cursor, n = "0", 0
repeat
  local r = redis.call("SCAN", cursor, "COUNT", 1000)
  cursor = r[1]
  for _, k in ipairs(r[2]) do
    local t = redis.call("PTTL", k)
    if t > 0 then
      redis.call("PEXPIRE", k, math.max(1, t - jump))
      n = n + 1
    end
  end
until cursor == "0"
return n`

func expectClockJump(o Options) string {
	head := fmt.Sprintf("The holder (TTL %s, no auto-extension) holds exactly a quorum, masters 0-2. Master %d's clock jumps "+
		"forward by %s, past the TTL, applied by its effect: every key's remaining TTL on it shrinks by the jump at once "+
		"(PEXPIRE key max(1, PTTL-jump), one script over SCAN), which is what Redis does with a clock that jumps, since "+
		"it stores expiries as absolute times; libfaketime, which would move the clock itself, is not usable here. The holder's key there expires, and a second client wins masters 2-4 "+
		"while the holder's lease is valid: the oracle must see a double grant, since Redlock assumes the masters' clocks "+
		"do not jump. ", clockTTL(o.Short), clockJumped, clockJump(o.Short))
	if o.Fencing {
		return head + fmt.Sprintf("With fencing on, the second client's token is higher, and the fenced resource rejects "+
			"all %d of the stale holder's writes made after the second client's: \"double grant reproduced; fencing "+
			"rejected %d/%d stale writes\".", clockStaleWrites, clockStaleWrites, clockStaleWrites)
	}
	return head + fmt.Sprintf("With fencing off, the resource accepts all %d of the stale holder's writes made after the "+
		"second client's: the double grant reaches the data. The run passes when both are reproduced.", clockStaleWrites)
}

// clockObs is what clock-jump observed; it is also its figures.
type clockObs struct {
	Fencing     bool    `json:"fencing"`
	TTLMs       int64   `json:"ttl_ms"`
	JumpMs      int64   `json:"jump_ms"`
	Method      string  `json:"method"`
	Masters     int     `json:"masters"`
	Quorum      int     `json:"quorum"`
	HolderNodes []int   `json:"holder_nodes"`
	HolderToken int64   `json:"holder_token"`
	ValidForMs  float64 `json:"holder_valid_for_ms"`
	JumpedNode  int     `json:"jumped_node"`
	// KeysShortened is how many keys the jump shortened on the master;
	// KeyGone says the holder's key was gone there afterwards.
	KeysShortened int      `json:"keys_shortened"`
	KeyGone       bool     `json:"holder_key_gone"`
	Attempts      []string `json:"second_attempts"`
	Granted       bool     `json:"second_granted"`
	SecondNodes   []int    `json:"second_nodes,omitempty"`
	SecondToken   int64    `json:"second_token"`
	// HolderLeftMs is what was left of the holder's validity at the grant.
	HolderLeftMs float64 `json:"holder_left_at_grant_ms,omitempty"`
	// HolderErr is what lease.Err() told the holder at its stale writes:
	// nothing, since its lease is valid by its own clock.
	HolderErr     string    `json:"holder_err_at_stale_writes,omitempty"`
	Writes        []Write   `json:"writes"`
	StaleWrites   int       `json:"stale_writes"`
	StaleAccepted int       `json:"stale_accepted"`
	SecondWriteOK bool      `json:"second_write_accepted"`
	DoubleGrants  int       `json:"double_grants"`
	Overlaps      []Overlap `json:"overlaps,omitempty"`
}

func runClockJump(ctx context.Context, e *env) (outcome, error) {
	ttl, jump := clockTTL(e.o.Short), clockJump(e.o.Short)
	obs := clockObs{Fencing: e.o.Fencing, TTLMs: ttl.Milliseconds(), JumpMs: jump.Milliseconds(),
		Method:  "effect: PEXPIRE key max(1, PTTL-jump) for every key with an expiry, one script over SCAN",
		Masters: clockMasters, Quorum: clockMasters/2 + 1, JumpedNode: clockJumped}
	fail := func(err error) (outcome, error) { return outcome{figures: obs}, err }

	cluster, err := e.masters(ctx, clockMasters)
	if err != nil {
		return fail(err)
	}
	defer cluster.Stop()
	addrs := cluster.Addrs()
	set := func(c *engine.Config) { c.TTL, c.Fencing, c.AutoExtend = ttl, e.o.Fencing, false; patient(c) }
	holder, err := e.locker(ctx, addrs, set)
	if err != nil {
		return fail(err)
	}
	defer holder.Close()
	second, err := e.locker(ctx, addrs, set)
	if err != nil {
		return fail(err)
	}
	defer second.Close()
	or := newOracle(e.start)
	res := &fencedResource{base: e.start}

	lease, nodes, err := holdExactQuorum(ctx, holder, addrs, clockResource, []int{3, 4})
	obs.HolderNodes = nodes
	if err != nil {
		return fail(err)
	}
	got := time.Now()
	or.acquire(clockResource, "holder", got, lease.ValidUntil())
	obs.HolderToken, obs.ValidForMs = lease.Token(), ms(lease.ValidUntil().Sub(got))
	e.step("holder acquired on masters %v, token %d, valid for %.0f ms; masters 3 and 4 freed", nodes, obs.HolderToken, obs.ValidForMs)
	w := res.write("holder", lease.Token())
	e.step("holder wrote with token %d: accepted=%v", w.Token, w.Accepted)

	line, err := redisproc.Do(ctx, addrs[clockJumped], directTimeout, "EVAL", jumpScript, "0", fmt.Sprint(jump.Milliseconds()))
	if err != nil {
		return fail(fmt.Errorf("clock jump on master %d: %w", clockJumped, err))
	}
	fmt.Sscanf(strings.TrimPrefix(line, ":"), "%d", &obs.KeysShortened)
	// A PEXPIRE of 1 ms leaves the key for up to a millisecond: wait for
	// it to be gone, for as long as the holder's lease lives (a key still
	// there then was not shortened, and the judge says so).
	for lease.Validity() > 0 {
		v, err := get(addrs[clockJumped], clockResource)
		if err != nil {
			return fail(err)
		}
		if obs.KeyGone = v == ""; obs.KeyGone {
			break
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return fail(err)
		}
	}
	e.step("master %d's clock jumped %s forward: %d key(s) shortened, the holder's key gone: %v",
		clockJumped, jump, obs.KeysShortened, obs.KeyGone)

	var next *engine.Lease
	for len(obs.Attempts) < clockAttempts && lease.Validity() > 0 {
		le, err := second.TryLock(ctx, clockResource)
		at := time.Now()
		if err != nil && ctx.Err() != nil {
			return fail(ctx.Err())
		}
		if err == nil {
			next = le
			or.acquire(clockResource, "second", at, le.ValidUntil())
			left := lease.ValidUntil().Sub(at)
			obs.Granted, obs.HolderLeftMs, obs.SecondToken = left > 0, ms(left), le.Token()
			obs.Attempts = append(obs.Attempts, "acquired")
			e.step("second client GRANTED, token %d, with %.0f ms of the holder's validity left", obs.SecondToken, obs.HolderLeftMs)
			break
		}
		obs.Attempts = append(obs.Attempts, err.Error())
		e.step("second client attempt %d: %v", len(obs.Attempts), err)
		if err := sleep(ctx, clockRetry); err != nil {
			return fail(err)
		}
	}
	if next != nil {
		// The writes come first, while the holder's lease is valid by its
		// own clock; which masters the second client holds is read after.
		w := res.write("second", next.Token())
		obs.SecondWriteOK = w.Accepted
		e.step("second client wrote with token %d: accepted=%v", w.Token, w.Accepted)
		// The holder knows nothing of the jump: by its own clock its lease
		// is valid, and it goes on writing.
		if err := lease.Err(); err != nil {
			obs.HolderErr = err.Error()
		}
		for i := 0; i < clockStaleWrites; i++ {
			w := res.write("holder", lease.Token())
			obs.StaleWrites++
			if w.Accepted {
				obs.StaleAccepted++
			}
		}
		e.step("stale holder (lease.Err: %s) wrote %d time(s) with token %d: %d accepted",
			errText(obs.HolderErr), obs.StaleWrites, lease.Token(), obs.StaleAccepted)
		for i, a := range addrs {
			v, err := get(a, clockResource)
			if err != nil {
				return fail(err)
			}
			if v == next.Value() {
				obs.SecondNodes = append(obs.SecondNodes, i)
			}
		}
		e.step("the second client holds masters %v", obs.SecondNodes)
		or.release(clockResource, "second", time.Now())
		next.Release(ctx)
	}
	or.release(clockResource, "holder", time.Now())
	lease.Release(ctx)
	obs.Writes = res.log()
	obs.DoubleGrants, obs.Overlaps = or.result()

	passed, why := judgeClockJump(obs)
	return outcome{figures: obs, passed: passed, observed: why, violations: obs.DoubleGrants + obs.StaleAccepted}, nil
}

// judgeClockJump decides clock-jump. The double grant must be reproduced
// with fencing on or off; fencing decides what happens to the stale
// holder's writes.
func judgeClockJump(obs clockObs) (bool, string) {
	switch {
	case len(obs.HolderNodes) != obs.Quorum || !contains(obs.HolderNodes, obs.JumpedNode):
		return false, fmt.Sprintf("set-up failed: the holder sat on masters %v, not on exactly a quorum of %d including master %d, so one clock jump does not test the hazard",
			obs.HolderNodes, obs.Quorum, obs.JumpedNode)
	case obs.KeysShortened == 0 || !obs.KeyGone:
		return false, fmt.Sprintf("set-up failed: the jump shortened %d key(s) on master %d and the holder's key gone there: %v",
			obs.KeysShortened, obs.JumpedNode, obs.KeyGone)
	case obs.DoubleGrants == 0 || !obs.Granted:
		return false, fmt.Sprintf("No double grant after master %d's clock jumped (second client: %s): the hazard was not reproduced.",
			obs.JumpedNode, strings.Join(obs.Attempts, "; "))
	case obs.StaleWrites == 0:
		return false, "set-up failed: the stale holder never wrote"
	case !obs.SecondWriteOK:
		return false, "the second client's write was rejected: the fenced resource had seen a higher token than its own"
	}
	grant := fmt.Sprintf("Master %d's clock jumped %d ms forward and the holder's key there expired; the second client won masters %v "+
		"with %.0f ms of the holder's validity left (%d overlapping hold(s)). The holder, its lease valid by its own clock (lease.Err: %s), ",
		obs.JumpedNode, obs.JumpMs, obs.SecondNodes, obs.HolderLeftMs, obs.DoubleGrants, errText(obs.HolderErr))
	rejected := obs.StaleWrites - obs.StaleAccepted
	if obs.Fencing {
		switch {
		case obs.SecondToken <= obs.HolderToken:
			return false, grant + fmt.Sprintf("wrote again, but the tokens did not increase: holder %d, second client %d.", obs.HolderToken, obs.SecondToken)
		case obs.StaleAccepted > 0:
			return false, grant + fmt.Sprintf("wrote again: STALE WRITE, the fenced resource accepted %d/%d writes with token %d after seeing %d.",
				obs.StaleAccepted, obs.StaleWrites, obs.HolderToken, obs.SecondToken)
		}
		return true, grant + fmt.Sprintf("wrote again with token %d, after the second client's %d: double grant reproduced; fencing rejected %d/%d stale writes.",
			obs.HolderToken, obs.SecondToken, rejected, obs.StaleWrites)
	}
	if obs.StaleAccepted != obs.StaleWrites {
		return false, grant + fmt.Sprintf("wrote again and %d/%d writes were rejected without fencing, which the resource has no way to do: the scenario is broken.",
			rejected, obs.StaleWrites)
	}
	return true, grant + fmt.Sprintf("wrote again: double grant reproduced; without fencing the resource accepted %d/%d stale writes, the double grant reaching the data.",
		obs.StaleAccepted, obs.StaleWrites)
}

// errText renders a recorded error, "nil" when there was none.
func errText(s string) string {
	if s == "" {
		return "nil"
	}
	return s
}
