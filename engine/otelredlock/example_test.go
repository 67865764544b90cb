package otelredlock_test

import (
	"context"
	"fmt"
	"log"
	"slices"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/engine/otelredlock"
)

func Example() {
	ctx := context.Background()
	// Any providers: here the SDK's, read in place; in a service, ones
	// with an OTLP or Prometheus exporter.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(ctx)
	obs, err := otelredlock.New(otelredlock.WithMeterProvider(mp), otelredlock.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}

	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved // fresh test masters
	cfg.Observer = obs
	locker, err := engine.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	lease, err := locker.TryLock(ctx, "example:otel")
	if err != nil {
		log.Fatal(err)
	}
	locker.TryLock(ctx, "example:otel") // held: refused
	lease.Release(ctx)

	// The metrics, summed by outcome (by state for the masters).
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sums := map[string]int64{}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					o, _ := p.Attributes.Value(otelredlock.AttrOutcome)
					sums[o.AsString()] += int64(p.Count)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					o, ok := p.Attributes.Value(otelredlock.AttrOutcome)
					if !ok {
						o, _ = p.Attributes.Value(otelredlock.AttrNodeState)
					}
					sums[o.AsString()] += p.Value
				}
			}
			for k, n := range sums {
				if n != 0 {
					lines = append(lines, fmt.Sprintf("%s{%s} %d %s", m.Name, k, n, m.Unit))
				}
			}
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}

	// One span per TryLock, with each master's vote.
	for _, s := range spans.Ended() {
		a := map[string]any{}
		for _, kv := range s.Attributes() {
			a[string(kv.Key)] = kv.Value.AsInterface()
		}
		votes, _ := a["redlock.votes.outcomes"].([]string)
		ok, _ := a["redlock.votes.ok"].(int64)
		refused, _ := a["redlock.votes.refused"].(int64)
		fmt.Printf("span %s %s: %s, votes of %d masters, majority ok %v, majority refused %v, status %s\n",
			s.SpanKind(), s.Name(), a["redlock.outcome"], len(votes), ok >= 3, refused >= 3, s.Status().Code)
	}
	// Output:
	// redlock.acquire.duration{acquired} 1 s
	// redlock.acquire.duration{contended} 1 s
	// redlock.acquisitions{acquired} 1 {acquisition}
	// redlock.acquisitions{contended} 1 {acquisition}
	// redlock.node.count{up} 5 {node}
	// redlock.release.duration{released} 1 s
	// span client redlock.TryLock: acquired, votes of 5 masters, majority ok true, majority refused false, status Unset
	// span client redlock.TryLock: contended, votes of 5 masters, majority ok false, majority refused true, status Unset
}
