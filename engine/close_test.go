package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
)

// A failed attempt's late yes that arrives while Close drains must still be
// deleted: a key left behind would keep the resource for its whole TTL,
// against every later holder.
func TestCloseDeletesALateYesArrivingWhileItDrains(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
	}{{"late yes", 20 * time.Millisecond}, {"yes at once", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			simTest(t, 3, func(t *testing.T, e *env) {
				slow := newLatencyProxy(e, e.addrs[1], tc.delay, nil)
				l := e.locker(func(c *engine.Config) {
					c.Masters = []string{e.addrs[0], slow.addr(), e.addrs[2]}
					c.TTL = time.Hour
					c.NodeTimeout = time.Second
				})
				const res = "late-yes-at-close"
				e.set(0, res, "other-owner")
				e.kill(2)
				// Node 0 refuses and node 2 is down: TryLock fails at
				// once, while node 1's yes is still on its way (or just
				// arrived), to come back during Close.
				_, err := l.TryLock(context.Background(), res)
				if !errors.Is(err, engine.ErrNotAcquired) {
					t.Fatalf("want ErrNotAcquired, got %v", err)
				}
				l.Close()
				if v := e.get(1, res); v != "" {
					t.Fatalf("node 1 keeps the failed attempt's key %q after Close", v)
				}
				if v := e.get(0, res); v != "other-owner" {
					t.Fatalf("node 0 holds %q: the other owner's key was touched", v)
				}
			})
		})
	}
}

// On the pool, not in parallel: the goroutines counted are the process's.
func TestNoGoroutineLeakAfterClose(t *testing.T) {
	e := newEnv(t, 3)
	base := runtime.NumGoroutine()
	l, err := engine.New(context.Background(), e.config())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				le, err := l.TryLock(context.Background(), fmt.Sprintf("leak-%d", i%5))
				if err == nil {
					le.Extend(context.Background(), time.Second)
					le.Release(context.Background())
				}
			}
		}()
	}
	wg.Wait()
	l.Close()
	if _, err := l.TryLock(context.Background(), "after-close"); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("TryLock after Close: want ErrClosed, got %v", err)
	}
	eventually(t, 30*time.Second, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= base })
}

// Release racing Close: a Release that reports success has deleted the
// keys; one that did not may leave them, but must say so.
func TestReleaseRacingClose(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		const delay = 40 * time.Millisecond
		l, slow := e.proxiedLocker(func(c *engine.Config) {
			c.TTL = 10 * time.Second
			c.NodeTimeout = 300 * time.Millisecond
		})
		ctx := context.Background()
		const n = 20
		var les []*engine.Lease
		for i := 0; i < n; i++ {
			le, err := l.TryLock(ctx, fmt.Sprintf("rel-close-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			les = append(les, le)
		}
		for _, p := range slow {
			p.delay.Store(int64(delay))
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, le := range les {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * delay / n)
				errs[i] = le.Release(ctx)
			}()
		}
		time.Sleep(delay / 2)
		l.Close()
		wg.Wait()
		ok := 0
		for i := range les {
			if errs[i] != nil {
				continue
			}
			ok++
			// Release returns at a quorum: the last master's delete may
			// come a latency after it (the keys live 10 s).
			for m := range e.direct {
				if !within(time.Second, func() bool { return e.get(m, les[i].Resource()) == "" }) {
					t.Errorf("Release %d returned nil but master %d keeps %q", i, m, e.get(m, les[i].Resource()))
				}
			}
		}
		t.Logf("%d of %d Releases succeeded", ok, n)
	})
}

