package scenario_test

import (
	"fmt"

	"github.com/redlock-bench/redlock/bench/scenario"
)

// `redlock-bench scenario list` prints this table; `redlock-bench scenario
// NAME` calls scenario.Run(ctx, NAME, options) and exits non-zero unless
// the Result passed.
func ExampleList() {
	for _, s := range scenario.List() {
		fmt.Println(s.Name, s.Options)
	}
	// Output:
	// restart-amnesia [Quarantine]
	// minority-down []
	// majority-down []
	// slow-node []
	// paused-holder [Fencing]
	// partition []
	// oom-node []
	// failover [Quarantine]
	// clock-jump [Fencing]
	// cluster-failover [Quarantine]
	// sentinel-failover [Quarantine]
}
