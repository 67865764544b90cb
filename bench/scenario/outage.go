package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// minority-down and majority-down kill masters under a closed-loop load and
// bring them back, with the per-phase figures of the load.
//
// Both use QuarantineObserved and a short TTL: the killed masters come back
// empty, with a new run_id, and the lockers keep them out of the vote for
// one TTL (MaxTTL). That is the safe behaviour, and part of what "after"
// and "recovery" measure; a short TTL keeps it to a second or two.

const (
	outageMasters   = 5
	outageWorkers   = 4
	outageResources = 256
)

// outagePlan is the pace of an outage scenario.
type outagePlan struct {
	ttl                   time.Duration
	before, during, after time.Duration
	// rejoinWait bounds the wait for restarted masters to be back in the
	// vote (or, for majority-down, for the first acquire): their
	// quarantine (one TTL) plus a reconnect.
	rejoinWait time.Duration
}

func outagePace(short bool) outagePlan {
	if short {
		return outagePlan{ttl: time.Second, before: 300 * time.Millisecond, during: 600 * time.Millisecond,
			after: 300 * time.Millisecond, rejoinWait: 4 * time.Second}
	}
	return outagePlan{ttl: 2 * time.Second, before: 3 * time.Second, during: 3 * time.Second,
		after: 3 * time.Second, rejoinWait: 8 * time.Second}
}

// Thresholds of minority-down's verdict.
const (
	// minorityMinRate: the outage may cost throughput (each acquire now
	// needs all three masters left), but not most of it. Generous, for
	// noisy two-core hosts.
	minorityMinRate = 0.3
	// minorityMaxNoQuorum is the share of attempts during the outage that
	// may fail for lack of quorum: three masters left, each must answer
	// within the node timeout, and on a loaded host one sometimes doesn't.
	minorityMaxNoQuorum = 0.01
)

func expectMinorityDown(o Options) string {
	p := outagePace(o.Short)
	return fmt.Sprintf("With 2 of 5 masters killed, the 3 left are still a quorum: locking goes on at no less than %.0f%% of "+
		"the rate before, with at most %.0f%% of attempts failing for lack of quorum. After the 2 restart (empty), they "+
		"stay out of the vote for their quarantine (MaxTTL %s), then rejoin, and locking goes on on all 5. The oracle "+
		"sees no overlapping holds throughout.", minorityMinRate*100, minorityMaxNoQuorum*100, p.ttl)
}

// outageObs is what minority-down and majority-down observed; it is also
// their figures.
type outageObs struct {
	TTLMs         int64   `json:"ttl_ms"`
	NodeTimeoutMs float64 `json:"node_timeout_ms"`
	Workers       int     `json:"workers"`
	Resources     int     `json:"resources"`
	Killed        []int   `json:"killed"`
	// Phases: before, outage, recovering (restarted, in quarantine),
	// after (every master back in the vote, or locking recovered).
	Phases []PhaseStats `json:"phases"`
	// KillMs and RestartMs are when the masters were killed and when the
	// last of them answered again, in ms since the load began.
	KillMs    float64 `json:"kill_ms"`
	RestartMs float64 `json:"restart_ms"`
	// Rejoined: every master was back in the vote (state up) within the
	// wait; RejoinMs is how long after the restart (minority-down).
	Rejoined bool    `json:"rejoined"`
	RejoinMs float64 `json:"rejoin_ms,omitempty"`
	// Recovered: an acquire that started after the restart succeeded;
	// RecoveryMs is from the restart to its return, UnavailableMs from the
	// kill (majority-down).
	Recovered     bool    `json:"recovered"`
	RecoveryMs    float64 `json:"recovery_ms,omitempty"`
	UnavailableMs float64 `json:"unavailable_ms,omitempty"`
	// FailFastBoundMs is the longest a failed attempt may take: the node
	// timeout plus scheduling slack (majority-down), beyond HostLagMs.
	FailFastBoundMs float64 `json:"fail_fast_bound_ms,omitempty"`
	// HostLagMs is the host's worst lag from the kill to the end of the
	// recovery (lagProbe: a PING to a master left up and a timer): how
	// much longer than the bound a failed attempt may take for no fault
	// of the engine's (majority-down).
	HostLagMs float64 `json:"host_lag_ms"`
	// Nodes are the masters as the locker saw them at the end.
	Nodes      []engine.NodeStatus `json:"nodes"`
	Violations int                 `json:"violations"`
	Overlaps   []Overlap           `json:"overlaps,omitempty"`
}

