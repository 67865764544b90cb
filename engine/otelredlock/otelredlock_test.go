package otelredlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/engine/otelredlock"
	"github.com/redlock-bench/redlock/multiplex/redistest"
)

// exampleMasters is set by TestMain, for the examples and benchmarks.
var exampleMasters []string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := redistest.Start(ctx, 5, redistest.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exampleMasters = c.Addrs()
	code := m.Run()
	c.Stop()
	os.Exit(code)
}

// telemetry is an adapter on a real SDK meter (read by hand) and a
// recording tracer.
type telemetry struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	obs    *engine.Observer
}

func newTelemetry(t testing.TB) *telemetry {
	t.Helper()
	tm := &telemetry{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(tm.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tm.spans))
	t.Cleanup(func() { mp.Shutdown(context.Background()); tp.Shutdown(context.Background()) })
	obs, err := otelredlock.New(otelredlock.WithMeterProvider(mp), otelredlock.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	tm.obs = obs
	return tm
}

func (tm *telemetry) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tm.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// has reports whether set carries every attribute in want.
func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// value sums the data points of metric name that carry want: counts for
// a histogram, values for a counter or gauge.
func value(rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) int64 {
	var sum int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes, want) {
						sum += p.Value
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes, want) {
						sum += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes, want) {
						sum += int64(p.Count)
					}
				}
			}
		}
	}
	return sum
}

func outcome(s string) attribute.KeyValue { return otelredlock.AttrOutcome.String(s) }

