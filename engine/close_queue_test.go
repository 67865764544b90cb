package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// A Locker closed while one of its goroutines waits in Lock (a service
// shutting down in a rolling deploy) must leave the masters' queues, and
// pass on a turn that may have been its own, as a waiter that gives up
// does: otherwise the next release gives the resource to nobody, and the
// waiters of other Lockers sleep until their fallback. A (closed) is
// queued before B; B's fallback is long, so that only a notification
// wakes it in time.
//
//   - asleep: A sleeps between attempts when it is closed; then the holder
//     releases.
//   - turn: the holder has released, the release gave A the turn (its
//     token is on the masters) and woke it, and A's attempt is on its way
//     through a slow link, when A is closed.
//   - cancelled: A's context is cancelled as A is closed.
func TestCloseLeavesTheQueue(t *testing.T) {
	for _, how := range []string{"asleep", "turn", "cancelled"} {
		t.Run(how, func(t *testing.T) { testCloseLeavesTheQueue(t, how) })
	}
}

func testCloseLeavesTheQueue(t *testing.T, how string) {
	const res = "closing"
	const fallback = 5 * time.Second
	e := newEnv(t, 3)
	cfg := func(c *engine.Config) { c.FallbackMin, c.FallbackMax = fallback, fallback }
	recA, recB := &recorder{}, &recorder{}
	lA, slow := e.proxiedLocker(func(c *engine.Config) {
		cfg(c)
		c.Observer = recA.observer()
		c.NodeTimeout = time.Second
	})
	lB := e.locker(func(c *engine.Config) { cfg(c); c.Observer = recB.observer() })
	holderL := e.locker(cfg)

	actx, acancel := context.WithCancel(context.Background())
	defer acancel()
	bctx, bcancel := context.WithTimeout(context.Background(), 2*fallback)
	defer bcancel()
	holder, got := holdAndQueue(t, e, holderL, []*engine.Locker{lA, lB}, res, []context.Context{actx, bctx})

	if how == "turn" {
		for _, p := range slow {
			p.delay.Store(int64(300 * time.Millisecond))
		}
		if err := holder.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The release gives A the turn and wakes it; A's attempt then
		// takes 300 ms to reach the masters.
		eventually(t, 5*time.Second, "the release woke A", func() bool { return lA.Waiting() == 0 })
	}
	closed := make(chan struct{})
	go func() {
		lA.Close()
		close(closed)
	}()
	if how == "cancelled" {
		acancel()
	}
	select {
	case <-closed:
	case <-time.After(fallback):
		t.Fatalf("Close still runs after %s", fallback)
	}

	results := make(map[int]result)
	receive := func(within time.Duration) bool {
		select {
		case r := <-got:
			results[r.i] = r
			return true
		case <-time.After(within):
			return false
		}
	}
	// Close returns once its waiters have left: A's Lock has returned, or
	// is about to.
	if !receive(time.Second) {
		t.Errorf("A's Lock still waits a second after Close returned")
	}
	if how != "turn" {
		if err := holder.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for len(results) < 2 && receive(3*fallback) {
	}
	a, b := results[0], results[1]
	switch {
	case a.le != nil:
		t.Errorf("A's Lock returned a lease after Close: %+v", a.le.Wait())
		a.le.Release(context.Background())
	case errors.Is(a.err, engine.ErrClosed), how == "cancelled" && errors.Is(a.err, context.Canceled):
	default:
		t.Errorf("A's Lock returned %v, want ErrClosed", a.err)
	}
	if b.err != nil || b.le == nil {
		for i := range e.direct {
			t.Logf("master %d: key %q queue %v", i, e.get(i, res), e.queueOf(i, res))
		}
		t.Fatalf("B's Lock: %v", b.err)
	}
	w := b.le.Wait()
	t.Logf("A's Lock: %v; B acquired: %+v", a.err, w)
	if w.Cause != engine.WakeNotified || w.Fallbacks != 0 {
		t.Errorf("B waited %+v: want it woken by a notification, not by its fallback (%s), A having left the queue", w, fallback)
	}
	if err := b.le.Release(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Each of A's waits between attempts was counted once, and ended
	// once: the gauge is back to zero, and only the last wait can have
	// been ended by Close (or A's context). A may have been woken before
	// (here, the undo of a split attempt of B's gives A the turn).
	if n := lA.Waiting(); n != 0 {
		t.Errorf("A's waiting gauge is %d after Close", n)
	}
	recA.mu.Lock()
	var retries []engine.WaitEvent
	for _, ev := range recA.waits {
		if ev.Kind == engine.WaitRetry {
			retries = append(retries, ev)
		}
	}
	recA.mu.Unlock()
	for i, ev := range retries {
		last := i == len(retries)-1
		switch {
		case ev.Err != nil && !last:
			t.Errorf("A's wait %d of %d ended with %v: only the last can", i+1, len(retries), ev.Err)
		case ev.Err != nil && how == "asleep" && !errors.Is(ev.Err, engine.ErrClosed):
			t.Errorf("A's last wait ended %+v, want by Close (ErrClosed)", ev)
		}
	}
	if how != "turn" && (len(retries) == 0 || retries[len(retries)-1].Err == nil) {
		t.Logf("A's waits: %+v (Close came during an attempt)", retries)
	}
	eventually(t, 5*time.Second, "no key and no queue left on the masters", func() bool {
		for i := range e.direct {
			if e.get(i, res) != "" || len(e.queueOf(i, res)) != 0 {
				return false
			}
		}
		return true
	})
}

// A lease that a waiter acquired just before its Locker closed is held:
// Close leaves it to expire, as it does every lease (Release after Close
// deletes nothing), and must not pass on the turn the waiter took. The
// next waiter (B, of another Locker) gets the resource only once the
// lease's validity has run out.
func TestCloseKeepsALeaseJustAcquired(t *testing.T) {
	const res = "just"
	e := newEnv(t, 3)
	cfg := func(c *engine.Config) {
		c.TTL = time.Second
		c.NodeTimeout = 200 * time.Millisecond
		c.FallbackMin, c.FallbackMax = time.Second, time.Second
	}
	lA, lB, holderL := e.locker(cfg), e.locker(cfg), e.locker(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	holder, got := holdAndQueue(t, e, holderL, []*engine.Locker{lA, lB}, res, []context.Context{ctx, ctx})
	a := releaseToFirst(t, holder, got)
	// A Release after Close would end the lease at once, keys left: its
	// validity as acquired is what the keys outlive.
	until := a.le.ValidUntil()
	lA.Close()
	held := 0
	for i := range e.direct {
		v := e.get(i, res)
		if strings.HasPrefix(v, a.le.Value()) {
			held++
		}
		// A's own token is a release that reached this master after A's
		// attempt, which popped A there (see leaveScript).
		if strings.HasPrefix(v, "~") && v != "~"+waiterID(a.le) {
			t.Errorf("master %d: turn token %q while A's lease is valid", i, v)
		}
	}
	if held < 2 && a.le.Validity() > 0 {
		t.Errorf("A's key is on %d masters while its lease is valid", held)
	}
	b := <-got
	if b.err != nil {
		t.Fatal(b.err)
	}
	defer b.le.Release(context.Background())
	if b.at.Before(until) {
		t.Fatalf("B acquired %s before A's lease ran out: two holders", until.Sub(b.at))
	}
	if a.le.Err() == nil {
		t.Fatalf("A's lease still trusted after B acquired")
	}
	if err := a.le.Release(context.Background()); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("A's Release after Close: %v, want ErrClosed", err)
	}
}

// Close races a release that hands the lease on at the in-process gate:
// whatever the order, a lease of the closed Locker is left to expire
// (or deleted), and the waiter of another Locker acquires only once every
// such lease has ended.
func TestCloseRacingAHandOff(t *testing.T) {
	e := newEnv(t, 3)
	cfg := func(c *engine.Config) {
		c.TTL = 600 * time.Millisecond
		c.NodeTimeout = 100 * time.Millisecond
		c.FallbackMin, c.FallbackMax = 600*time.Millisecond, 600*time.Millisecond
	}
	for i, order := range []string{"release first", "close first", "together"} {
		t.Run(order, func(t *testing.T) {
			res := fmt.Sprintf("handoff-%d", i)
			lA, lB := e.locker(cfg), e.locker(cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a1, err := lA.Lock(ctx, res)
			if err != nil {
				t.Fatal(err)
			}
			a2 := lockAtGate(t, ctx, lA, res)
			bGot := make(chan result, 1)
			go func() {
				le, err := lB.Lock(ctx, res)
				bGot <- result{2, le, err, time.Now()}
			}()
			eventually(t, 5*time.Second, "B subscribed and asleep", func() bool { return lB.Subscriptions() == 1 && lB.Waiting() == 1 })

			// A Release after Close ends a lease at once, keys left: its
			// validity as acquired is what the keys outlive.
			untils := []time.Time{a1.ValidUntil()}
			released := make(chan error, 1)
			switch order {
			case "release first":
				released <- a1.Release(context.Background())
				lA.Close()
			case "close first":
				lA.Close()
				released <- a1.Release(context.Background())
			default:
				go func() { released <- a1.Release(context.Background()) }()
				lA.Close()
			}
			t.Logf("A's release: %v", <-released)
			if r := <-a2; r.err == nil {
				untils = append(untils, r.le.ValidUntil())
				t.Logf("A's second goroutine got the lease: %+v", r.le.Wait())
			} else if !errors.Is(r.err, engine.ErrClosed) {
				t.Errorf("A's second goroutine: %v, want a lease or ErrClosed", r.err)
			}
			b := <-bGot
			if b.err != nil {
				t.Fatal(b.err)
			}
			defer b.le.Release(context.Background())
			for _, until := range untils {
				if b.at.Before(until) {
					t.Errorf("B acquired %s before a lease of A ran out: two holders", until.Sub(b.at))
				}
			}
		})
	}
}

// quitScript sent twice for one waiter: the second finds it gone from
// the queue. It must not take the turn that the first passed on, nor touch
// a lock; where the key is free, it gives the turn to the first waiter, as
// a release would (harmless: it wakes a waiter that would otherwise sleep).
func TestQuitTwice(t *testing.T) {
	e := newEnv(t, 1)
	c := e.direct[0]
	ctx := context.Background()
	const key = "quit"
	const queue = "\xffredlock:queue:" + key
	do := func(args ...string) {
		t.Helper()
		if err := c.Do(ctx, c.B().Arbitrary(args[0]).Args(args[1:]...).Build()).Error(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	quit := func(id string) {
		t.Helper()
		do("EVAL", engine.QuitScriptBody, "1", key, id)
	}
	check := func(when, wantKey string, wantQueue ...string) {
		t.Helper()
		if v := e.get(0, key); v != wantKey {
			t.Errorf("%s: key %q, want %q", when, v, wantKey)
		}
		if q := e.queueOf(0, key); strings.Join(q, " ") != strings.Join(wantQueue, " ") {
			t.Errorf("%s: queue %v, want %v", when, q, wantQueue)
		}
	}
	do("ZADD", queue, "1", "A", "2", "B", "3", "C")
	do("SET", key, "~A", "PX", "10000")
	quit("A")
	check("A's quit with its turn", "~B", "C")
	quit("A")
	check("A's second quit", "~B", "C")
	do("SET", key, "B.x+", "PX", "10000")
	quit("A")
	check("A's quit while B holds", "B.x+", "C")
	do("DEL", key)
	quit("A")
	check("A's quit on a free key", "~C")
}