// Many goroutines Lock one resource (gate, fencing, a slow link) while the
// Locker closes: every Lock returns, Close does not wait its full bound,
// and unless a Lock handed out a lease, no key is left.
func TestLockStormRacingClose(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		const delay = 40 * time.Millisecond
		const res = "storm-close"
		l, slow := e.proxiedLocker(func(c *engine.Config) {
			c.TTL = 10 * time.Second
			c.NodeTimeout = time.Second
			c.Fencing = true
		})
		other := e.locker(nil)
		ctx := context.Background()
		held, err := other.TryLock(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range slow {
			p.delay.Store(int64(delay))
		}
		const n = 30
		got := make(chan result, n)
		for i := 0; i < n; i++ {
			go func() {
				time.Sleep(time.Duration(i) * 3 * delay / n)
				le, err := l.Lock(ctx, res)
				got <- result{i, le, err, time.Now()}
			}()
		}
		time.Sleep(delay)
		held.Release(ctx) // a waiter is woken and attempts while Close begins
		time.Sleep(delay + delay/2)
		start := time.Now()
		l.Close()
		took := time.Since(start)
		leases := 0
		for i := 0; i < n; i++ {
			select {
			case r := <-got:
				if r.err == nil {
					leases++
					t.Logf("Lock %d got a lease at Close; Release: %v", r.i, r.le.Release(ctx))
				} else if !errors.Is(r.err, engine.ErrClosed) {
					t.Logf("Lock %d: %v", r.i, r.err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("Lock calls still blocked 5 s after Close")
			}
		}
		t.Logf("Close took %s; %d leases handed out", took, leases)
		if took > 2*time.Second {
			t.Errorf("Close took %s: it waited its full bound for Lock callers", took)
		}
		if leases == 0 {
			eventually(t, 3*time.Second, "no key left", func() bool {
				for m := range e.direct {
					if v := e.get(m, res); v != "" {
						return false
					}
				}
				return true
			})
		}
	})
}

// A Release that hands its lease on at the gate while its Locker closes:
// the goroutine it hands to leaves the gate (ErrClosed) while the hand-off
// raises the fencing counters, a round on a slow link. Release must not
// report the lock released while its keys stay on the masters for the TTL,
// leaving the waiters of other processes to their fallback.
func TestHandOffRacingCloseLeavesNoKey(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		const res = "handoff-close"
		const delay = 150 * time.Millisecond
		lA, slow := e.proxiedLocker(func(c *engine.Config) {
			c.TTL = 10 * time.Second
			c.NodeTimeout = 500 * time.Millisecond
			c.Fencing = true
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a1, err := lA.Lock(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		a2 := lockAtGate(t, ctx, lA, res)
		for _, p := range slow {
			p.delay.Store(int64(delay))
		}
		released := make(chan error, 1)
		go func() { released <- a1.Release(context.Background()) }()
		time.Sleep(delay / 3) // the hand-off's fencing round is on its way
		lA.Close()
		rerr := <-released
		r := <-a2
		t.Logf("Release: %v; the second goroutine's Lock: %v", rerr, r.err)
		if r.le != nil {
			t.Logf("the second goroutine got the lease (valid for %s): a lease held at Close", r.le.Validity())
			return
		}
		if rerr != nil {
			return // Release admits the keys were not deleted
		}
		// Release returns at a quorum: the last master's delete may come
		// a latency after it (the key lives 10 s).
		var left []string
		for i := range e.direct {
			if !within(time.Second, func() bool { return e.get(i, res) == "" }) {
				left = append(left, fmt.Sprintf("master %d: %q", i, e.get(i, res)))
			}
		}
		if len(left) > 0 {
			t.Errorf("Release returned nil and nobody holds the lease, but the key stays for its TTL: %v", left)
		}
	})
}

// A TryLock on a slow link when its Locker closes: it must not hand out a
// lease whose keys nobody can delete (Release after Close deletes
// nothing), leaving them for the TTL.
func TestTryLockRacingCloseLeavesNoKey(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		const res = "trylock-close"
		const delay = 150 * time.Millisecond
		lA, slow := e.proxiedLocker(func(c *engine.Config) {
			c.TTL = 10 * time.Second
			c.NodeTimeout = 500 * time.Millisecond
		})
		for _, p := range slow {
			p.delay.Store(int64(delay))
		}
		got := make(chan result, 1)
		go func() {
			le, err := lA.TryLock(context.Background(), res)
			got <- result{0, le, err, time.Now()}
		}()
		time.Sleep(delay / 3) // the SETs are on their way
		lA.Close()
		r := <-got
		t.Logf("TryLock: %v", r.err)
		if r.le != nil {
			t.Logf("Release: %v", r.le.Release(context.Background()))
		}
		eventually(t, 2*time.Second, "no key left", func() bool {
			for i := range e.direct {
				if e.get(i, res) != "" {
					return false
				}
			}
			return true
		})
	})
}

