package bench

import (
	"runtime"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/results"
)

// errKind classifies a failed operation for the counters.
type errKind uint8

// Error kinds; the order of the named ones follows results.ErrorKinds.
const (
	errNoQuorum errKind = iota
	errTimeout
	errOther
	errRelease
	numErrKinds
	// kindContended is a refusal because another holder has the lock. It
	// is counted apart from errors: contention is the workload, not a fault.
	kindContended
)

// counters are the plain counts of one interval.
type counters struct {
	attempts, acquired, contended, lost int64
	errors                              [numErrKinds]int64
	// extensions sums auto-extensions; notified counts acquisitions woken
	// by a release notification, gated those that queued at the gate;
	// fallbacks and backoffs sum the waits ended that way.
	extensions, notified, gated, fallbacks, backoffs int64
}

func (c *counters) add(o *counters) {
	c.attempts += o.attempts
	c.acquired += o.acquired
	c.contended += o.contended
	c.lost += o.lost
	c.extensions += o.extensions
	c.notified += o.notified
	c.gated += o.gated
	c.fallbacks += o.fallbacks
	c.backoffs += o.backoffs
	for i := range c.errors {
		c.errors[i] += o.errors[i]
	}
}

func (c *counters) errorTotal() int64 {
	var n int64
	for _, v := range c.errors {
		n += v
	}
	return n
}

// interval is what was recorded between two ticks of the collector.
type interval struct {
	hist *results.Set
	c    counters
	// measured marks an interval of the measured window. An operation
	// that began in the warm-up is not recorded into one: it belongs to
	// neither window.
	measured bool
}

func newInterval() *interval { return &interval{hist: results.NewSet()} }

func (iv *interval) reset() {
	iv.hist.Reset()
	iv.c = counters{}
}

// opRecord is one finished operation, as a worker buffers it: 24 bytes.
type opRecord struct {
	acquireUs, holdUs, releaseUs, handoffUs uint32
	// extensions, fallbacks and backoffs are the lease's auto-extensions
	// and its Lock's waits ended by the fallback timer or a back-off,
	// saturated at the uint16 range.
	extensions, fallbacks, backoffs uint16
	flags                           recFlags
	kind                            errKind // failures only
}

type recFlags uint8

const (
	recMeasured      recFlags = 1 << iota // began in the measured window
	recAcquired                           // got the lock (else kind says why not)
	recWait                               // acquired in mode wait
	recLost                               // the lease was lost before release
	recReleaseFailed                      // release failed (not a lost lease)
	recHandoff                            // handoffUs is set: a waiter took the resource over
	recNotified                           // the last wait ended with a release notification
	recGated                              // queued at the engine's in-process gate
)

// sat16 saturates n to the range of a uint16.
func sat16(n int) uint16 {
	if n < 0 {
		return 0
	}
	if n > 0xffff {
		return 0xffff
	}
	return uint16(n)
}

// toUs converts a duration to whole microseconds, clamped to the
// histograms' range so that it fits a uint32.
func toUs(d time.Duration) uint32 {
	us := d / time.Microsecond
	if us < 0 {
		return 0
	}
	if us > time.Duration(results.HighestUs) {
		return uint32(results.HighestUs)
	}
	return uint32(us)
}

// add records r into iv, unless r began in the warm-up and iv is measured.
func (iv *interval) add(r *opRecord) {
	if iv.measured && r.flags&recMeasured == 0 {
		return
	}
	iv.c.attempts++
	if r.flags&recAcquired == 0 {
		if r.kind == kindContended {
			iv.c.contended++
		} else {
			iv.c.errors[r.kind]++
		}
		iv.hist.RecordUs(results.AcquireFail, int64(r.acquireUs))
		return
	}
	iv.c.acquired++
	if r.flags&recLost != 0 {
		iv.c.lost++
	}
	iv.c.extensions += int64(r.extensions)
	iv.c.fallbacks += int64(r.fallbacks)
	iv.c.backoffs += int64(r.backoffs)
	if r.flags&recNotified != 0 {
		iv.c.notified++
	}
	if r.flags&recGated != 0 {
		iv.c.gated++
	}
	if r.flags&recHandoff != 0 {
		iv.hist.RecordUs(results.Handoff, int64(r.handoffUs))
	}
	if r.flags&recReleaseFailed != 0 {
		iv.c.errors[errRelease]++
	}
	k := results.Acquire
	if r.flags&recWait != 0 {
		k = results.Wait
	}
	iv.hist.RecordUs(k, int64(r.acquireUs))
	iv.hist.RecordUs(results.Hold, int64(r.holdUs))
	iv.hist.RecordUs(results.Release, int64(r.releaseUs))
}

