package main

import (
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/results"
)

// A run that measured nothing says what to change: --workers 100000 on
// two CPUs gave "0.0 acquisitions/s" and exit 1 with no hint.
func TestMeasuredNothingSaysWhatToChange(t *testing.T) {
	base := func(workers, resources int) *results.Summary {
		return &results.Summary{Machine: results.Machine{CPUs: 2, GOMAXPROCS: 2}, NodeTimeoutMs: 100,
			Config: results.RunConfig{Workers: workers, Resources: resources},
			Errors: map[string]int64{"no_quorum": 0, "timeout": 0, "other": 0, "release": 0}}
	}
	crowd := base(100000, 1000)
	crowd.Attempts, crowd.Errors["no_quorum"] = 5000, 4000
	contended := base(64, 2)
	contended.Attempts, contended.Contended = 900, 900
	slow := base(64, 1000)
	slow.Attempts, slow.Errors["timeout"] = 900, 900
	other := base(64, 1000)
	other.Attempts, other.Errors["other"] = 900, 900
	idle := base(100000, 1000)
	for _, c := range []struct {
		name string
		s    *results.Summary
		want []string
	}{
		{"100000 workers", crowd, []string{"most no_quorum (4000)", "100000 workers on 2 CPUs", "try --workers 2000 or fewer"}},
		{"no attempt", idle, []string{"no attempt in its measured window", "try --workers 2000 or fewer"}},
		{"2 resources", contended, []string{"all 900 were refused", "64 workers share 2 resources", "raise --resources or lower --workers"}},
		{"timeouts", slow, []string{"most timeout (900)", "silent past the node timeout (100 ms)", "raise --node-timeout"}},
	} {
		got := measuredNothing(c.s)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.name, got, w)
			}
		}
	}
	// Errors no flag explains (WRONGTYPE, ...) get no hint.
	if got := measuredNothing(other); strings.Contains(got, ";") {
		t.Errorf("other errors: %q", got)
	}
	if bench.WorkersPerCPU*2 != 2000 {
		t.Fatalf("WorkersPerCPU %d: the cases above assume 1000", bench.WorkersPerCPU)
	}
}
