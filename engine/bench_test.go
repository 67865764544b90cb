package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// benchLocker uses the five masters started by TestMain.
func benchLocker(b *testing.B, mutate func(*engine.Config)) *engine.Locker {
	b.Helper()
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved
	if mutate != nil {
		mutate(&cfg)
	}
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// runID keeps resource names unique across the repeated invocations of a
// benchmark function, so no run meets a previous run's keys.
var runID atomic.Int64

// One TryLock+Release cycle on 5 masters, one caller at a time: the
// latency floor (two round trips to the slowest of the quorum).
func BenchmarkTryLockRelease(b *testing.B) {
	l := benchLocker(b, nil)
	ctx := context.Background()
	prefix := "bench:" + strconv.FormatInt(runID.Add(1), 10) + ":"
	names := make([]string, 1024)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		le, err := l.TryLock(ctx, names[i&1023])
		if err != nil {
			b.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// The same cycle from 128 goroutines on distinct resources: throughput,
// where auto-pipelining batches concurrent lockers' commands. The
// sub-benchmarks are the tuning knobs whose defaults were chosen here.
func BenchmarkTryLockReleaseParallel(b *testing.B) {
	for _, pm := range []int{-1} {
		for _, fd := range []time.Duration{-1, 50 * time.Microsecond, 100 * time.Microsecond, 200 * time.Microsecond, 400 * time.Microsecond} {
			b.Run(fmt.Sprintf("multiplex=%d/flush=%s", pm, fd), func(b *testing.B) {
				l := benchLocker(b, func(c *engine.Config) { c.PipelineMultiplex, c.MaxFlushDelay = pm, fd })
				ctx := context.Background()
				prefix := "pbench:" + strconv.FormatInt(runID.Add(1), 10) + ":"
				var seq atomic.Int64
				b.ReportAllocs()
				b.SetParallelism(64)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					// A ring of names per goroutine: re-locking the name just
					// released can meet that lease's deletes still on their
					// way when the masters are slow, which is not the cost
					// measured here.
					g := prefix + strconv.FormatInt(seq.Add(1), 10) + ":"
					names := make([]string, 64)
					for i := range names {
						names[i] = g + strconv.Itoa(i)
					}
					for i := 0; pb.Next(); i++ {
						le, err := l.TryLock(ctx, names[i&63])
						if err != nil {
							b.Error(err)
							return
						}
						if err := le.Release(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
