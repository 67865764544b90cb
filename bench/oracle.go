package bench

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-bench/redlock/results"
)

// maxExamples is how many violations are kept as examples.
const maxExamples = 10

// oracle is the in-process register of holds that checks mutual exclusion.
// A hold of a resource runs from the moment the acquire call returned until
// release begins or the lease's validity ends, whichever is first. Two
// holds of one resource that overlap are a violation.
//
// Workers must unregister a hold before calling Release: once the release
// reaches Redis another worker may acquire, and a hold still registered
// then would be a false violation.
//
// A correct lock never makes it fire: a second holder's acquire returns
// after the first's release began (we unregister first) or after its keys
// expired, which is after its validity ended. The nolock control makes it
// fire at once.
type oracle struct {
	base  time.Time
	slots []slot
	names []string

	count    atomic.Int64
	mu       sync.Mutex
	examples []results.Violation
}

// slot is one resource's holds. Padding to a cache line keeps workers on
// neighbouring resources from slowing each other down.
type slot struct {
	mu sync.Mutex
	// holds are the registered holds, almost always zero or one.
	holds []hold
	// lastEnd is the latest end of an unregistered hold, in nanoseconds
	// since base. A hold that starts before it overlapped that one, even
	// if the two were never registered at the same time.
	lastEnd     int64
	lastEndWith int32
	_           [20]byte
}

type hold struct {
	worker int32
	start  int64
	until  int64 // validity end, nanoseconds since base
}

func newOracle(base time.Time, names []string) *oracle {
	return &oracle{base: base, slots: make([]slot, len(names)), names: names}
}

// acquire registers worker's hold of resource res, starting at start and
// valid until until, and counts every hold it overlaps.
func (o *oracle) acquire(res int, worker int, start, until time.Time) {
	s0, u := start.Sub(o.base).Nanoseconds(), until.Sub(o.base).Nanoseconds()
	sl := &o.slots[res]
	sl.mu.Lock()
	if sl.lastEnd > s0 {
		o.violation(res, int(sl.lastEndWith), worker, s0, sl.lastEnd-s0)
	}
	kept := sl.holds[:0]
	for _, h := range sl.holds {
		if h.until <= s0 {
			// Its validity ended before we began: that hold is over.
			sl.ended(h.worker, h.until)
			continue
		}
		o.violation(res, int(h.worker), worker, s0, h.until-s0)
		kept = append(kept, h)
	}
	sl.holds = append(kept, hold{worker: int32(worker), start: s0, until: u})
	sl.mu.Unlock()
}

// release ends worker's hold of res at end (when release began).
func (o *oracle) release(res int, worker int, end time.Time) {
	e := end.Sub(o.base).Nanoseconds()
	sl := &o.slots[res]
	sl.mu.Lock()
	for i, h := range sl.holds {
		if h.worker == int32(worker) {
			sl.ended(h.worker, min(e, h.until))
			last := len(sl.holds) - 1
			sl.holds[i] = sl.holds[last]
			sl.holds = sl.holds[:last]
			break
		}
	}
	sl.mu.Unlock()
}

func (sl *slot) ended(worker int32, at int64) {
	if at > sl.lastEnd {
		sl.lastEnd, sl.lastEndWith = at, worker
	}
}

func (o *oracle) violation(res, first, second int, at, remaining int64) {
	if o.count.Add(1) > maxExamples {
		return
	}
	o.mu.Lock()
	o.examples = append(o.examples, results.Violation{
		Resource:         o.names[res],
		FirstHolder:      first,
		SecondHolder:     second,
		AtS:              float64(at) / 1e9,
		FirstRemainingUs: remaining / 1e3,
	})
	o.mu.Unlock()
}

// violations returns the count and the first examples, in the order found.
func (o *oracle) violations() (int64, []results.Violation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ex := append([]results.Violation(nil), o.examples...)
	return o.count.Load(), ex
}
