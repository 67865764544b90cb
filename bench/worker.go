package bench

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/engine"
)

// worker is one goroutine of load. The loop allocates nothing of its own:
// names are precomputed, the random sources and the timer are the
// worker's, and the recorder and oracle take no allocations per call.
type worker struct {
	id    int
	r     *runner
	c     *engines.Client
	sh    *shard
	buf   *opBuffer
	rng   *rand.Rand
	zipf  *rand.Zipf
	timer *time.Timer
	// wake receives the sleeper's signal (see sleeper.sleep).
	wake chan struct{}
	// set and setNames are the resources of the operation under way:
	// one, or K sorted by name with --lock multi:K.
	set      []int
	setNames []string
}

func (w *worker) loop() {
	defer w.r.wg.Done()
	defer func() {
		if w.timer != nil {
			w.timer.Stop()
		}
	}()
	for n := uint(1); !w.r.stopped.Load(); n++ {
		if n%yieldEvery == 0 {
			// A goroutine that never blocks (the nolock control never
			// does) is only preempted after 10ms; with thousands of them
			// on two cores, the collector and any goroutine holding a
			// lock wait seconds for their turn. Yielding keeps the run
			// queue moving.
			runtime.Gosched()
		}
		if !w.operate() {
			return
		}
	}
}

// op is one operation's place and times.
type op struct {
	// read: with --lock rw:F, the operation reads (a shared hold).
	read bool
	// measured: in the measured window; claimed: one of --ops's.
	measured, claimed bool
	// t0 is when the operation was due (open loop) or began; asked when
	// the lock was asked for, which the oracle measures a handoff from;
	// t1 when the acquire returned.
	t0, asked, t1 time.Time
}

// operate runs one operation: acquire, hold, release, record. It reports
// whether the worker goes on: not once the run stopped or --ops is
// reached.
func (w *worker) operate() bool {
	o, ok := w.begin()
	if !ok {
		return false
	}
	lease, waitCtx, err := w.acquire(o.read)
	o.t1 = time.Now()
	if err != nil {
		return w.failed(o, err, waitCtx)
	}
	h := w.hold(o, lease)
	if w.r.stopped.Load() {
		return false
	}
	w.recordAcquired(o, lease, h)
	return true
}

// begin starts the next operation: in an open loop it waits until the
// operation is due, under --ops it claims one of the measured operations,
// and it picks the resource. ok is false when the run stops first or the
// other workers have claimed the rest.
func (w *worker) begin() (o op, ok bool) {
	r := w.r
	if r.perOpNs > 0 {
		// Open loop: latency counts from when the operation was due,
		// not from when a worker got to it (no coordinated omission).
		n := r.tickets.Add(1) - 1
		o.t0 = r.start.Add(time.Duration(float64(n) * r.perOpNs))
		if d := time.Until(o.t0); d > 0 && !w.sleep(d) {
			return o, false
		}
	}
	o.measured = r.measuring.Load()
	if r.opsCap > 0 && o.measured {
		if r.opsTaken.Add(1) > r.opsCap {
			return o, false // the others finish the last operations
		}
		o.claimed = true
	}
	w.pickSet()
	if f := r.cfg.Lock.Reads(); f > 0 {
		// Drawn whether or not the engine shares reads (RedlockMutex
		// does not), so that its operations fall on the same resources
		// as ours.
		o.read = w.rng.Float64() < f && r.shared
	}
	o.asked = o.t0
	if r.perOpNs == 0 {
		o.t0 = time.Now()
		o.asked = o.t0
	} else if r.cfg.Mode == ModeWait {
		o.asked = time.Now() // the call, not the intended start
	}
	return o, true
}

// acquire takes the lock of the resources w.set (for reading if read):
// one attempt, or in mode wait until acquired or --wait-timeout. waitCtx,
// the wait's context (nil in mode try), tells a timeout from other
// failures.
func (w *worker) acquire(read bool) (lease engines.Lease, waitCtx context.Context, err error) {
	r := w.r
	ctx, wait := r.opCtx, r.cfg.Mode == ModeWait
	if wait {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(r.opCtx, r.cfg.WaitTimeout)
		defer cancel()
		ctx = waitCtx
	}
	lease, err = w.c.Take(ctx, engines.Op{Names: w.setNames, Read: read, Wait: wait})
	return lease, waitCtx, err
}

