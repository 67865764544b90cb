package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// A stopped minority master accepts TCP connections but never answers, so
// opening a pub/sub connection to it lasts the whole dial timeout. A Lock
// waiter must not wait for that beyond its context, and other resources'
// waiters of the same Locker must not wait behind it at all. In virtual
// time: the bounds are exact.
func TestNotifyStoppedMasterBlocksNobody(t *testing.T) {
	simTestWith(t, 3, steadyMasters, testNotifyStoppedMasterBlocksNobody)
}

func testNotifyStoppedMasterBlocksNobody(t *testing.T, e *env) {
	const dialTimeout = 3 * time.Second
	holderL := e.locker(nil)
	waiterL := e.locker(func(c *engine.Config) {
		c.Conn.DialTimeout = dialTimeout
		// Only a notification can wake the waiter on S in time.
		c.Wait.FallbackMin, c.Wait.FallbackMax = 8*time.Second, 8*time.Second
	})
	r, err := holderL.TryLock(context.Background(), "stopped-r")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(context.Background())
	s, err := holderL.TryLock(context.Background(), "stopped-s")
	if err != nil {
		t.Fatal(err)
	}
	// The waiter's Locker has no pub/sub connection yet: its first waiter
	// opens them, one of them to the stopped master.
	e.pause(2)

	type result struct {
		le   *engine.Lease
		err  error
		took time.Duration
	}
	rDone := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		le, err := waiterL.Lock(ctx, "stopped-r")
		rDone <- result{le, err, time.Since(start)}
	}()
	time.Sleep(50 * time.Millisecond) // virtual time: R's waiter is opening the connections
	sDone := make(chan result, 1)
	sStart := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		le, err := waiterL.Lock(ctx, "stopped-s")
		sDone <- result{le, err, time.Since(sStart)}
	}()
	// S's waiter subscribes and marks the holder while R's dial is still
	// under way: it waits for the stopped master's confirmation at most
	// a node timeout (100 ms at the default TTL), then queues.
	eventually(t, 110*time.Millisecond, "S's waiter queued while R's dial is under way", func() bool { return len(e.queueOf(0, "stopped-s")) != 0 })
	t.Logf("S queued %s after its Lock", time.Since(sStart))

	rr := <-rDone
	if rr.err == nil {
		rr.le.Release(context.Background())
		t.Fatal("Lock of a held resource succeeded")
	}
	if !errors.Is(rr.err, context.DeadlineExceeded) {
		t.Errorf("Lock(R): want the context's error, got %v", rr.err)
	}
	// The context's end, checked every quarter of the node timeout
	// (100 ms at the default TTL), at most 25 ms.
	if bound := 300*time.Millisecond + 25*time.Millisecond; rr.took > bound {
		t.Errorf("Lock(R) with a 300ms context returned after %s, want within %s (dial timeout %s)", rr.took, bound, dialTimeout)
	}

	// Its release must wake S's waiter at once.
	released := time.Now()
	if err := s.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	sr := <-sDone
	if sr.err != nil {
		t.Fatalf("Lock(S): %v", sr.err)
	}
	defer sr.le.Release(context.Background())
	if w := sr.le.Wait(); w.Cause != engine.WakeNotified {
		t.Errorf("Lock(S) wait %+v: want woken by S's release notification", w)
	}
	// (Release itself waits a node timeout for the stopped master.)
	if took, bound := sStart.Add(sr.took).Sub(released), time.Millisecond; took > bound {
		t.Errorf("Lock(S) acquired %s after S's release, want within %s (dial timeout %s)", took, bound, dialTimeout)
	}
	t.Logf("Lock(R) returned after %s, Lock(S) after %s", rr.took, sr.took)
}

