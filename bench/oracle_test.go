package bench

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
)

func TestOracle(t *testing.T) {
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		name string
		run  func(o *oracle)
		want int64
	}{
		{"one after the other", func(o *oracle) {
			o.acquire(0, 1, at(0), at(100))
			o.release(0, 1, at(10))
			o.acquire(0, 2, at(11), at(111))
			o.release(0, 2, at(20))
		}, 0},
		{"second begins while first holds", func(o *oracle) {
			o.acquire(0, 1, at(0), at(100))
			o.acquire(0, 2, at(5), at(105))
		}, 1},
		{"first expired before second began", func(o *oracle) {
			o.acquire(0, 1, at(0), at(100))
			o.acquire(0, 2, at(101), at(201))
			o.release(0, 1, at(150)) // released late: it lost its lease at 100
			o.acquire(0, 3, at(202), at(300))
		}, 0},
		{"second registered after the first was already gone, but began before it ended", func(o *oracle) {
			o.acquire(0, 1, at(0), at(100))
			o.release(0, 1, at(50))
			o.acquire(0, 2, at(40), at(140)) // began at 40, while 1 held until 50
		}, 1},
		{"other resources do not interfere", func(o *oracle) {
			o.acquire(0, 1, at(0), at(100))
			o.acquire(1, 2, at(5), at(105))
			o.acquire(2, 3, at(6), at(106))
		}, 0},
		{"three holders at once are three pairs", func(o *oracle) {
			o.acquire(0, 1, at(0), at(100))
			o.acquire(0, 2, at(1), at(100))
			o.acquire(0, 3, at(2), at(100))
		}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOracle(base, []string{"r0", "r1", "r2"}, engines.Lock{})
			c.run(o)
			n, ex := o.violations()
			if n != c.want {
				t.Fatalf("violations = %d, want %d (%+v)", n, c.want, ex)
			}
			if n > 0 && (len(ex) == 0 || ex[0].Resource != "r0") {
				t.Errorf("examples = %+v", ex)
			}
		})
	}
}

func TestOracleKeepsFewExamples(t *testing.T) {
	base := time.Now()
	o := newOracle(base, []string{"r"}, engines.Lock{})
	for i := 0; i < 100; i++ {
		o.acquire(0, i, base.Add(time.Duration(i)), base.Add(time.Hour))
	}
	n, ex := o.violations()
	if n != 100*99/2 || len(ex) != maxExamples {
		t.Errorf("count %d examples %d, want %d and %d", n, len(ex), 100*99/2, maxExamples)
	}
}

func TestOracleConcurrentDisjointResources(t *testing.T) {
	names := make([]string, 8)
	o := newOracle(time.Now(), names, engines.Lock{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				now := time.Now()
				o.acquire(w, w, now, now.Add(time.Second))
				o.release(w, w, time.Now())
			}
		}()
	}
	wg.Wait()
	if n, _ := o.violations(); n != 0 {
		t.Errorf("%d violations with one worker per resource", n)
	}
}

func BenchmarkOracle(b *testing.B) {
	names := make([]string, 1000)
	o := newOracle(time.Now(), names, engines.Lock{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			now := time.Now()
			r := i % len(names)
			o.acquire(r, 0, now, now.Add(time.Second))
			o.release(r, 0, now)
			i += 7
		}
	})
}

