// Package otelredlock reports an engine.Locker's operations to
// OpenTelemetry: latency histograms, counters by outcome, the masters'
// states, and a span per Lock and TryLock.
//
// It is a module of its own, so that a service importing engine does not
// take on OpenTelemetry unless it imports this package too:
//
//	obs, err := otelredlock.New() // the global MeterProvider and TracerProvider
//	cfg := engine.DefaultConfig(masters...)
//	cfg.Observer = obs
//
// Names follow OpenTelemetry's semantic conventions: a redlock.* namespace
// for what is Redlock's own, the registry's attributes (error.type,
// server.address, server.port) where they apply, durations in seconds,
// counters pluralized with a {thing} unit. Instruments (meter scope
// ScopeName):
//
//	redlock.acquire.duration   histogram, s           redlock.operation (lock, try_lock), redlock.outcome, error.type
//	redlock.release.duration   histogram, s           redlock.outcome, error.type
//	redlock.extend.duration    histogram, s           redlock.outcome, redlock.extend.auto, error.type
//	redlock.wait.duration      histogram, s           redlock.wait.kind (gate, retry), redlock.wait.wake_cause, error.type
//	redlock.acquisitions       counter, {acquisition} redlock.operation, redlock.outcome (acquired, contended, no_quorum, error), error.type
//	redlock.lease.lost         counter, {lease}       redlock.lease.lost.reason (lock_lost, expired)
//	redlock.handoffs           counter, {handoff}
//	redlock.node.count         updowncounter, {node}  server.address, server.port, redlock.node.state (up, down, quarantined):
//	                                                  1 for the master's current state, 0 for the others
//	redlock.node.quarantined   updowncounter, {node}  server.address, server.port: 1 while the master's votes do not count
//
// error.type is set only when the operation failed, as the conventions
// ask, with one of these values: no_quorum, not_held, expired, contended
// (a Lock that gave up while the resource was held; a TryLock refused by a
// holder did what it was asked and carries none), timeout and canceled
// (the context ended), closed, wrong_type, reserved_resource,
// no_resources and too_many_resources (a TryLockAll or LockAll refused
// for its list of names), _OTHER.
//
// Spans: one per Lock and TryLock call, named "redlock.Lock" or
// "redlock.TryLock", of kind client, a child of the caller's context. It
// is recorded when the call ends, with the call's start as its start
// time, so the engine needs no tracing of its own; attributes are set
// then, so samplers see none. Attributes: redlock.resource,
// redlock.outcome, redlock.attempts, redlock.quorum, redlock.handoff,
// redlock.masters, redlock.votes.outcomes (each master's outcome, in
// redlock.masters order), redlock.votes.ok and redlock.votes.refused,
// redlock.fencing.token when fencing is on, and error.type. A failed call
// (error.type set) gets status Error with the error's message, and the
// error as an exception event.
package otelredlock

import (
	"context"
	"errors"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/redlock-bench/redlock/engine"
)

// ScopeName is the instrumentation scope of the meter and the tracer,
// whose schema URL is that of the semantic conventions the names follow
// (semconv v1.43.0).
const ScopeName = "github.com/redlock-bench/redlock/engine/otelredlock"

// version is this module's version as the service's build recorded it
// ("(devel)" inside this repository).
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/redlock-bench/redlock/engine/otelredlock" {
				return d.Version
			}
		}
		if bi.Main.Path == "github.com/redlock-bench/redlock/engine/otelredlock" {
			return bi.Main.Version
		}
	}
	return ""
}

// Attribute keys.
const (
	AttrOperation  = attribute.Key("redlock.operation")
	AttrOutcome    = attribute.Key("redlock.outcome")
	AttrErrorType  = semconv.ErrorTypeKey
	AttrAuto       = attribute.Key("redlock.extend.auto")
	AttrWaitKind   = attribute.Key("redlock.wait.kind")
	AttrWakeCause  = attribute.Key("redlock.wait.wake_cause")
	AttrLostReason = attribute.Key("redlock.lease.lost.reason")
	AttrNodeState  = attribute.Key("redlock.node.state")
	AttrAddress    = semconv.ServerAddressKey
	AttrPort       = semconv.ServerPortKey
	AttrResource   = attribute.Key("redlock.resource")
	AttrAttempts   = attribute.Key("redlock.attempts")
	AttrQuorum     = attribute.Key("redlock.quorum")
	AttrHandoff    = attribute.Key("redlock.handoff")
	AttrVotes      = attribute.Key("redlock.votes.outcomes")
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
	nWaitErr = 5  // how a wait ended: see waitErr
)