// bufLen is how many operations a worker buffers before it takes its
// shard's lock. Taking a shared lock per operation collapses into a lock
// convoy with thousands of workers on two cores; per 64 operations it is
// rarely contended.
const bufLen = 64

// opBuffer is a worker's unflushed operations. Its lock is contended only
// by the collector, once a second.
type opBuffer struct {
	mu   sync.Mutex
	n    int
	recs [bufLen]opRecord
}

// shard is where a group of workers flush their buffers. A full set of
// histograms is ~0.2 MB per kind, so one per worker would not scale to
// 10,000 workers; instead workers share a bounded number of shards.
type shard struct {
	mu  sync.Mutex
	cur *interval
	_   [48]byte // keep neighbouring shards' locks off one cache line
}

// shardCount bounds memory (one histogram set per shard, plus one spare)
// while keeping lock contention low: a couple of shards per CPU.
func shardCount(workers int) int {
	return max(1, min(workers, 2*runtime.GOMAXPROCS(0), 64))
}

// record buffers one operation, flushing the buffer into sh when full.
func (b *opBuffer) record(sh *shard, r opRecord) {
	b.mu.Lock()
	b.recs[b.n] = r
	b.n++
	if b.n == bufLen {
		sh.mu.Lock()
		for i := range b.recs {
			sh.cur.add(&b.recs[i])
		}
		sh.mu.Unlock()
		b.n = 0
	}
	b.mu.Unlock()
}

// drainInto moves the buffered operations into iv.
func (b *opBuffer) drainInto(iv *interval) {
	b.mu.Lock()
	for i := 0; i < b.n; i++ {
		iv.add(&b.recs[i])
	}
	b.n = 0
	b.mu.Unlock()
}

// swap replaces the shard's interval with spare and returns the old one.
func (s *shard) swap(spare *interval) *interval {
	s.mu.Lock()
	old := s.cur
	s.cur = spare
	s.mu.Unlock()
	return old
}

// recorder owns the shards, the workers' buffers and the totals.
type recorder struct {
	shards  []shard
	buffers []opBuffer
	// spare is swapped into a shard; the interval taken out is merged,
	// emptied and becomes the spare for the next shard, so the collector
	// needs one spare in all.
	spare *interval
	// last is the merged interval just collected; total is the measured
	// window so far.
	last, total *interval
}

func newRecorder(nshards, workers int) *recorder {
	r := &recorder{
		shards:  make([]shard, nshards),
		buffers: make([]opBuffer, workers),
		spare:   newInterval(),
		last:    newInterval(),
		total:   newInterval(),
	}
	for i := range r.shards {
		r.shards[i].cur = newInterval()
	}
	return r
}

// collect gathers everything recorded since the last call into r.last,
// which it empties first: the workers' buffers, then the shards' intervals,
// which it swaps out. The intervals swapped in are marked measured or not:
// at the end of the warm-up the collector swaps in measured intervals first
// and only then lets workers start measured operations, so that no
// measured operation lands in a discarded warm-up interval.
func (r *recorder) collect(measured bool) *interval {
	r.last.reset()
	r.last.measured = measured
	for i := range r.buffers {
		r.buffers[i].drainInto(r.last)
	}
	for i := range r.shards {
		r.spare.measured = measured
		old := r.shards[i].swap(r.spare)
		r.last.hist.Merge(old.hist)
		r.last.c.add(&old.c)
		old.reset()
		r.spare = old
	}
	return r.last
}

// commit adds r.last to the measured totals.
func (r *recorder) commit() {
	r.total.hist.Merge(r.last.hist)
	r.total.c.add(&r.last.c)
}
