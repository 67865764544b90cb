package scenario

import (
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/engine"
)

// failover and clock-jump against real servers. Each run is also judged
// again under the opposite expectation, which must fail: the observation
// itself, not the judge's reading of the options, carries the outcome.

func TestFailover(t *testing.T) {
	for _, c := range []struct {
		q              engine.QuarantinePolicy
		redlockOverlap bool
	}{
		{engine.QuarantineAlways, false},
		{engine.QuarantineObserved, false},
		{engine.QuarantineOff, true}, // the control: Redlock's path can show a double grant
	} {
		t.Run(c.q.String(), func(t *testing.T) {
			r := runShort(t, "failover", Options{Quarantine: c.q})
			if !r.Passed {
				t.Fatalf("verdict FAIL: %s", r.Observed)
			}
			obs := r.Figures.(failoverObs)
			if obs.Single.DoubleGrants == 0 || !obs.Single.Granted {
				t.Fatalf("single master with a replica: no double grant: %+v", obs.Single)
			}
			if got := obs.Redlock.DoubleGrants > 0; got != c.redlockOverlap {
				t.Fatalf("Redlock double grants = %d with quarantine %s: %s", obs.Redlock.DoubleGrants, c.q, r.Observed)
			}
			if want := obs.Single.DoubleGrants + obs.Redlock.DoubleGrants; r.Violations != want {
				t.Errorf("violations = %d, want %d", r.Violations, want)
			}
			// The same observation under the other expectation must fail.
			other := engine.QuarantineOff
			if c.q == engine.QuarantineOff {
				other = engine.QuarantineAlways
			}
			if passed, why := judgeFailover(obs, other); passed {
				t.Errorf("judged with quarantine %s, this run passed: %s", other, why)
			}
		})
	}
}

func TestClockJump(t *testing.T) {
	for _, fencing := range []bool{true, false} {
		name := map[bool]string{true: "fencing", false: "no-fencing"}[fencing]
		t.Run(name, func(t *testing.T) {
			r := runShort(t, "clock-jump", Options{Fencing: fencing})
			if !r.Passed {
				t.Fatalf("verdict FAIL: %s", r.Observed)
			}
			obs := r.Figures.(clockObs)
			if obs.DoubleGrants == 0 {
				t.Fatalf("no double grant: %s", r.Observed)
			}
			if !contains(obs.SecondNodes, clockJumped) {
				t.Errorf("the second client's quorum %v lacks the jumped master %d", obs.SecondNodes, clockJumped)
			}
			if obs.HolderErr != "" {
				t.Errorf("the holder's lease reported %q: by its own clock it is valid", obs.HolderErr)
			}
			wantAccepted := clockStaleWrites
			if fencing {
				wantAccepted = 0
				if want := "double grant reproduced; fencing rejected 3/3 stale writes"; !strings.Contains(r.Observed, want) {
					t.Errorf("observed %q lacks %q", r.Observed, want)
				}
			}
			if obs.StaleWrites != clockStaleWrites || obs.StaleAccepted != wantAccepted {
				t.Errorf("stale writes %d accepted %d, want %d accepted %d", obs.StaleWrites, obs.StaleAccepted, clockStaleWrites, wantAccepted)
			}
			if want := obs.DoubleGrants + obs.StaleAccepted; r.Violations != want {
				t.Errorf("violations = %d, want %d", r.Violations, want)
			}
			// Judged under the other fencing setting, this run must fail.
			flipped := obs
			flipped.Fencing = !fencing
			if passed, why := judgeClockJump(flipped); passed {
				t.Errorf("judged with fencing %v, this run passed: %s", !fencing, why)
			}
		})
	}
}

func failoverLost() failoverObs {
	return failoverObs{
		Single: failoverSingleObs{LinkUp: true, HolderOnMaster: true, MasterKilled: true, Promoted: true,
			LinksCut: 1, Granted: true, HolderLeftMs: 1900, DoubleGrants: 1, SecondAttempts: []string{"acquired"}},
		Redlock: failoverRedlockObs{Masters: 5, Quorum: 3, HolderNodes: []int{0, 1, 2}, FailedOver: true,
			probeObs: probeObs{HolderLeftAtProbeMs: 1500, DiscountedVotes: 3, AfterReleaseAcquired: true, AfterRelease: "acquired"}},
	}
}

