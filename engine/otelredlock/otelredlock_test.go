package otelredlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/engine/otelredlock"
	"github.com/redlock-bench/redlock/internal/redistest"
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

// locker is a Locker on the test masters observed by tm (mutate may
// change its Config), closed when the test ends.
func (tm *telemetry) locker(t *testing.T, mutate func(*engine.Config)) *engine.Locker {
	t.Helper()
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved
	cfg.Observer = tm.obs
	if mutate != nil {
		mutate(&cfg)
	}
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// otherLocker is an unobserved Locker on the test masters, another owner.
func otherLocker(t *testing.T, ttl time.Duration) *engine.Locker {
	t.Helper()
	l, err := engine.New(context.Background(), engine.Config{Masters: exampleMasters, TTL: ttl, Quarantine: engine.QuarantineObserved})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
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

// noErrorType reports whether no data point of metric name that carries
// want has error.type: successes must not.
func noErrorType(rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) bool {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			}
			for _, set := range sets {
				if _, bad := set.Value(otelredlock.AttrErrorType); bad && has(set, want) {
					return false
				}
			}
		}
	}
	return true
}

func errorType(s string) attribute.KeyValue { return otelredlock.AttrErrorType.String(s) }

// spanAttrs is a span's attributes as a set.
func spanAttrs(s sdktrace.ReadOnlySpan) attribute.Set { return attribute.NewSet(s.Attributes()...) }

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
	// One Lock that waits for the holder's release: released once the
	// Lock, subscribed, has been refused again on a quorum, which its
	// waiter's mark on the holder's value there shows (see engine's
	// waitMark): it then sleeps until the release (or a fallback) wakes it.
	go func() {
		for markedOn(c.Addrs(), "taken") < len(c.Addrs())/2+1 {
			time.Sleep(time.Millisecond)
		}
		held.Release(context.Background())
	}()
	le, err := l.Lock(ctx, "taken")
	if err != nil {
		t.Fatal(err)
	}
	// One lost lease: its keys deleted behind its back, found by Extend.
	for _, a := range c.Addrs() {
		if _, err := redistest.Do(a, 10*time.Second, "DEL", "taken"); err != nil {
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
		{"redlock.extend.duration", 1, []attribute.KeyValue{outcome("not_held"), errorType("not_held"), otelredlock.AttrAuto.Bool(false)}},
		{"redlock.lease.lost", 1, []attribute.KeyValue{otelredlock.AttrLostReason.String("lock_lost")}},
		{"redlock.node.count", 5, []attribute.KeyValue{otelredlock.AttrNodeState.String("up")}},
		{"redlock.node.quarantined", 0, nil},
	} {
		if got := value(rm, w.name, w.attr...); got != w.want {
			t.Errorf("%s %v = %d, want %d", w.name, w.attr, got, w.want)
		}
	}
	checkInstruments(t, rm, "redlock.acquire.duration", "redlock.release.duration", "redlock.extend.duration", "redlock.wait.duration",
		"redlock.acquisitions", "redlock.lease.lost", "redlock.node.count", "redlock.node.quarantined")
	// Successes, and TryLocks refused by a holder, are not failures.
	for _, w := range []struct {
		name string
		attr []attribute.KeyValue
	}{
		{"redlock.acquisitions", []attribute.KeyValue{outcome("acquired")}},
		{"redlock.acquisitions", []attribute.KeyValue{try, outcome("contended")}},
		{"redlock.acquire.duration", []attribute.KeyValue{try, outcome("contended")}},
		{"redlock.release.duration", []attribute.KeyValue{outcome("released")}},
	} {
		if !noErrorType(rm, w.name, w.attr...) {
			t.Errorf("%s %v carries error.type", w.name, w.attr)
		}
	}
	// Each master by server.address and server.port, as the conventions
	// split them.
	for _, a := range c.Addrs() {
		host, port, _ := strings.Cut(a, ":")
		p, _ := strconv.Atoi(port)
		if got := value(rm, "redlock.node.count", otelredlock.AttrAddress.String(host), otelredlock.AttrPort.Int(p),
			otelredlock.AttrNodeState.String("up")); got != 1 {
			t.Errorf("master %s: redlock.node.count up = %d, want 1", a, got)
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
			if no, _ := attrs.Value(otelredlock.AttrVotesNo); no.AsInt64() < 3 || s.Status().Code != codes.Unset || attrs.HasValue(otelredlock.AttrErrorType) {
				t.Fatalf("contended TryLock span: refused %d, status %v, attributes %v", no.AsInt64(), s.Status(), attrs.ToSlice())
			}
		}
		if res.AsString() == "acquired" && (s.Status().Code != codes.Unset || attrs.HasValue(otelredlock.AttrErrorType)) {
			t.Fatalf("acquired span: status %v, attributes %v", s.Status(), attrs.ToSlice())
		}
		if s.SpanKind() != trace.SpanKindClient || (s.Name() != "redlock.TryLock" && s.Name() != "redlock.Lock") ||
			s.InstrumentationScope().Name != otelredlock.ScopeName || s.InstrumentationScope().SchemaURL != schemaURL {
			t.Fatalf("span %q of kind %v, scope %+v", s.Name(), s.SpanKind(), s.InstrumentationScope())
		}
	}
	if contended != 2 {
		t.Fatalf("%d contended spans, want 2", contended)
	}

	// No quorum: three masters killed. The gauges follow the watcher.
	for _, i := range []int{0, 1, 2} {
		c.Nodes[i].Kill()
	}
	_, outage := l.TryLock(ctx, "outage")
	if !errors.Is(outage, engine.ErrNoQuorum) {
		t.Fatalf("want no quorum, got %v", outage)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rm = tm.collect(t)
		if value(rm, "redlock.node.count", otelredlock.AttrNodeState.String("down")) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node gauges: %d down, want 3", value(rm, "redlock.node.count", otelredlock.AttrNodeState.String("down")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := value(rm, "redlock.acquisitions", try, outcome("no_quorum"), errorType("no_quorum")); got != 1 {
		t.Fatalf("no_quorum count %d, want 1", got)
	}
	if got := value(rm, "redlock.acquire.duration", try, outcome("no_quorum"), errorType("no_quorum")); got != 1 {
		t.Fatalf("no_quorum durations %d, want 1", got)
	}
	// A failed call's span: status Error with the error's message,
	// error.type as on the metrics, the error as an exception event.
	spans = tm.spans.Ended()
	last := spans[len(spans)-1]
	lastAttrs := spanAttrs(last)
	if et, _ := lastAttrs.Value(otelredlock.AttrErrorType); last.Status().Code != codes.Error ||
		last.Status().Description != outage.Error() || et.AsString() != "no_quorum" ||
		len(last.Events()) != 1 || last.Events()[0].Name != "exception" {
		t.Fatalf("no-quorum span: status %v, error.type %q, events %v", last.Status(), et.AsString(), last.Events())
	}
}

