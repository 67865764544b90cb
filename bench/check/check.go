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
// The lock family has three more shapes, each with its own rule. A
// semaphore of P permits (NewSemaphores) admits P holds at once: a
// violation is a hold that begins while P others are held. A
// multi-resource lease is a hold of each of its resources, registered on
// each, so that it may overlap no other hold on any of them. A shared
// hold (Hold.Shared, a read lock) overlaps other shared holds freely and
// no exclusive one: a writer overlaps no one.
//
// check imports only the standard library: it judges holds, not locks.
package check

import (
	"math"
	"slices"
	"sort"
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
	// Shared marks a read lock's hold: it may overlap other shared holds
	// of the resource, never an exclusive one. Its token is not checked:
	// readers that hold together have no order. Not for semaphores.
	Shared bool
	// Permit is a semaphore permit's slot plus one (engine's
	// Lease.Permit()+1), 0 when unknown. Tokens only increase per slot,
	// so a semaphore's token is checked against the last of its slot, and
	// only when the slot is known.
	Permit int
}

// Violation is two overlapping holds: Second began while First still held
// Resource, FirstLeft before First's hold was to end. On a semaphore it is
// more holds at once than permits: Holders of them at At, when Second
// began or, if it registered late, when the last of them began; First is
// the one of the others that ended first, FirstLeft after At.
type Violation struct {
	Resource      string
	First, Second int
	At            time.Duration // since the oracle's base
	FirstLeft     time.Duration
	// Holders is how many held the semaphore at once; 0 for a pair.
	Holders int
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
	// names are the resources' names, by index: kept here rather than in
	// each slot, which a run has millions of.
	names []string
	t     tally
}

// New returns an oracle for the named resources; times are reported since
// base.
func New(base time.Time, names []string) *Oracle {
	o := &Oracle{base: base, slots: make([]slot, len(names)), names: names}
	o.t.base = base
	return o
}

// NewSemaphores returns an oracle for the named semaphores of permits
// permits each: a violation is a hold that begins while permits others
// of its semaphore are held, at some instant it shares with all of them.
// With 1 permit it is New.
func NewSemaphores(base time.Time, names []string, permits int) *Oracle {
	o := New(base, names)
	o.t.permits = max(permits, 1)
	return o
}

// Begin registers holder who's hold of resource res, counts every hold it
// overlaps, checks its token, and returns its hand-off time: the time since
// the previous hold ended, if this one was asked for before that.
func (o *Oracle) Begin(res, who int, h Hold) (handoff time.Duration, handed bool) {
	return o.slots[res].begin(&o.t, o.names[res], who, h)
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

// Incomplete counts the semaphore holds checked against part of the
// holds that ended while they registered: a semaphore keeps the last
// 4·permits+64 ended holds, for a second, which a hold registered that
// late may need more of (see keptEnded). Such a check may miss a
// violation; it never finds a false one.
func (o *Oracle) Incomplete() int64 { return o.t.incomplete.Load() }

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
		sl = &slot{}
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
	return sl.begin(&k.t, res, id, h)
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
	// holds are the registered holds, almost always zero or one (up to
	// the permits, on a semaphore).
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
	// x is what shared holds and semaphores need beyond a lock, made when
	// first needed, so that a lock's slot stays small.
	x *slotExt
}

// slotExt is a slot's state for shared holds and for semaphores.
type slotExt struct {
	// lastExclEnd is lastEnd over the exclusive holds only, which a
	// shared hold must begin after; lastExclWith is its holder.
	lastExclEnd  int64
	lastExclWith int32

	// ended[head:] are a semaphore's holds that ended lately, sorted by
	// their end (see keptEnded): a hold that registers after they ended
	// may still have overlapped them.
	ended []span
	head  int
	// forgot is the latest end of an ended hold no longer kept.
	forgot int64
	// latest is the latest start of a hold registered.
	latest int64
	// tokens are the last token of each of a semaphore's permit slots,
	// by slot, and when its hold began.
	tokens map[int32]tokenMark
	// starts and ends are crowd's scratch.
	starts, ends []int64
}

// span is an ended hold of a semaphore.
type span struct {
	who        int32
	start, end int64
}

type tokenMark struct{ token, start int64 }

// keptEnded bounds what a semaphore keeps of its ended holds: those that
// ended less than a second before the latest start, at most
// 4·permits+64 of them. A hold registered later than that after it began
// (its holder descheduled for a second) is checked without the ones let
// go, and counted in Incomplete.
const keptEnded = time.Second

