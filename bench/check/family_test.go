package check

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The semaphore's rule: more holds at once than permits is a violation,
// counted once, by the hold that made them too many; P at once is not.
func TestSemaphoreOracle(t *testing.T) {
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		who, start, until int
		end               int // when End is called; 0: never
	}
	for _, c := range []struct {
		name    string
		permits int
		steps   []step // registered in this order
		want    int64
		holders int // of the first example
	}{
		{"P at once", 3, []step{{1, 0, 100, 0}, {2, 1, 100, 0}, {3, 2, 100, 0}}, 0, 0},
		{"P+1 at once", 3, []step{{1, 0, 100, 0}, {2, 1, 100, 0}, {3, 2, 100, 0}, {4, 3, 100, 0}}, 1, 4},
		{"P+2 at once: each extra holder counts", 2, []step{{1, 0, 100, 0}, {2, 1, 100, 0}, {3, 2, 100, 0}, {4, 3, 100, 0}}, 2, 3},
		{"P+1 in turn, never at once", 2, []step{{1, 0, 100, 10}, {2, 5, 100, 0}, {3, 11, 100, 0}}, 0, 0},
		{"expired, not released", 2, []step{{1, 0, 10, 0}, {2, 5, 100, 0}, {3, 11, 100, 0}}, 0, 0},
		// Worker 3 began at 8, while 1 and 2 held, but registered after
		// 1 ended at 10.
		{"registered late", 2, []step{{1, 0, 100, 10}, {2, 5, 100, 0}, {3, 8, 100, 0}}, 1, 3},
		// Pairwise overlaps without a common instant: 1 [0,20) and 3
		// [25,40) never meet.
		{"a chain is not a crowd", 2, []step{{2, 10, 100, 30}, {3, 25, 100, 40}, {1, 0, 20, 0}}, 0, 0},
		{"one permit is a lock", 1, []step{{1, 0, 100, 0}, {2, 1, 100, 0}}, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := NewSemaphores(base, []string{"s"}, c.permits)
			for _, s := range c.steps {
				o.Begin(0, s.who, Hold{Start: at(s.start), Until: at(s.until)})
				if s.end > 0 {
					o.End(0, s.who, at(s.end))
				}
			}
			n, ex := o.Violations()
			if n != c.want {
				t.Fatalf("violations %d, want %d (%+v)", n, c.want, ex)
			}
			if n > 0 && ex[0].Holders != c.holders {
				t.Errorf("example %+v, want %d holders", ex[0], c.holders)
			}
			if o.Incomplete() != 0 {
				t.Errorf("incomplete %d", o.Incomplete())
			}
		})
	}
}

// A semaphore's tokens increase per permit slot, not per semaphore:
// holders of two slots at once may carry them in any order.
func TestSemaphoreOracleTokensPerSlot(t *testing.T) {
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	o := NewSemaphores(base, []string{"s"}, 2)
	o.Begin(0, 1, Hold{Start: at(0), Until: at(100), Token: 9, Permit: 1})
	o.Begin(0, 2, Hold{Start: at(1), Until: at(100), Token: 4, Permit: 2}) // slot 1, lower: fine
	o.End(0, 1, at(10))
	o.Begin(0, 3, Hold{Start: at(11), Until: at(100), Token: 9, Permit: 1}) // slot 0 again, not above 9
	o.End(0, 2, at(20))
	o.Begin(0, 4, Hold{Start: at(21), Until: at(100), Token: 5, Permit: 2})
	o.Begin(0, 5, Hold{Start: at(22), Until: at(100), Token: 1}) // slot unknown: not checked
	checked, stale, ex := o.StaleTokens()
	if checked != 4 || stale != 1 || ex[0].Holder != 3 {
		t.Errorf("checked %d stale %d %+v, want 4 checked and holder 3's stale", checked, stale, ex)
	}
}

// A shared hold (a reader) overlaps other readers freely, and a writer
// overlaps no one.
func TestSharedHolds(t *testing.T) {
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		who, start int
		shared     bool
		end        int
	}
	for _, c := range []struct {
		name  string
		steps []step
		want  int64
	}{
		{"readers together", []step{{1, 0, true, 0}, {2, 1, true, 0}, {3, 2, true, 0}}, 0},
		{"a writer among readers", []step{{1, 0, true, 0}, {2, 1, true, 0}, {3, 2, false, 0}}, 2},
		{"a reader under a writer", []step{{1, 0, false, 0}, {2, 1, true, 0}}, 1},
		{"writers", []step{{1, 0, false, 0}, {2, 1, false, 0}}, 1},
		{"a writer after the readers", []step{{1, 0, true, 5}, {2, 1, true, 6}, {3, 7, false, 0}}, 0},
		// A reader that ended at 9 is no obstacle to a reader begun at 8,
		// but a writer ended at 5 is to one begun at 4.
		{"a late reader after a reader", []step{{1, 0, true, 9}, {2, 8, true, 0}}, 0},
		{"a late reader after a writer", []step{{1, 0, false, 5}, {2, 4, true, 0}}, 1},
		{"a late writer after a reader", []step{{1, 0, true, 9}, {2, 8, false, 0}}, 1},
		// The first shared hold sees the exclusive ones that ended before.
		{"a late first reader", []step{{1, 0, false, 9}, {2, 8, true, 0}}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := New(base, []string{"r"})
			for _, s := range c.steps {
				o.Begin(0, s.who, Hold{Start: at(s.start), Until: at(100), Shared: s.shared})
				if s.end > 0 {
					o.End(0, s.who, at(s.end))
				}
			}
			if n, ex := o.Violations(); n != c.want {
				t.Errorf("violations %d, want %d (%+v)", n, c.want, ex)
			}
		})
	}
}