// A code is an engine.Result, refined for ResultError by the error's
// class: codes past nResults are ResultError with errorSubtypes[code-nResults].
type code uint8

var errorSubtypes = [...]string{"timeout", "canceled", "closed", "wrong_type", "reserved_resource",
	"no_resources", "too_many_resources", "_OTHER"}

const nCodes = nResults + len(errorSubtypes)

// codeOf classifies an event's result; errors.Is runs only for
// ResultError, off the hot path.
func codeOf(r engine.Result, err error) code {
	if int(r) >= nResults {
		r = 0
	}
	if r != engine.ResultError {
		return code(r)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nResults + 0
	case errors.Is(err, context.Canceled):
		return nResults + 1
	case errors.Is(err, engine.ErrClosed):
		return nResults + 2
	case errors.Is(err, engine.ErrWrongType):
		return nResults + 3
	case errors.Is(err, engine.ErrReservedResource):
		return nResults + 4
	case errors.Is(err, engine.ErrNoResources):
		return nResults + 5
	case errors.Is(err, engine.ErrTooManyResources):
		return nResults + 6
	}
	return nResults + 7
}

// result is c's engine.Result.
func (c code) result() engine.Result {
	if c >= nResults {
		return engine.ResultError
	}
	return engine.Result(c)
}

// errorType is error.type for code c of operation op (0 for release and
// extend), "" when the operation succeeded.
func (c code) errorType(op engine.AcquireOp) string {
	if c >= nResults {
		return errorSubtypes[c-nResults]
	}
	switch engine.Result(c) {
	case engine.ResultAcquired, engine.ResultReleased, engine.ResultHandedOff, engine.ResultExtended:
		return ""
	case engine.ResultContended:
		if op == engine.OpLock {
			return "contended"
		}
		return "" // a TryLock refused by a holder is an answer, not a failure
	case engine.ResultNoQuorum:
		return "no_quorum"
	case engine.ResultNotHeld:
		return "not_held"
	case engine.ResultExpired:
		return "expired"
	}
	return "_OTHER"
}

// waitErrors are error.type's values for a wait's error (the context's,
// or ErrClosed), index 0 none.
var waitErrors = [nWaitErr]string{"", "timeout", "canceled", "closed", "_OTHER"}

// waitErr is the index in waitErrors of a wait's error.
func waitErr(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.DeadlineExceeded):
		return 1
	case errors.Is(err, context.Canceled):
		return 2
	case errors.Is(err, engine.ErrClosed):
		return 3
	}
	return 4
}

// observer holds the instruments and, for every attribute combination,
// its options built once, so that recording allocates nothing for them.
type observer struct {
	tracer trace.Tracer // nil: no spans

	acquire, release, extend, wait metric.Float64Histogram
	acquisitions, lost, handoffs   metric.Int64Counter

	acquireRec [nOps][nCodes][]metric.RecordOption
	acquireAdd [nOps][nCodes][]metric.AddOption
	releaseRec [nCodes][]metric.RecordOption
	extendRec  [2][nCodes][]metric.RecordOption
	waitRec    [3][nWake][nWaitErr][]metric.RecordOption
	lostAdd    [2][]metric.AddOption

	mu    sync.Mutex
	nodes map[string]*nodeAttrs // each master's last state and attributes

	// The spans' slice attributes, built once: building one copies the
	// slice through reflection. votes is keyed by the VoteSet (bounded:
	// there are few outcome combinations), masters by the Locker's slice.
	votesMu sync.RWMutex
	votes   map[engine.VoteSet]attribute.KeyValue
	masters atomic.Pointer[mastersAttr]
}

// nodeAttrs is a master's last state and its gauges' attribute options.
type nodeAttrs struct {
	state       engine.NodeState
	byState     [4]metric.ObserveOption // up, down, quarantined, clock-skewed
	quarantined metric.ObserveOption
}