// markedOn counts the masters where key's value carries a waiter's mark
// (a trailing "+"); a master that does not answer counts as unmarked.
func markedOn(addrs []string, key string) int {
	n := 0
	for _, a := range addrs {
		r, _ := redistest.Do(a, 10*time.Second, "EVAL", `local v = redis.call("GET", KEYS[1]); if v and string.sub(v, -1) == "+" then return 1 end; return 0`, "1", key)
		if r == ":1" {
			n++
		}
	}
	return n
}

// A lease whose validity runs out while held counts as lost, expired.
func TestExpiredLeaseCountsAsLost(t *testing.T) {
	tm := newTelemetry(t)
	l := tm.locker(t, func(c *engine.Config) { c.TTL = 200 * time.Millisecond })
	le, err := l.TryLock(context.Background(), "expiring")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-le.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the lease did not expire")
	}
	// Done closes as the lease ends; the event follows on the same
	// goroutine.
	deadline := time.Now().Add(30 * time.Second)
	for value(tm.collect(t), "redlock.lease.lost", otelredlock.AttrLostReason.String("expired")) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("expired leases %d, want 1", value(tm.collect(t), "redlock.lease.lost"))
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

// schemaURL is that of the semantic conventions the names follow.
const schemaURL = "https://opentelemetry.io/schemas/1.43.0"

// instruments are every instrument's kind and unit, as the package
// documents them and OpenTelemetry's conventions want them: durations in
// seconds, counters pluralized with a {thing} unit, masters counted by
// state in up-down counters.
var instruments = map[string]struct{ kind, unit string }{
	"redlock.acquire.duration": {"histogram", "s"},
	"redlock.release.duration": {"histogram", "s"},
	"redlock.extend.duration":  {"histogram", "s"},
	"redlock.wait.duration":    {"histogram", "s"},
	"redlock.acquisitions":     {"counter", "{acquisition}"},
	"redlock.lease.lost":       {"counter", "{lease}"},
	"redlock.handoffs":         {"counter", "{handoff}"},
	"redlock.node.count":       {"updowncounter", "{node}"},
	"redlock.node.quarantined": {"updowncounter", "{node}"},
}

