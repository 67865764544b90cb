package engine_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// A lease is handed on at the in-process gate as it is: its value, its
// owner and its TTL. A Lock whose options differ from the Locker's must
// not be handed another goroutine's lease: it waits on the masters and
// gets a lease of its own, with the TTL and owner it asked for. In
// virtual time: goroutine 1 holds R with the Locker's defaults (2 s, no
// owner); goroutine 2 asks for R WithTTL(4s) and WithOwner; goroutine 1
// releases.
func TestLockWithOptionsIsNotHandedAnotherLease(t *testing.T) {
	t.Parallel()
	simTest(t, 3, func(t *testing.T, e *env) {
		ctx := context.Background()
		l := e.locker(func(c *engine.Config) { c.TTL, c.MaxTTL = 2*time.Second, 8*time.Second })
		first, err := l.Lock(ctx, "R")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *engine.Lease, 1)
		go func() {
			le, err := l.Lock(ctx, "R", engine.WithTTL(4*time.Second), engine.WithOwner("g2"))
			if err != nil {
				t.Error(err)
			}
			got <- le
		}()
		synctest.Wait() // goroutine 2 waits, at the gate or on the masters
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		second := <-got
		if second == nil {
			return
		}
		defer second.Release(ctx)
		if second.Value() == first.Value() || engine.OwnerOf(second.Value()) != "g2" {
			t.Fatalf("goroutine 2 got value %q (owner %q), goroutine 1 held %q: want a lease of its own, owner g2",
				second.Value(), engine.OwnerOf(second.Value()), first.Value())
		}
		awaitOnAll(t, e, "R", second.Value())
		for i := range e.direct {
			if p := e.pttl(i, e.key("R")); p <= 2000 || p > 4000 {
				t.Errorf("master %d: PTTL %d ms, want the 4 s asked for, above the Locker's 2 s", i, p)
			}
		}
	})
}