// outageRun is the shared script: load, kill, wait, restart, wait for the
// rejoin (or recovery), measure after.
func outageRun(ctx context.Context, e *env, killed []int, waitAll, disjoint bool) (outageObs, error) {
	p := outagePace(e.o.Short)
	obs := outageObs{TTLMs: p.ttl.Milliseconds(), Workers: outageWorkers, Resources: outageResources, Killed: killed}
	cluster, err := e.masters(ctx, outageMasters)
	if err != nil {
		return obs, err
	}
	defer cluster.Stop()
	l, err := e.locker(ctx, cluster.Addrs(), func(c *engine.Config) { c.TTL = p.ttl })
	if err != nil {
		return obs, err
	}
	defer l.Close()
	obs.NodeTimeoutMs = ms(l.Config().NodeTimeout)
	or := newOracle(e.start)
	ld := startLoad(ctx, l, or, outageWorkers, outageResources, disjoint, "scenario:"+e.name+":", "before")
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			obs.Phases = ld.stop()
		}
	}
	defer stop()
	e.step("load started: %d workers, TryLock+Release on %d resources, TTL %s", outageWorkers, outageResources, p.ttl)
	if err := sleep(ctx, p.before); err != nil {
		return obs, err
	}

	var lag *lagProbe
	if !waitAll {
		// Through the phases whose failed attempts majority-down bounds,
		// on a master it does not kill.
		lag = startLagProbe(cluster.Addrs()[outageMasters-1])
		defer func() {
			if lag != nil {
				lag.end()
			}
		}()
	}
	for _, i := range killed {
		if err := cluster.Nodes[i].Kill(); err != nil {
			return obs, err
		}
	}
	ld.next("outage")
	obs.KillMs = ms(time.Since(ld.begin))
	e.step("killed masters %v", killed)
	if err := sleep(ctx, p.during); err != nil {
		return obs, err
	}

	// The outage ends as the restarts begin: an acquire granted once a
	// master is back belongs to the recovery.
	ld.next("recovering")
	for _, i := range killed {
		if err := cluster.Nodes[i].Restart(ctx); err != nil {
			return obs, fmt.Errorf("restart master %d: %w", i, err)
		}
	}
	restarted := time.Now()
	// Nothing can be acquired during a majority outage, so any success
	// counted from here on is the recovery. (The exact time comes from the
	// samples afterwards; this only tells the driver when to move on.)
	acquiredAtRestart := ld.acquired.Load()
	obs.RestartMs = ms(restarted.Sub(ld.begin))
	e.step("restarted masters %v (empty: no persistence)", killed)

	deadline := time.Now().Add(p.rejoinWait)
	for time.Now().Before(deadline) {
		if waitAll && allUp(l.Nodes()) {
			obs.Rejoined, obs.RejoinMs = true, ms(time.Since(restarted))
			e.step("every master back in the vote, %.0f ms after the restart", obs.RejoinMs)
			break
		}
		if !waitAll && ld.acquired.Load() > acquiredAtRestart {
			break
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return obs, err
		}
	}
	ld.next("after")
	if lag != nil {
		obs.HostLagMs = ms(lag.end())
		lag = nil
	}
	if err := sleep(ctx, p.after); err != nil {
		return obs, err
	}
	stop()
	obs.Nodes = l.Nodes()
	obs.Violations, obs.Overlaps = or.result()
	e.step("load stopped")

	if waitAll {
		return obs, nil // minority-down: locking never stopped, nothing to recover
	}
	if r, ok := phase(obs.Phases, "recovering"); ok && r.FirstAcquiredMs >= 0 {
		obs.Recovered = true
		obs.RecoveryMs = round3(r.FirstAcquiredMs - obs.RestartMs)
		obs.UnavailableMs = round3(r.FirstAcquiredMs - obs.KillMs)
	} else if a, ok := phase(obs.Phases, "after"); ok && a.FirstAcquiredMs >= 0 {
		obs.Recovered = true
		obs.RecoveryMs = round3(a.FirstAcquiredMs - obs.RestartMs)
		obs.UnavailableMs = round3(a.FirstAcquiredMs - obs.KillMs)
	}
	return obs, nil
}