// lockAtGate starts a Lock of res on l in another goroutine and waits
// until it is queued at the gate, behind a holder in this process; its
// result comes on the channel.
func lockAtGate(t *testing.T, ctx context.Context, l *engine.Locker, res string) <-chan result {
	t.Helper()
	c := make(chan result, 1)
	go func() {
		le, err := l.Lock(ctx, res)
		c <- result{1, le, err, time.Now()}
	}()
	eventually(t, 5*time.Second, "a second goroutine queued at the gate", func() bool { return l.GateWaiting(res) == 1 })
	return c
}

// Close wakes Lock callers queued at the gate: they return at once rather
// than wait for the holder's lease to run out (a full TTL), then fail.
func TestCloseWakesGateWaiters(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		l := e.locker(func(c *engine.Config) { c.TTL = 10 * time.Second })
		const res = "close-gate"
		ctx := context.Background()
		held, err := l.Lock(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(ctx)
		errc := make(chan error, 1)
		go func() {
			le, err := l.Lock(ctx, res)
			if le != nil {
				le.Release(ctx)
			}
			errc <- err
		}()
		eventually(t, 2*time.Second, "the waiter queued", func() bool { return l.GateWaiting(res) == 1 })
		l.Close()
		// In virtual time "at once" is exact: the waiter has returned
		// once everything Close woke is blocked again, with no time
		// passed.
		closedAt := time.Now()
		synctest.Wait()
		select {
		case err := <-errc:
			if err == nil {
				t.Fatal("Lock succeeded after Close")
			}
		default:
			t.Fatalf("a Lock queued at the gate still waits after Close returned (the holder's validity is %s)", held.Validity())
		}
		if d := time.Since(closedAt); d != 0 {
			t.Fatalf("set-up: %s passed", d)
		}
	})
}

// A Release after Close does not hand the lease to a Lock queued at the
// gate (the hand-off needs no round trip without fencing): Lock would
// return a lease after Close, which can neither extend nor delete.
func TestNoHandoffAfterClose(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		l := e.locker(func(c *engine.Config) { c.TTL = 10 * time.Second })
		const res = "close-handoff"
		ctx := context.Background()
		held, err := l.Lock(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		type got struct {
			le  *engine.Lease
			err error
		}
		gc := make(chan got, 1)
		go func() {
			le, err := l.Lock(ctx, res)
			gc <- got{le, err}
		}()
		eventually(t, 2*time.Second, "the waiter queued", func() bool { return l.GateWaiting(res) == 1 })
		l.Close()
		held.Release(ctx)
		select {
		case g := <-gc:
			if g.err == nil {
				t.Fatalf("Lock returned a lease (cause %v, validity %s) after Close", g.le.Wait().Cause, g.le.Validity())
			}
		case <-time.After(12 * time.Second):
			t.Fatal("the waiter never returned")
		}
	})
}

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
		t.Run(how, func(t *testing.T) {
			simTest(t, 3, func(t *testing.T, e *env) { testCloseLeavesTheQueue(t, e, how) })
		})
	}
}

// testCloseLeavesTheQueue runs one case, in virtual time.
func testCloseLeavesTheQueue(t *testing.T, e *env, how string) {
	const res = "closing"
	const fallback = 5 * time.Second
	cfg := func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = fallback, fallback }
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
		// takes 300 ms to reach the masters. On every master, A's turn
		// token (it lives 50 ms) or A popped from the queue, B left
		// alone in it (which lasts until A's attempt arrives): the
		// release gave A the turn.
		gave := make([]bool, len(e.direct))
		if !within(5*time.Second, func() bool {
			all := true
			for i := range e.direct {
				gave[i] = gave[i] || strings.HasPrefix(e.get(i, res), "~") || len(e.queueOf(i, res)) == 1
				all = all && gave[i]
			}
			return all
		}) {
			t.Fatal("set-up: the release's turn to A was not seen on every master")
		}
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

	// Each of A's waits between attempts ended once, and only the last
	// can have been ended by Close (or A's context). A may have been
	// woken before (here, the undo of a split attempt of B's gives A the
	// turn).
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
	simTest(t, 3, func(t *testing.T, e *env) {
		const res = "just"
		cfg := func(c *engine.Config) {
			c.TTL = time.Second
			c.NodeTimeout = 200 * time.Millisecond
			c.Wait.FallbackMin, c.Wait.FallbackMax = time.Second, time.Second
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
	})
}