// failed records an acquire that failed. It reports false when the run
// has stopped: the stop cut the call short, which is not a failure.
func (w *worker) failed(o op, err error, waitCtx context.Context) bool {
	r := w.r
	if r.stopped.Load() {
		return false
	}
	kind := classify(err, waitCtx)
	if kind != kindContended {
		r.noteError(kind, err, o.measured)
	}
	rec := opRecord{acquireUs: toUs(o.t1.Sub(o.t0)), kind: kind}
	if o.measured {
		rec.flags = recMeasured
	}
	w.buf.record(w.sh, rec)
	w.done(o.claimed)
	return true
}

// classify sorts a failed acquire into a counter. waitCtx is the
// per-operation context of mode wait (nil in mode try); when it ran out,
// the wait timed out whatever the last attempt said.
func classify(err error, waitCtx context.Context) errKind {
	if waitCtx != nil && errors.Is(waitCtx.Err(), context.DeadlineExceeded) {
		return errTimeout
	}
	switch engines.Classify(err) {
	case engines.Contended:
		return kindContended
	case engines.NoQuorum:
		return errNoQuorum
	case engines.TimedOut:
		return errTimeout
	}
	return errOther
}

// held is what became of an acquired lease.
type held struct {
	// t2 is when the hold ended, t3 when the release returned.
	t2, t3 time.Time
	// lost: the lease expired or was lost before its release.
	lost, releaseFailed bool
	// handed: the oracle saw the resource handed over from another
	// holder, handoff after the lock was asked for.
	handed  bool
	handoff time.Duration
}

// hold holds the lease for the hold time, under the oracle's watch, then
// releases it. A multi-resource lease is a hold of each of its
// resources, each with its own part (engines.Part).
func (w *worker) hold(o op, lease engines.Lease) (h held) {
	r, cfg := w.r, &w.r.cfg
	res := w.set
	if r.oracle != nil {
		for i, ri := range res {
			d, handed := r.oracle.begin(ri, w.id, w.holdSpec(o, engines.Part(lease, i)))
			// A lease on several resources waited for the last of them.
			if handed && (!h.handed || d < h.handoff) {
				h.handoff, h.handed = d, true
			}
		}
	}
	h.t2 = o.t1
	if !cfg.Hold.Zero() {
		w.sleep(w.holdTime())
		h.t2 = time.Now()
	}
	// Unregister before releasing: see oracle.
	for i, ri := range res {
		until, lost := w.holdEnd(engines.Part(lease, i), h.t2)
		h.lost = h.lost || lost
		if r.oracle != nil {
			r.oracle.release(ri, w.id, minTime(h.t2, until))
		}
	}
	rerr := lease.Release(r.relCtx)
	h.t3 = time.Now()
	if rerr != nil {
		if engines.Lost(rerr) {
			h.lost = true
		} else {
			h.releaseFailed = true
			r.noteError(errRelease, rerr, o.measured)
		}
	}
	return h
}

// liveLease reports whether lease's validity moves while it is held: ours
// with --extend, and a baseline's that extends itself.
func (w *worker) liveLease(lease engines.Lease) bool {
	if _, ok := lease.(engines.SelfExtending); ok {
		return true
	}
	_, detailed := lease.(engines.Detailed)
	return detailed && w.r.cfg.Extend
}

// holdSpec describes to the oracle the hold of a resource by lease, which
// the operation o acquired.
func (w *worker) holdSpec(o op, lease engines.Lease) holdSpec {
	spec := holdSpec{start: o.t1, until: lease.ValidUntil(), shared: o.read}
	if w.r.cfg.Mode == ModeWait {
		spec.asked = o.asked
	}
	if dl, ok := lease.(engines.Detailed); ok {
		spec.token = dl.Token()
	}
	if pl, ok := lease.(engines.Permitted); ok {
		spec.permit = pl.Permit() + 1
	}
	if w.liveLease(lease) {
		spec.live = lease
	}
	return spec
}

// holdEnd is the validity end of lease when its hold ends at t2, and
// whether it was lost by then: expired, or its lost-lock signal fired,
// whatever its validity said.
func (w *worker) holdEnd(lease engines.Lease, t2 time.Time) (until time.Time, lost bool) {
	until = lease.ValidUntil()
	if dl, ok := lease.(engines.Detailed); ok && w.liveLease(lease) {
		lost = dl.Err() != nil
	}
	return until, lost || !t2.Before(until)
}