func TestJudgeFailover(t *testing.T) {
	with := func(q engine.QuarantinePolicy, mut func(*failoverObs)) func() (bool, string) {
		o := failoverLost()
		if mut != nil {
			mut(&o)
		}
		return func() (bool, string) { return judgeFailover(o, q) }
	}
	redlockLost := func(o *failoverObs) {
		o.Redlock.DoubleGrants, o.Redlock.Granted, o.Redlock.DiscountedVotes = 1, true, 0
	}
	checkVerdicts(t, []verdict{
		{"single lost, Redlock kept", true, "refuses replicas", with(engine.QuarantineAlways, nil)},
		{"single kept: not reproduced", false, "not reproduced",
			with(engine.QuarantineAlways, func(o *failoverObs) { o.Single.DoubleGrants, o.Single.Granted = 0, false })},
		{"write reached the replica", false, "set-up failed",
			with(engine.QuarantineAlways, func(o *failoverObs) { o.Single.OnReplica = true })},
		{"Redlock lost too", false, "DOUBLE GRANT", with(engine.QuarantineAlways, redlockLost)},
		{"Redlock refused, not by the quarantine", false, "never seen discounted",
			with(engine.QuarantineObserved, func(o *failoverObs) { o.Redlock.DiscountedVotes = 0 })},
		{"Redlock holder on 4 masters", false, "set-up failed",
			with(engine.QuarantineAlways, func(o *failoverObs) { o.Redlock.HolderNodes = []int{0, 1, 2, 3} })},
		{"Redlock holder's quorum without the failed node", false, "set-up failed",
			with(engine.QuarantineAlways, func(o *failoverObs) { o.Redlock.HolderNodes = []int{1, 2, 3} })},
		{"Redlock lease ran out before the probe", false, "too short for this machine",
			with(engine.QuarantineAlways, func(o *failoverObs) { o.Redlock.HolderLeftAtProbeMs = 0 })},
		{"off, both lost", true, "lost it as well", with(engine.QuarantineOff, redlockLost)},
		{"off, Redlock kept: control not reproduced", false, "did not reproduce", with(engine.QuarantineOff, nil)},
	})
}

func clockReproduced(fencing bool) clockObs {
	o := clockObs{Fencing: fencing, Masters: 5, Quorum: 3, HolderNodes: []int{0, 1, 2}, JumpedNode: 2,
		KeysShortened: 1, KeyGone: true, Granted: true, SecondNodes: []int{2, 3, 4}, HolderLeftMs: 1900,
		DoubleGrants: 1, StaleWrites: 3, SecondWriteOK: true, Attempts: []string{"acquired"}}
	if fencing {
		o.HolderToken, o.SecondToken = 1, 2
	} else {
		o.StaleAccepted = 3
	}
	return o
}

func TestJudgeClockJump(t *testing.T) {
	with := func(fencing bool, mut func(*clockObs)) func() (bool, string) {
		o := clockReproduced(fencing)
		if mut != nil {
			mut(&o)
		}
		return func() (bool, string) { return judgeClockJump(o) }
	}
	checkVerdicts(t, []verdict{
		{"fencing rejects all", true, "fencing rejected 3/3 stale writes", with(true, nil)},
		{"fencing, one stale write accepted", false, "STALE WRITE", with(true, func(o *clockObs) { o.StaleAccepted = 1 })},
		{"fencing, tokens not increasing", false, "did not increase", with(true, func(o *clockObs) { o.SecondToken = 1 })},
		{"no fencing, all accepted", true, "accepted 3/3", with(false, nil)},
		{"no fencing, one rejected", false, "broken", with(false, func(o *clockObs) { o.StaleAccepted = 2 })},
		{"no double grant", false, "not reproduced", with(true, func(o *clockObs) { o.DoubleGrants, o.Granted = 0, false })},
		{"key not gone", false, "set-up failed", with(false, func(o *clockObs) { o.KeyGone = false })},
		{"jumped master outside the holder's quorum", false, "set-up failed", with(false, func(o *clockObs) { o.JumpedNode = 4 })},
	})
}