// Close races a release that hands the lease on at the in-process gate:
// whatever the order, a lease of the closed Locker is left to expire
// (or deleted), and the waiter of another Locker acquires only once every
// such lease has ended.
func TestCloseRacingAHandOff(t *testing.T) {
	cfg := func(c *engine.Config) {
		c.TTL = 600 * time.Millisecond
		c.NodeTimeout = 100 * time.Millisecond
		c.Wait.FallbackMin, c.Wait.FallbackMax = 600*time.Millisecond, 600*time.Millisecond
	}
	for _, order := range []string{"release first", "close first", "together"} {
		t.Run(order, func(t *testing.T) {
			simTest(t, 3, func(t *testing.T, e *env) {
				const res = "handoff"
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
				eventually(t, 5*time.Second, "B subscribed and queued", func() bool { return lB.Subscriptions() == 1 && e.queued(res, 1) })

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
		})
	}
}

// quitScript sent twice for one waiter: the second finds it gone from
// the queue. It must not take the turn that the first passed on, nor touch
// a lock; where the key is free, it gives the turn to the first waiter, as
// a release would (harmless: it wakes a waiter that would otherwise sleep).
//
// A turn token lives for the turn grace only, which a loaded machine can
// spend between two commands: each quit and the reads that check it run
// in one MULTI/EXEC, where the master's clock stands still (Redis 7).
func TestQuitTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	c := e.direct[0]
	ctx := context.Background()
	key := e.key("quit")
	queue := "\xffredlock:queue:" + key
	do := func(args ...string) {
		t.Helper()
		if err := c.Do(ctx, c.B().Arbitrary(args[0]).Args(args[1:]...).Build()).Error(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	quit := func(when, id, wantKey string, wantQueue ...string) {
		t.Helper()
		res := c.DoMulti(ctx,
			c.B().Multi().Build(),
			c.B().Eval().Script(engine.QuitScriptBody).Numkeys(1).Key(key).Arg(id).Build(),
			c.B().Get().Key(key).Build(),
			c.B().Zrange().Key(queue).Min("0").Max("-1").Build(),
			c.B().Exec().Build())
		replies, err := res[4].ToArray()
		if err != nil {
			t.Fatalf("%s: EXEC: %v", when, err)
		}
		if err := replies[0].Error(); err != nil {
			t.Fatalf("%s: quit: %v", when, err)
		}
		v, err := replies[1].ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatalf("%s: GET: %v", when, err)
		}
		q, err := replies[2].AsStrSlice()
		if err != nil {
			t.Fatalf("%s: ZRANGE: %v", when, err)
		}
		if v != wantKey {
			t.Errorf("%s: key %q, want %q", when, v, wantKey)
		}
		if strings.Join(q, " ") != strings.Join(wantQueue, " ") {
			t.Errorf("%s: queue %v, want %v", when, q, wantQueue)
		}
	}
	do("ZADD", queue, "1", "A", "2", "B", "3", "C")
	do("SET", key, "~A", "PX", "10000")
	quit("A's quit with its turn", "A", "~B", "C")
	// B's turn as the first quit left it, whether or not it has expired.
	do("SET", key, "~B", "PX", "10000")
	quit("A's second quit", "A", "~B", "C")
	do("SET", key, "B.x+", "PX", "10000")
	quit("A's quit while B holds", "A", "B.x+", "C")
	do("DEL", key)
	quit("A's quit on a free key", "A", "~C")
}

// Close returns within its bound (a few round spans) with a master hung
// (SIGSTOP) under the Locker's connections, pub/sub ones included: the
// connections to a master that answers nothing are cut rather than
// closed politely, which waited for replies that never came. (Found by
// bench/sim; redlock exec exited seconds after its command because of
// it.)
//
// On real masters (the guarantees' table names it) Close must return, and
// the waiter with ErrClosed; the 30 s allowed fail only when Close hangs
// on the stopped master. The bound of a few round spans, which a polite
// close overruns by a second, is a matter of time: virtual time checks it
// exactly (TestCloseWithAHungMasterReturnsWithinItsBound).
func TestCloseWithAHungMasterReturnsPromptly(t *testing.T) {
	e := ownEnv(t, 3)
	closeWithAHungMaster(t, e, func(*engine.Locker) time.Duration { return 30 * time.Second })
}

// TestCloseWithAHungMasterReturnsWithinItsBound is
// TestCloseWithAHungMasterReturnsPromptly in virtual time, where Close
// must return within three node timeouts and half a second.
func TestCloseWithAHungMasterReturnsWithinItsBound(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		closeWithAHungMaster(t, e, func(l *engine.Locker) time.Duration { return 3*l.Config().NodeTimeout + 500*time.Millisecond })
	})
}

