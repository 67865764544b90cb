package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// worker is one goroutine of load. The loop allocates nothing of its own:
// names are precomputed, the random sources and the timer are the
// worker's, and the recorder and oracle take no allocations per call.
type worker struct {
	id    int
	r     *runner
	eng   Engine
	sh    *shard
	buf   *opBuffer
	rng   *rand.Rand
	zipf  *rand.Zipf
	timer *time.Timer
	// wake receives the sleeper's signal (see sleeper.sleep).
	wake chan struct{}
}

func (w *worker) loop() {
	r := w.r
	defer r.wg.Done()
	defer func() {
		if w.timer != nil {
			w.timer.Stop()
		}
	}()
	cfg := &r.cfg
	wait := cfg.Mode == ModeWait
	for n := uint(1); !r.stopped.Load(); n++ {
		if n%yieldEvery == 0 {
			// A goroutine that never blocks (the nolock control never
			// does) is only preempted after 10ms; with thousands of them
			// on two cores, the collector and any goroutine holding a
			// lock wait seconds for their turn. Yielding keeps the run
			// queue moving.
			runtime.Gosched()
		}
		var t0 time.Time
		if r.perOpNs > 0 {
			// Open loop: latency counts from when the operation was due,
			// not from when a worker got to it (no coordinated omission).
			n := r.tickets.Add(1) - 1
			t0 = r.start.Add(time.Duration(float64(n) * r.perOpNs))
			if d := time.Until(t0); d > 0 && !w.sleep(d) {
				return
			}
		}
		measured := r.measuring.Load()
		claimed := false
		if r.opsCap > 0 && measured {
			if r.opsTaken.Add(1) > r.opsCap {
				return // the others finish the last operations
			}
			claimed = true
		}
		res := w.pick()
		asked := t0
		if r.perOpNs == 0 {
			t0 = time.Now()
			asked = t0
		} else if wait {
			asked = time.Now() // the call, not the intended start
		}

		var lease Lease
		var err error
		var waitCtx context.Context
		if wait {
			var cancel context.CancelFunc
			waitCtx, cancel = context.WithTimeout(r.opCtx, cfg.WaitTimeout)
			lease, err = w.eng.Lock(waitCtx, r.names[res])
			cancel()
		} else {
			lease, err = w.eng.TryLock(r.opCtx, r.names[res])
		}
		t1 := time.Now()
		if err != nil {
			if r.stopped.Load() {
				return // cut short by the end of the run: not a failure
			}
			kind := classify(err, waitCtx)
			if kind != kindContended {
				r.noteError(kind, err)
			}
			rec := opRecord{acquireUs: toUs(t1.Sub(t0)), kind: kind}
			if measured {
				rec.flags = recMeasured
			}
			w.buf.record(w.sh, rec)
			w.done(claimed)
			continue
		}

		until := lease.ValidUntil()
		dl, detailed := lease.(detailedLease)
		var handoff time.Duration
		handed := false
		if r.oracle != nil {
			h := holdSpec{start: t1, until: until}
			if wait {
				h.asked = asked
			}
			if detailed {
				h.token = dl.Token()
				if cfg.Extend {
					h.live = lease
				}
			}
			handoff, handed = r.oracle.begin(res, w.id, h)
		}
		t2 := t1
		if !cfg.Hold.Zero() {
			w.sleep(w.holdTime())
			t2 = time.Now()
		}
		lostSignal := false
		if detailed && cfg.Extend {
			// Auto-extension moved the validity; and a lease whose
			// lost-lock signal fired is lost, whatever its validity said.
			until = lease.ValidUntil()
			lostSignal = dl.Err() != nil
		}
		lost := lostSignal || !t2.Before(until)
		// Unregister before releasing: see oracle.
		if r.oracle != nil {
			r.oracle.release(res, w.id, minTime(t2, until))
		}
		rerr := lease.Release(r.relCtx)
		t3 := time.Now()
		releaseFailed := false
		if rerr != nil {
			if leaseLost(rerr) {
				lost = true
			} else {
				releaseFailed = true
				r.noteError(errRelease, rerr)
			}
		}
		if r.stopped.Load() {
			return
		}
		rec := opRecord{acquireUs: toUs(t1.Sub(t0)), holdUs: toUs(t2.Sub(t1)), releaseUs: toUs(t3.Sub(t2)), flags: recAcquired}
		if measured {
			rec.flags |= recMeasured
		}
		if wait {
			rec.flags |= recWait
		}
		if lost {
			rec.flags |= recLost
		}
		if releaseFailed {
			rec.flags |= recReleaseFailed
		}
		if handed {
			rec.flags |= recHandoff
			rec.handoffUs = toUs(handoff)
		}
		if detailed {
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
		if measured {
			r.perWorker[w.id].n.Add(1)
		}
		w.done(claimed)
	}
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
