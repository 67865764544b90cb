package scenario

import (
	"sync"
	"time"
)

// maxOverlaps is how many overlaps the oracle keeps as examples.
const maxOverlaps = 10

// oracle is the in-process register of holds that checks mutual exclusion,
// the same rule as bench's: a hold runs from the moment the acquire
// returned until its holder stopped trusting it (release began, its lost-
// lock signal fired, or its validity ran out, whichever came first). Two
// holds of one resource that overlap are a double grant.
//
// Holders must end their hold before they call Release: once the release
// reaches a master, another client may acquire, and a hold still
// registered would be a false overlap.
//
// The scenarios hold few locks at a time, so one mutex is enough.
type oracle struct {
	base time.Time

	mu       sync.Mutex
	holds    map[string][]hold
	lastEnd  map[string]hold // the hold that ended last, per resource
	count    int
	overlaps []Overlap
}

type hold struct {
	who          string
	start, until time.Time
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

func newOracle(base time.Time) *oracle {
	return &oracle{base: base, holds: map[string][]hold{}, lastEnd: map[string]hold{}}
}

// acquire registers who's hold of res from start (when its acquire
// returned) until until (its validity end), and counts every hold it
// overlaps.
func (o *oracle) acquire(res, who string, start, until time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if last, ok := o.lastEnd[res]; ok && last.until.After(start) {
		o.overlap(res, last.who, who, start, last.until.Sub(start))
	}
	kept := o.holds[res][:0]
	for _, h := range o.holds[res] {
		if !h.until.After(start) {
			o.ended(res, h) // its validity ended before we began
			continue
		}
		o.overlap(res, h.who, who, start, h.until.Sub(start))
		kept = append(kept, h)
	}
	o.holds[res] = append(kept, hold{who: who, start: start, until: until})
}

// release ends who's hold of res at end, or at its validity end if that
// came first. Ending a hold that is not registered does nothing.
func (o *oracle) release(res, who string, end time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	hs := o.holds[res]
	for i, h := range hs {
		if h.who == who {
			if end.Before(h.until) {
				h.until = end
			}
			o.ended(res, h)
			o.holds[res] = append(hs[:i], hs[i+1:]...)
			return
		}
	}
}

func (o *oracle) ended(res string, h hold) {
	if last, ok := o.lastEnd[res]; !ok || h.until.After(last.until) {
		o.lastEnd[res] = h
	}
}

func (o *oracle) overlap(res, first, second string, at time.Time, left time.Duration) {
	o.count++
	if len(o.overlaps) < maxOverlaps {
		o.overlaps = append(o.overlaps, Overlap{
			Resource: res, First: first, Second: second,
			AtMs: ms(at.Sub(o.base)), FirstLeftMs: ms(left),
		})
	}
}

// result returns the number of overlaps and the first examples.
func (o *oracle) result() (int, []Overlap) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.count, append([]Overlap(nil), o.overlaps...)
}

// fencedResource is the storage a lock protects, made to check fencing
// tokens as the README asks of one: it remembers the highest token it has
// seen and refuses writes with a lower one. A writer without a token (0,
// fencing off) cannot be told from any other, so it is always accepted:
// that is the weakness fencing removes.
type fencedResource struct {
	base    time.Time
	mu      sync.Mutex
	highest int64
	writes  []Write
}

// Write is one write attempt on the fenced resource.
type Write struct {
	Who      string  `json:"who"`
	Token    int64   `json:"token"`
	Accepted bool    `json:"accepted"`
	AtMs     float64 `json:"at_ms"`
	// Highest is the highest token the resource had seen before this write.
	Highest int64 `json:"highest_before"`
}

// write applies a write by who carrying token and reports whether the
// resource accepted it.
func (f *fencedResource) write(who string, token int64) Write {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := Write{Who: who, Token: token, AtMs: ms(time.Since(f.base)), Highest: f.highest}
	w.Accepted = token >= f.highest
	if w.Accepted {
		f.highest = token
	}
	f.writes = append(f.writes, w)
	return w
}

func (f *fencedResource) log() []Write {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Write(nil), f.writes...)
}
