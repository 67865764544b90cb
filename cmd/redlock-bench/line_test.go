package main

import (
	"testing"

	"github.com/redlock-bench/redlock/results"
)

// run -q's line, which make bench shows for each run, says p50 and p99,
// the errors by kind and the violations, and marks a run that had errors
// or lost leases DEGRADED and one whose holders overlapped UNSAFE. Before,
// a run with 24 no-quorum errors read ", 24 errors" at best, and make
// bench showed throughput and safety only.
func TestQuietLineShowsADegradedRun(t *testing.T) {
	base := func() *results.Summary {
		return &results.Summary{Engine: "redlock", Mode: "try", Checked: true, AcquiredPerSec: 31234.5,
			AcquireLatencyUs: results.Stats{P50: 180, P99: 570},
			Errors:           map[string]int64{"no_quorum": 0, "timeout": 0, "other": 0, "release": 0}}
	}
	clean := base()
	degraded := base()
	degraded.Errors["no_quorum"], degraded.Errors["timeout"] = 20, 4
	lost := base()
	lost.LostLeases = 3
	unsafe := base()
	unsafe.Violations, unsafe.Errors["other"] = 2, 1
	stale := base()
	stale.StaleTokens = 1
	unchecked := base()
	unchecked.Checked = false
	interrupted := base()
	interrupted.Interrupted = true
	saturated := base()
	saturated.Errors["no_quorum"] = 20
	saturated.Machine = results.Machine{CPUs: 2, GOMAXPROCS: 2}
	saturated.CPU = results.NewCPU(results.CPUReading{WindowS: 10, ClientS: 19, HostBusy: 0.98}, 1000, saturated.Machine)
	for _, c := range []struct {
		s    *results.Summary
		want string
	}{
		{clean, "redlock: 31234.5 acquisitions/s, p50=0.18 ms p99=0.57 ms, 0 errors, 0 violations"},
		{degraded, "redlock: 31234.5 acquisitions/s, p50=0.18 ms p99=0.57 ms, 24 errors (no_quorum 20, timeout 4), 0 violations: DEGRADED"},
		{lost, "redlock: 31234.5 acquisitions/s, p50=0.18 ms p99=0.57 ms, 0 errors, 3 leases lost, 0 violations: DEGRADED"},
		{unsafe, "redlock: 31234.5 acquisitions/s, p50=0.18 ms p99=0.57 ms, 1 errors (other 1), 2 VIOLATIONS: UNSAFE"},
		{stale, "redlock: 31234.5 acquisitions/s, p50=0.18 ms p99=0.57 ms, 0 errors, 0 violations, 1 STALE TOKENS: UNSAFE"},
		{unchecked, "redlock: 31234.5 acquisitions/s, p50=0.18 ms p99=0.57 ms, 0 errors, safety unchecked (--check=false)"},
		{interrupted, "redlock: 31234.5 acquisitions/s, p50=0.18 ms p99=0.57 ms, 0 errors, 0 violations (interrupted)"},
		{saturated, "redlock: 31234.5 acquisitions/s, p50=0.18 ms p99=0.57 ms, 20 errors (no_quorum 20), 0 violations: DEGRADED, " +
			"CPU-saturated: host, client (client 1.90 CPUs, host 98% of 2 CPUs)"},
	} {
		if got := quietLine(c.s); got != c.want {
			t.Errorf("\n got %q\nwant %q", got, c.want)
		}
	}
}
