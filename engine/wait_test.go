package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// wokenByRelease has holderL take resource and waiterL wait for it, then
// releases: the waiter must be woken by the release's notification. It
// returns the waiter's lease.
func wokenByRelease(t *testing.T, e *env, holderL, waiterL *engine.Locker, resource string) *engine.Lease {
	t.Helper()
	holder, err := holderL.TryLock(context.Background(), resource)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *engine.Lease, 1)
	go func() {
		// Past the waiter's fallback, if it has one of its own: the wait
		// must say what woke it.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		le, err := waiterL.Lock(ctx, resource)
		if err != nil {
			t.Error(err)
		}
		got <- le
	}()
	eventually(t, 30*time.Second, "waiter subscribed and queued", func() bool { return waiterL.Subscriptions() == 1 && e.queued(resource, 1) })
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	le := <-got
	if le == nil {
		t.FailNow()
	}
	if w := le.Wait(); w.Cause != engine.WakeNotified || w.Notified < 1 || w.Fallbacks != 0 {
		t.Fatalf("wait %+v: want woken by the release notification", w)
	}
	return le
}

func TestWaiterWakesOnReleaseNotification(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	// A fallback far beyond the test's patience: only a notification can
	// wake the waiter (and wokenByRelease checks that it did).
	slow := func(c *engine.Config) {
		c.Wait.FallbackMin, c.Wait.FallbackMax = 20*time.Second, 20*time.Second
		patient(c)
	}
	holderL, waiterL := e.locker(slow), e.locker(slow)
	wokenByRelease(t, e, holderL, waiterL, "notify").Release(context.Background())
	// After the default linger (1 s).
	eventually(t, 30*time.Second, "subscription dropped", func() bool { return waiterL.Subscriptions() == 0 })
}

// In virtual time: the expiry, and the fallback retry that finds it, are
// exact.
func TestFallbackCoversExpiryWithoutNotification(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		const ttl, fallbackMax = 300 * time.Millisecond, 40 * time.Millisecond
		holderL := e.locker(func(c *engine.Config) { c.TTL = ttl })
		waiterL := e.locker(func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = 20*time.Millisecond, fallbackMax })
		start := time.Now()
		if _, err := holderL.TryLock(context.Background(), "expiry"); err != nil {
			t.Fatal(err)
		}
		// The holder never releases: the key expires, which publishes nothing.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		le, err := waiterL.Lock(ctx, "expiry")
		if err != nil {
			t.Fatal(err)
		}
		if w := le.Wait(); w.Cause != engine.WakeFallback {
			t.Fatalf("wait %+v: want the fallback retry to find the expiry", w)
		}
		// The first fallback retry after the expiry finds the key gone.
		t.Logf("acquired %s after the holder: %+v", time.Since(start), le.Wait())
		if took, bound := time.Since(start), ttl+fallbackMax+time.Millisecond; took > bound {
			t.Fatalf("acquired %s after the holder, whose key lived %s, want within %s", took, ttl, bound)
		}
	})
}

func TestGateIsFIFO(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(patient)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := l.Lock(ctx, "fifo")
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			le, err := l.Lock(ctx, "fifo")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if !le.Wait().Gated {
				t.Errorf("waiter %d was not queued at the gate", i)
			}
			le.Release(ctx)
		}()
		// Queue them one at a time, so the arrival order is known.
		eventually(t, 30*time.Second, fmt.Sprintf("waiter %d queued", i), func() bool { return l.GateWaiting("fifo") == i+1 })
	}
	first.Release(ctx)
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("acquisition order %v, want 0..%d", order, n-1)
		}
	}
	if len(order) != n {
		t.Fatalf("only %d of %d waiters acquired", len(order), n)
	}
}

func TestGateCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(func(c *engine.Config) { c.Wait.DisableGate = true; patient(c) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := l.Lock(ctx, "nogate")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *engine.Lease, 1)
	go func() {
		le, err := l.Lock(ctx, "nogate")
		if err != nil {
			t.Error(err)
		}
		got <- le
	}()
	// Without the gate, the second Lock asks the masters, is refused,
	// and queues there.
	eventually(t, 30*time.Second, "the second Lock queued on the masters", func() bool { return e.queued("nogate", 1) })
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	le := <-got
	if le == nil {
		t.FailNow()
	}
	if le.Wait().Gated || le.Wait().Attempts < 2 || l.GateWaiting("nogate") != 0 {
		t.Fatalf("with the gate off the waiter should compete remotely: %+v", le.Wait())
	}
}

// In virtual time: the extensions run on their schedule, which a loaded
// machine's missed node timeout (30 ms at this TTL) would end, as it
// should.
func TestAutoExtendOutlivesTTL(t *testing.T) {
	simTestWith(t, 5, steadyMasters, func(t *testing.T, e *env) {
		const ttl = 300 * time.Millisecond
		l := e.locker(func(c *engine.Config) { c.TTL = ttl; c.AutoExtend = true })
		other := e.locker(nil)
		start := time.Now()
		le, err := l.TryLock(context.Background(), "long-hold")
		if err != nil {
			t.Fatal(err)
		}
		deadline := start.Add(5 * ttl)
		for time.Now().Before(deadline) {
			if err := le.Err(); err != nil {
				t.Fatalf("lease lost while auto-extending: %v", err)
			}
			if _, err := other.TryLock(context.Background(), "long-hold"); !errors.Is(err, engine.ErrNotAcquired) {
				t.Fatalf("another locker got in while held: %v", err)
			}
			time.Sleep(ttl / 5)
		}
		// One every TTL/3 (100 ms): counted half-way to the sixteenth.
		time.Sleep(time.Until(start.Add(5*ttl + ttl/6)))
		if n := le.Extensions(); n != 15 {
			t.Fatalf("%d extensions across 5 TTLs, want 15", n)
		}
		select {
		case <-le.Done():
			t.Fatal("Done closed while the lease was held")
		default:
		}
		if err := le.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-le.Done()
		if !errors.Is(le.Err(), engine.ErrReleased) || !errors.Is(context.Cause(le.Context()), engine.ErrReleased) {
			t.Fatalf("after release: Err %v, cause %v", le.Err(), context.Cause(le.Context()))
		}
	})
}

// In virtual time: the lease ends when the validity of its last
// extension does.
func TestMaxExtensionsThenExpiry(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		l := e.locker(func(c *engine.Config) {
			c.TTL = 200 * time.Millisecond
			c.AutoExtend, c.MaxExtensions = true, 2
		})
		le, err := l.TryLock(context.Background(), "capped")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-le.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done never closed after the extensions ran out")
		}
		if !errors.Is(le.Err(), engine.ErrLeaseExpired) || le.Extensions() != 2 {
			t.Fatalf("Err %v after %d extensions, want expiry after 2", le.Err(), le.Extensions())
		}
		if now, until := time.Now(), le.ValidUntil(); now.Before(until) || now.After(until.Add(time.Millisecond)) {
			t.Fatalf("Done at %s, the validity's end at %s", now.Format("15:04:05.000000"), until.Format("15:04:05.000000"))
		}
	})
}

