package scenario

import (
	"context"
	"fmt"
	"time"
)

// slow-node: one master's replies are delayed by 50 ms on the wire (a
// toxiproxy latency toxic). Because an acquire returns as soon as a quorum
// said yes, the four fast masters decide it and the slow one's reply is
// handled late; the acquire's latency should not move.
//
// The fast and slow conditions alternate in short chunks inside one run,
// as DESIGN asks of comparisons on small noisy machines, and a control
// phase with three slow masters (a quorum then needs a slow one) shows
// that the delay is really applied: without it, "no change" would prove
// nothing.

const (
	slowMasters = 5
	slowNode    = 0
	slowAdded   = 50 * time.Millisecond
	slowWorkers = 2
	// slowResources: little contention, so that latency is the masters'.
	slowResources = 1024
	// slowTolerance is how far the slow condition's p99 may be above the
	// all-fast p99: "within a few ms".
	slowTolerance = 5 * time.Millisecond
)

// slowPace is the chunk length and the number of fast/slow pairs.
func slowPace(short bool) (chunk time.Duration, pairs int, control time.Duration) {
	if short {
		return 250 * time.Millisecond, 2, 300 * time.Millisecond
	}
	return 500 * time.Millisecond, 6, time.Second
}

func expectSlowNode(o Options) string {
	return fmt.Sprintf("With master %d's replies %s late, an acquire still returns when the 3 fastest of 5 masters agree: "+
		"its p99 stays within %s of the p99 with every master fast (the fast masters' round trip). In the control "+
		"phase, with 3 masters slow, the median acquire takes at least %s, which shows the delay is really applied.",
		slowNode, slowAdded, slowTolerance, slowAdded*8/10)
}

// slowObs is what slow-node observed; it is also its figures.
type slowObs struct {
	SlowNode      int     `json:"slow_node"`
	AddedMs       float64 `json:"added_ms"`
	NodeTimeoutMs float64 `json:"node_timeout_ms"`
	Workers       int     `json:"workers"`
	ChunkMs       float64 `json:"chunk_ms"`
	Pairs         int     `json:"pairs"`
	// Phases: warm-up (not judged), fast, slow (alternating chunks
	// merged), control (masters 0-2 slow).
	Phases      []PhaseStats `json:"phases"`
	P50DeltaMs  float64      `json:"p50_delta_ms"`
	P99DeltaMs  float64      `json:"p99_delta_ms"`
	ToleranceMs float64      `json:"tolerance_ms"`
	Violations  int          `json:"violations"`
	Overlaps    []Overlap    `json:"overlaps,omitempty"`
}

