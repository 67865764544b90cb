package results_test

import (
	"fmt"
	"time"

	"github.com/redlock-bench/redlock/results"
)

func ExampleStatsOf() {
	set := results.NewSet()
	for i := 1; i <= 100; i++ {
		set.Record(results.Acquire, time.Duration(i)*time.Millisecond)
	}
	st := results.StatsOf(set[results.Acquire])
	fmt.Println(st.Count, st.P50, st.P99, st.Max)
	// Output: 100 50015 99007 100031
}
