// Package check is the single safety oracle of redlock-bench: runs,
// scenarios and the chaos soak all register their holds here, and it says
// whether mutual exclusion held, whether fencing tokens only grew, and
// whether a lease's Done fired before the next holder got the lock. It
// also holds Store, the fenced resource a lock protects, which accepts a
// write only with a token at least the highest it has seen.
//
// A hold of a resource runs from the moment the acquire call returned until
// its holder stopped trusting it: release began, its Done fired, or its
// validity ran out, whichever came first. Two holds of one resource that
// overlap are a violation.
//
// Holders must End a hold before they call Release: once the release
// reaches a master another holder may acquire, and a hold still registered
// then would be a false violation.
//
// A correct lock never makes it fire: a second holder's acquire returns
// after the first's release began (End comes first) or after its keys
// expired, which is after its validity ended. The nolock control engine
// makes it fire at once.
//
// check imports only the standard library: it judges holds, not locks.
package check

import (
	"sync"
	"sync/atomic"
	"time"
)

// MaxExamples is how many examples of each kind of fault are kept.
const MaxExamples = 10

// Validity is a lease whose validity end may move while it is held
// (auto-extension). *engine.Lease satisfies it.
type Validity interface {
	// ValidUntil is when the holder must stop relying on the lock; it
	// must carry a monotonic clock reading.
	ValidUntil() time.Time
}

// Hold describes a hold as it begins.
type Hold struct {
	// Start is when the acquire call returned; Until is the lease's
	// validity end then.
	Start, Until time.Time
	// Asked is when the acquisition was asked for, for a waiting acquire;
	// zero otherwise. A hold asked for before the previous hold of the
	// resource ended took that one over: its hand-off time is measured.
	Asked time.Time
	// Token is the fencing token; 0 for none (no token check).
	Token int64
	// Live is set when the validity may move while the lease is held: it
	// is read again whenever the hold's end matters.
	Live Validity
	// Done, when set, closes the moment the lease can no longer be
	// trusted. A hold whose Done is closed is over; and one whose validity
	// ran out must have its Done closed by the time another hold of the
	// resource begins (else it is counted Done-late).
	Done <-chan struct{}
}

// Violation is two overlapping holds: Second began while First still held
// Resource, FirstLeft before First's hold was to end.
type Violation struct {
	Resource      string
	First, Second int
	At            time.Duration // since the oracle's base
	FirstLeft     time.Duration
}

// StaleToken is a hold whose token did not exceed the token of the hold of
// the same resource that began before it (Previous; or, when the stale hold
// began first but registered later, it is not below the later one's).
type StaleToken struct {
	Resource        string
	Holder          int
	Token, Previous int64
	At              time.Duration
}

// DoneLate is a hold whose validity had run out when another hold of the
// resource began, while its Done had not yet fired.
type DoneLate struct {
	Resource string
	Holder   int
	Next     int
	At       time.Duration
	// Expired is how long before At the validity ran out.
	Expired time.Duration
}

// Oracle is the register of holds of a fixed set of resources, numbered
// 0..n-1. It is safe for concurrent use; holds of different resources
// share nothing but the counters.
type Oracle struct {
	base  time.Time
	slots []slot
	t     tally
}

// New returns an oracle for the named resources; times are reported since
// base.
func New(base time.Time, names []string) *Oracle {
	o := &Oracle{base: base, slots: make([]slot, len(names))}
	for i, n := range names {
		o.slots[i].name = n
	}
	o.t.base = base
	return o
}

// Begin registers holder who's hold of resource res, counts every hold it
// overlaps, checks its token, and returns its hand-off time: the time since
// the previous hold ended, if this one was asked for before that.
func (o *Oracle) Begin(res, who int, h Hold) (handoff time.Duration, handed bool) {
	return o.slots[res].begin(&o.t, who, h)
}

// End ends who's hold of res at at, or at its validity end if that came
// first. Ending a hold that is not registered does nothing.
func (o *Oracle) End(res, who int, at time.Time) { o.slots[res].end(&o.t, who, at) }

// Violations returns the count of overlapping pairs and the first examples.
func (o *Oracle) Violations() (int64, []Violation) { return o.t.violations() }

