package bench

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/results"
)

// The bench's memory must not grow with workers × histograms: `run
// --workers 10000` has to stay under 1 GiB RSS. A full histogram set is
// about a megabyte, so one per worker would be 10 GB. These tests pin the
// design that prevents it: workers share a bounded number of shards (a
// couple per CPU, at most 64), and what a worker owns is a fixed-size
// buffer of records. They count allocations, not time, so they hold on any
// machine.

// allocated returns the bytes f allocates; what f returns is kept alive
// until the count is taken.
func allocated(f func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := f()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return after.TotalAlloc - before.TotalAlloc
}

func TestRecorderHistogramsDoNotGrowWithWorkers(t *testing.T) {
	// A set of histograms per shard, plus the spare, the last interval and
	// the totals.
	sets := func(r *recorder) int { return len(r.shards) + 3 }
	few, many := newRecorder(shardCount(256), 256), newRecorder(shardCount(10000), 10000)
	if sets(few) != sets(many) {
		t.Errorf("histogram sets: %d for 256 workers, %d for 10000", sets(few), sets(many))
	}
	if n := shardCount(1 << 20); n > 64 {
		t.Errorf("a million workers get %d shards, want at most 64", n)
	}

	setBytes := allocated(func() any { return results.NewSet() })
	few256 := allocated(func() any { return newRecorder(shardCount(256), 256) })
	many10k := allocated(func() any { return newRecorder(shardCount(10000), 10000) })
	buf := uint64(unsafe.Sizeof(opBuffer{}))
	perWorker := (many10k - few256) / (10000 - 256)
	t.Logf("histogram set %.2f MiB; recorder %.2f MiB for 256 workers, %.2f MiB for 10000 (%d shards); %d bytes per worker, buffer %d",
		mib(setBytes), mib(few256), mib(many10k), len(many.shards), perWorker, buf)
	// Per worker, only the buffer (and the slice's rounding).
	if perWorker > buf+buf/8 {
		t.Errorf("each worker costs %d bytes of recorder, want only its %d-byte buffer", perWorker, buf)
	}
	if want := uint64(sets(many))*setBytes + 10000*buf; many10k > want+want/8 {
		t.Errorf("recorder for 10000 workers: %.1f MiB, want about %d sets and the buffers, %.1f MiB", mib(many10k), sets(many), mib(want))
	}
}

// The whole runner (names, per-worker counters, recorder) grows by a few
// kilobytes per worker, not by histograms.
func TestRunnerFootprintPerWorker(t *testing.T) {
	size := func(workers int) uint64 {
		return runnerBytes(func(c *Config) { c.Workers = workers }, nil)
	}
	a, b := size(256), size(10000)
	per := (b - a) / (10000 - 256)
	t.Logf("runner: %.2f MiB for 256 workers, %.2f MiB for 10000: %d bytes per worker", mib(a), mib(b), per)
	if per > 4096 {
		t.Errorf("each worker costs %d bytes of runner state, want at most 4 KiB", per)
	}
	if b > 64<<20 {
		t.Errorf("runner state for 10000 workers: %.1f MiB, want under 64 MiB", mib(b))
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// runnerBytes returns the bytes a runner allocates, for the default
// configuration (engine nolock) changed by set, with what also builds on
// it (nil for nothing).
func runnerBytes(set func(*Config), also func(*runner) any) uint64 {
	c := DefaultConfig()
	c.Engine = engines.MustParse("nolock")
	set(&c)
	return allocated(func() any {
		r := newRunner(c, nil)
		if also == nil {
			return r
		}
		return []any{r, also(r)}
	})
}

// A resource costs its name and the oracle's slot: MaxResources of them
// must stay within the budget limits.go gives them (about 130 bytes each,
// measured as RSS).
func TestRunnerFootprintPerResource(t *testing.T) {
	size := func(resources int) uint64 {
		return runnerBytes(func(c *Config) { c.Resources = resources },
			func(r *runner) any { return newOracle(time.Now(), r.names, engines.Lock{}) })
	}
	a, b := size(1000), size(1_001_000)
	per := (b - a) / 1_000_000
	t.Logf("runner and oracle: %d bytes per resource; %d resources: %.0f MiB", per, MaxResources, mib(per*MaxResources))
	if per > 130 {
		t.Errorf("each resource costs %d bytes, want at most the 130 that MaxResources is chosen for", per)
	}
}
