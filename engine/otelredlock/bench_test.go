package otelredlock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/engine/otelredlock"
)

var runID atomic.Int64

// discard is a span exporter that drops every span: a batch processor's
// cost without the network.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// tracerProviders are the SDK set-ups measured: every span recorded and
// none exported; every span exported by a batch processor (blocking when
// its queue is full, so no span is dropped unmeasured); and the usual
// production sampler, one trace in a hundred, with the same processor.
func tracerProviders(b *testing.B) []struct {
	name string
	tp   *sdktrace.TracerProvider
} {
	always := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	batch := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(discard{}, sdktrace.WithBlocking()))
	ratio := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))),
		sdktrace.WithBatcher(discard{}, sdktrace.WithBlocking()))
	b.Cleanup(func() {
		for _, tp := range []*sdktrace.TracerProvider{always, batch, ratio} {
			tp.Shutdown(context.Background())
		}
	})
	return []struct {
		name string
		tp   *sdktrace.TracerProvider
	}{{"always", always}, {"always+batch", batch}, {"ratio0.01+batch", ratio}}
}

// adapters are the variants measured: no observer; the adapter on a real
// SDK MeterProvider (its reader never collects during the run) with no
// spans; and with spans on each of tracerProviders.
func adapters(b *testing.B) []struct {
	name string
	obs  *engine.Observer
} {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { mp.Shutdown(context.Background()) })
	metrics, err := otelredlock.New(otelredlock.WithMeterProvider(mp), otelredlock.WithTracerProvider(noop.NewTracerProvider()))
	if err != nil {
		b.Fatal(err)
	}
	out := []struct {
		name string
		obs  *engine.Observer
	}{{"observer=nil", nil}, {"observer=metrics", metrics}}
	for _, tp := range tracerProviders(b) {
		spans, err := otelredlock.New(otelredlock.WithMeterProvider(mp), otelredlock.WithTracerProvider(tp.tp))
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, struct {
			name string
			obs  *engine.Observer
		}{"observer=metrics+spans/" + tp.name, spans})
	}
	return out
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
	for _, a := range adapters(b)[1:] {
		b.Run(a.name, func(b *testing.B) {
			ctx := trace.ContextWithSpanContext(context.Background(), trace.SpanContext{})
			start := time.Now()
			acq := engine.AcquireEvent{Op: engine.OpTryLock, Resource: "r", Start: start, Duration: 200 * time.Microsecond,
				Result: engine.ResultAcquired, Attempts: 1, Votes: benchVotes, Quorum: 3, Masters: benchMasters}
			rel := engine.ReleaseEvent{Resource: "r", Start: start, Duration: 150 * time.Microsecond, Result: engine.ResultReleased,
				Votes: benchVotes, Quorum: 3, Masters: benchMasters}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a.obs.Acquire(ctx, acq)
				a.obs.Release(ctx, rel)
			}
		})
	}
}

var (
	benchMasters = []string{"a:1", "b:1", "c:1", "d:1", "e:1"}
	benchVotes   = engine.VoteSet{N: 5, OK: 0b111, Refused: 0b1000}
)

// The floor for BenchmarkAdapter's spans: what any instrumentation pays
// to record one span with the same attributes on the same SDK set-up,
// written plainly (started and ended live, the slice attributes built
// once, as the adapter keeps them).
func BenchmarkSDKSpan(b *testing.B) {
	votes := otelredlock.AttrVotes.StringSlice([]string{"ok", "ok", "ok", "refused", "pending"})
	masters := otelredlock.AttrMasters.StringSlice(benchMasters)
	for _, tp := range tracerProviders(b) {
		b.Run(tp.name, func(b *testing.B) {
			tracer := tp.tp.Tracer("bench")
			ctx := trace.ContextWithSpanContext(context.Background(), trace.SpanContext{})
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, sp := tracer.Start(ctx, "redlock.TryLock", trace.WithSpanKind(trace.SpanKindClient))
				if sp.IsRecording() {
					sp.SetAttributes(
						otelredlock.AttrResource.String("r"),
						otelredlock.AttrOutcome.String("acquired"),
						otelredlock.AttrAttempts.Int(1),
						otelredlock.AttrQuorum.Int(3),
						otelredlock.AttrHandoff.Bool(false),
						votes,
						otelredlock.AttrVotesOK.Int(3),
						otelredlock.AttrVotesNo.Int(1),
						masters,
					)
				}
				sp.End()
			}
		})
	}
}

// The adapter's span alone (a no-op MeterProvider), for one TryLock's
// event: next to BenchmarkSDKSpan, the adapter's own share of a span.
func BenchmarkAdapterSpan(b *testing.B) {
	for _, tp := range tracerProviders(b) {
		b.Run(tp.name, func(b *testing.B) {
			obs, err := otelredlock.New(otelredlock.WithMeterProvider(metricnoop.NewMeterProvider()), otelredlock.WithTracerProvider(tp.tp))
			if err != nil {
				b.Fatal(err)
			}
			ctx := trace.ContextWithSpanContext(context.Background(), trace.SpanContext{})
			acq := engine.AcquireEvent{Op: engine.OpTryLock, Resource: "r", Start: time.Now(), Duration: 200 * time.Microsecond,
				Result: engine.ResultAcquired, Attempts: 1, Votes: benchVotes, Quorum: 3, Masters: benchMasters}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				obs.Acquire(ctx, acq)
			}
		})
	}
}