// With the gate off, a Locker's goroutines subscribe to and unsubscribe
// from one channel over and over, from many goroutines. Each master must
// keep the channel subscribed exactly while the notifier thinks so: a lost
// subscription leaves waiters to the (here slow) fallback, and one left
// behind after the last waiter is gone shows a reordering the other way.
//
// With NotifyLinger, a subscription outlives its waiters; at 1 ms, its
// expiry races with the next waiter's subscribe.
//
// On the pool's real masters, in parallel: the churn is the Locker's
// goroutines against one pub/sub connection, thousands of times, which
// real masters serve faster than simulated ones. The fallback (30 s)
// and the wait for confirmations (4 s, the most the default TTL allows)
// are far beyond any wake-up of a loaded machine: a waiter that sleeps
// until its fallback lost its subscription.
func TestNotifySubscribeOrderWithoutGate(t *testing.T) {
	for _, linger := range []time.Duration{-1, time.Millisecond} {
		t.Run(fmt.Sprintf("linger=%v", linger), func(t *testing.T) {
			t.Parallel()
			testNotifySubscribeOrder(t, newEnv(t, 1), linger)
		})
	}
}

func testNotifySubscribeOrder(t *testing.T, e *env, linger time.Duration) {
	// One master: with more, a subscription lost on one of them is covered
	// by the others' notifications and shows only on the masters.
	const fallback = 30 * time.Second
	waiterL := e.locker(func(c *engine.Config) {
		c.Wait.DisableGate = true
		c.Wait.NotifyLinger = linger
		c.Wait.FallbackMin, c.Wait.FallbackMax = fallback, fallback
		// Waiters wait for the subscription's confirmation, rather than
		// mark before they listen.
		patient(c)
	})
	// The holders' own waits must not leave a subscription behind either.
	holderL := e.locker(func(c *engine.Config) { c.Wait.NotifyLinger = -1; patient(c) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	const resources, goroutines, rounds = 2, 3, 500
	var (
		notified, fallbacks, locks atomic.Int64
		wg, holders                sync.WaitGroup
		stop                       = make(chan struct{})
	)
	for r := 0; r < resources; r++ {
		res := fmt.Sprintf("churn-%d", r)
		// Another process takes the resource now and then, so that
		// waiters subscribe, and the last of them unsubscribes, many
		// times.
		holders.Add(1)
		go func() {
			defer holders.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				le, err := holderL.Lock(ctx, res)
				if err != nil {
					t.Error(err)
					return
				}
				// The churn's pace, not a wait for anything: a short
				// hold, and a gap for the waiters to take it.
				time.Sleep(time.Millisecond)
				le.Release(ctx)
				time.Sleep(time.Millisecond)
			}
		}()
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Stop at the first lost subscription: it stays lost
				// while the resource has waiters, which here is long.
				for i := 0; i < rounds && fallbacks.Load() == 0; i++ {
					le, err := waiterL.Lock(ctx, res)
					if err != nil {
						t.Error(err)
						return
					}
					w := le.Wait()
					notified.Add(int64(w.Notified))
					fallbacks.Add(int64(w.Fallbacks))
					locks.Add(1)
					le.Release(ctx)
				}
			}()
		}
	}
	wg.Wait()
	close(stop)
	holders.Wait()
	t.Logf("%d locks: %d notified wake-ups, %d fallbacks", locks.Load(), notified.Load(), fallbacks.Load())
	if notified.Load() == 0 {
		t.Fatal("no waiter was ever notified: the test did not exercise the subscriptions")
	}
	if f := fallbacks.Load(); f != 0 {
		t.Errorf("%d waits ended by the %s fallback: a subscription was lost", f, fallback)
	}
	eventually(t, 30*time.Second, "no subscription without waiters, once they stopped lingering", func() bool { return waiterL.Subscriptions() == 0 })
	// The last unsubscribe may still be on its way; a subscription that
	// outlives it never goes.
	for r := 0; r < resources; r++ {
		for i := range e.direct {
			channel := "redlock:released:" + e.key(fmt.Sprintf("churn-%d", r))
			eventually(t, 30*time.Second, fmt.Sprintf("node %d: no subscriber to churn-%d after the last waiter left", i, r), func() bool {
				return e.subscribers(i, channel) == 0
			})
		}
	}
}

