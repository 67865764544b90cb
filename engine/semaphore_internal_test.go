package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// Masters older than Redis 7.0 have no SET NX GET: the acquire script
// reads each slot, then sets it. Forced here on newer masters, the
// semaphore keeps its behaviour: one permit per slot, contention when
// full, a release that wakes a waiter, a fenced permit.
func TestSemaphoreWithoutSetNXGet(t *testing.T) {
	c := redistest.StartT(t, 3)
	var cls []rueidis.Client
	for _, a := range c.Addrs() {
		cls = append(cls, direct(t, a))
	}
	for _, fencing := range []bool{false, true} {
		cfg := DefaultConfig(c.Addrs()...)
		cfg.Quarantine = QuarantineObserved
		cfg.Fencing = fencing
		cfg.NodeTimeout = 4 * time.Second // past any answer of a loaded machine
		l, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		l.setGet = false
		s, err := l.Semaphore("old", 2)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		a, err := s.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.TryAcquire(ctx)
		if err != nil || b.Permit() == a.Permit() {
			t.Fatalf("second permit: slot %d (first %d), %v", b.Permit(), a.Permit(), err)
		}
		if fencing && (a.Token() == 0 || b.Token() == 0) {
			t.Fatalf("fenced permits without tokens: %d, %d", a.Token(), b.Token())
		}
		if _, err := s.TryAcquire(ctx); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("both permits held: %v", err)
		}
		// The release comes once the waiter sleeps: its attempt marked
		// both permits on a quorum, so that their releases publish.
		marked := func() bool {
			n := 0
			for _, cl := range cls {
				ok := true
				for _, le := range []*Lease{a, b} {
					v, _ := cl.Do(ctx, cl.B().Get().Key(s.keys[le.Permit()]).Build()).ToString()
					ok = ok && v == le.value+waitMark
				}
				if ok {
					n++
				}
			}
			return n >= 2
		}
		go func() {
			for !marked() && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			a.Release(context.Background())
		}()
		w, err := s.Acquire(ctx)
		if err != nil || w.Permit() != a.Permit() {
			t.Fatalf("Acquire after the release: slot %d, %v", w.Permit(), err)
		}
		if fencing && w.Token() <= a.Token() {
			t.Fatalf("token %d after %d in one slot", w.Token(), a.Token())
		}
		for _, le := range []*Lease{b, w} {
			if err := le.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		l.Close()
	}
}