// In virtual time: the failed extension's node timeout, and so Done, are
// exact.
func TestPausedMajorityFiresDoneBeforeValidityEnds(t *testing.T) {
	simTestWith(t, 5, steadyMasters, func(t *testing.T, e *env) {
		const ttl, every, nodeTimeout = 3 * time.Second, time.Second, 100 * time.Millisecond
		l := e.locker(func(c *engine.Config) { c.TTL = ttl; c.AutoExtend = true; c.NodeTimeout = nodeTimeout })
		acquired := time.Now()
		le, err := l.TryLock(context.Background(), "paused-holder")
		if err != nil {
			t.Fatal(err)
		}
		ctx := le.Context()
		for _, i := range []int{0, 2, 4} {
			e.pause(i)
		}
		validUntil := le.ValidUntil()
		select {
		case <-le.Done():
		case <-time.After(2 * ttl):
			t.Fatal("Done did not fire with a majority paused")
		}
		fired := time.Now()
		t.Logf("Done %s after the lease was taken", fired.Sub(acquired))
		if !fired.Before(validUntil) {
			t.Fatalf("Done fired at the validity's end, not at the failed extension (%s late)", fired.Sub(validUntil))
		}
		// The extension at TTL/3 waits a node timeout, checked every
		// quarter of it.
		if took, bound := fired.Sub(acquired), every+nodeTimeout*5/4; took > bound {
			t.Fatalf("Done fired %s after the lease was taken, want by the failed extension, within %s", took, bound)
		}
		if !errors.Is(le.Err(), engine.ErrLockLost) || !errors.Is(le.Err(), engine.ErrNoQuorum) {
			t.Fatalf("Err = %v, want ErrLockLost from a no-quorum extension", le.Err())
		}
		if !errors.Is(context.Cause(ctx), engine.ErrLockLost) {
			t.Fatalf("context cause %v", context.Cause(ctx))
		}
	})
}

func TestFencingTokensStrictlyIncrease(t *testing.T) {
	e := ownEnv(t, 5)
	const ttl = time.Second
	fenced := func(c *engine.Config) {
		c.Fencing = true
		c.TTL = ttl
		c.Wait.RetryDelayMin, c.Wait.RetryDelayMax = time.Millisecond, 5*time.Millisecond
	}
	lockers := []*engine.Locker{e.locker(fenced), e.locker(fenced), e.locker(fenced)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		mu     sync.Mutex
		tokens []int64
		wg     sync.WaitGroup
	)
	hold := func(l *engine.Locker, rounds int) {
		defer wg.Done()
		for r := 0; r < rounds; r++ {
			le, err := l.Lock(ctx, "fenced")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock() // inside the critical section: the order of holds
			tokens = append(tokens, le.Token())
			mu.Unlock()
			le.Release(ctx)
		}
	}
	run := func() {
		for _, l := range lockers {
			for g := 0; g < 3; g++ {
				wg.Add(1)
				go hold(l, 10)
			}
		}
		wg.Wait()
	}
	run()
	// A minority restarts without persistence and forgets its counters;
	// the quarantine keeps those nodes out until they could not matter.
	for _, i := range []int{1, 3} {
		if err := e.cluster.Nodes[i].Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if len(tokens) != 2*3*3*10 {
		t.Fatalf("%d holds, want %d", len(tokens), 2*3*3*10)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d at hold %d after %d: not strictly increasing", tokens[i], i, tokens[i-1])
		}
	}
	if tokens[0] < 1 {
		t.Fatalf("first token %d", tokens[0])
	}
}

// (Not parallel: it counts the process's goroutines.)
func TestNoLeaksAfterCloseWithWaiters(t *testing.T) {
	e := newEnv(t, 3)
	base := e.goroutines()
	l := e.locker(func(c *engine.Config) { c.AutoExtend = true; patient(c) })
	holder, err := l.TryLock(context.Background(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	other := e.locker(patient)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			other.Lock(ctx, fmt.Sprintf("busy-%d", i%2)) // some get it, the rest wait
		}()
	}
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); other.Lock(ctx, "busy") }()
	}
	eventually(t, 30*time.Second, "waiters subscribed", func() bool { return other.Subscriptions() >= 1 })
	cancel()
	wg.Wait()
	eventually(t, 30*time.Second, "subscriptions gone", func() bool {
		if n := other.Subscriptions(); n != 0 {
			t.Logf("%d subscriptions", n)
			return false
		}
		return true
	})
	holder.Release(context.Background())
	l.Close()
	other.Close()
	goroutinesBackTo(t, base)
}

