// Package otelredlock reports an engine.Locker's operations to
// OpenTelemetry: latency histograms, counters by outcome, gauges of the
// masters' states, and a span per Lock and TryLock.
//
// It is a module of its own, so that a service importing engine does not
// take on OpenTelemetry unless it imports this package too:
//
//	obs, err := otelredlock.New() // the global MeterProvider and TracerProvider
//	cfg := engine.DefaultConfig(masters...)
//	cfg.Observer = obs
//
// Instruments (meter scope ScopeName; names follow OpenTelemetry's
// semantic-convention style, durations in seconds):
//
//	redlock.acquire.duration   histogram  redlock.operation (lock, try_lock), redlock.outcome
//	redlock.release.duration   histogram  redlock.outcome
//	redlock.extend.duration    histogram  redlock.outcome, redlock.extend.auto
//	redlock.wait.duration      histogram  redlock.wait.kind (gate, retry), redlock.wake.cause
//	redlock.acquisitions       counter    redlock.operation, redlock.outcome (acquired, contended, no_quorum, error)
//	redlock.leases.lost        counter    redlock.lost.reason (lock_lost, expired)
//	redlock.handoffs           counter
//	redlock.node.state         gauge      server.address, redlock.node.state: 1 for the master's state, 0 for the others
//	redlock.node.quarantined   gauge      server.address: 1 while the master's votes are not counted
//
// Spans: one per Lock and TryLock call, named "redlock.Lock" or
// "redlock.TryLock", a client span child of the caller's context. It is
// recorded when the call ends, with the call's start as its start time, so
// the engine needs no tracing of its own. Attributes: redlock.resource,
// redlock.outcome, redlock.attempts, redlock.quorum, redlock.handoff,
// redlock.votes (each master's outcome, in redlock.masters order),
// redlock.votes.ok and .refused, redlock.masters, and
// redlock.fencing.token when fencing is on. A span's status is Error for
// no_quorum and error outcomes; contention is not an error.
package otelredlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/redlock-bench/redlock/engine"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/redlock-bench/redlock/engine/otelredlock"

// Attribute keys.
const (
	AttrOperation  = attribute.Key("redlock.operation")
	AttrOutcome    = attribute.Key("redlock.outcome")
	AttrAuto       = attribute.Key("redlock.extend.auto")
	AttrWaitKind   = attribute.Key("redlock.wait.kind")
	AttrWakeCause  = attribute.Key("redlock.wake.cause")
	AttrLostReason = attribute.Key("redlock.lost.reason")
	AttrNodeState  = attribute.Key("redlock.node.state")
	AttrAddress    = attribute.Key("server.address")
	AttrResource   = attribute.Key("redlock.resource")
	AttrAttempts   = attribute.Key("redlock.attempts")
	AttrQuorum     = attribute.Key("redlock.quorum")
	AttrHandoff    = attribute.Key("redlock.handoff")
	AttrVotes      = attribute.Key("redlock.votes")
	AttrVotesOK    = attribute.Key("redlock.votes.ok")
	AttrVotesNo    = attribute.Key("redlock.votes.refused")
	AttrMasters    = attribute.Key("redlock.masters")
	AttrToken      = attribute.Key("redlock.fencing.token")
)

// Buckets are the latency histograms' bounds, in seconds: a lock round
// trip on a LAN takes well under a millisecond, a Lock wait up to seconds.
var Buckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Option configures New.
type Option func(*config)

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider sets the MeterProvider. Default: otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets the TracerProvider. Default:
// otel.GetTracerProvider(). A noop.TracerProvider turns spans off, and
// with them their cost.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

const (
	nOps     = 3  // engine.AcquireOp values, 0 unused
	nResults = 10 // engine.Result values, 0 unknown
	nWake    = 5  // engine.WakeCause values
)

// observer holds the instruments and, for every attribute combination,
// its options built once, so that recording allocates nothing for them.
type observer struct {
	tracer trace.Tracer // nil: no spans

	acquire, release, extend, wait metric.Float64Histogram
	acquisitions, lost, handoffs   metric.Int64Counter

	acquireRec [nOps][nResults][]metric.RecordOption
	acquireAdd [nOps][nResults][]metric.AddOption
	releaseRec [nResults][]metric.RecordOption
	extendRec  [2][nResults][]metric.RecordOption
	waitRec    [3][nWake][]metric.RecordOption
	lostAdd    [2][]metric.AddOption

	mu    sync.Mutex
	nodes map[string]engine.NodeState // last state of each master seen

	// The spans' slice attributes, built once: building one copies the
	// slice through reflection. votes is keyed by the VoteSet (bounded:
	// there are few outcome combinations), masters by the Locker's slice.
	votesMu sync.RWMutex
	votes   map[engine.VoteSet]attribute.KeyValue
	masters atomic.Pointer[mastersAttr]
}