// pickSet chooses the resources of the next operation: one, or the K
// distinct ones of a multi-resource lease, each by the distribution,
// sorted by name, the order in which a lease takes them. A resource drawn
// twice is drawn again; a small pool under a steep Zipf would take long
// to yield its coldest resources that way, so after 16·K draws the rest
// are drawn uniformly.
func (w *worker) pickSet() {
	names, set := w.r.names, w.set
	if len(set) == 1 {
		set[0] = w.pick()
		w.setNames[0] = names[set[0]]
		return
	}
	for n, draws := 0, 0; n < len(set); draws++ {
		var i int
		if draws < 16*len(set) {
			i = w.pick()
		} else {
			i = w.rng.IntN(len(names))
		}
		if !slices.Contains(set[:n], i) {
			set[n] = i
			n++
		}
	}
	for i := 1; i < len(set); i++ {
		for j := i; j > 0 && names[set[j]] < names[set[j-1]]; j-- {
			set[j], set[j-1] = set[j-1], set[j]
		}
	}
	for i, ri := range set {
		w.setNames[i] = names[ri]
	}
}

// recordAcquired records an operation that acquired its lease.
func (w *worker) recordAcquired(o op, lease engines.Lease, h held) {
	r, cfg := w.r, &w.r.cfg
	wait := cfg.Mode == ModeWait
	rec := opRecord{acquireUs: toUs(o.t1.Sub(o.t0)), holdUs: toUs(h.t2.Sub(o.t1)), releaseUs: toUs(h.t3.Sub(h.t2)), flags: recAcquired}
	if o.measured {
		rec.flags |= recMeasured
	}
	if wait {
		rec.flags |= recWait
	}
	if h.lost {
		rec.flags |= recLost
	}
	if h.releaseFailed {
		rec.flags |= recReleaseFailed
	}
	if h.handed {
		rec.flags |= recHandoff
		rec.handoffUs = toUs(h.handoff)
	}
	if dl, ok := lease.(engines.Detailed); ok {
		if wait {
			wi := dl.Wait()
			rec.fallbacks, rec.backoffs = sat16(wi.Fallbacks), sat16(wi.Backoffs)
			if wi.Cause == engine.WakeNotified {
				rec.flags |= recNotified
			}
			if wi.Gated {
				rec.flags |= recGated
			}
		}
		if cfg.Extend {
			rec.extensions = sat16(dl.Extensions())
		}
	}
	w.buf.record(w.sh, rec)
	if o.measured {
		r.perWorker[w.id].n.Add(1)
	}
	w.done(o.claimed)
}

// workerCount is one worker's count of measured acquisitions, alone on its
// cache line: each worker bumps its own, and only the end of the run reads
// them all.
type workerCount struct {
	n atomic.Int64
	_ [56]byte
}

// yieldEvery is how many operations a worker runs between yields.
const yieldEvery = 16

// done counts a claimed operation as recorded, and ends the run with the
// last one.
func (w *worker) done(claimed bool) {
	if claimed && w.r.opsDone.Add(1) == w.r.opsCap {
		w.r.limitReached()
	}
}

// newRand is worker id's random source: reproducible from the seed, and
// different for every worker.
func newRand(seed uint64, id int) *rand.Rand { return rand.New(rand.NewPCG(seed, uint64(id))) }

// newZipf returns the Zipf generator of cfg's distribution, or nil for
// uniform. Resource 0 is the hottest.
func newZipf(rng *rand.Rand, cfg Config) *rand.Zipf {
	if !cfg.Distribution.Zipf {
		return nil
	}
	return rand.NewZipf(rng, cfg.Distribution.S, 1, uint64(cfg.Resources-1))
}

// pick chooses the resource of the next operation.
func (w *worker) pick() int {
	if w.zipf != nil {
		return int(w.zipf.Uint64())
	}
	return w.rng.IntN(len(w.r.names))
}

// maxExpFactor caps exponential hold times at this many means, so that one
// draw from the far tail cannot stall a worker for the rest of the run.
const maxExpFactor = 20

func (w *worker) holdTime() time.Duration {
	h := w.r.cfg.Hold
	switch h.Kind {
	case HoldExp:
		return time.Duration(math.Min(w.rng.ExpFloat64(), maxExpFactor) * float64(h.D))
	case HoldUniform:
		if h.Max == h.Min {
			return h.Min
		}
		return h.Min + time.Duration(w.rng.Int64N(int64(h.Max-h.Min)+1))
	}
	return h.D
}

// sleep waits for d or until the run stops; it reports whether the run
// still goes on. The timer is the worker's own, reused, so that sleeping
// allocates nothing.
func (w *worker) sleep(d time.Duration) bool {
	if d <= 0 {
		return !w.r.stopped.Load()
	}
	if sl := w.r.sleeper; sl != nil {
		if w.wake == nil {
			w.wake = make(chan struct{}, 1)
		}
		return sl.sleep(d, w.wake, w.r.done)
	}
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	select {
	case <-w.timer.C:
		return true
	case <-w.r.done:
		w.timer.Stop()
		return false
	}
}