// The fencing check must flag a token that does not increase in the order
// the holds began, and only such a token.
func TestOracleStaleTokens(t *testing.T) {
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		res, worker  int
		start, until int
		token        int64
		release      int // release time, ms; 0: not released
	}
	for _, c := range []struct {
		name      string
		steps     []step
		checked   int64
		stale     int64
		wantToken int64 // the first stale example's token
	}{
		{"increasing", []step{{0, 1, 0, 100, 1, 10}, {0, 2, 11, 111, 2, 20}, {0, 3, 21, 121, 5, 30}}, 3, 0, 0},
		{"a repeated token", []step{{0, 1, 0, 100, 7, 10}, {0, 2, 11, 111, 7, 20}}, 2, 1, 7},
		{"a lower token after a higher one", []step{{0, 1, 0, 100, 9, 10}, {0, 2, 11, 111, 8, 20}, {0, 3, 21, 121, 10, 30}}, 3, 1, 8},
		// Stale against the highest seen, not just the previous hold.
		{"below an earlier peak", []step{{0, 1, 0, 100, 9, 10}, {0, 2, 11, 111, 3, 20}, {0, 3, 21, 121, 5, 30}}, 3, 2, 3},
		// The hold that began first registered last: its token must be
		// the lower one. (The overlap check cannot tell such a hold from
		// an overlapping one, and counts a violation: see below.)
		{"registered late, lower token", []step{{0, 2, 50, 150, 6, 60}, {0, 1, 0, 40, 5, 40}}, 2, 0, 0},
		{"registered late, higher token", []step{{0, 2, 50, 150, 5, 60}, {0, 1, 0, 40, 6, 40}}, 2, 1, 6},
		{"resources are separate", []step{{0, 1, 0, 100, 9, 10}, {1, 2, 11, 111, 1, 20}}, 2, 0, 0},
		{"no tokens, no check", []step{{0, 1, 0, 100, 0, 10}, {0, 2, 11, 111, 0, 20}}, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOracle(base, []string{"r0", "r1"}, engines.Lock{})
			for _, s := range c.steps {
				o.begin(s.res, s.worker, holdSpec{start: at(s.start), until: at(s.until), token: s.token})
				if s.release > 0 {
					o.release(s.res, s.worker, at(s.release))
				}
			}
			checked, stale, ex := o.staleTokens()
			if checked != c.checked || stale != c.stale {
				t.Fatalf("checked %d stale %d, want %d and %d (%+v)", checked, stale, c.checked, c.stale, ex)
			}
			if stale > 0 && (len(ex) == 0 || ex[0].Token != c.wantToken) {
				t.Errorf("examples %+v, want the first with token %d", ex, c.wantToken)
			}
			if n, _ := o.violations(); n != 0 && !strings.HasPrefix(c.name, "registered late") {
				t.Errorf("%d violations in a sequence without overlaps", n)
			}
		})
	}
}

// A waiter that asked before the previous hold ended took it over: its
// handoff is from that end to its start. Anyone else has none.
func TestOracleHandoff(t *testing.T) {
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	o := newOracle(base, []string{"r0"}, engines.Lock{})
	if _, handed := o.begin(0, 1, holdSpec{start: at(5), until: at(100), asked: at(0)}); handed {
		t.Error("the first hold of a resource has no handoff")
	}
	o.release(0, 1, at(10))
	d, handed := o.begin(0, 2, holdSpec{start: at(13), until: at(113), asked: at(2)})
	if !handed || d != 3*time.Millisecond {
		t.Errorf("waiter since 2ms, previous hold ended at 10ms, began at 13ms: handoff %v %v, want 3ms", d, handed)
	}
	o.release(0, 2, at(20))
	if _, handed := o.begin(0, 3, holdSpec{start: at(40), until: at(140), asked: at(30)}); handed {
		t.Error("asked after the previous hold ended: not a handoff but an idle resource")
	}
	o.release(0, 3, at(50))
	if _, handed := o.begin(0, 4, holdSpec{start: at(60), until: at(160)}); handed {
		t.Error("mode try (no asked time): no handoff")
	}
	if n, _ := o.violations(); n != 0 {
		t.Errorf("%d violations", n)
	}
}

// movingLease is a lease whose validity an auto-extension moves.
type movingLease struct {
	mu    sync.Mutex
	until time.Time
}

func (l *movingLease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}
func (l *movingLease) Release(context.Context) error { return nil }
func (l *movingLease) extend(to time.Time) {
	l.mu.Lock()
	l.until = to
	l.mu.Unlock()
}

// With auto-extension the validity at acquisition is not the end of the
// hold: a second holder after it but before the extended validity must be
// flagged, and one after the lease was let go must not.
func TestOracleLiveValidity(t *testing.T) {
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

	o := newOracle(base, []string{"r0"}, engines.Lock{})
	le := &movingLease{until: at(100)}
	o.begin(0, 1, holdSpec{start: at(0), until: at(100), live: le})
	le.extend(at(200)) // extended at ~70ms
	o.begin(0, 2, holdSpec{start: at(150), until: at(250)})
	if n, _ := o.violations(); n != 1 {
		t.Errorf("second holder at 150ms while the first was extended to 200ms: %d violations, want 1", n)
	}

	o = newOracle(base, []string{"r0"}, engines.Lock{})
	le = &movingLease{until: at(100)}
	o.begin(0, 1, holdSpec{start: at(0), until: at(100), live: le})
	le.extend(at(200))
	// The extension then failed: the validity stays at 200, and a holder
	// after it is no overlap, though the first never released.
	o.begin(0, 2, holdSpec{start: at(201), until: at(300)})
	o.release(0, 1, at(250)) // released late, at the validity re-read: min(250, 200)
	o.release(0, 2, at(260))
	o.begin(0, 3, holdSpec{start: at(261), until: at(400)})
	if n, ex := o.violations(); n != 0 {
		t.Errorf("holds after the extended validity: %d violations %+v", n, ex)
	}
}