type mastersAttr struct {
	first *string
	n     int
	kv    attribute.KeyValue
}

// maxVoteAttrs bounds the votes cache; past it, attributes are built per
// span.
const maxVoteAttrs = 4096

var clientKind = trace.WithSpanKind(trace.SpanKindClient)

func (o *observer) votesAttr(v engine.VoteSet) attribute.KeyValue {
	o.votesMu.RLock()
	kv, ok := o.votes[v]
	o.votesMu.RUnlock()
	if ok {
		return kv
	}
	votes := make([]string, v.N)
	for i := range votes {
		votes[i] = v.Outcome(i).String()
	}
	kv = AttrVotes.StringSlice(votes)
	o.votesMu.Lock()
	if len(o.votes) < maxVoteAttrs {
		o.votes[v] = kv
	}
	o.votesMu.Unlock()
	return kv
}

func (o *observer) mastersAttr(m []string) attribute.KeyValue {
	if len(m) == 0 {
		return AttrMasters.StringSlice(nil)
	}
	if c := o.masters.Load(); c != nil && c.first == &m[0] && c.n == len(m) {
		return c.kv
	}
	c := &mastersAttr{first: &m[0], n: len(m), kv: AttrMasters.StringSlice(m)}
	o.masters.Store(c)
	return c.kv
}

// New returns an Observer for engine.Config.Observer that records to the
// providers' meter and tracer.
func New(opts ...Option) (*engine.Observer, error) {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	o := &observer{nodes: make(map[string]engine.NodeState), votes: make(map[engine.VoteSet]attribute.KeyValue)}
	if _, off := c.tp.(noop.TracerProvider); !off {
		o.tracer = c.tp.Tracer(ScopeName)
	}
	m := c.mp.Meter(ScopeName)
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(Buckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		ct, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return ct
	}
	o.acquire = hist("redlock.acquire.duration", "Duration of Lock and TryLock calls, waits included.")
	o.release = hist("redlock.release.duration", "Duration of Release calls.")
	o.extend = hist("redlock.extend.duration", "Duration of extensions, automatic or not.")
	o.wait = hist("redlock.wait.duration", "Time Lock callers spent queued at the in-process gate or asleep between attempts.")
	o.acquisitions = counter("redlock.acquisitions", "{call}", "Lock and TryLock calls, by outcome.")
	o.lost = counter("redlock.leases.lost", "{lease}", "Leases that ended without a release: lock lost or validity expired while held.")
	o.handoffs = counter("redlock.handoffs", "{handoff}", "Leases passed to the next goroutine queued at the gate, without a round trip.")
	state, err := m.Int64ObservableGauge("redlock.node.state", metric.WithUnit("{node}"),
		metric.WithDescription("1 for each master's current state (up, down, quarantined), 0 for the others."))
	errs = append(errs, err)
	quarantined, err := m.Int64ObservableGauge("redlock.node.quarantined", metric.WithUnit("{node}"),
		metric.WithDescription("1 while a master is quarantined after a restart: its votes do not count."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if _, err := m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		o.mu.Lock()
		defer o.mu.Unlock()
		for addr, st := range o.nodes {
			for _, s := range []engine.NodeState{engine.StateUp, engine.StateDown, engine.StateQuarantined} {
				v := int64(0)
				if s == st {
					v = 1
				}
				ob.ObserveInt64(state, v, metric.WithAttributes(AttrAddress.String(addr), AttrNodeState.String(string(s))))
			}
			q := int64(0)
			if st == engine.StateQuarantined {
				q = 1
			}
			ob.ObserveInt64(quarantined, q, metric.WithAttributes(AttrAddress.String(addr)))
		}
		return nil
	}, state, quarantined); err != nil {
		return nil, err
	}
	o.buildOptions()
	return &engine.Observer{
		Acquire:   o.onAcquire,
		Release:   o.onRelease,
		Extend:    o.onExtend,
		Wait:      o.onWait,
		Handoff:   o.onHandoff,
		Lost:      o.onLost,
		NodeState: o.onNodeState,
	}, nil
}

