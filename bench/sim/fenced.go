package sim

import (
	"fmt"
	"sync"
	"time"
)

// fencedStore is the storage the locks protect, one per resource (or
// semaphore slot), as bench/check's Store models it: it accepts a write
// whose token is at least the highest it has seen (a write without a
// token, from a Locker without fencing, is always accepted, and raises
// nothing), and judges each write against the order in which the holds
// began: a write by a holder after a later holder began is stale, and
// one after a later holder with a token began is one the store must
// reject. It differs in one point: a holder's first write is made at the
// instant its hold begins (open), under the store's lock, so that no
// stale write slips between a new holder's start and its first write
// and is counted as accepted though the holder would have raised the
// bar first.
type fencedStore struct {
	h  *History
	mu sync.Mutex
	// By resource: the highest token seen, and the latest hold to begin
	// (a grant's ID), and the latest with a token.
	highest      map[string]int64
	latest       map[string]int
	latestFenced map[string]int
}

// StoreWrite is one write to a protected resource.
type StoreWrite struct {
	At       time.Duration
	Resource string
	Grant    int
	Token    int64
	// Highest is the highest token the resource had seen before.
	Highest  int64
	Accepted bool
	// Stale: a later hold of the resource had begun; Outrun: a later hold
	// with a token had (the store must reject the write of a holder with
	// a token then). Without tokens no write is outrun.
	Stale, Outrun bool
}

func (w StoreWrite) String() string {
	v := "accepted"
	if !w.Accepted {
		v = "rejected"
	}
	s := ""
	switch {
	case w.Outrun:
		s = " (stale)"
	case w.Stale:
		s = " (stale, after a holder without a token)"
	}
	return fmt.Sprintf("%12s write %s by lease#%d token %d (highest seen %d): %s%s", fmtDur(w.At), w.Resource, w.Grant, w.Token, w.Highest, v, s)
}

func newFencedStore(h *History) *fencedStore {
	return &fencedStore{h: h, highest: make(map[string]int64), latest: make(map[string]int), latestFenced: make(map[string]int)}
}

// write is lease grant's write to resource with its token; open marks
// the first, as its hold begins.
func (s *fencedStore) write(resource string, grant int, token int64, open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if open {
		s.latest[resource] = grant
		if token != 0 {
			s.latestFenced[resource] = grant
		}
	}
	w := StoreWrite{At: s.h.since(time.Now()), Resource: resource, Grant: grant, Token: token, Highest: s.highest[resource]}
	w.Accepted = token == 0 || token >= w.Highest
	if w.Accepted && token != 0 {
		s.highest[resource] = token
	}
	w.Stale = s.latest[resource] != grant
	w.Outrun = token != 0 && s.latestFenced[resource] != grant
	s.h.wrote(w)
}
