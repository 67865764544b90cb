package otelredlock_test

import (
	"context"
	"fmt"
	"log"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/engine/otelredlock"
)

func Example() {
	ctx := context.Background()
	// Any MeterProvider: here the SDK's, read by hand; in a service, one
	// with a Prometheus or OTLP exporter.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	obs, err := otelredlock.New(otelredlock.WithMeterProvider(mp),
		otelredlock.WithTracerProvider(noop.NewTracerProvider())) // no spans
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
	locker.TryLock(ctx, "example:otel") // contended
	lease.Release(ctx)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, o := range []string{"acquired", "contended"} {
				fmt.Println(m.Name, o, value(rm, m.Name, outcome(o)))
			}
		case metricdata.Histogram[float64]:
			fmt.Println(m.Name, m.Unit, "count", d.DataPoints[0].Count)
		case metricdata.Gauge[int64]:
			if m.Name == "redlock.node.state" {
				fmt.Println(m.Name, "up", value(rm, m.Name, otelredlock.AttrNodeState.String("up")))
			}
		}
	}
	// Output:
	// redlock.acquire.duration s count 1
	// redlock.release.duration s count 1
	// redlock.acquisitions acquired 1
	// redlock.acquisitions contended 1
	// redlock.node.state up 5
}