func TestMetricsAndSpansMatchWhatHappened(t *testing.T) {
	c := redistest.StartT(t, 5)
	tm := newTelemetry(t)
	cfg := engine.DefaultConfig(c.Addrs()...)
	cfg.Quarantine = engine.QuarantineObserved // fresh masters
	cfg.NodeTimeout = 100 * time.Millisecond
	cfg.Observer = tm.obs
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other, err := engine.New(context.Background(), engine.Config{Masters: c.Addrs(), TTL: time.Second, Quarantine: engine.QuarantineObserved})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()

	// Four acquired and released, two contended.
	for i := range 4 {
		le, err := l.TryLock(ctx, fmt.Sprintf("res-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	held, err := other.TryLock(ctx, "taken")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := l.TryLock(ctx, "taken"); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("want contention, got %v", err)
		}
	}
	// One Lock that waits for the holder's release: released a little
	// after the Lock, refused, has subscribed to the release.
	go func() {
		for l.Subscriptions() == 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		held.Release(context.Background())
	}()
	le, err := l.Lock(ctx, "taken")
	if err != nil {
		t.Fatal(err)
	}
	// One lost lease: its keys deleted behind its back, found by Extend.
	for _, a := range c.Addrs() {
		if _, err := redistest.Do(a, time.Second, "DEL", "taken"); err != nil {
			t.Fatal(err)
		}
	}
	if err := le.Extend(ctx, 5*time.Second); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("want the lock lost, got %v", err)
	}

	rm := tm.collect(t)
	try := otelredlock.AttrOperation.String("try_lock")
	for _, w := range []struct {
		name string
		want int64
		attr []attribute.KeyValue
	}{
		{"redlock.acquisitions", 4, []attribute.KeyValue{try, outcome("acquired")}},
		{"redlock.acquisitions", 2, []attribute.KeyValue{try, outcome("contended")}},
		{"redlock.acquisitions", 1, []attribute.KeyValue{otelredlock.AttrOperation.String("lock"), outcome("acquired")}},
		{"redlock.acquisitions", 0, []attribute.KeyValue{outcome("no_quorum")}},
		{"redlock.acquire.duration", 7, nil},
		{"redlock.release.duration", 4, []attribute.KeyValue{outcome("released")}},
		{"redlock.extend.duration", 1, []attribute.KeyValue{outcome("not_held"), otelredlock.AttrAuto.Bool(false)}},
		{"redlock.leases.lost", 1, []attribute.KeyValue{otelredlock.AttrLostReason.String("lock_lost")}},
		{"redlock.node.state", 5, []attribute.KeyValue{otelredlock.AttrNodeState.String("up")}},
		{"redlock.node.quarantined", 0, nil},
	} {
		if got := value(rm, w.name, w.attr...); got != w.want {
			t.Errorf("%s %v = %d, want %d", w.name, w.attr, got, w.want)
		}
	}
	w := le.Wait()
	if got, want := value(rm, "redlock.wait.duration", otelredlock.AttrWaitKind.String("retry")), int64(w.Notified+w.Fallbacks+w.Backoffs); got != want || want == 0 {
		t.Errorf("%d waits recorded, want the Lock's %d (%+v)", got, want, w)
	}

	// Spans: one per call, with the votes.
	spans := tm.spans.Ended()
	if len(spans) != 7 {
		t.Fatalf("%d spans, want 7", len(spans))
	}
	contended := 0
	for _, s := range spans {
		attrs := attribute.NewSet(s.Attributes()...)
		votes, _ := attrs.Value(otelredlock.AttrVotes)
		res, _ := attrs.Value(otelredlock.AttrOutcome)
		if len(votes.AsStringSlice()) != 5 || !s.StartTime().Before(s.EndTime()) {
			t.Fatalf("span %s: votes %v, %s..%s", s.Name(), votes.AsStringSlice(), s.StartTime(), s.EndTime())
		}
		ok, _ := attrs.Value(otelredlock.AttrVotesOK)
		no, _ := attrs.Value(otelredlock.AttrVotesNo)
		masters, _ := attrs.Value(otelredlock.AttrMasters)
		if n := strings.Count(strings.Join(votes.AsStringSlice(), ","), "ok"); int64(n) != ok.AsInt64() ||
			int64(strings.Count(strings.Join(votes.AsStringSlice(), ","), "refused")) != no.AsInt64() ||
			!slices.Equal(masters.AsStringSlice(), c.Addrs()) {
			t.Fatalf("span %s: votes %v, %d ok, %d refused, masters %v", s.Name(), votes.AsStringSlice(), ok.AsInt64(), no.AsInt64(), masters.AsStringSlice())
		}
		if res.AsString() == "contended" {
			contended++
			if no, _ := attrs.Value(otelredlock.AttrVotesNo); no.AsInt64() < 3 || s.Status().Code == codes.Error {
				t.Fatalf("contended span: refused %d, status %v", no.AsInt64(), s.Status())
			}
		}
	}
	if contended != 2 {
		t.Fatalf("%d contended spans, want 2", contended)
	}

	// No quorum: three masters killed. The gauges follow the watcher.
	for _, i := range []int{0, 1, 2} {
		c.Nodes[i].Kill()
	}
	if _, err := l.TryLock(ctx, "outage"); !errors.Is(err, engine.ErrNoQuorum) {
		t.Fatalf("want no quorum, got %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rm = tm.collect(t)
		if value(rm, "redlock.node.state", otelredlock.AttrNodeState.String("down")) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node gauges: %d down, want 3", value(rm, "redlock.node.state", otelredlock.AttrNodeState.String("down")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := value(rm, "redlock.acquisitions", try, outcome("no_quorum")); got != 1 {
		t.Fatalf("no_quorum count %d, want 1", got)
	}
	spans = tm.spans.Ended()
	if last := spans[len(spans)-1]; last.Status().Code != codes.Error {
		t.Fatalf("no-quorum span status %v, want Error", last.Status())
	}
}

// A lease whose validity runs out while held counts as lost, expired.
func TestExpiredLeaseCountsAsLost(t *testing.T) {
	tm := newTelemetry(t)
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved
	cfg.TTL = 200 * time.Millisecond
	cfg.Observer = tm.obs
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	le, err := l.TryLock(context.Background(), "expiring")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-le.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lease did not expire")
	}
	// Done closes as the lease ends; the event follows on the same
	// goroutine.
	deadline := time.Now().Add(5 * time.Second)
	for value(tm.collect(t), "redlock.leases.lost", otelredlock.AttrLostReason.String("expired")) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("expired leases %d, want 1", value(tm.collect(t), "redlock.leases.lost"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // past the keys' expiry on the masters too (drift)
	if err := le.Release(context.Background()); !errors.Is(err, engine.ErrLeaseExpired) {
		t.Fatalf("release of an expired lease: %v", err)
	}
	if got := value(tm.collect(t), "redlock.release.duration", outcome("expired")); got != 1 {
		t.Fatalf("expired releases %d, want 1", got)
	}
}
