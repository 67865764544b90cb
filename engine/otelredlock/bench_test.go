package otelredlock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/engine/otelredlock"
)

var runID atomic.Int64

// adapters are the variants measured: no observer; the adapter on a real
// SDK MeterProvider (its reader never collects during the run) with no
// spans; and with spans on a real SDK tracer that samples every span and
// exports none.
func adapters(b *testing.B) []struct {
	name string
	obs  *engine.Observer
} {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { mp.Shutdown(context.Background()); tp.Shutdown(context.Background()) })
	metrics, err := otelredlock.New(otelredlock.WithMeterProvider(mp), otelredlock.WithTracerProvider(noop.NewTracerProvider()))
	if err != nil {
		b.Fatal(err)
	}
	spans, err := otelredlock.New(otelredlock.WithMeterProvider(mp), otelredlock.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		obs  *engine.Observer
	}{{"observer=nil", nil}, {"observer=metrics", metrics}, {"observer=metrics+spans", spans}}
}

// One TryLock+Release cycle on the five masters, as engine's benchmark of
// the same name: the adapter's cost next to two round trips.
func BenchmarkTryLockRelease(b *testing.B) {
	for _, a := range adapters(b) {
		b.Run(a.name, func(b *testing.B) {
			cfg := engine.DefaultConfig(exampleMasters...)
			cfg.Quarantine = engine.QuarantineObserved
			cfg.Observer = a.obs
			cfg.NodeTimeout = time.Second // a loaded machine's stalls are not the cost measured
			l, err := engine.New(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			// Unique per invocation (-count), so no run meets an earlier
			// run's keys.
			prefix := "obench:" + strconv.FormatInt(runID.Add(1), 10) + ":"
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
		})
	}
}

// The adapter alone, without the network: the events of one
// TryLock+Release cycle, as the engine hands them over.
func BenchmarkAdapter(b *testing.B) {
	masters := []string{"a:1", "b:1", "c:1", "d:1", "e:1"}
	votes := engine.VoteSet{N: 5, OK: 0b111, Refused: 0b1000}
	for _, a := range adapters(b)[1:] {
		b.Run(a.name, func(b *testing.B) {
			ctx := trace.ContextWithSpanContext(context.Background(), trace.SpanContext{})
			start := time.Now()
			acq := engine.AcquireEvent{Op: engine.OpTryLock, Resource: "r", Start: start, Duration: 200 * time.Microsecond,
				Result: engine.ResultAcquired, Attempts: 1, Votes: votes, Quorum: 3, Masters: masters}
			rel := engine.ReleaseEvent{Resource: "r", Start: start, Duration: 150 * time.Microsecond, Result: engine.ResultReleased,
				Votes: votes, Quorum: 3, Masters: masters}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a.obs.Acquire(ctx, acq)
				a.obs.Release(ctx, rel)
			}
		})
	}
}