// closeWithAHungMaster closes a Locker with a waiter subscribed and
// commands in flight to its third master, hung; Close must take no
// longer than bound says.
func closeWithAHungMaster(t *testing.T, e *env, bound func(*engine.Locker) time.Duration) {
	ctx := context.Background()
	holderL := e.locker(patient)
	l := e.locker(func(c *engine.Config) { c.TTL = 2 * time.Second })
	held, err := holderL.TryLock(ctx, "hung")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	// A waiter subscribes to the releases: pub/sub connections to every
	// master, besides the pool's.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		_, err := l.Lock(wctx, "hung")
		waited <- err
	}()
	eventually(t, 30*time.Second, "the waiter subscribed and queued", func() bool { return l.Subscriptions() == 1 && e.queued("hung", 1) })
	e.pause(2)
	// Commands are in flight to the hung master when Close begins.
	if _, err := l.TryLock(ctx, "other"); err != nil {
		t.Logf("TryLock with one master hung: %v", err)
	}
	most := bound(l)
	began := time.Now()
	l.Close()
	if took := time.Since(began); took > most {
		t.Fatalf("Close took %s with one master of three hung, want at most %s", took, most)
	}
	if err := <-waited; !errors.Is(err, engine.ErrClosed) {
		t.Errorf("the waiter's Lock: %v, want ErrClosed", err)
	}
	// The holder's deferred Release finds the master answering again.
	e.resume(2)
}

// Close returns within its bound while a dial to a master is hung: the
// network drops what is sent to it (a partition, not a stopped process,
// whose kernel still completes the handshake), and a new connection was
// on its way when Close began. The dial's context ends with Close rather
// than at the dial timeout, or at the partition's end. (Found by
// bench/sim, whose partitions hang dials.) In virtual time.
func TestCloseWithADialHungReturnsPromptly(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		ctx := context.Background()
		addrs := e.addrs
		front := newLatencyProxy(e, addrs[2], 0, nil)
		var hung atomic.Bool
		dialing := make(chan struct{}, 16)
		l := e.locker(func(c *engine.Config) {
			c.Masters = []string{addrs[0], addrs[1], front.addr()}
			c.Conn.DialTimeout = 10 * time.Second
			dial := c.Conn.DialContext
			c.Conn.DialContext = func(ctx context.Context, addr string) (net.Conn, error) {
				if addr == front.addr() && hung.Load() {
					dialing <- struct{}{}
					<-ctx.Done() // the partition drops the SYNs
					return nil, ctx.Err()
				}
				return dial(ctx, addr)
			}
		})
		if le, err := l.TryLock(ctx, "dial"); err != nil {
			t.Fatal(err)
		} else {
			le.Release(ctx)
		}
		// The partition begins: the connection breaks, the next dial
		// hangs.
		hung.Store(true)
		front.kill()
		// A command to master 2 finds the connection broken and dials
		// anew.
		dialed := false
		for i := 0; i < 50 && !dialed; i++ {
			go l.TryLock(ctx, fmt.Sprintf("dial-%d", i))
			select {
			case <-dialing:
				dialed = true
			case <-time.After(100 * time.Millisecond):
			}
		}
		if !dialed {
			t.Fatal("set-up: no dial to the partitioned master")
		}
		bound := 3*l.Config().NodeTimeout + 500*time.Millisecond
		began := time.Now()
		l.Close()
		if took := time.Since(began); took > bound {
			t.Errorf("Close took %s with a dial hung (dial timeout 10s): want at most %s", took.Round(time.Millisecond), bound)
		}
	})
}
