package scenario

import (
	"testing"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// cluster-failover against real clusters: a double grant with the
// quarantine off (by policy, or with the per-shard quarantine alone
// turned off by the cluster-failover-trusted switch), none with it on.
// Each run is also judged under the opposite expectation, which must
// fail: the observation carries the outcome.
func TestClusterFailover(t *testing.T) {
	mutation.Require(t)
	for _, c := range []struct {
		name    string
		q       engine.QuarantinePolicy
		trusted bool
		double  bool
	}{
		{"always", engine.QuarantineAlways, false, false},
		{"off", engine.QuarantineOff, false, true},
		// The control: only the per-shard quarantine of a promoted
		// replica is undone, so the verdict must be a FAIL.
		{"always/cluster-failover-trusted", engine.QuarantineAlways, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer mutation.ClusterFailoverTrusted.Set(c.trusted)()
			r := runShort(t, "cluster-failover", Options{Quarantine: c.q})
			obs := r.Figures.(clusterFailoverObs)
			if got := obs.DoubleGrants > 0; got != c.double {
				t.Fatalf("double grants = %d, want any: %v: %s", obs.DoubleGrants, c.double, r.Observed)
			}
			if r.Violations != obs.DoubleGrants {
				t.Errorf("violations = %d, want %d", r.Violations, obs.DoubleGrants)
			}
			if obs.OnPromoted || !obs.OtherShardGranted {
				t.Errorf("key on the promoted replica %v, other shard granted %v", obs.OnPromoted, obs.OtherShardGranted)
			}
			if want := !c.trusted; r.Passed != want {
				t.Fatalf("passed = %v, want %v: %s", r.Passed, want, r.Observed)
			}
			if c.trusted {
				return
			}
			other := engine.QuarantineOff
			if c.q == engine.QuarantineOff {
				other = engine.QuarantineAlways
			}
			if passed, why := judgeClusterFailover(obs, other); passed {
				t.Errorf("judged with quarantine %s, this run passed: %s", other, why)
			}
		})
	}
}

func clusterFailoverHeld() clusterFailoverObs {
	return clusterFailoverObs{Clusters: 3, Shards: 2, Quorum: 2, HolderVotes: []int{0, 1}, HolderOnPrimary: true,
		PrimaryKilled: true, Promoted: true, LinksCut: 1, OtherShardGranted: true,
		probeObs: probeObs{HolderLeftAtProbeMs: 3500, DiscountedVotes: 3, AfterReleaseAcquired: true, AfterRelease: "acquired"}}
}

func TestJudgeClusterFailover(t *testing.T) {
	with := func(q engine.QuarantinePolicy, mut func(*clusterFailoverObs)) func() (bool, string) {
		o := clusterFailoverHeld()
		if mut != nil {
			mut(&o)
		}
		return func() (bool, string) { return judgeClusterFailover(o, q) }
	}
	lost := func(o *clusterFailoverObs) {
		o.DoubleGrants, o.Granted, o.DiscountedVotes, o.HolderLeftMs = 1, true, 0, 1500
	}
	checkVerdicts(t, []verdict{
		{"kept by the quarantine", true, "sat out", with(engine.QuarantineAlways, nil)},
		{"lost with the quarantine on", false, "DOUBLE GRANT", with(engine.QuarantineAlways, lost)},
		{"refused, not by the quarantine", false, "another cause",
			with(engine.QuarantineObserved, func(o *clusterFailoverObs) { o.DiscountedVotes = 0 })},
		{"not acquired after the release", false, "after the holder released",
			with(engine.QuarantineAlways, func(o *clusterFailoverObs) { o.AfterReleaseAcquired = false })},
		{"other shard refused", false, "did not keep",
			with(engine.QuarantineAlways, func(o *clusterFailoverObs) { o.OtherShardGranted = false })},
		{"write reached the replica", false, "set-up failed",
			with(engine.QuarantineAlways, func(o *clusterFailoverObs) { o.OnPromoted = true })},
		{"holder on every cluster", false, "set-up failed",
			with(engine.QuarantineAlways, func(o *clusterFailoverObs) { o.HolderVotes = []int{0, 1, 2} })},
		{"holder's quorum without the failed cluster", false, "set-up failed",
			with(engine.QuarantineAlways, func(o *clusterFailoverObs) { o.HolderVotes, o.HolderOnPrimary = []int{1, 2}, false })},
		{"lease ran out before the probe", false, "too short for this machine",
			with(engine.QuarantineOff, func(o *clusterFailoverObs) { lost(o); o.HolderLeftAtProbeMs = -90 })},
		{"off, lost", true, "voted at once", with(engine.QuarantineOff, lost)},
		{"off, kept: not reproduced", false, "not reproduced", with(engine.QuarantineOff, nil)},
	})
}