// Count is the number of violations so far, cheaply.
func (o *Oracle) Count() int64 { return o.t.count.Load() }

// StaleTokens returns how many tokens were checked, how many were stale,
// and the first stale ones.
func (o *Oracle) StaleTokens() (checked, stale int64, ex []StaleToken) { return o.t.staleTokens() }

// DoneLate returns how many holds were found expired with Done still open
// when the next hold began, and the first examples.
func (o *Oracle) DoneLate() (int64, []DoneLate) { return o.t.doneLate() }

// Keyed is an Oracle over resources and holders named by strings, created
// as they are first seen: for callers with few holds whose names are not
// known in advance (scenarios, the chaos soak's history). Holder names are
// numbered in the order first seen; HolderName maps them back.
type Keyed struct {
	t     tally
	mu    sync.Mutex
	slots map[string]*slot
	who   map[string]int
	names []string
}

// NewKeyed returns an empty register; times are reported since base.
func NewKeyed(base time.Time) *Keyed {
	k := &Keyed{slots: map[string]*slot{}, who: map[string]int{}}
	k.t.base = base
	return k
}

func (k *Keyed) lookup(res, who string) (*slot, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	sl := k.slots[res]
	if sl == nil {
		sl = &slot{name: res}
		k.slots[res] = sl
	}
	id, ok := k.who[who]
	if !ok {
		id = len(k.names)
		k.who[who] = id
		k.names = append(k.names, who)
	}
	return sl, id
}

// HolderName is the name of holder number id.
func (k *Keyed) HolderName(id int) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if id < 0 || id >= len(k.names) {
		return ""
	}
	return k.names[id]
}

// Begin is Oracle.Begin by names.
func (k *Keyed) Begin(res, who string, h Hold) (handoff time.Duration, handed bool) {
	sl, id := k.lookup(res, who)
	return sl.begin(&k.t, id, h)
}

// End is Oracle.End by names.
func (k *Keyed) End(res, who string, at time.Time) {
	sl, id := k.lookup(res, who)
	sl.end(&k.t, id, at)
}

// Violations is Oracle.Violations.
func (k *Keyed) Violations() (int64, []Violation) { return k.t.violations() }

// StaleTokens is Oracle.StaleTokens.
func (k *Keyed) StaleTokens() (checked, stale int64, ex []StaleToken) { return k.t.staleTokens() }

// DoneLate is Oracle.DoneLate.
func (k *Keyed) DoneLate() (int64, []DoneLate) { return k.t.doneLate() }

// slot is one resource's holds.
type slot struct {
	mu sync.Mutex
	// holds are the registered holds, almost always zero or one.
	holds []hold
	// lastEnd is the latest end of an unregistered hold, in nanoseconds
	// since base. A hold that starts before it overlapped that one, even
	// if the two were never registered at the same time.
	lastEnd     int64
	lastEndWith int32
	// lastToken is the highest fencing token seen, carried by a hold that
	// began at lastTokenStart.
	lastToken      int64
	lastTokenStart int64
	name           string
}

type hold struct {
	who   int32
	start int64
	until int64 // validity end, nanoseconds since base
	live  Validity
	done  <-chan struct{}
}

// validUntil is the hold's validity end now.
func (h *hold) validUntil(t *tally) int64 {
	if h.live != nil {
		return t.ns(h.live.ValidUntil())
	}
	return h.until
}