// The oracle is exact for every shape of the family: on any history of
// holds, each registered a little after it began (in the order of those
// calls, with every End before the next call that comes later), it finds a
// violation if and only if the holds broke the rule at some instant: more
// than P at once on a semaphore; two at once, not both shared, on a lock.
// A control that grants one permit too many, or lets a writer in beside a
// reader, makes such histories; the schedules here are arbitrary, so they
// include every one a control could make.
func TestOracleIsExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		permits := rapid.IntRange(1, 4).Draw(rt, "permits")
		shared := permits == 1 && rapid.Bool().Draw(rt, "rw")
		n := rapid.IntRange(1, 24).Draw(rt, "holds")
		type hold struct {
			start, until, reg, end int // ms; end: when End is called
			shared                 bool
		}
		hs := make([]hold, n)
		for i := range hs {
			h := &hs[i]
			h.start = rapid.IntRange(0, 200).Draw(rt, "start")
			h.until = h.start + rapid.IntRange(1, 60).Draw(rt, "validity")
			// Registered while valid: a moment after the acquire returned.
			h.reg = h.start + rapid.IntRange(0, min(5, h.until-h.start-1)).Draw(rt, "delay")
			// Ended after it registered: End comes after Begin.
			h.end = h.reg + rapid.IntRange(1, 80).Draw(rt, "held")
			h.shared = shared && rapid.Bool().Draw(rt, "shared")
		}
		type call struct {
			at, who int
			end     bool
		}
		var calls []call
		for i, h := range hs {
			calls = append(calls, call{h.reg, i, false}, call{h.end, i, true})
		}
		// By time; at the same time an End comes first, and a hold's
		// Begin before its own End.
		slices.SortStableFunc(calls, func(a, b call) int {
			switch {
			case a.at != b.at:
				return a.at - b.at
			case a.end != b.end && a.who != b.who:
				if a.end {
					return -1
				}
				return 1
			case a.who == b.who:
				if !a.end {
					return -1
				}
				return 1
			}
			return 0
		})
		base := time.Now()
		ms := func(v int) time.Time { return base.Add(time.Duration(v) * time.Millisecond) }
		o := NewSemaphores(base, []string{"r"}, permits)
		for _, c := range calls {
			h := hs[c.who]
			if c.end {
				o.End(0, c.who, ms(h.end))
			} else {
				o.Begin(0, c.who, Hold{Start: ms(h.start), Until: ms(h.until), Shared: h.shared})
			}
		}
		// The truth, by brute force: each hold is [start, min(end, until)).
		end := func(h hold) int { return min(h.end, h.until) }
		broken, why := false, ""
		for i, a := range hs {
			at, crowd := a.start, 0
			if at >= end(a) {
				continue // held for no time
			}
			for j, b := range hs {
				if b.start <= at && at < end(b) {
					crowd++
					if permits == 1 && j != i && !(a.shared && b.shared) {
						broken, why = true, fmt.Sprintf("holds %d and %d at %dms", j, i, at)
					}
				}
			}
			if permits > 1 && crowd > permits {
				broken, why = true, fmt.Sprintf("%d holds at %dms", crowd, at)
			}
		}
		got, ex := o.Violations()
		if (got > 0) != broken {
			rt.Fatalf("oracle found %d violations %+v; truth: broken %v (%s)", got, ex, broken, why)
		}
		if o.Incomplete() != 0 {
			rt.Fatalf("incomplete %d", o.Incomplete())
		}
	})
}

// A semaphore keeps a bounded number of its ended holds: a hold registered
// after more of them ended is counted incomplete, not judged by guess.
func TestSemaphoreOracleForgetsBoundedly(t *testing.T) {
	base := time.Now()
	us := func(v int) time.Time { return base.Add(time.Duration(v) * time.Microsecond) }
	o := NewSemaphores(base, []string{"s"}, 2)
	limit := 4*2 + 64
	for i := range limit + 10 {
		o.Begin(0, i, Hold{Start: us(10 + i*2), Until: us(1e6)})
		o.End(0, i, us(11+i*2))
	}
	o.Begin(0, 9999, Hold{Start: us(0), Until: us(1e6)}) // began before all of them
	if o.Incomplete() != 1 {
		t.Errorf("incomplete %d, want 1", o.Incomplete())
	}
	if n, ex := o.Violations(); n != 0 {
		t.Errorf("violations %d %+v: never more than 2 at once", n, ex)
	}
}
