package engine_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redlock-bench/redlock/engine"
)

// benchLocker uses the five masters started by TestMain.
func benchLocker(b *testing.B) *engine.Locker {
	b.Helper()
	l, err := engine.New(context.Background(), engine.DefaultConfig(exampleMasters...))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// One TryLock+Release cycle on 5 masters, one caller at a time: the
// latency floor (two round trips to the slowest of the quorum).
func BenchmarkTryLockRelease(b *testing.B) {
	l := benchLocker(b)
	ctx := context.Background()
	names := make([]string, 1024)
	for i := range names {
		names[i] = "bench:" + strconv.Itoa(i)
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

// The same cycle from many goroutines on distinct resources: throughput,
// where auto-pipelining batches concurrent lockers' commands.
func BenchmarkTryLockReleaseParallel(b *testing.B) {
	l := benchLocker(b)
	ctx := context.Background()
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		name := "pbench:" + strconv.FormatInt(seq.Add(1), 10)
		for pb.Next() {
			le, err := l.TryLock(ctx, name)
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
}