// checkInstruments checks the kind, unit and scope of every instrument in
// rm (an instrument appears once it has a measurement), and that each
// name in need appears.
func checkInstruments(t *testing.T, rm metricdata.ResourceMetrics, need ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelredlock.ScopeName || sm.Scope.SchemaURL != schemaURL {
			t.Errorf("scope %q, schema %q", sm.Scope.Name, sm.Scope.SchemaURL)
		}
		for _, m := range sm.Metrics {
			w, ok := instruments[m.Name]
			if !ok {
				t.Errorf("undocumented instrument %s", m.Name)
				continue
			}
			seen[m.Name] = true
			var k string
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				k = "histogram"
			case metricdata.Sum[int64]:
				k = "updowncounter"
				if d.IsMonotonic {
					k = "counter"
				}
			}
			if k != w.kind || m.Unit != w.unit || m.Description == "" {
				t.Errorf("%s: %s in %q (%q), want %s in %q", m.Name, k, m.Unit, m.Description, w.kind, w.unit)
			}
		}
	}
	for _, name := range need {
		if !seen[name] {
			t.Errorf("no %s recorded", name)
		}
	}
}

// A Lock that gives up while another owner holds the resource failed:
// error.type contended on its metrics and span, status Error; its waits
// ended by the context carry error.type timeout.
func TestLockGivingUpIsAFailure(t *testing.T) {
	tm := newTelemetry(t)
	// A fallback longer than the deadline: the deadline ends a wait, not
	// an attempt, however slow the machine.
	l := tm.locker(t, func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = 2*time.Second, 2*time.Second })
	other := otherLocker(t, 5*time.Second)
	held, err := other.TryLock(context.Background(), "given-up")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, lockErr := l.Lock(ctx, "given-up")
	if !errors.Is(lockErr, engine.ErrNotAcquired) || !errors.Is(lockErr, context.DeadlineExceeded) {
		t.Fatalf("want contention until the deadline, got %v", lockErr)
	}
	rm := tm.collect(t)
	lock := otelredlock.AttrOperation.String("lock")
	if got := value(rm, "redlock.acquisitions", lock, outcome("contended"), errorType("contended")); got != 1 {
		t.Errorf("gave-up Locks with error.type contended: %d, want 1", got)
	}
	if got := value(rm, "redlock.wait.duration", otelredlock.AttrWaitKind.String("retry"), errorType("timeout")); got != 1 {
		t.Errorf("waits ended by the deadline: %d, want 1", got)
	}
	spans := tm.spans.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sp := spans[0]
	attrs := spanAttrs(sp)
	et, _ := attrs.Value(otelredlock.AttrErrorType)
	attempts, _ := attrs.Value(otelredlock.AttrAttempts)
	if sp.Name() != "redlock.Lock" || sp.Status().Code != codes.Error || sp.Status().Description != lockErr.Error() ||
		et.AsString() != "contended" || attempts.AsInt64() < 2 {
		t.Fatalf("span %s: status %v, error.type %q, attempts %d", sp.Name(), sp.Status(), et.AsString(), attempts.AsInt64())
	}
	// The span covers the call: from before the Lock to its deadline at least.
	if d := sp.EndTime().Sub(sp.StartTime()); d < 150*time.Millisecond || d > 5*time.Second {
		t.Fatalf("span lasted %v, want the Lock's 150 ms or a little more", d)
	}
}

// Hand-offs at the gate: the counter, the releases that handed off and
// the gate waits ended by a hand-off agree, one per hand-off.
func TestHandoffsAgree(t *testing.T) {
	tm := newTelemetry(t)
	l := tm.locker(t, nil)
	ctx := context.Background()
	// A second Lock queues at the gate behind the first holder; whether
	// it is queued when the holder releases is up to the scheduler, so
	// try until one hand-off happened.
	for i := 0; i < 20 && value(tm.collect(t), "redlock.handoffs") == 0; i++ {
		first, err := l.Lock(ctx, "handed")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *engine.Lease)
		started := make(chan struct{})
		go func() {
			close(started)
			le, err := l.Lock(ctx, "handed")
			if err != nil {
				t.Error(err)
			}
			got <- le
		}()
		<-started // then a moment to reach the gate
		time.Sleep(20 * time.Millisecond)
		first.Release(ctx)
		(<-got).Release(ctx)
	}
	rm := tm.collect(t)
	checkInstruments(t, rm, "redlock.handoffs", "redlock.wait.duration")
	n := value(rm, "redlock.handoffs")
	if n == 0 {
		t.Fatal("no hand-off in 20 tries")
	}
	if got := value(rm, "redlock.release.duration", outcome("handed_off")); got != n {
		t.Errorf("%d releases handed off, %d hand-offs counted", got, n)
	}
	if got := value(rm, "redlock.wait.duration", otelredlock.AttrWaitKind.String("gate"), otelredlock.AttrWakeCause.String("handoff")); got != n {
		t.Errorf("%d gate waits ended by a hand-off, %d hand-offs counted", got, n)
	}
	if got := value(rm, "redlock.acquisitions", otelredlock.AttrOperation.String("lock"), outcome("acquired")); got < 2*n {
		t.Errorf("%d Locks acquired, want at least %d", got, 2*n)
	}
	if !noErrorType(rm, "redlock.release.duration", outcome("handed_off")) {
		t.Error("a hand-off carries error.type")
	}
}

