package check

import (
	"sync"
	"time"
)

// Store is the storage a lock protects, made to check fencing tokens as
// the README asks of one: it remembers the highest token it has seen and
// refuses writes with a lower one. A writer without a token (0, fencing
// off) cannot be told from any other, so it is always accepted: that is the
// weakness fencing removes.
//
// It also judges each write against the order in which the holds began
// (Open), which it learns from the holders and not from the tokens: a write
// by a holder after a later holder has opened is stale, whatever its token
// says. A stale write the store accepted is what fencing exists to prevent,
// so StaleAccepted must stay 0 with fencing on, even when the lock itself
// failed (keys lost on a majority). Without fencing it is not.
type Store struct {
	base time.Time
	keep bool

	mu      sync.Mutex
	highest int64
	gen     int64 // the latest holder's number, in the order they opened
	writes  []Write
	n       StoreCounts
}

// StoreCounts are a store's totals.
type StoreCounts struct {
	Writes        int64 `json:"writes"`
	Rejected      int64 `json:"rejected"`
	Stale         int64 `json:"stale"`
	StaleAccepted int64 `json:"stale_accepted"`
	// FreshRejected counts writes by the latest holder that were refused:
	// its token was below one seen before, so the tokens went backwards.
	FreshRejected int64 `json:"fresh_rejected"`
}

// Write is one write attempt on the store.
type Write struct {
	Who      string  `json:"who"`
	Token    int64   `json:"token"`
	Accepted bool    `json:"accepted"`
	AtMs     float64 `json:"at_ms"`
	// Highest is the highest token the store had seen before this write.
	Highest int64 `json:"highest_before"`
	// Stale is set when a later holder had opened before this write.
	Stale bool `json:"stale,omitempty"`
}

// NewStore returns an empty store; times are reported since base. With
// keep, every write is kept for Log (scenarios); without, only counted.
func NewStore(base time.Time, keep bool) *Store { return &Store{base: base, keep: keep} }

// Writer is one holder's handle on a store.
type Writer struct {
	s     *Store
	who   string
	token int64
	gen   int64
}

// Open registers a new holder, later than every holder opened before, and
// returns its handle. Call it as the hold begins.
func (s *Store) Open(who string, token int64) *Writer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	return &Writer{s: s, who: who, token: token, gen: s.gen}
}

// Write applies a write by the holder and reports it.
func (w *Writer) Write() Write { return w.s.write(w.who, w.token, w.gen) }

// Write applies a write by who carrying token, with no judgement of
// staleness, and reports whether the store accepted it.
func (s *Store) Write(who string, token int64) Write { return s.write(who, token, 0) }

func (s *Store) write(who string, token, gen int64) Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := Write{Who: who, Token: token, AtMs: float64(time.Since(s.base).Microseconds()) / 1e3, Highest: s.highest}
	w.Accepted = token >= s.highest
	if w.Accepted {
		s.highest = token
	}
	w.Stale = gen != 0 && gen < s.gen
	s.n.Writes++
	if !w.Accepted {
		s.n.Rejected++
	}
	if w.Stale {
		s.n.Stale++
		if w.Accepted {
			s.n.StaleAccepted++
		}
	} else if gen != 0 && !w.Accepted {
		s.n.FreshRejected++
	}
	if s.keep {
		s.writes = append(s.writes, w)
	}
	return w
}

// Log returns every write so far, when the store keeps them.
func (s *Store) Log() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Write(nil), s.writes...)
}

// Counts returns the store's totals.
func (s *Store) Counts() StoreCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}
