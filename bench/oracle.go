package bench

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-bench/redlock/results"
)

// maxExamples is how many violations (and stale tokens) are kept as
// examples.
const maxExamples = 10

// oracle is the in-process register of holds that checks mutual exclusion.
// A hold of a resource runs from the moment the acquire call returned until
// release begins or the lease's validity ends, whichever is first. Two
// holds of one resource that overlap are a violation.
//
// With auto-extension the validity moves while the hold lasts, so a hold
// registered with a live lease has its validity read from the lease when
// another hold of the resource begins, and the worker passes the validity
// it re-reads at release.
//
// Workers must unregister a hold before calling Release: once the release
// reaches Redis another worker may acquire, and a hold still registered
// then would be a false violation.
//
// A correct lock never makes it fire: a second holder's acquire returns
// after the first's release began (we unregister first) or after its keys
// expired, which is after its validity ended. The nolock control makes it
// fire at once.
//
// The register serves two more purposes. With fencing, it checks that
// tokens strictly increase per resource in the order the holds began; a
// token that does not is stale. And it measures handoffs: the time from the
// end of one hold to the start of the next, when the next was asked for
// before the previous ended (a waiter took it over).
type oracle struct {
	base  time.Time
	slots []slot
	names []string

	count    atomic.Int64
	mu       sync.Mutex
	examples []results.Violation

	tokensChecked atomic.Int64
	stale         atomic.Int64
	staleMu       sync.Mutex
	staleExamples []results.StaleToken
}

// slot is one resource's holds. Its fields fill one 64-byte cache line,
// which keeps workers on neighbouring resources from slowing each other
// down.
type slot struct {
	mu sync.Mutex
	// holds are the registered holds, almost always zero or one.
	holds []hold
	// lastEnd is the latest end of an unregistered hold, in nanoseconds
	// since base. A hold that starts before it overlapped that one, even
	// if the two were never registered at the same time.
	lastEnd int64
	// lastToken is the highest fencing token seen, carried by a hold that
	// began at lastTokenStart.
	lastToken      int64
	lastTokenStart int64
	lastEndWith    int32
	_              int32
}

type hold struct {
	worker int32
	start  int64
	until  int64 // validity end, nanoseconds since base
	// live is the lease, when its validity may move (auto-extension).
	live Lease
}

// holdSpec describes a hold as it begins.
type holdSpec struct {
	// start is when the acquire call returned; until is the lease's
	// validity end then.
	start, until time.Time
	// asked is when the acquisition was asked for, in mode wait; zero
	// otherwise. A hold asked for before the previous hold of the resource
	// ended took that one over: its handoff is measured.
	asked time.Time
	// token is the fencing token; 0 for none.
	token int64
	// live is set when the lease's validity may move while it is held.
	live Lease
}

func newOracle(base time.Time, names []string) *oracle {
	return &oracle{base: base, slots: make([]slot, len(names)), names: names}
}

func (o *oracle) ns(t time.Time) int64 { return t.Sub(o.base).Nanoseconds() }

// acquire registers worker's hold of resource res with validity end until,
// and counts every hold it overlaps.
func (o *oracle) acquire(res int, worker int, start, until time.Time) {
	o.begin(res, worker, holdSpec{start: start, until: until})
}

// begin registers worker's hold of resource res, counts every hold it
// overlaps, checks its fencing token, and returns its handoff: the time
// since the previous hold ended, if this one was asked for before that.
func (o *oracle) begin(res int, worker int, h holdSpec) (handoff time.Duration, handed bool) {
	s0, u := o.ns(h.start), o.ns(h.until)
	sl := &o.slots[res]
	sl.mu.Lock()
	kept := sl.holds[:0]
	for _, old := range sl.holds {
		until := old.until
		if old.live != nil {
			// Read now: the holder's view of its validity at our start
			// (or later, which only errs towards reporting).
			until = o.ns(old.live.ValidUntil())
		}
		if until <= s0 {
			// Its validity ended before we began: that hold is over.
			sl.ended(old.worker, until)
			continue
		}
		o.violation(res, int(old.worker), worker, s0, until-s0)
		kept = append(kept, old)
	}
	if sl.lastEnd > s0 {
		o.violation(res, int(sl.lastEndWith), worker, s0, sl.lastEnd-s0)
	}
	if !h.asked.IsZero() && sl.lastEnd > 0 && sl.lastEnd <= s0 && o.ns(h.asked) <= sl.lastEnd {
		handoff, handed = time.Duration(s0-sl.lastEnd), true
	}
	if h.token != 0 {
		o.checkToken(sl, res, worker, s0, h.token)
	}
	sl.holds = append(kept, hold{worker: int32(worker), start: s0, until: u, live: h.live})
	sl.mu.Unlock()
	return handoff, handed
}

// checkToken compares a hold's token with the token of the hold of the
// same resource that began just before it. The caller holds sl.mu.
func (o *oracle) checkToken(sl *slot, res, worker int, s0, token int64) {
	o.tokensChecked.Add(1)
	prev, later := sl.lastToken, s0 >= sl.lastTokenStart
	if prev != 0 && (later && token <= prev || !later && token >= prev) {
		o.staleToken(res, worker, s0, token, prev)
	}
	if later {
		sl.lastToken, sl.lastTokenStart = max(token, prev), s0
	}
}

// release ends worker's hold of res at end: when release began, or the
// lease's validity end as re-read then, whichever is first.
func (o *oracle) release(res int, worker int, end time.Time) {
	e := o.ns(end)
	sl := &o.slots[res]
	sl.mu.Lock()
	for i, h := range sl.holds {
		if h.worker == int32(worker) {
			if h.live == nil {
				e = min(e, h.until)
			}
			sl.ended(h.worker, e)
			last := len(sl.holds) - 1
			sl.holds[i] = sl.holds[last]
			sl.holds[last] = hold{}
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

func (o *oracle) staleToken(res, worker int, at, token, prev int64) {
	if o.stale.Add(1) > maxExamples {
		return
	}
	o.staleMu.Lock()
	o.staleExamples = append(o.staleExamples, results.StaleToken{
		Resource: o.names[res],
		Worker:   worker,
		Token:    token,
		Previous: prev,
		AtS:      float64(at) / 1e9,
	})
	o.staleMu.Unlock()
}

// violations returns the count and the first examples, in the order found.
func (o *oracle) violations() (int64, []results.Violation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ex := append([]results.Violation(nil), o.examples...)
	return o.count.Load(), ex
}

// staleTokens returns how many tokens were checked, how many were stale,
// and the first stale ones.
func (o *oracle) staleTokens() (checked, stale int64, ex []results.StaleToken) {
	o.staleMu.Lock()
	defer o.staleMu.Unlock()
	return o.tokensChecked.Load(), o.stale.Load(), append([]results.StaleToken(nil), o.staleExamples...)
}
