package check

import (
	"testing"
	"time"
)

// A hold whose Done fired is over, though its validity has time left; one
// whose validity ran out with Done still open is counted late.
func TestDone(t *testing.T) {
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

	o := New(base, []string{"r"})
	done := make(chan struct{})
	o.Begin(0, 1, Hold{Start: at(0), Until: at(100), Done: done})
	o.Begin(0, 2, Hold{Start: at(50), Until: at(150)})
	if n, _ := o.Violations(); n != 1 {
		t.Fatalf("Done open, validity left: %d violations, want 1", n)
	}

	o = New(base, []string{"r"})
	done = make(chan struct{})
	o.Begin(0, 1, Hold{Start: at(0), Until: at(100), Done: done})
	close(done) // lost before its validity ended
	o.Begin(0, 2, Hold{Start: at(50), Until: at(150)})
	if n, ex := o.Violations(); n != 0 {
		t.Fatalf("Done fired before the second began: %d violations %+v", n, ex)
	}
	if n, _ := o.DoneLate(); n != 0 {
		t.Fatalf("Done fired in time: %d late", n)
	}

	o = New(base, []string{"r"})
	o.Begin(0, 1, Hold{Start: at(0), Until: at(100), Done: make(chan struct{})})
	o.Begin(0, 2, Hold{Start: at(120), Until: at(220)})
	n, ex := o.DoneLate()
	if n != 1 || len(ex) != 1 || ex[0].Holder != 1 || ex[0].Next != 2 || ex[0].Expired != 20*time.Millisecond {
		t.Fatalf("expired with Done open: late %d %+v, want 1 (holder 1, next 2, 20ms)", n, ex)
	}
	if v, _ := o.Violations(); v != 0 {
		t.Errorf("an expired hold is no overlap: %d violations", v)
	}
}

func TestKeyedNames(t *testing.T) {
	base := time.Now()
	k := NewKeyed(base)
	k.Begin("a", "holder", Hold{Start: base, Until: base.Add(time.Second)})
	k.Begin("b", "other", Hold{Start: base, Until: base.Add(time.Second)})
	k.Begin("a", "second", Hold{Start: base.Add(time.Millisecond), Until: base.Add(time.Second)})
	n, ex := k.Violations()
	if n != 1 || ex[0].Resource != "a" || k.HolderName(ex[0].First) != "holder" || k.HolderName(ex[0].Second) != "second" {
		t.Fatalf("violations %d %+v", n, ex)
	}
	k.End("a", "holder", base.Add(2*time.Millisecond))
	k.End("a", "second", base.Add(3*time.Millisecond))
	k.Begin("a", "holder", Hold{Start: base.Add(4 * time.Millisecond), Until: base.Add(time.Second)})
	if n, _ := k.Violations(); n != 1 {
		t.Errorf("after both ended: %d violations, want still 1", n)
	}
}

// The store judges staleness by the order holders opened, not by tokens:
// with tokens that follow that order it rejects every stale write; with
// tokens that do not (or none), it accepts some, and says so.
func TestStore(t *testing.T) {
	for _, c := range []struct {
		name           string
		first, second  int64
		staleAccepted  int64
		freshRejected  int64
		secondAccepted bool
	}{
		{"increasing tokens", 5, 6, 0, 0, true},
		{"no tokens", 0, 0, 1, 0, true},
		{"tokens went backwards", 6, 5, 1, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewStore(time.Now(), true)
			a := s.Open("a", c.first)
			a.Write()
			b := s.Open("b", c.second)
			if got := b.Write(); got.Accepted != c.secondAccepted || got.Stale {
				t.Fatalf("the latest holder's write %+v", got)
			}
			late := a.Write() // a paused past its lease
			if !late.Stale {
				t.Fatalf("a write after a later holder opened is stale: %+v", late)
			}
			n := s.Counts()
			if n.StaleAccepted != c.staleAccepted || n.FreshRejected != c.freshRejected || n.Writes != 3 || len(s.Log()) != 3 {
				t.Errorf("counts %+v log %d", n, len(s.Log()))
			}
		})
	}
}

// Out of model two acquisitions can overlap in time, and the one that
// returns last need not be the one granted last: the store orders holders
// by their acquisitions (OpenSpan), not by when the calls returned, and a
// write is stale only once a holder whose acquisition began after the
// writer's returned has written (before that the store has not seen the
// later token, and no fenced store could refuse).
func TestStoreConcurrentAcquisitions(t *testing.T) {
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	s := NewStore(base, true)
	// a: asked at 0, granted with the lower token, its call returned late
	// (30); b: asked at 10, after a was granted, returned at 20.
	b := s.OpenSpan("b", 200, at(10), at(20))
	if w := b.Write(); !w.Accepted || w.Stale {
		t.Fatalf("b's first write %+v", w)
	}
	a := s.OpenSpan("a", 100, at(0), at(30))
	if w := a.Write(); w.Accepted || w.Stale {
		t.Fatalf("a's write after b's, with a lower token: %+v (want refused, not stale: neither is later)", w)
	}
	if w := b.Write(); !w.Accepted || w.Stale {
		t.Fatalf("b's write after a opened: %+v (a's acquisition is not later than b's)", w)
	}
	// c begins after b returned, with a higher token; until c writes, b's
	// writes are not stale (the store has not seen c's token).
	c := s.OpenSpan("c", 300, at(40), at(45))
	if w := b.Write(); !w.Accepted || w.Stale {
		t.Fatalf("b's write before c's first: %+v", w)
	}
	c.Write()
	if w := b.Write(); w.Accepted || !w.Stale {
		t.Fatalf("b's write after c's: %+v (want stale, refused)", w)
	}
	if n := s.Counts(); n.StaleAccepted != 0 || n.Stale != 1 || n.Rejected != 2 {
		t.Errorf("counts %+v", n)
	}
	// Tokens that went backwards between ordered acquisitions are still
	// caught: d begins after c returned, with a lower token.
	d := s.OpenSpan("d", 250, at(50), at(55))
	d.Write()
	if w := c.Write(); !w.Accepted || !w.Stale {
		t.Fatalf("c's write after d's lower-token write: %+v (want stale, accepted)", w)
	}
	if n := s.Counts(); n.StaleAccepted != 1 || n.FreshRejected != 2 {
		t.Errorf("counts %+v", n)
	}
}