func allUp(ns []engine.NodeStatus) bool {
	for _, n := range ns {
		if n.State != engine.StateUp {
			return false
		}
	}
	return true
}

func runMinorityDown(ctx context.Context, e *env) (outcome, error) {
	obs, err := outageRun(ctx, e, []int{3, 4}, true, false)
	if err != nil {
		return outcome{figures: obs}, err
	}
	passed, why := judgeMinorityDown(obs)
	return outcome{figures: obs, passed: passed, observed: why, violations: obs.Violations}, nil
}

// judgeMinorityDown decides minority-down: locking goes on through the
// outage and after it, and never excludes badly.
func judgeMinorityDown(obs outageObs) (bool, string) {
	before, _ := phase(obs.Phases, "before")
	during, _ := phase(obs.Phases, "outage")
	after, _ := phase(obs.Phases, "after")
	switch {
	case obs.Violations > 0:
		return false, fmt.Sprintf("the oracle saw %d overlapping hold(s)", obs.Violations)
	case before.Acquired == 0:
		return false, "set-up failed: nothing was acquired before the outage"
	case during.Attempts == 0 || during.Acquired == 0:
		return false, fmt.Sprintf("locking stopped with 2 of 5 masters down: %d attempts, none acquired (%d no quorum, %d not acquired, %d other errors)",
			during.Attempts, during.NoQuorum, during.NotAcquired, during.Other)
	case float64(during.NoQuorum) > minorityMaxNoQuorum*float64(during.Attempts):
		return false, fmt.Sprintf("%d of %d attempts during the outage failed for lack of quorum, more than %.0f%%",
			during.NoQuorum, during.Attempts, minorityMaxNoQuorum*100)
	case during.AcquiredPerS < minorityMinRate*before.AcquiredPerS:
		return false, fmt.Sprintf("throughput fell from %.0f/s to %.0f/s during the outage, below %.0f%% of before",
			before.AcquiredPerS, during.AcquiredPerS, minorityMinRate*100)
	case !obs.Rejoined:
		return false, "the restarted masters did not rejoin the vote within the wait"
	case after.Acquired == 0:
		return false, "nothing was acquired after the masters rejoined"
	}
	return true, fmt.Sprintf("Locking went on with 2 of 5 masters down: %.0f acquires/s before, %.0f/s during (p99 %d µs → %d µs), "+
		"%d of %d attempts without quorum. The restarted masters rejoined the vote %.0f ms after their restart; %.0f/s after (p99 %d µs). "+
		"No overlapping holds.",
		before.AcquiredPerS, during.AcquiredPerS, before.Acquire.P99Us, during.Acquire.P99Us,
		during.NoQuorum, during.Attempts, obs.RejoinMs, after.AcquiredPerS, after.Acquire.P99Us)
}

// majoritySlack is the scheduling slack allowed on top of the node timeout
// before a failed attempt counts as hanging. A hang waits for a dial or a
// connection timeout (multiplex.DefaultDialTimeout, 2 s, or longer); a
// two-core host running other work adds hundreds of milliseconds to a
// round (310 ms beside two CPU-bound processes and other tests), so the
// slack sits at half the shortest hang, and the host's lag measured in
// the run (lagProbe) is allowed on top: 1.8 s was seen beside two
// CPU-bound processes at a lower priority.
const majoritySlack = time.Second

