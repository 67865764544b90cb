package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/engine/otelredlock"
)

// MetricsPath is where a MetricsServer serves.
const MetricsPath = "/metrics"

// MetricsServer serves the engine's live metrics for Prometheus at
// MetricsPath (--metrics-addr), through the OpenTelemetry adapter
// (package otelredlock) and OpenTelemetry's Prometheus exporter, so that a
// dashboard can watch a long run as it goes. Set Observer as the run's
// Config.Observer (or chaos.Config.Observer).
type MetricsServer struct {
	// Observer feeds the served metrics.
	Observer *engine.Observer
	// Addr is the address listened on, with the port chosen when the
	// requested one was 0.
	Addr string
	mp   *sdkmetric.MeterProvider
	srv  *http.Server
	done chan error
}

// StartMetrics listens on addr (host:port, e.g. ":9464") and serves until
// Close. A taken or bad address is an error at once, naming it.
func StartMetrics(addr string) (*MetricsServer, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("metrics exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp),
		sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", "redlock-bench"))))
	obs, err := otelredlock.New(otelredlock.WithMeterProvider(mp), otelredlock.WithTracerProvider(noop.NewTracerProvider()))
	if err != nil {
		mp.Shutdown(context.Background())
		return nil, fmt.Errorf("metrics: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		mp.Shutdown(context.Background())
		return nil, fmt.Errorf("--metrics-addr %s: cannot serve metrics: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &MetricsServer{Observer: obs, Addr: ln.Addr().String(), mp: mp, done: make(chan error, 1),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { m.done <- m.srv.Serve(ln) }()
	return m, nil
}

// Close stops serving, within ctx, and shuts the meter down.
func (m *MetricsServer) Close(ctx context.Context) error {
	err := m.srv.Shutdown(ctx)
	if serr := <-m.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, m.mp.Shutdown(ctx))
}