// Masters younger than MaxTTL are quarantined under QuarantineAlways:
// both gauges say so, per master.
func TestQuarantinedMastersGauge(t *testing.T) {
	c := redistest.StartT(t, 3)
	tm := newTelemetry(t)
	cfg := engine.DefaultConfig(c.Addrs()...)
	cfg.Quarantine = engine.QuarantineAlways
	cfg.TTL = time.Minute // the masters are seconds old
	cfg.Observer = tm.obs
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rm := tm.collect(t)
	for _, a := range c.Addrs() {
		host, port, _ := strings.Cut(a, ":")
		p, _ := strconv.Atoi(port)
		server := []attribute.KeyValue{otelredlock.AttrAddress.String(host), otelredlock.AttrPort.Int(p)}
		if got := value(rm, "redlock.node.quarantined", server...); got != 1 {
			t.Errorf("%s: redlock.node.quarantined %d, want 1", a, got)
		}
		for state, want := range map[string]int64{"quarantined": 1, "up": 0, "down": 0} {
			if got := value(rm, "redlock.node.count", append(server, otelredlock.AttrNodeState.String(state))...); got != want {
				t.Errorf("%s: redlock.node.count %s %d, want %d", a, state, got, want)
			}
		}
	}
	if _, err := l.TryLock(context.Background(), "q"); !errors.Is(err, engine.ErrNoQuorum) {
		t.Fatalf("TryLock with every master quarantined: %v", err)
	}
}

// Close ends a waiting Lock: its wait and the call carry error.type closed.
func TestCloseEndsAWaitAsClosed(t *testing.T) {
	tm := newTelemetry(t)
	// After its refused attempt the Lock sleeps until a release is
	// announced, which none is: Close finds it asleep.
	l := tm.locker(t, func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = 10*time.Second, 10*time.Second })
	other := otherLocker(t, 20*time.Second)
	held, err := other.TryLock(context.Background(), "closing")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.Lock(context.Background(), "closing")
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for l.Subscriptions() == 0 { // refused, and waiting for the release
		if time.Now().After(deadline) {
			t.Fatal("the Lock did not wait")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // past the attempt, into the sleep
	l.Close()
	if err := <-done; !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Lock ended by Close: %v", err)
	}
	rm := tm.collect(t)
	if got := value(rm, "redlock.wait.duration", otelredlock.AttrWaitKind.String("retry"), errorType("closed")); got != 1 {
		t.Errorf("waits ended by Close: %d, want 1", got)
	}
	if got := value(rm, "redlock.acquisitions", otelredlock.AttrOperation.String("lock"), outcome("error"), errorType("closed")); got != 1 {
		t.Errorf("Locks ended by Close: %d, want 1", got)
	}
}

// TryLockAll and LockAll refused for their list of names (none, or more
// than MaxResources) report that as their error.type, not _OTHER.
func TestRefusedResourceListsHaveTheirErrorType(t *testing.T) {
	tm := newTelemetry(t)
	l := tm.locker(t, nil)
	many := make([]string, engine.MaxResources+1)
	for i := range many {
		many[i] = "r" + strconv.Itoa(i)
	}
	ctx := context.Background()
	for _, c := range []struct {
		names []string
		want  error
		etype string
	}{
		{nil, engine.ErrNoResources, "no_resources"},
		{many, engine.ErrTooManyResources, "too_many_resources"},
	} {
		if _, err := l.TryLockAll(ctx, c.names...); !errors.Is(err, c.want) {
			t.Fatalf("TryLockAll of %d names: %v, want %v", len(c.names), err, c.want)
		}
		if _, err := l.LockAll(ctx, c.names...); !errors.Is(err, c.want) {
			t.Fatalf("LockAll of %d names: %v, want %v", len(c.names), err, c.want)
		}
		rm := tm.collect(t)
		for _, op := range []string{"try_lock", "lock"} {
			if got := value(rm, "redlock.acquisitions", otelredlock.AttrOperation.String(op), outcome("error"), errorType(c.etype)); got != 1 {
				t.Errorf("%s of %d names: %d acquisitions with error.type %s, want 1", op, len(c.names), got, c.etype)
			}
		}
	}
}