type hold struct {
	who    int32
	permit int32
	shared bool
	start  int64
	until  int64 // validity end, nanoseconds since base
	live   Validity
	done   <-chan struct{}
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

// begin registers who's hold h of the resource name; see Oracle.Begin.
func (sl *slot) begin(t *tally, name string, who int, h Hold) (handoff time.Duration, handed bool) {
	if t.permits > 1 {
		return sl.beginPermit(t, name, who, h)
	}
	s0, u := t.ns(h.Start), t.ns(h.Until)
	sl.mu.Lock()
	if h.Shared && sl.x == nil {
		// Every hold so far was exclusive.
		sl.x = &slotExt{lastExclEnd: sl.lastEnd, lastExclWith: sl.lastEndWith}
	}
	kept := sl.holds[:0]
	for _, old := range sl.holds {
		if sl.over(t, name, &old, who, s0) {
			continue
		}
		if !h.Shared || !old.shared {
			t.violation(name, int(old.who), who, s0, old.validUntil(t)-s0, 0)
		}
		kept = append(kept, old)
	}
	end, with := sl.lastEnd, sl.lastEndWith
	if h.Shared {
		end, with = sl.x.lastExclEnd, sl.x.lastExclWith
	}
	if end > s0 {
		t.violation(name, int(with), who, s0, end-s0, 0)
	}
	handoff, handed = sl.handoff(t, h, s0)
	if h.Token != 0 && !h.Shared {
		sl.checkToken(t, name, who, s0, h.Token)
	}
	sl.holds = append(kept, hold{who: int32(who), shared: h.Shared, start: s0, until: u, live: h.Live, done: h.Done})
	sl.mu.Unlock()
	return handoff, handed
}

// over reports whether the registered hold old is over when who's hold
// begins at s0, and if so ends it: its validity ended before (its holder
// must have been told: Done-late otherwise), or its holder was told to
// stop trusting it. The caller holds sl.mu.
func (sl *slot) over(t *tally, name string, old *hold, who int, s0 int64) bool {
	// Read now: the holder's view of its validity at our start (or later,
	// which only errs towards reporting).
	until := old.validUntil(t)
	switch {
	case until <= s0:
		if old.done != nil && !closed(old.done) {
			t.late(name, int(old.who), who, s0, s0-until)
		}
		sl.ended(t, old, until)
		return true
	case closed(old.done):
		// When exactly it was told is not known here; at the latest now.
		sl.ended(t, old, min(until, s0))
		return true
	}
	return false
}

// handoff is the time since the previous hold ended, if h was asked for
// before that. The caller holds sl.mu.
func (sl *slot) handoff(t *tally, h Hold, s0 int64) (time.Duration, bool) {
	if !h.Asked.IsZero() && sl.lastEnd > 0 && sl.lastEnd <= s0 && t.ns(h.Asked) <= sl.lastEnd {
		return time.Duration(s0 - sl.lastEnd), true
	}
	return 0, false
}

// beginPermit is begin on a semaphore of t.permits permits: a violation is
// an instant, from s0 on, at which the new hold and t.permits others were
// held, registered or ended since.
func (sl *slot) beginPermit(t *tally, name string, who int, h Hold) (handoff time.Duration, handed bool) {
	s0, u := t.ns(h.Start), t.ns(h.Until)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	x := sl.x
	if x == nil {
		x = &slotExt{}
		sl.x = x
	}
	kept := sl.holds[:0]
	for _, old := range sl.holds {
		if !sl.over(t, name, &old, who, s0) {
			kept = append(kept, old)
		}
	}
	clear(sl.holds[len(kept):])
	sl.holds = kept
	x.latest = max(x.latest, s0)
	x.prune(t.permits)
	if x.forgot > s0 {
		t.incomplete.Add(1)
	}
	hu := u
	if h.Live != nil {
		hu = t.ns(h.Live.ValidUntil())
	}
	if at, n, first, left := sl.crowd(t, s0, hu); n > t.permits {
		t.violation(name, first, who, at, left, n)
	}
	handoff, handed = sl.handoff(t, h, s0)
	if h.Token != 0 && h.Permit > 0 {
		sl.checkPermitToken(t, name, who, s0, h.Token, int32(h.Permit-1))
	}
	sl.holds = append(sl.holds, hold{who: int32(who), permit: int32(h.Permit), start: s0, until: u, live: h.Live, done: h.Done})
	return handoff, handed
}

// crowd finds the instant, from s0 on, at which the most holds of the
// semaphore were held, the one beginning at s0 included (it lasts from
// s0 until now or its validity end hu, whichever is first): the
// registered holds, and those that ended after s0. It returns that
// instant, how many held then, and of the others held then, the one that
// ended first, with how long it had left. The caller holds sl.mu.
func (sl *slot) crowd(t *tally, s0, hu int64) (at int64, n int, first int, left int64) {
	x := sl.x
	from := x.head + sort.Search(len(x.ended)-x.head, func(i int) bool { return x.ended[x.head+i].end > s0 })
	recent := x.ended[from:]
	if len(sl.holds)+len(recent) < t.permits {
		return s0, len(sl.holds) + len(recent) + 1, -1, 0 // too few to be too many
	}
	starts, ends := x.starts[:0], x.ends[:0]
	for i := range sl.holds {
		starts = append(starts, max(sl.holds[i].start, s0))
		ends = append(ends, sl.holds[i].validUntil(t))
	}
	for _, e := range recent {
		starts = append(starts, max(e.start, s0))
		ends = append(ends, e.end)
	}
	slices.Sort(starts)
	slices.Sort(ends)
	best, at := 0, s0
	for i, j := 0, 0; i < len(starts); {
		// Held at p: begun by p and not ended by p.
		p := starts[i]
		if p >= hu {
			break // the new hold is over by then
		}
		for i < len(starts) && starts[i] == p {
			i++
		}
		for j < len(ends) && ends[j] <= p {
			j++
		}
		if c := i - j; c > best {
			best, at = c, p
		}
	}
	x.starts, x.ends = starts, ends
	first, left = -1, int64(math.MaxInt64)
	pick := func(who int32, start, end int64) {
		if max(start, s0) <= at && end > at && end-at < left {
			first, left = int(who), end-at
		}
	}
	for i := range sl.holds {
		pick(sl.holds[i].who, sl.holds[i].start, sl.holds[i].validUntil(t))
	}
	for _, e := range recent {
		pick(e.who, e.start, e.end)
	}
	return at, best + 1, first, left
}

// prune lets go of the ended holds keptEnded does not keep.
func (x *slotExt) prune(permits int) {
	horizon, limit := x.latest-int64(keptEnded), 4*permits+64
	for x.head < len(x.ended) && (x.ended[x.head].end <= horizon || len(x.ended)-x.head > limit) {
		x.forgot = max(x.forgot, x.ended[x.head].end)
		x.head++
	}
	if x.head >= 64 && 2*x.head >= len(x.ended) {
		n := copy(x.ended, x.ended[x.head:])
		x.ended, x.head = x.ended[:n], 0
	}
}

// keep adds an ended hold of a semaphore, in the order of the ends: they
// come almost in order, so the insertion is short.
func (x *slotExt) keep(e span) {
	x.ended = append(x.ended, e)
	for i := len(x.ended) - 1; i > x.head && x.ended[i-1].end > e.end; i-- {
		x.ended[i], x.ended[i-1] = x.ended[i-1], x.ended[i]
	}
}

// checkToken compares a hold's token with the token of the hold of the
// same resource that began just before it. The caller holds sl.mu.
func (sl *slot) checkToken(t *tally, name string, who int, s0, token int64) {
	t.tokensChecked.Add(1)
	prev, later := sl.lastToken, s0 >= sl.lastTokenStart
	if prev != 0 && (later && token <= prev || !later && token >= prev) {
		t.staleToken(name, who, s0, token, prev)
	}
	if later {
		sl.lastToken, sl.lastTokenStart = max(token, prev), s0
	}
}

// checkPermitToken is checkToken for a semaphore's permit slot: tokens
// increase per slot. The caller holds sl.mu.
func (sl *slot) checkPermitToken(t *tally, name string, who int, s0, token int64, permit int32) {
	x := sl.x
	if x.tokens == nil {
		x.tokens = map[int32]tokenMark{}
	}
	m := x.tokens[permit]
	t.tokensChecked.Add(1)
	later := s0 >= m.start
	if m.token != 0 && (later && token <= m.token || !later && token >= m.token) {
		t.staleToken(name, who, s0, token, m.token)
	}
	if later {
		x.tokens[permit] = tokenMark{token: max(token, m.token), start: s0}
	}
}

func (sl *slot) end(t *tally, who int, at time.Time) {
	e := t.ns(at)
	sl.mu.Lock()
	for i := range sl.holds {
		h := &sl.holds[i]
		if h.who == int32(who) {
			sl.ended(t, h, min(e, h.validUntil(t)))
			last := len(sl.holds) - 1
			sl.holds[i] = sl.holds[last]
			sl.holds[last] = hold{}
			sl.holds = sl.holds[:last]
			break
		}
	}
	sl.mu.Unlock()
}

// ended records that hold h ended at at. The caller holds sl.mu.
func (sl *slot) ended(t *tally, h *hold, at int64) {
	if at > sl.lastEnd {
		sl.lastEnd, sl.lastEndWith = at, h.who
	}
	x := sl.x
	switch {
	case x == nil:
	case t.permits > 1:
		x.keep(span{who: h.who, start: h.start, end: at})
	case !h.shared && at > x.lastExclEnd:
		x.lastExclEnd, x.lastExclWith = at, h.who
	}
}

// tally is the counters and examples an oracle reports.
type tally struct {
	base time.Time
	// permits is how many holds of one resource may overlap: 1 for a
	// lock (every overlapping pair is a violation), P for a semaphore.
	permits int
	// incomplete counts the semaphore holds checked without every ended
	// hold they may have overlapped (see keptEnded).
	incomplete atomic.Int64

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

func (t *tally) violation(res string, first, second int, at, left int64, holders int) {
	if t.count.Add(1) > MaxExamples {
		return
	}
	t.mu.Lock()
	t.examples = append(t.examples, Violation{Resource: res, First: first, Second: second,
		At: time.Duration(at), FirstLeft: time.Duration(left), Holders: holders})
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
