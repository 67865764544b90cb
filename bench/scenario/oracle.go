package scenario

import (
	"sync"
	"time"

	"github.com/redlock-bench/redlock/bench/check"
)

// oracle is the scenarios' view of the safety oracle (package check), by
// resource and holder name: a hold runs from the moment the acquire
// returned until its holder stopped trusting it (release began, or its
// validity ran out, whichever came first). Two holds of one resource that
// overlap are a double grant.
//
// Holders must end their hold before they call Release: once the release
// reaches a master, another client may acquire, and a hold still
// registered would be a false overlap.
type oracle struct {
	k *check.Keyed
}

// Overlap is a double grant: Second acquired Resource while First still
// held it, with FirstLeftMs of First's hold to run.
type Overlap struct {
	Resource    string  `json:"resource"`
	First       string  `json:"first"`
	Second      string  `json:"second"`
	AtMs        float64 `json:"at_ms"`
	FirstLeftMs float64 `json:"first_left_ms"`
}

func newOracle(base time.Time) *oracle { return &oracle{k: check.NewKeyed(base)} }

// acquire registers who's hold of res from start (when its acquire
// returned) until until (its validity end), and counts every hold it
// overlaps.
func (o *oracle) acquire(res, who string, start, until time.Time) {
	o.k.Begin(res, who, check.Hold{Start: start, Until: until})
}

// release ends who's hold of res at end, or at its validity end if that
// came first. Ending a hold that is not registered does nothing.
func (o *oracle) release(res, who string, end time.Time) { o.k.End(res, who, end) }

// result returns the number of overlaps and the first examples.
func (o *oracle) result() (int, []Overlap) {
	n, ex := o.k.Violations()
	var out []Overlap
	for _, v := range ex {
		out = append(out, Overlap{
			Resource: v.Resource, First: o.k.HolderName(v.First), Second: o.k.HolderName(v.Second),
			AtMs: ms(v.At), FirstLeftMs: ms(v.FirstLeft),
		})
	}
	return int(n), out
}

// fencedResource is the storage a lock protects, made to check fencing
// tokens (check.Store): it remembers the highest token it has seen and
// refuses writes with a lower one. A writer without a token (0, fencing
// off) is always accepted: that is the weakness fencing removes. The zero
// value with base set is ready to use.
type fencedResource struct {
	base time.Time
	once sync.Once
	s    *check.Store
}

// Write is one write attempt on the fenced resource.
type Write = check.Write

func (f *fencedResource) store() *check.Store {
	f.once.Do(func() { f.s = check.NewStore(f.base, true) })
	return f.s
}

// write applies a write by who carrying token and reports whether the
// resource accepted it.
func (f *fencedResource) write(who string, token int64) Write { return f.store().Write(who, token) }

func (f *fencedResource) log() []Write { return f.store().Log() }