func runSlowNode(ctx context.Context, e *env) (outcome, error) {
	chunk, pairs, control := slowPace(e.o.Short)
	obs := slowObs{SlowNode: slowNode, AddedMs: ms(slowAdded), Workers: slowWorkers,
		ChunkMs: ms(chunk), Pairs: pairs, ToleranceMs: ms(slowTolerance)}
	fail := func(err error) (outcome, error) { return outcome{figures: obs}, err }

	cluster, err := e.masters(ctx, slowMasters)
	if err != nil {
		return fail(err)
	}
	defer cluster.Stop()
	px, err := e.proxies(ctx, cluster.Addrs())
	if err != nil {
		return fail(err)
	}
	// Deferred in reverse: the locker closes first, then the proxies,
	// with the delays lifted before either (see fault.Proxies).
	defer px.Close()
	// The engine's default TTL and node timeout (100 ms), which the 50 ms
	// delay stays under: the slow master's votes still count, and only the
	// early return is measured.
	l, err := e.locker(ctx, px.Addrs(), nil)
	if err != nil {
		return fail(err)
	}
	defer l.Close()
	defer func() {
		for i := range slowMasters {
			px.Slow(i, 0)
		}
	}()
	obs.NodeTimeoutMs = ms(l.Config().NodeTimeout)

	or := newOracle(e.start)
	ld := startLoad(ctx, l, or, slowWorkers, slowResources, false, "scenario:slow-node:", "warm-up")
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			obs.Phases = ld.stop()
		}
	}
	defer stop()
	e.step("load started: %d workers through the proxies, node timeout %.0f ms", slowWorkers, obs.NodeTimeoutMs)
	if err := sleep(ctx, chunk); err != nil {
		return fail(err)
	}
	for i := range pairs {
		// Alternate which condition goes first, so that neither always
		// follows the other.
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, slow := range order {
			d, name := time.Duration(0), "fast"
			if slow {
				d, name = slowAdded, "slow"
			}
			if err := px.Slow(slowNode, d); err != nil {
				return fail(err)
			}
			ld.next(name)
			if err := sleep(ctx, chunk); err != nil {
				return fail(err)
			}
		}
	}
	e.step("%d pairs of %s chunks done, master %d alternately %s slower", pairs, chunk, slowNode, slowAdded)
	for i := range 3 {
		if err := px.Slow(i, slowAdded); err != nil {
			return fail(err)
		}
	}
	ld.next("control")
	e.step("control: masters 0-2 all %s slower", slowAdded)
	if err := sleep(ctx, control); err != nil {
		return fail(err)
	}
	stop()
	e.step("load stopped")
	obs.Violations, obs.Overlaps = or.result()
	fast, _ := phase(obs.Phases, "fast")
	slow, _ := phase(obs.Phases, "slow")
	obs.P50DeltaMs = float64(slow.Acquire.P50Us-fast.Acquire.P50Us) / 1e3
	obs.P99DeltaMs = float64(slow.Acquire.P99Us-fast.Acquire.P99Us) / 1e3

	passed, why := judgeSlowNode(obs)
	return outcome{figures: obs, passed: passed, observed: why, violations: obs.Violations}, nil
}

// judgeSlowNode decides slow-node: the slow master costs the acquire
// nothing worth mentioning, and the control shows it was slow.
func judgeSlowNode(obs slowObs) (bool, string) {
	fast, _ := phase(obs.Phases, "fast")
	slow, _ := phase(obs.Phases, "slow")
	control, _ := phase(obs.Phases, "control")
	delta := float64(slow.Acquire.P99Us-fast.Acquire.P99Us) / 1e3
	switch {
	case obs.Violations > 0:
		return false, fmt.Sprintf("the oracle saw %d overlapping hold(s)", obs.Violations)
	case fast.Acquired == 0 || slow.Acquired == 0:
		return false, fmt.Sprintf("set-up failed: %d acquires with every master fast, %d with one slow", fast.Acquired, slow.Acquired)
	case control.Acquired == 0:
		return false, "the control phase acquired nothing"
	case float64(control.Acquire.P50Us)/1e3 < 0.8*obs.AddedMs:
		return false, fmt.Sprintf("the control's median acquire took %.1f ms with 3 masters %.0f ms slower: the delay was not applied, so this run proves nothing",
			float64(control.Acquire.P50Us)/1e3, obs.AddedMs)
	case delta > obs.ToleranceMs:
		return false, fmt.Sprintf("one slow master raised the acquire p99 by %.2f ms (%d µs → %d µs), more than %.0f ms: the quorum did not return early",
			delta, fast.Acquire.P99Us, slow.Acquire.P99Us, obs.ToleranceMs)
	}
	return true, fmt.Sprintf("With master %d %.0f ms slower, acquire p50/p99 were %d/%d µs against %d/%d µs with every master fast "+
		"(p99 %+.2f ms, within %.0f ms): the quorum returned without it. Control, 3 masters slow: p50 %.1f ms.",
		obs.SlowNode, obs.AddedMs, slow.Acquire.P50Us, slow.Acquire.P99Us, fast.Acquire.P50Us, fast.Acquire.P99Us,
		delta, obs.ToleranceMs, float64(control.Acquire.P50Us)/1e3)
}
