package bench

import (
	"time"

	"github.com/redlock-bench/redlock/bench/check"
	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/results"
)

// maxExamples is how many violations (and stale tokens) are kept as
// examples.
const maxExamples = check.MaxExamples

// oracle is a run's view of the safety oracle (package check), by resource
// index and worker number. With auto-extension the validity moves while the
// hold lasts: a hold registered with a live lease has its validity read
// from the lease whenever its end matters.
//
// Workers must unregister a hold before calling Release (see check). The
// register also checks, with fencing, that tokens strictly increase per
// resource in the order the holds began, and measures hand-offs: the time
// from the end of one hold to the start of the next, when the next was
// asked for before the previous ended (a waiter took it over).
type oracle struct {
	o     *check.Oracle
	names []string
	// count is the number of violations so far, read by the per-second
	// intervals.
	count violationCount
}

type violationCount struct{ o *check.Oracle }

func (c violationCount) Load() int64 { return c.o.Count() }

// holdSpec describes a hold as it begins.
type holdSpec struct {
	// start is when the acquire call returned; until is the lease's
	// validity end then.
	start, until time.Time
	// asked is when the acquisition was asked for, in mode wait; zero
	// otherwise.
	asked time.Time
	// token is the fencing token; 0 for none.
	token int64
	// live is set when the lease's validity may move while it is held.
	live engines.Lease
	// permit is a semaphore permit's slot plus one; 0 when unknown.
	permit int
	// shared marks a read lock's hold, which may overlap other shared
	// holds of the resource and no exclusive one.
	shared bool
}

// newOracle is the oracle of the resources names, each a lock, or with
// --lock semaphore:P a semaphore of P permits. A multi-resource lease is
// registered on each of its resources; a read lock's hold is shared.
func newOracle(base time.Time, names []string, lock engines.Lock) *oracle {
	o := check.New(base, names)
	if p := lock.Holders(); p > 0 {
		o = check.NewSemaphores(base, names, p)
	}
	return &oracle{o: o, names: names, count: violationCount{o}}
}

// acquire registers worker's hold of resource res with validity end until,
// and counts every hold it overlaps.
func (o *oracle) acquire(res int, worker int, start, until time.Time) {
	o.begin(res, worker, holdSpec{start: start, until: until})
}

// begin registers worker's hold of resource res, counts every hold it
// overlaps, checks its fencing token, and returns its handoff.
func (o *oracle) begin(res int, worker int, h holdSpec) (handoff time.Duration, handed bool) {
	ch := check.Hold{Start: h.start, Until: h.until, Asked: h.asked, Token: h.token, Permit: h.permit, Shared: h.shared}
	if h.live != nil {
		ch.Live = h.live
	}
	return o.o.Begin(res, worker, ch)
}

// release ends worker's hold of res at end: when release began, or the
// lease's validity end as re-read then, whichever is first.
func (o *oracle) release(res int, worker int, end time.Time) { o.o.End(res, worker, end) }

// incomplete counts the semaphore holds checked without every ended hold
// they may have overlapped (check.Oracle.Incomplete); 0 on a nil oracle.
func (o *oracle) incomplete() int64 {
	if o == nil {
		return 0
	}
	return o.o.Incomplete()
}

// violations returns the count and the first examples, in the order found.
func (o *oracle) violations() (int64, []results.Violation) {
	n, ex := o.o.Violations()
	var out []results.Violation
	for _, v := range ex {
		out = append(out, results.Violation{
			Resource: v.Resource, FirstHolder: v.First, SecondHolder: v.Second,
			AtS: v.At.Seconds(), FirstRemainingUs: v.FirstLeft.Microseconds(), Holders: v.Holders,
		})
	}
	return n, out
}

// staleTokens returns how many tokens were checked, how many were stale,
// and the first stale ones.
func (o *oracle) staleTokens() (checked, stale int64, ex []results.StaleToken) {
	checked, stale, cx := o.o.StaleTokens()
	for _, s := range cx {
		ex = append(ex, results.StaleToken{Resource: s.Resource, Worker: s.Holder, Token: s.Token, Previous: s.Previous, AtS: s.At.Seconds()})
	}
	return checked, stale, ex
}
