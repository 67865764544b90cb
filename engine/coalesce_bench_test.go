package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redlock-bench/redlock/engine"
)

// TryLock+Release cycles from 256 goroutines, with each master's queued
// releases coalesced into one script call or sent one by one.
func BenchmarkTryLockReleaseCoalesce(b *testing.B) {
	for _, off := range []bool{false, true} {
		b.Run(fmt.Sprintf("DisableCoalesce=%v", off), func(b *testing.B) {
			l := benchLocker(b, func(c *engine.Config) { c.DisableCoalesce = off })
			ctx := context.Background()
			prefix := "cbench:" + strconv.FormatInt(runID.Add(1), 10) + ":"
			var seq atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(128)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
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

// One caller at a time: nothing queues, so both settings send the same
// commands, and the latency must be the same.
func BenchmarkTryLockReleaseSerialCoalesce(b *testing.B) {
	for _, off := range []bool{false, true} {
		b.Run(fmt.Sprintf("DisableCoalesce=%v", off), func(b *testing.B) {
			l := benchLocker(b, func(c *engine.Config) { c.DisableCoalesce = off })
			ctx := context.Background()
			prefix := "sbench:" + strconv.FormatInt(runID.Add(1), 10) + ":"
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				le, err := l.TryLock(ctx, prefix+strconv.Itoa(i&1023))
				if err != nil {
					b.Fatal(err)
				}
				if err := le.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
