package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

func TestHandoffPassesTheLeaseInProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	l := e.locker(func(c *engine.Config) { c.Fencing = true; patient(c) })
	other := e.locker(patient)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := l.Lock(ctx, "handoff")
	if err != nil {
		t.Fatal(err)
	}
	// Lock returns at a quorum: the last SETs may still be on their way.
	eventually(t, 30*time.Second, "the first lease's keys on every master", func() bool {
		for i := 0; i < 5; i++ {
			if e.get(i, e.key("handoff")) != first.Value() {
				return false
			}
		}
		return true
	})
	got := make(chan *engine.Lease, 1)
	go func() {
		le, err := l.Lock(ctx, "handoff")
		if err != nil {
			t.Error(err)
		}
		got <- le
	}()
	eventually(t, 30*time.Second, "second goroutine queued", func() bool { return l.GateWaiting("handoff") == 1 })
	firstUntil := first.ValidUntil()
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
	if !errors.Is(first.Err(), engine.ErrReleased) {
		t.Fatalf("first lease after hand-off: %v", first.Err())
	}
	second := <-got
	if second == nil {
		t.FailNow()
	}
	if w := second.Wait(); w.Cause != engine.WakeHandoff || w.Attempts != 0 {
		t.Fatalf("wait %+v: want a hand-off without asking the masters", w)
	}
	if second.Value() != first.Value() || second.Token() <= first.Token() {
		t.Fatalf("successor value %q token %d, first %q token %d", second.Value(), second.Token(), first.Value(), first.Token())
	}
	if !second.ValidUntil().Equal(firstUntil) {
		t.Fatal("the successor must inherit the validity, not extend it")
	}
	if !first.ValidUntil().Before(firstUntil) {
		t.Fatal("the handed-on lease's ValidUntil must tell when it ended")
	}
	// The keys never left the masters, so another process is still shut out.
	for i := 0; i < 5; i++ {
		if v := e.get(i, e.key("handoff")); v != first.Value() {
			t.Fatalf("node %d holds %q during the hand-off", i, v)
		}
	}
	if _, err := other.TryLock(ctx, "handoff"); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("another locker during the hand-off: %v", err)
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Release returns at a quorum: the last masters' deletes may land
	// after it (the keys live 10 s, longer than that takes).
	eventually(t, 30*time.Second, "the last release's deletes on every master", func() bool {
		for i := 0; i < 5; i++ {
			if e.get(i, e.key("handoff")) != "" {
				return false
			}
		}
		return true
	})
}

func TestHandoffsAreCapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(func(c *engine.Config) { c.Wait.MaxHandoffs = 2; patient(c) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	le, err := l.Lock(ctx, "capped-handoff")
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	leases := make(chan *engine.Lease, n)
	for i := 0; i < n; i++ {
		go func() {
			got, err := l.Lock(ctx, "capped-handoff")
			if err != nil {
				t.Error(err)
			}
			leases <- got
		}()
		eventually(t, 30*time.Second, "queued", func() bool { return l.GateWaiting("capped-handoff") == i+1 })
	}
	var causes []engine.WakeCause
	for i := 0; i < n; i++ {
		le.Release(ctx)
		le = <-leases
		if le == nil {
			t.FailNow()
		}
		causes = append(causes, le.Wait().Cause)
	}
	le.Release(ctx)
	// Two hand-offs in a row, then a real release that the next waiter wins
	// on the masters, which starts a new chain.
	want := []engine.WakeCause{engine.WakeHandoff, engine.WakeHandoff, engine.WakeNone, engine.WakeHandoff}
	for i := range want {
		if causes[i] != want[i] {
			t.Fatalf("causes %v, want %v", causes, want)
		}
	}
}

// In virtual time: the lease's validity runs down exactly as long as the
// test waits.
func TestNoHandoffOfAShortLease(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		const ttl = 400 * time.Millisecond
		l := e.locker(func(c *engine.Config) { c.TTL = ttl })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		first, err := l.Lock(ctx, "short")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *engine.Lease, 1)
		go func() {
			le, _ := l.Lock(ctx, "short")
			got <- le
		}()
		eventually(t, 5*time.Second, "queued", func() bool { return l.GateWaiting("short") == 1 })
		time.Sleep(ttl * 6 / 10) // less than half the TTL of validity left
		first.Release(ctx)
		second := <-got
		if second == nil || second.Wait().Cause == engine.WakeHandoff || second.Value() == first.Value() {
			t.Fatalf("a lease with little validity left was handed on: %+v", second.Wait())
		}
	})
}

// A gated lease that expires hands its turn on; releasing it afterwards
// must not hand the turn on a second time. In virtual time: the expiry
// is exact, and so is the wait that shows the third still queued.
func TestExpiredGatedLeaseLeavesTheGateOnce(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		const ttl = 300 * time.Millisecond
		l := e.locker(func(c *engine.Config) { c.TTL = ttl })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		first, err := l.Lock(ctx, "expire-gate")
		if err != nil {
			t.Fatal(err)
		}
		second := make(chan *engine.Lease, 1)
		go func() { le, _ := l.Lock(ctx, "expire-gate"); second <- le }()
		eventually(t, 5*time.Second, "second queued", func() bool { return l.GateWaiting("expire-gate") == 1 })
		third := make(chan *engine.Lease, 1)
		go func() { le, _ := l.Lock(ctx, "expire-gate"); third <- le }()
		eventually(t, 5*time.Second, "third queued", func() bool { return l.GateWaiting("expire-gate") == 2 })
		<-first.Done() // expires: the turn goes to the second
		s := <-second
		if s == nil {
			t.FailNow()
		}
		first.Release(ctx) // late: must not let the third in beside the second
		select {
		case le := <-third:
			t.Fatalf("third got past the gate while the second held it: %+v", le.Wait())
		case <-time.After(200 * time.Millisecond):
		}
		if l.GateWaiting("expire-gate") != 1 {
			t.Fatalf("the third should still be queued, queue is %d", l.GateWaiting("expire-gate"))
		}
		s.Release(ctx)
		if le := <-third; le == nil {
			t.Fatal("third never got the lock")
		}
	})
}

// More masters than the lease's inline tally holds: the hand-off must size
// the successor's tally from the lease's. Seven simulated masters, more
// than the pool has.
func TestHandoffWithSevenMasters(t *testing.T) {
	simTest(t, 7, func(t *testing.T, e *env) {
		l := e.locker(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		first, err := l.Lock(ctx, "seven")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *engine.Lease, 1)
		go func() { le, _ := l.Lock(ctx, "seven"); got <- le }()
		eventually(t, 5*time.Second, "queued", func() bool { return l.GateWaiting("seven") == 1 })
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		second := <-got
		if second == nil || second.Wait().Cause != engine.WakeHandoff {
			t.Fatal("no hand-off with seven masters")
		}
		if err := second.Release(ctx); err != nil {
			t.Fatalf("release after a hand-off on seven masters: %v", err)
		}
	})
}