func expectMajorityDown(o Options) string {
	p := outagePace(o.Short)
	return fmt.Sprintf("With 3 of 5 masters killed no quorum is possible: every attempt fails with ErrNoQuorum (never "+
		"ErrNotAcquired, never a success), and none takes longer than the node timeout plus %s (beyond how late this host "+
		"made a PING to a master left up and a timer meanwhile). After the 3 restart "+
		"(empty), locking recovers once their quarantine (MaxTTL %s) is over, within %s of the restart. The "+
		"unavailable window, from the kill to the first acquire, is measured.",
		majoritySlack, p.ttl, p.rejoinWait)
}

func runMajorityDown(ctx context.Context, e *env) (outcome, error) {
	// Disjoint resources: with shared ones, a master may refuse because
	// another worker's failed attempt left its key there a moment before it
	// was undone, and the engine reports such a mixed tally (refusals and
	// failures, quorum out of reach) as ErrNotAcquired, a split vote. That
	// is a question about contention; this scenario asks about the outage
	// alone, where every master that answers is free.
	obs, err := outageRun(ctx, e, []int{0, 1, 2}, false, true)
	if err != nil {
		return outcome{figures: obs}, err
	}
	obs.FailFastBoundMs = obs.NodeTimeoutMs + ms(majoritySlack)
	passed, why := judgeMajorityDown(obs, outagePace(e.o.Short).rejoinWait)
	return outcome{figures: obs, passed: passed, observed: why, violations: obs.Violations}, nil
}

// judgeMajorityDown decides majority-down: fast ErrNoQuorum failures while
// no quorum exists, and recovery once the masters are back.
func judgeMajorityDown(obs outageObs, recoverWithin time.Duration) (bool, string) {
	before, _ := phase(obs.Phases, "before")
	during, _ := phase(obs.Phases, "outage")
	recovering, _ := phase(obs.Phases, "recovering")
	slowest := max(during.Failed.MaxUs, recovering.Failed.MaxUs)
	switch {
	case obs.Violations > 0:
		return false, fmt.Sprintf("the oracle saw %d overlapping hold(s)", obs.Violations)
	case before.Acquired == 0:
		return false, "set-up failed: nothing was acquired before the outage"
	case during.Attempts == 0:
		return false, "no attempt was made during the outage"
	case during.Acquired > during.AcquiredLater:
		// Those that returned after the restarts began may have been
		// granted by the masters back.
		return false, fmt.Sprintf("%d acquire(s) succeeded with 3 of 5 masters down", during.Acquired-during.AcquiredLater)
	case during.NotAcquired > 0 || during.Other > 0:
		return false, fmt.Sprintf("the outage was misreported: of %d failed attempts, %d said ErrNotAcquired (contention) and %d another error, instead of ErrNoQuorum",
			during.Attempts, during.NotAcquired, during.Other)
	case float64(slowest)/1e3 > obs.FailFastBoundMs+max(0, obs.HostLagMs):
		return false, fmt.Sprintf("an attempt hung: the slowest failure took %.1f ms, more than the node timeout plus slack (%.0f ms) and the host's lag (%.1f ms)",
			float64(slowest)/1e3, obs.FailFastBoundMs, obs.HostLagMs)
	case !obs.Recovered:
		return false, "locking did not recover after the masters came back"
	case obs.RecoveryMs > ms(recoverWithin):
		return false, fmt.Sprintf("locking took %.0f ms to recover after the restart, more than %s", obs.RecoveryMs, recoverWithin)
	}
	return true, fmt.Sprintf("All %d attempts during the outage failed with ErrNoQuorum, none with ErrNotAcquired; the slowest took %.1f ms "+
		"(p99 %d µs, bound %.0f ms, the host's lag %.1f ms). Locking recovered %.0f ms after the restart (quarantine of the restarted masters "+
		"included); it was unavailable for %.0f ms in all.",
		during.Attempts, float64(slowest)/1e3, during.Failed.P99Us, obs.FailFastBoundMs, obs.HostLagMs, obs.RecoveryMs, obs.UnavailableMs)
}
