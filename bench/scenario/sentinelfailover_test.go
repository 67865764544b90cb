package scenario

import (
	"testing"

	"github.com/redlock-bench/redlock/engine"
)

// sentinel-failover against real sentinels: a double grant with the
// quarantine off, none with it on. Each run is also judged under the
// opposite expectation, which must fail: the observation carries the
// outcome.
func TestSentinelFailover(t *testing.T) {
	for _, c := range []struct {
		q      engine.QuarantinePolicy
		double bool
	}{
		{engine.QuarantineAlways, false},
		{engine.QuarantineObserved, false},
		{engine.QuarantineOff, true}, // the control: the run can show a double grant
	} {
		t.Run(c.q.String(), func(t *testing.T) {
			r := runShort(t, "sentinel-failover", Options{Quarantine: c.q})
			obs := r.Figures.(sentinelFailoverObs)
			if !r.Passed {
				t.Fatalf("verdict FAIL: %s", r.Observed)
			}
			if got := obs.DoubleGrants > 0; got != c.double {
				t.Fatalf("double grants = %d with quarantine %s: %s", obs.DoubleGrants, c.q, r.Observed)
			}
			if r.Violations != obs.DoubleGrants {
				t.Errorf("violations = %d, want %d", r.Violations, obs.DoubleGrants)
			}
			if obs.OnPromoted || !obs.Followed || obs.Promoted == obs.OldMaster {
				t.Errorf("key on the promoted master %v, followed %v, promoted %s (old %s)", obs.OnPromoted, obs.Followed, obs.Promoted, obs.OldMaster)
			}
			if !c.double && (obs.VoteState != string(engine.StateQuarantined) || obs.VoteRestarts != 1) {
				t.Errorf("the second client's Sentinel vote: %s after %d run_id change(s), want quarantined after 1", obs.VoteState, obs.VoteRestarts)
			}
			other := engine.QuarantineOff
			if c.q == engine.QuarantineOff {
				other = engine.QuarantineAlways
			}
			if passed, why := judgeSentinelFailover(obs, other); passed {
				t.Errorf("judged with quarantine %s, this run passed: %s", other, why)
			}
		})
	}
}

func sentinelFailoverHeld() sentinelFailoverObs {
	return sentinelFailoverObs{Votes: 3, Quorum: 2, HolderVotes: []int{0, 2}, HolderOnMaster: true, MasterKilled: true,
		OldMaster: "127.0.0.1:7000", Promoted: "127.0.0.1:7001", LinksCut: 1, Followed: true, VoteState: "quarantined", VoteRestarts: 1,
		probeObs: probeObs{DiscountedVotes: 3, AfterReleaseAcquired: true, AfterRelease: "acquired"}}
}

func TestJudgeSentinelFailover(t *testing.T) {
	with := func(q engine.QuarantinePolicy, mut func(*sentinelFailoverObs)) func() (bool, string) {
		o := sentinelFailoverHeld()
		if mut != nil {
			mut(&o)
		}
		return func() (bool, string) { return judgeSentinelFailover(o, q) }
	}
	lost := func(o *sentinelFailoverObs) {
		o.DoubleGrants, o.Granted, o.DiscountedVotes, o.HolderLeftMs = 1, true, 0, 5000
	}
	checkVerdicts(t, []verdict{
		{"kept by the quarantine", true, "kept the vote out", with(engine.QuarantineAlways, nil)},
		{"lost with the quarantine on", false, "DOUBLE GRANT", with(engine.QuarantineAlways, lost)},
		{"granted, oracle missed it", false, "oracle missed",
			with(engine.QuarantineObserved, func(o *sentinelFailoverObs) { o.Granted = true })},
		{"refused, not by the quarantine", false, "another cause",
			with(engine.QuarantineObserved, func(o *sentinelFailoverObs) { o.DiscountedVotes = 0 })},
		{"not acquired after the release", false, "after the holder released",
			with(engine.QuarantineAlways, func(o *sentinelFailoverObs) { o.AfterReleaseAcquired = false })},
		{"write reached the replica", false, "set-up failed",
			with(engine.QuarantineAlways, func(o *sentinelFailoverObs) { o.OnPromoted = true })},
		{"the sentinels kept the old master", false, "set-up failed",
			with(engine.QuarantineAlways, func(o *sentinelFailoverObs) { o.Promoted = o.OldMaster })},
		{"the second client never followed", false, "did not follow",
			with(engine.QuarantineOff, func(o *sentinelFailoverObs) { lost(o); o.Followed = false })},
		{"holder on every vote", false, "set-up failed",
			with(engine.QuarantineAlways, func(o *sentinelFailoverObs) { o.HolderVotes = []int{0, 1, 2} })},
		{"holder's quorum without the Sentinel vote", false, "set-up failed",
			with(engine.QuarantineAlways, func(o *sentinelFailoverObs) { o.HolderVotes, o.HolderOnMaster = []int{0, 1}, false })},
		{"off, lost", true, "voted at once", with(engine.QuarantineOff, lost)},
		{"off, kept: not reproduced", false, "not reproduced", with(engine.QuarantineOff, nil)},
	})
}
