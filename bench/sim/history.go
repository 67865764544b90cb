package sim

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"
)

// Event is one step of a worker, in virtual time.
type Event struct {
	// Called is when the operation was called, At when it returned
	// (virtual time since the run started); the same for a step that is
	// not a call.
	Called, At time.Duration
	Client     int
	Worker     int
	// Seq orders one worker's events; with At, Client and Worker it gives
	// the history an order that does not depend on how the scheduler
	// interleaved workers at one instant.
	Seq int
	// Op is "lock", "trylock", "lockall", "trylockall", "acquire",
	// "tryacquire" (a semaphore's permit), "rlock", "tryrlock", "wlock",
	// "trywlock" (a read/write lock's RLock, TryRLock, Lock, TryLock),
	// "extend", "release", "remotevalidity" (the calls), "done" (the
	// lease ended while held), "abandon" (its holder left it
	// unreleased), "paused".
	Op string
	// Resource is the resource, the semaphore's name, or a multi-resource
	// lease's label ("{r0,r1}"), whose names are Resources.
	Resource  string
	Resources []string
	// Result is "ok" or the error's class (see errClass); Err the error.
	Result string
	Err    error
	// Grant is the lease an acquiring op returned, or the lease an op
	// acted on: its index in History.Grants, or -1.
	Grant int
	// Left is a "remotevalidity" call's answer: the validity the masters
	// vouched for, from Called.
	Left time.Duration
}

// on reports whether the event concerns resource r: its own, or one of
// a multi-resource lease's.
func (e Event) on(r string) bool { return e.Resource == r || slices.Contains(e.Resources, r) }

func (e Event) String() string {
	g := ""
	if e.Grant >= 0 {
		g = fmt.Sprintf(" lease#%d", e.Grant)
	}
	call := ""
	if e.Called != e.At {
		call = fmt.Sprintf(" (called at %s)", fmtDur(e.Called))
	}
	return fmt.Sprintf("%12s c%d/w%d %-8s %-4s %s%s%s", fmtDur(e.At), e.Client, e.Worker, e.Op, e.Resource, e.Result, g, call)
}

// CloseRecord is one Locker's Close: when it began and returned.
type CloseRecord struct {
	Client      int
	Began, Done time.Duration
}

// FaultRecord is a fault as applied: its schedule entry, and when it
// began and ended (At, End: virtual time since the run started).
type FaultRecord struct {
	Fault
	Index   int // its place in the drawn schedule, as -sim.keep names it
	At, End time.Duration
}

func (f FaultRecord) String() string {
	return fmt.Sprintf("%12s..%-12s #%d %s", fmtDur(f.At), fmtDur(f.End), f.Index, f.Fault.Describe())
}

// Grant is one lease the engine handed out, as its holder saw it: a
// lock on one resource, a lock on several (Resources), or a semaphore's
// permit (Permits > 0).
type Grant struct {
	ID int
	// Resource is the resource, the semaphore's name, or a multi-resource
	// lease's label ("{r0,r1}").
	Resource string
	// Resources are a multi-resource lease's names, sorted; nil for the
	// others.
	Resources []string
	// Permits is a semaphore's permit count, Permit the slot the permit
	// holds; Permits is 0 for a lock.
	Permits, Permit int
	// RW is "read" or "write" for a read/write lock's lease, whose
	// Resource is the lock's name; empty for the others.
	RW     string
	Client int
	Worker int
	Token  int64  // fencing token, 0 without fencing
	Value  string // the lease's value on the masters
	// Called is when the holder called Lock or TryLock, Granted when it
	// returned the lease: the holder trusts it from Granted.
	Called, Granted time.Duration
	// ValidUntil is the lease's validity as the engine trusted it when
	// handed out; End is when the holder stopped trusting it: Lease's
	// ValidUntil after the lease ended (the release began, it expired or
	// was lost), the last validity it was given otherwise.
	ValidUntil, End time.Duration
	// Ended says how: "released", or the lease's Err class when it ended
	// on its own.
	Ended string
	// Extensions: auto-extensions that succeeded.
	Extensions int
	// Wake is how Lock's last wait ended (engine.WakeCause: "none",
	// "notified", "fallback", "backoff", "handoff"); empty for TryLock.
	Wake string
}

func (g Grant) String() string {
	what := g.Resource
	if g.RW != "" {
		what += " " + g.RW
	}
	if g.Permits > 0 {
		what = fmt.Sprintf("%s permit %d of %d", g.Resource, g.Permit, g.Permits)
	}
	return fmt.Sprintf("lease#%d %s c%d/w%d value %s token %d called %s granted %s valid until %s, ended %s at %s",
		g.ID, what, g.Client, g.Worker, g.Value, g.Token, fmtDur(g.Called), fmtDur(g.Granted), fmtDur(g.ValidUntil), g.Ended, fmtDur(g.End))
}

// Units are what the lease excludes others from, each as the checkers
// name it: its resource, each of a multi-resource lease's, or a permit's
// slot (see slotUnit). Mutual exclusion, fencing and the fenced store
// hold per unit.
func (g Grant) Units() []string {
	switch {
	case g.RW != "":
		// Readers share: the read/write lock's checkers judge its
		// leases (see check_rw.go).
		return nil
	case g.Permits > 0:
		return []string{slotUnit(g.Resource, g.Permit)}
	case g.Resources != nil:
		return g.Resources
	}
	return []string{g.Resource}
}

// on reports whether the lease holds resource r (a lock's resource, not
// a semaphore's name).
func (g Grant) on(r string) bool {
	if g.Permits > 0 || g.RW != "" {
		return false
	}
	if g.Resources != nil {
		return slices.Contains(g.Resources, r)
	}
	return g.Resource == r
}