func (o *observer) buildOptions() {
	rec := func(kv ...attribute.KeyValue) []metric.RecordOption {
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	}
	add := func(kv ...attribute.KeyValue) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	}
	for op := range nOps {
		opAttr := AttrOperation.String(engine.AcquireOp(op).String())
		for r := range nResults {
			res := AttrOutcome.String(engine.Result(r).String())
			o.acquireRec[op][r] = rec(opAttr, res)
			o.acquireAdd[op][r] = add(opAttr, res)
		}
	}
	for r := range nResults {
		res := AttrOutcome.String(engine.Result(r).String())
		o.releaseRec[r] = rec(res)
		o.extendRec[0][r] = rec(res, AttrAuto.Bool(false))
		o.extendRec[1][r] = rec(res, AttrAuto.Bool(true))
	}
	for k := range 3 {
		for c := range nWake {
			o.waitRec[k][c] = rec(AttrWaitKind.String(engine.WaitKind(k).String()), AttrWakeCause.String(engine.WakeCause(c).String()))
		}
	}
	o.lostAdd[0] = add(AttrLostReason.String("expired"))
	o.lostAdd[1] = add(AttrLostReason.String("lock_lost"))
}

// bounded clamps an enum value into a table of n entries (0 is "unknown").
func bounded[T ~uint8](v T, n int) T {
	if int(v) >= n {
		return 0
	}
	return v
}

func (o *observer) onAcquire(ctx context.Context, e engine.AcquireEvent) {
	op, r := bounded(e.Op, nOps), bounded(e.Result, nResults)
	o.acquire.Record(ctx, e.Duration.Seconds(), o.acquireRec[op][r]...)
	o.acquisitions.Add(ctx, 1, o.acquireAdd[op][r]...)
	if o.tracer != nil {
		o.span(ctx, &e)
	}
}

// span records the call's span after the fact, from its start.
func (o *observer) span(ctx context.Context, e *engine.AcquireEvent) {
	name := "redlock.TryLock"
	if e.Op == engine.OpLock {
		name = "redlock.Lock"
	}
	_, sp := o.tracer.Start(ctx, name, trace.WithTimestamp(e.Start), clientKind)
	if sp.IsRecording() {
		sp.SetAttributes(
			AttrResource.String(e.Resource),
			AttrOutcome.String(e.Result.String()),
			AttrAttempts.Int(e.Attempts),
			AttrQuorum.Int(e.Quorum),
			AttrHandoff.Bool(e.Handoff),
			o.votesAttr(e.Votes),
			AttrVotesOK.Int(e.Votes.Count(engine.OutcomeOK)),
			AttrVotesNo.Int(e.Votes.Count(engine.OutcomeRefused)),
			o.mastersAttr(e.Masters),
		)
		if e.Token != 0 {
			sp.SetAttributes(AttrToken.Int64(e.Token))
		}
		if e.Result == engine.ResultNoQuorum || e.Result == engine.ResultError {
			sp.RecordError(e.Err)
			sp.SetStatus(codes.Error, e.Result.String())
		}
	}
	sp.End(trace.WithTimestamp(e.Start.Add(e.Duration)))
}

func (o *observer) onRelease(ctx context.Context, e engine.ReleaseEvent) {
	o.release.Record(ctx, e.Duration.Seconds(), o.releaseRec[bounded(e.Result, nResults)]...)
}

func (o *observer) onExtend(ctx context.Context, e engine.ExtendEvent) {
	auto := 0
	if e.Auto {
		auto = 1
	}
	o.extend.Record(ctx, e.Duration.Seconds(), o.extendRec[auto][bounded(e.Result, nResults)]...)
}

func (o *observer) onWait(e engine.WaitEvent) {
	o.wait.Record(context.Background(), e.Duration.Seconds(), o.waitRec[bounded(e.Kind, 3)][bounded(e.Cause, nWake)]...)
}

func (o *observer) onHandoff(engine.HandoffEvent) {
	o.handoffs.Add(context.Background(), 1)
}

func (o *observer) onLost(e engine.LostEvent) {
	reason := 0
	if errors.Is(e.Err, engine.ErrLockLost) {
		reason = 1
	}
	o.lost.Add(context.Background(), 1, o.lostAdd[reason]...)
}

func (o *observer) onNodeState(e engine.NodeStateEvent) {
	o.mu.Lock()
	o.nodes[e.Addr] = e.State
	o.mu.Unlock()
}