// A release publishes only when a waiter marked the holder's value: the
// uncontended path pays for no PUBLISH, and a waiter still wakes at once.
func TestReleasePublishesOnlyForMarkedHolders(t *testing.T) {
	withAndWithoutFencing(t, func(t *testing.T, fencing bool, base func(*engine.Config)) {
		e := ownEnv(t, 5)
		cfg := func(c *engine.Config) { base(c); patient(c) }
		holderL, waiterL := e.locker(cfg), e.locker(cfg)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for i := 0; i < 20; i++ {
			le, err := holderL.TryLock(ctx, "quiet")
			if err != nil {
				t.Fatal(err)
			}
			if err := le.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// The releases that might come late (a late SET's undo) have
		// had their replies: Release waits for every delete it sent.
		if p := e.publishes(); p[0]+p[1]+p[2]+p[3]+p[4] != 0 {
			t.Fatalf("publishes %v after releases nobody waited for, want none", p)
		}

		holder, err := holderL.TryLock(ctx, "marked")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *engine.Lease, 1)
		go func() {
			le, err := waiterL.Lock(ctx, "marked")
			if err != nil {
				t.Error(err)
			}
			got <- le
		}()
		eventually(t, 30*time.Second, "waiter queued", func() bool { return e.queued("marked", 1) })
		marked := 0
		for i := range e.direct {
			switch e.get(i, "marked") {
			case holder.Value() + "+":
				marked++
				c := e.direct[i]
				if ttl, err := c.Do(ctx, c.B().Pttl().Key("marked").Build()).AsInt64(); err != nil || ttl <= 0 {
					t.Fatalf("node %d: the marked key's PTTL is %d (%v): the mark must keep the expiry", i, ttl, err)
				}
			case holder.Value(), "":
			default:
				t.Fatalf("node %d holds %q, want the holder's value %q, marked or not", i, e.get(i, "marked"), holder.Value())
			}
		}
		if marked < 3 {
			t.Fatalf("the holder's value is marked on %d masters, want a quorum (the waiter was refused by one)", marked)
		}
		// A marked value is still the holder's: it extends and releases.
		if err := holder.Extend(ctx, 10*time.Second); err != nil {
			t.Fatalf("extend of a marked lease: %v", err)
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("release of a marked lease: %v", err)
		}
		le := <-got
		if le == nil {
			t.FailNow()
		}
		if w := le.Wait(); w.Cause != engine.WakeNotified {
			t.Fatalf("wait %+v: want woken by the release notification", w)
		}
		p := e.publishes()
		if n := p[0] + p[1] + p[2] + p[3] + p[4]; n < 3 || n > 5 {
			t.Fatalf("publishes %v for one release of a value marked on %d masters", p, marked)
		}
		le.Release(ctx)
	})
}