// A master whose pub/sub connection could not be opened (stopped when the
// first waiter came) or broke (restarted) is subscribed again in the
// background once it answers, while the waiter keeps waiting. In virtual
// time: the dial timeout and the retries run on their schedule.
func TestNotifyMasterRejoins(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		holderL := e.locker(nil)
		waiterL := e.locker(func(c *engine.Config) {
			c.Conn.DialTimeout = time.Second
			c.Wait.FallbackMin, c.Wait.FallbackMax = 30*time.Second, 30*time.Second
		})
		const res = "rejoin"
		channel := "redlock:released:" + e.key(res)
		holder, err := holderL.TryLock(context.Background(), res)
		if err != nil {
			t.Fatal(err)
		}
		// TryLock returns at a quorum; the third SET may still be on its
		// way. Had the waiter's first attempt overtaken it, the waiter
		// would see a split vote (free on that master) and back off
		// instead of waiting for a notification.
		eventually(t, 5*time.Second, "the holder's key on every master", func() bool {
			for i := range e.direct {
				if e.get(i, e.key(res)) != holder.Value() {
					return false
				}
			}
			return true
		})
		e.pause(2)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		got := make(chan *engine.Lease, 1)
		go func() {
			le, err := waiterL.Lock(ctx, res)
			if err != nil {
				t.Error(err)
			}
			got <- le
		}()
		subscribed := func(i int) func() bool { return func() bool { return e.subscribers(i, channel) == 1 } }
		eventually(t, 5*time.Second, "subscribed on masters 0 and 1", func() bool { return subscribed(0)() && subscribed(1)() })
		e.resume(2)
		eventually(t, 5*time.Second, "subscribed on master 2 once resumed", subscribed(2))
		e.restart(1)
		eventually(t, 5*time.Second, "subscribed on master 1 after its restart", subscribed(1))
		select {
		case le := <-got:
			t.Fatalf("the waiter returned (%v) before the release", le)
		default:
		}
		holder.Release(context.Background()) // master 1 forgot the key: not all agree
		le := <-got
		if le == nil {
			t.FailNow()
		}
		defer le.Release(context.Background())
		if w := le.Wait(); w.Cause != engine.WakeNotified {
			t.Fatalf("wait %+v: want woken by the release notification", w)
		}
	})
}

// A subscription outlives its last waiter by NotifyLinger: the next Lock
// of a resource waited for lately queues at its first attempt (no plain
// attempt, no new subscription), and the masters are unsubscribed once
// the linger has passed. In virtual time: the linger is exact.
func TestSubscriptionLingers(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		const linger = 300 * time.Millisecond
		channel := "redlock:released:" + e.key("linger")
		holderL := e.locker(nil)
		waiterL := e.locker(func(c *engine.Config) {
			c.Wait.NotifyLinger = linger
			c.Wait.FallbackMin, c.Wait.FallbackMax = 20*time.Second, 20*time.Second
		})
		wait := func(round int) engine.WaitInfo {
			le := wokenByRelease(t, e, holderL, waiterL, "linger")
			w := le.Wait()
			t.Logf("round %d: %+v", round, w)
			if err := le.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			return w
		}
		// Each wake-up makes one attempt (a release may wake a waiter
		// twice, see subscription); the rest came before the first sleep.
		before := func(w engine.WaitInfo) int { return w.Attempts - w.Notified - w.Fallbacks - w.Backoffs }
		if w := wait(1); before(w) != 2 {
			t.Errorf("first wait %+v: %d attempts before it slept, want 2: a plain one, then one that queues", w, before(w))
		}
		if n := waiterL.Subscriptions(); n != 1 {
			t.Fatalf("%d subscriptions right after the last waiter left, want 1 lingering", n)
		}
		if w := wait(2); before(w) != 1 {
			t.Errorf("second wait %+v: %d attempts before it slept, want 1 that queues on the lingering subscription", w, before(w))
		}
		left := time.Now()
		eventually(t, 5*time.Second, "the subscription ends after the linger", func() bool { return waiterL.Subscriptions() == 0 })
		t.Logf("the subscription ended %s after its last waiter", time.Since(left))
		if d := time.Since(left); d < linger || d > linger+10*time.Millisecond {
			t.Errorf("the subscription ended %s after its last waiter, want after the %s linger", d, linger)
		}
		eventually(t, 5*time.Second, "the masters unsubscribed", func() bool {
			for i := range e.direct {
				if e.subscribers(i, channel) != 0 {
					return false
				}
			}
			return true
		})
	})
}