// slotUnit names slot i of semaphore name as a unit: "s0#1".
func slotUnit(name string, i int) string { return fmt.Sprintf("%s#%d", name, i) }

// unitKey is the key that holds unit u on the masters: the resource's
// key, or the semaphore slot's (engine/keys.go's semPrefix).
func unitKey(u string) string {
	if name, i, ok := strings.Cut(u, "#"); ok {
		return semPrefix + "{" + name + "}:" + i
	}
	return u
}

// unitResource is what a violation about unit u concerns, for its
// report: the resource, or the semaphore.
func unitResource(u string) string {
	name, _, _ := strings.Cut(u, "#")
	return name
}

// History is everything a run's workers did, recorded as it happened.
// Safe for concurrent use.
type History struct {
	start  time.Time
	mu     sync.Mutex
	events []Event
	grants []Grant
	seqs   map[[2]int]int // each worker's last Seq
	closes []CloseRecord
	faults []FaultRecord
	writes []StoreWrite
	notes  []string
}

// NewHistory starts a history at the current virtual instant.
func NewHistory() *History { return &History{start: time.Now(), seqs: make(map[[2]int]int)} }

// since is virtual time since the run started.
func (h *History) since(t time.Time) time.Duration { return t.Sub(h.start) }

func (h *History) add(e Event) {
	h.mu.Lock()
	k := [2]int{e.Client, e.Worker}
	h.seqs[k]++
	e.Seq = h.seqs[k]
	h.events = append(h.events, e)
	h.mu.Unlock()
}

// closed records a Locker's Close.
func (h *History) closed(client int, began, done time.Duration) {
	h.mu.Lock()
	h.closes = append(h.closes, CloseRecord{client, began, done})
	h.mu.Unlock()
}

// fault records a fault's start (index -1: its end, of the last record
// with that index).
func (h *History) fault(f FaultRecord) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, f)
	return len(h.faults) - 1
}

func (h *History) faultEnded(i int, end time.Duration) {
	h.mu.Lock()
	h.faults[i].End = end
	h.mu.Unlock()
}

func (h *History) wrote(w StoreWrite) {
	h.mu.Lock()
	h.writes = append(h.writes, w)
	h.mu.Unlock()
}

// note records something that went wrong in the simulation itself.
func (h *History) note(s string) {
	h.mu.Lock()
	h.notes = append(h.notes, s)
	h.mu.Unlock()
}

// Closes returns every Close, in order.
func (h *History) Closes() []CloseRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.closes)
}

// Faults returns every fault as applied, in order.
func (h *History) Faults() []FaultRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.faults)
}

// Writes returns every write to the protected resources, in order.
func (h *History) Writes() []StoreWrite {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.writes)
}

// Notes returns what went wrong in the simulation itself.
func (h *History) Notes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.notes)
}

// grant records a new lease and returns its ID.
func (h *History) grant(g Grant) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	g.ID = len(h.grants)
	h.grants = append(h.grants, g)
	return g.ID
}

// end records how lease id ended.
func (h *History) end(id int, end time.Duration, how string, extensions int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.grants[id].End, h.grants[id].Ended, h.grants[id].Extensions = end, how, extensions
}

// Events returns the events in canonical order: by instant, then client,
// worker and the worker's own order.
func (h *History) Events() []Event {
	h.mu.Lock()
	ev := slices.Clone(h.events)
	h.mu.Unlock()
	slices.SortFunc(ev, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Client, b.Client), cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.Seq, b.Seq))
	})
	return ev
}

// Grants returns every lease handed out, in the order they were.
func (h *History) Grants() []Grant {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.grants)
}

// Hash is a digest of the canonical event log and the leases' times and
// tokens: two runs with the same hash made the same choices at the same
// virtual instants with the same outcomes. Lease values are left out:
// they are random bytes, and their order depends on the schedule.
func (h *History) Hash() uint64 {
	d := fnv.New64a()
	var b [8]byte
	num := func(n int64) {
		binary.LittleEndian.PutUint64(b[:], uint64(n))
		d.Write(b[:])
	}
	for _, e := range h.Events() {
		num(int64(e.At))
		num(int64(e.Client<<16 | e.Worker))
		d.Write([]byte(e.Op + "\x00" + e.Resource + "\x00" + e.Result + "\x00"))
	}
	gs := h.Grants()
	slices.SortFunc(gs, func(a, b Grant) int {
		return cmp.Or(cmp.Compare(a.Granted, b.Granted), cmp.Compare(a.Client, b.Client), cmp.Compare(a.Worker, b.Worker))
	})
	for _, g := range gs {
		num(int64(g.Granted))
		num(int64(g.End))
		num(g.Token)
	}
	return d.Sum64()
}

// Window is the events from `from` to `to` (virtual time since the
// start), at most max of them, the latest kept.
func (h *History) Window(from, to time.Duration, max int) []Event {
	var out []Event
	for _, e := range h.Events() {
		if e.At >= from && e.At <= to {
			out = append(out, e)
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}

// FormatEvents lists events one a line.
func FormatEvents(ev []Event) string {
	var b strings.Builder
	for _, e := range ev {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// fmtDur prints virtual time as seconds with microseconds, which reads
// better in a column than Duration's String.
func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.6fs", d.Seconds())
}

// Tally counts the events by operation and result ("lock ok", "release
// expired"), sorted by name, as "name=count" fields.
func (h *History) Tally() string {
	counts := make(map[string]int)
	for _, e := range h.Events() {
		counts[e.Op+":"+e.Result]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, counts[k])
	}
	return b.String()
}