// Keys of two owners on two masters each, none holding a quorum: a split
// vote, which nobody will release with a publish. The waiter must back off
// and retry, not wait for a notification (here, for a 20s fallback), with
// fencing as without. In virtual time: the split stands exactly as long
// as its keys live.
func TestSplitVoteBacksOff(t *testing.T) {
	for _, fencing := range []bool{false, true} {
		t.Run(fmt.Sprintf("fencing=%v", fencing), func(t *testing.T) {
			simTestWith(t, 5, steadyMasters, func(t *testing.T, e *env) {
				const retryMax = 20 * time.Millisecond
				l := e.locker(func(c *engine.Config) {
					c.Fencing = fencing
					c.Wait.FallbackMin, c.Wait.FallbackMax = 20*time.Second, 20*time.Second
					c.Wait.RetryDelayMin, c.Wait.RetryDelayMax = 10*time.Millisecond, retryMax
				})
				const res, split = "split", 300 * time.Millisecond
				set := time.Now()
				for i, owner := range []string{"splitownerAAAAAAAAAAAA", "splitownerAAAAAAAAAAAA", "splitownerBBBBBBBBBBBB", "splitownerBBBBBBBBBBBB"} {
					c := e.direct[i]
					if err := c.Do(context.Background(), c.B().Set().Key(e.key(res)).Value(owner).Px(split).Build()).Error(); err != nil {
						t.Fatal(err)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				le, err := l.Lock(ctx, res)
				cancel()
				if err != nil {
					t.Fatalf("Lock after a split vote: %v", err)
				}
				w := le.Wait()
				le.Release(context.Background())
				if w.Backoffs < 1 || w.Fallbacks != 0 || w.Cause != engine.WakeBackoff {
					t.Fatalf("wait %+v: want back-offs until the split keys expired, no fallback wait", w)
				}
				// The first back-off after the keys expired finds them gone.
				t.Logf("acquired %s after the split was set: %+v", time.Since(set), w)
				if took, bound := time.Since(set), split+retryMax+2*time.Millisecond; took > bound {
					t.Fatalf("acquired %s after the split was set, want within %s (the keys lived %s)", took, bound, split)
				}
			})
		})
	}
}

// On masters started moments ago (the default quarantine keeps their
// votes out until they are MaxTTL old), Lock waits until the quorum can
// vote, and then acquires: a few attempts, not one every few
// milliseconds for the whole quarantine. In virtual time: the quarantine
// ends exactly when the masters are a TTL old.
func TestLockWaitsOutTheQuarantine(t *testing.T) {
	o := steadyMasters
	o.Uptime = 0
	simTestWith(t, 3, o, func(t *testing.T, e *env) {
		booted := time.Now()
		cfg := e.config()
		cfg.Quarantine = engine.QuarantineAlways
		cfg.TTL = time.Second
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		le, err := l.Lock(ctx, "fresh")
		if err != nil {
			t.Fatalf("Lock through the quarantine: %v", err)
		}
		defer le.Release(context.Background())
		w := le.Wait()
		if w.Attempts > 3 {
			t.Fatalf("%d attempts during a quarantine of at most %s, want at most 3 (%+v)", w.Attempts, cfg.TTL, w)
		}
		// The quarantine's end, a back-off (at most RetryDelayMax) and
		// a round trip.
		t.Logf("acquired %s after the masters started: %+v", time.Since(booted), w)
		if took, bound := time.Since(booted), cfg.TTL+engine.DefaultRetryDelayMax+time.Millisecond; took < cfg.TTL || took > bound {
			t.Fatalf("acquired %s after the masters started, want after the quarantine (%s), within %s", took, cfg.TTL, bound)
		}
	})
}

// A Lock short of a quorum because one master is quarantined and another
// is down must not sleep until the quarantine ends: the master that is
// down may come back first (a pause, a partition that heals), and with it
// the quorum. Lock must then acquire within its back-off, not wait out a
// quarantine the quorum no longer needs. In virtual time: the pause, the
// quarantine and the back-off are exact.
func TestLockDoesNotWaitOutAQuarantineTheQuorumNoLongerNeeds(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		const nodeTimeout = 100 * time.Millisecond
		l := e.locker(func(c *engine.Config) {
			c.TTL, c.MaxTTL = time.Second, 30*time.Second
			c.NodeTimeout = nodeTimeout
		})
		e.restart(0)
		eventually(t, 5*time.Second, "master 0's restart seen", func() bool {
			if le, err := l.TryLock(context.Background(), "probe"); err == nil {
				le.Release(context.Background())
			}
			return l.Nodes()[0].State == engine.StateQuarantined
		})
		e.pause(1)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got := make(chan error, 1)
		go func() {
			le, err := l.Lock(ctx, "back")
			if err == nil {
				le.Release(context.Background())
			}
			got <- err
		}()
		time.Sleep(500 * time.Millisecond) // virtual time: the Lock's first attempts fail
		e.resume(1)
		resumed := time.Now()
		if err := <-got; err != nil {
			t.Fatalf("masters 1 and 2 were back for 4.5 s, yet: %v", err)
		}
		t.Logf("acquired %s after master 1 resumed", time.Since(resumed))
		// The attempt under way when master 1 resumed may wait out its
		// node timeout, then a fallback's back-off at most (the default
		// 250 ms), and the next attempt is a round trip.
		if took, bound := time.Since(resumed), nodeTimeout*5/4+engine.DefaultFallbackMax+engine.DefaultRetryDelayMax+time.Millisecond; took > bound {
			t.Fatalf("acquired %s after master 1 resumed, want within %s: the Lock waited out the quarantine (30 s)", took, bound)
		}
	})
}