var nodeStates = [4]engine.NodeState{engine.StateUp, engine.StateDown, engine.StateQuarantined, engine.StateClockSkewed}

// serverAttrs splits a master's address into server.address and
// server.port, as the conventions want them.
func serverAttrs(addr string) []attribute.KeyValue {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []attribute.KeyValue{AttrAddress.String(addr)}
	}
	kv := []attribute.KeyValue{AttrAddress.String(host)}
	if p, err := strconv.Atoi(port); err == nil {
		kv = append(kv, AttrPort.Int(p))
	}
	return kv
}

func newNodeAttrs(addr string) *nodeAttrs {
	server := serverAttrs(addr)
	n := &nodeAttrs{quarantined: metric.WithAttributes(server...)}
	for i, s := range nodeStates {
		n.byState[i] = metric.WithAttributes(append(server[:len(server):len(server)], AttrNodeState.String(string(s)))...)
	}
	return n
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
	o := &observer{nodes: make(map[string]*nodeAttrs), votes: make(map[engine.VoteSet]attribute.KeyValue)}
	if _, off := c.tp.(noop.TracerProvider); !off {
		o.tracer = c.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version()), trace.WithSchemaURL(semconv.SchemaURL))
	}
	m := c.mp.Meter(ScopeName, metric.WithInstrumentationVersion(version()), metric.WithSchemaURL(semconv.SchemaURL))
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
	o.acquisitions = counter("redlock.acquisitions", "{acquisition}", "Lock and TryLock calls, by outcome.")
	o.lost = counter("redlock.lease.lost", "{lease}", "Leases that ended without a release: lock lost or validity expired while held.")
	o.handoffs = counter("redlock.handoffs", "{handoff}", "Leases passed to the next goroutine queued at the gate, without a round trip.")
	// Up-down counters, as the conventions' hw.status and
	// db.client.connection.count: summed over masters, they count the
	// masters in each state.
	state, err := m.Int64ObservableUpDownCounter("redlock.node.count", metric.WithUnit("{node}"),
		metric.WithDescription("Masters in each state (up, down, quarantined): 1 for a master's current state, 0 for the others."))
	errs = append(errs, err)
	quarantined, err := m.Int64ObservableUpDownCounter("redlock.node.quarantined", metric.WithUnit("{node}"),
		metric.WithDescription("1 while a master is quarantined after a restart: its votes do not count."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if _, err := m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, n := range o.nodes {
			for i, s := range nodeStates {
				v := int64(0)
				if s == n.state {
					v = 1
				}
				ob.ObserveInt64(state, v, n.byState[i])
			}
			q := int64(0)
			if n.state == engine.StateQuarantined {
				q = 1
			}
			ob.ObserveInt64(quarantined, q, n.quarantined)
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
	set := func(kv ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	// outcome is a code's attributes: redlock.outcome, and error.type when
	// the operation failed.
	outcome := func(op engine.AcquireOp, c code, kv ...attribute.KeyValue) []attribute.KeyValue {
		kv = append(kv, AttrOutcome.String(c.result().String()))
		if t := c.errorType(op); t != "" {
			kv = append(kv, AttrErrorType.String(t))
		}
		return kv
	}
	for op := range engine.AcquireOp(nOps) {
		opAttr := AttrOperation.String(op.String())
		for c := range code(nCodes) {
			s := set(outcome(op, c, opAttr)...)
			o.acquireRec[op][c] = []metric.RecordOption{s}
			o.acquireAdd[op][c] = []metric.AddOption{s}
		}
	}
	for c := range code(nCodes) {
		o.releaseRec[c] = []metric.RecordOption{set(outcome(0, c)...)}
		o.extendRec[0][c] = []metric.RecordOption{set(outcome(0, c, AttrAuto.Bool(false))...)}
		o.extendRec[1][c] = []metric.RecordOption{set(outcome(0, c, AttrAuto.Bool(true))...)}
	}
	for k := range engine.WaitKind(3) {
		for w := range engine.WakeCause(nWake) {
			base := []attribute.KeyValue{AttrWaitKind.String(k.String()), AttrWakeCause.String(w.String())}
			o.waitRec[k][w][0] = []metric.RecordOption{set(base...)}
			for i := 1; i < nWaitErr; i++ {
				o.waitRec[k][w][i] = []metric.RecordOption{set(append(base[:2:2], AttrErrorType.String(waitErrors[i]))...)}
			}
		}
	}
	o.lostAdd[0] = []metric.AddOption{set(AttrLostReason.String("expired"))}
	o.lostAdd[1] = []metric.AddOption{set(AttrLostReason.String("lock_lost"))}
}

// bounded clamps an enum value into a table of n entries (0 is "unknown").
func bounded[T ~uint8](v T, n int) T {
	if int(v) >= n {
		return 0
	}
	return v
}

func (o *observer) onAcquire(ctx context.Context, e engine.AcquireEvent) {
	op, c := bounded(e.Op, nOps), codeOf(e.Result, e.Err)
	o.acquire.Record(ctx, e.Duration.Seconds(), o.acquireRec[op][c]...)
	o.acquisitions.Add(ctx, 1, o.acquireAdd[op][c]...)
	if o.tracer != nil {
		o.span(ctx, &e, c)
	}
}

// spanScratch holds a span's option and attribute slices: the tracer's
// methods are called through interfaces, so slices passed to them escape,
// and the SDK copies what it keeps.
type spanScratch struct {
	start [2]trace.SpanStartOption
	attrs [12]attribute.KeyValue
}

var scratchPool = sync.Pool{New: func() any { return new(spanScratch) }}

// span records the call's span after the fact, from its start. It ends
// now, as the call returns: an end timestamp would cost an allocation.
func (o *observer) span(ctx context.Context, e *engine.AcquireEvent, c code) {
	name := "redlock.TryLock"
	if e.Op == engine.OpLock {
		name = "redlock.Lock"
	}
	s := scratchPool.Get().(*spanScratch)
	s.start[0], s.start[1] = trace.WithTimestamp(e.Start), clientKind
	_, sp := o.tracer.Start(ctx, name, s.start[:]...)
	used := 0
	if sp.IsRecording() {
		a := append(s.attrs[:0],
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
			a = append(a, AttrToken.Int64(e.Token))
		}
		t := c.errorType(e.Op)
		if t != "" {
			a = append(a, AttrErrorType.String(t))
		}
		sp.SetAttributes(a...)
		used = len(a)
		if t != "" && e.Err != nil {
			sp.RecordError(e.Err)
			sp.SetStatus(codes.Error, e.Err.Error())
		}
	}
	sp.End()
	// Keep no resource name or time alive in the pool; only what was used.
	s.start = [2]trace.SpanStartOption{}
	clear(s.attrs[:used])
	scratchPool.Put(s)
}

func (o *observer) onRelease(ctx context.Context, e engine.ReleaseEvent) {
	o.release.Record(ctx, e.Duration.Seconds(), o.releaseRec[codeOf(e.Result, e.Err)]...)
}

func (o *observer) onExtend(ctx context.Context, e engine.ExtendEvent) {
	auto := 0
	if e.Auto {
		auto = 1
	}
	o.extend.Record(ctx, e.Duration.Seconds(), o.extendRec[auto][codeOf(e.Result, e.Err)]...)
}

func (o *observer) onWait(e engine.WaitEvent) {
	o.wait.Record(context.Background(), e.Duration.Seconds(), o.waitRec[bounded(e.Kind, 3)][bounded(e.Cause, nWake)][waitErr(e.Err)]...)
}

func (o *observer) onHandoff(engine.HandoffEvent) {
	o.handoffs.Add(context.Background(), 1)
}

func (o *observer) onLost(e engine.LostEvent) {
	reason := 1 // lock_lost
	if e.Result == engine.ResultExpired {
		reason = 0
	}
	o.lost.Add(context.Background(), 1, o.lostAdd[reason]...)
}

func (o *observer) onNodeState(e engine.NodeStateEvent) {
	o.mu.Lock()
	n := o.nodes[e.Addr]
	if n == nil {
		n = newNodeAttrs(e.Addr)
		o.nodes[e.Addr] = n
	}
	n.state = e.State
	o.mu.Unlock()
}
