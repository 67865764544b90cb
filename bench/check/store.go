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
// It also judges each write against the order in which the holds began,
// which it learns from the holders and not from the tokens: a write by a
// holder after a later holder has written is stale, whatever its token
// says. A holder is later than another if its acquisition began after the
// other's returned (OpenSpan; Open takes the moment it is called for
// both): out of model two acquisitions can overlap in time, and the call
// that returns last need not be the one granted last, so neither is later
// than the other. Until the later holder's first write the store has not
// seen its token, and no fenced store could refuse the earlier one's. A
// stale write the store accepted is what fencing exists to prevent, so
// StaleAccepted must stay 0 with fencing on, even when the lock itself
// failed (keys lost on a majority). Without fencing it is not.
type Store struct {
	base time.Time
	keep bool

	mu      sync.Mutex
	highest int64
	// began is the latest start of an acquisition whose holder has
	// written: a write by a holder whose acquisition returned before it
	// is stale.
	began  time.Time
	writes []Write
	n      StoreCounts
}

// StoreCounts are a store's totals.
type StoreCounts struct {
	Writes        int64 `json:"writes"`
	Rejected      int64 `json:"rejected"`
	Stale         int64 `json:"stale"`
	StaleAccepted int64 `json:"stale_accepted"`
	// FreshRejected counts writes that were refused although not stale:
	// the tokens went backwards, or (out of model) a holder whose
	// acquisition overlapped the writer's wrote a higher token first.
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
	// Stale is set when a later holder had written before this write.
	Stale bool `json:"stale,omitempty"`
}

// NewStore returns an empty store; times are reported since base. With
// keep, every write is kept for Log (scenarios); without, only counted.
func NewStore(base time.Time, keep bool) *Store { return &Store{base: base, keep: keep} }

// Writer is one holder's handle on a store.
type Writer struct {
	s               *Store
	who             string
	token           int64
	began, returned time.Time
}

// Open registers a new holder, later than every holder opened before, and
// returns its handle. Call it as the hold begins.
func (s *Store) Open(who string, token int64) *Writer {
	now := time.Now()
	return s.OpenSpan(who, token, now, now)
}

// OpenSpan registers a holder whose acquisition began at began (no later
// than the attempt that was granted reached a master) and returned at
// returned; it is later than every holder whose acquisition returned
// before began. Call it as the hold begins.
func (s *Store) OpenSpan(who string, token int64, began, returned time.Time) *Writer {
	return &Writer{s: s, who: who, token: token, began: began, returned: returned}
}

// Write applies a write by the holder and reports it.
func (w *Writer) Write() Write { return w.s.write(w.who, w.token, w) }

// Write applies a write by who carrying token, with no judgement of
// staleness, and reports whether the store accepted it.
func (s *Store) Write(who string, token int64) Write { return s.write(who, token, nil) }

func (s *Store) write(who string, token int64, h *Writer) Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := Write{Who: who, Token: token, AtMs: float64(time.Since(s.base).Microseconds()) / 1e3, Highest: s.highest}
	w.Accepted = token >= s.highest
	if w.Accepted {
		s.highest = token
	}
	if h != nil {
		w.Stale = s.began.After(h.returned)
		if h.began.After(s.began) {
			s.began = h.began
		}
	}
	s.n.Writes++
	if !w.Accepted {
		s.n.Rejected++
	}
	if w.Stale {
		s.n.Stale++
		if w.Accepted {
			s.n.StaleAccepted++
		}
	} else if h != nil && !w.Accepted {
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
