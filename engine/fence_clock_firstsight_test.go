package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// A master that New could not reach is first measured when the
// reconnect loop reaches it, so New's clock check never saw it; its
// judgement against the others' clocks (read again, within a node
// timeout) runs in the background. Until then it must not vote with a
// clock provably far off: a token taken from a clock 2 MaxTTL ahead is
// raised onto the counters of its quorum, and once those masters
// restart (the quarantine admits a rolling restart) their clocks alone,
// MaxTTL later, stand below it.
//
// Here master 2, up for an hour (so QuarantineAlways trusts it on first
// sight), is cut off while New runs, its clock 2 MaxTTL ahead. Master 1
// answers 40 ms after a command (within the 50 ms node timeout), so the
// background judgement, which waits for every other master's clock,
// takes that long; a TryLock made the moment master 2 joins reaches a
// quorum with masters 0 and 2 in well under a millisecond. Then masters
// 0 and 1 restart empty, sit out their quarantine, and a second TryLock
// is fenced by their clocks alone: its token must still be above the
// first.
func TestFirstSeenMasterWithAFarClockDoesNotVoteWhileJudged(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		if t1, t2 := tokensAroundAFarFirstSight(t, e); t2 <= t1 {
			t.Fatalf("token %d after %d: the first came from master 2's clock, %s ahead, counted before it was judged", t2, t1, 2*firstSightMaxTTL)
		}
	})
}

// The control: judged only in the background (clock-judged-late), master
// 2 votes with its far clock in the first TryLock, and the second token
// is smaller. The first TryLock is scheduled well inside the judgement's
// 40 ms, so it cannot miss.
func TestFirstSeenMasterWithAFarClockControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.ClockJudgedLate.Set(true)()
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		t1, t2 := tokensAroundAFarFirstSight(t, e)
		if t2 > t1 {
			t.Fatalf("with %s on, token %d after %d: the test cannot catch it", mutation.ClockJudgedLate.Name(), t2, t1)
		}
		t.Logf("caught: token %d after %d", t2, t1)
	})
}

const firstSightMaxTTL = 2 * time.Second

// tokensAroundAFarFirstSight runs the schedule above and returns the two
// tokens.
func tokensAroundAFarFirstSight(t *testing.T, e *env) (t1, t2 int64) {
	const maxTTL = firstSightMaxTTL
	ctx := context.Background()
	e.sim[2].JumpClock(2 * maxTTL)
	e.sim[2].Partition(simredis.Refuse)
	e.sim[1].SetLatency(simredis.Latency{Min: 20 * time.Millisecond})
	l := e.locker(func(c *engine.Config) {
		c.Fencing, c.TTL, c.MaxTTL = true, maxTTL, maxTTL
		c.Quarantine = engine.QuarantineAlways
	})
	if st := l.Nodes()[2]; st.State != engine.StateDown {
		t.Fatalf("master 2 while cut off: %+v, want down", st)
	}
	e.sim[2].Partition(simredis.Connected)
	// The reconnect loop dials it every 500 ms: until its client is
	// up (its state then reads up, or clock-skewed once judged).
	for l.Nodes()[2].State == engine.StateDown {
		time.Sleep(time.Millisecond)
	}
	first, err := l.TryLock(ctx, "firstsight")
	if err != nil {
		t.Fatalf("TryLock as master 2 joins: %v", err)
	}
	t1 = first.Token()
	first.Release(ctx)
	for l.Nodes()[2].State != engine.StateClockSkewed {
		time.Sleep(time.Millisecond)
	}
	e.restart(0)
	e.restart(1)
	// Each restart is seen on its next connection, and sits out
	// MaxTTL from then.
	time.Sleep(maxTTL / 2)
	// A command to each makes the pool dial them again.
	if le, err := l.TryLock(ctx, "probe"); err == nil {
		le.Release(ctx)
	}
	deadline := time.Now().Add(3 * maxTTL)
	for {
		sts := l.Nodes()
		if sts[0].State == engine.StateUp && sts[1].State == engine.StateUp && sts[0].Restarts == 1 && sts[1].Restarts == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("masters 0 and 1 not back from their quarantine: %+v", sts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	second, err := l.TryLock(ctx, "firstsight")
	if err != nil {
		t.Fatalf("TryLock after masters 0 and 1 restarted: %v", err)
	}
	second.Release(ctx)
	return t1, second.Token()
}