func closed(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (sl *slot) begin(t *tally, who int, h Hold) (handoff time.Duration, handed bool) {
	s0, u := t.ns(h.Start), t.ns(h.Until)
	sl.mu.Lock()
	kept := sl.holds[:0]
	for _, old := range sl.holds {
		// Read now: the holder's view of its validity at our start (or
		// later, which only errs towards reporting).
		until := old.validUntil(t)
		switch {
		case until <= s0:
			// Its validity ended before we began: that hold is over, and
			// its holder must have been told.
			if old.done != nil && !closed(old.done) {
				t.late(sl.name, int(old.who), who, s0, s0-until)
			}
			sl.ended(old.who, until)
			continue
		case closed(old.done):
			// Its holder was told to stop trusting it; when exactly is
			// not known here, at the latest now.
			sl.ended(old.who, min(until, s0))
			continue
		}
		t.violation(sl.name, int(old.who), who, s0, until-s0)
		kept = append(kept, old)
	}
	if sl.lastEnd > s0 {
		t.violation(sl.name, int(sl.lastEndWith), who, s0, sl.lastEnd-s0)
	}
	if !h.Asked.IsZero() && sl.lastEnd > 0 && sl.lastEnd <= s0 && t.ns(h.Asked) <= sl.lastEnd {
		handoff, handed = time.Duration(s0-sl.lastEnd), true
	}
	if h.Token != 0 {
		sl.checkToken(t, who, s0, h.Token)
	}
	sl.holds = append(kept, hold{who: int32(who), start: s0, until: u, live: h.Live, done: h.Done})
	sl.mu.Unlock()
	return handoff, handed
}

// checkToken compares a hold's token with the token of the hold of the
// same resource that began just before it. The caller holds sl.mu.
func (sl *slot) checkToken(t *tally, who int, s0, token int64) {
	t.tokensChecked.Add(1)
	prev, later := sl.lastToken, s0 >= sl.lastTokenStart
	if prev != 0 && (later && token <= prev || !later && token >= prev) {
		t.staleToken(sl.name, who, s0, token, prev)
	}
	if later {
		sl.lastToken, sl.lastTokenStart = max(token, prev), s0
	}
}

func (sl *slot) end(t *tally, who int, at time.Time) {
	e := t.ns(at)
	sl.mu.Lock()
	for i := range sl.holds {
		h := &sl.holds[i]
		if h.who == int32(who) {
			e = min(e, h.validUntil(t))
			sl.ended(h.who, e)
			last := len(sl.holds) - 1
			sl.holds[i] = sl.holds[last]
			sl.holds[last] = hold{}
			sl.holds = sl.holds[:last]
			break
		}
	}
	sl.mu.Unlock()
}

func (sl *slot) ended(who int32, at int64) {
	if at > sl.lastEnd {
		sl.lastEnd, sl.lastEndWith = at, who
	}
}

// tally is the counters and examples an oracle reports.
type tally struct {
	base time.Time

	count    atomic.Int64
	mu       sync.Mutex
	examples []Violation

	tokensChecked atomic.Int64
	stale         atomic.Int64
	staleEx       []StaleToken

	nLate  atomic.Int64
	lateEx []DoneLate
}

func (t *tally) ns(at time.Time) int64 { return at.Sub(t.base).Nanoseconds() }

func (t *tally) violation(res string, first, second int, at, left int64) {
	if t.count.Add(1) > MaxExamples {
		return
	}
	t.mu.Lock()
	t.examples = append(t.examples, Violation{Resource: res, First: first, Second: second,
		At: time.Duration(at), FirstLeft: time.Duration(left)})
	t.mu.Unlock()
}

func (t *tally) staleToken(res string, who int, at, token, prev int64) {
	if t.stale.Add(1) > MaxExamples {
		return
	}
	t.mu.Lock()
	t.staleEx = append(t.staleEx, StaleToken{Resource: res, Holder: who, Token: token, Previous: prev, At: time.Duration(at)})
	t.mu.Unlock()
}

func (t *tally) late(res string, who, next int, at, expired int64) {
	if t.nLate.Add(1) > MaxExamples {
		return
	}
	t.mu.Lock()
	t.lateEx = append(t.lateEx, DoneLate{Resource: res, Holder: who, Next: next, At: time.Duration(at), Expired: time.Duration(expired)})
	t.mu.Unlock()
}

func (t *tally) violations() (int64, []Violation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count.Load(), append([]Violation(nil), t.examples...)
}

func (t *tally) staleTokens() (checked, stale int64, ex []StaleToken) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tokensChecked.Load(), t.stale.Load(), append([]StaleToken(nil), t.staleEx...)
}

func (t *tally) doneLate() (int64, []DoneLate) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nLate.Load(), append([]DoneLate(nil), t.lateEx...)
}
