package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// waiterID is the queue id a waiter's lease value starts with ("" for a
// lease that was not queued).
func waiterID(le *engine.Lease) string {
	id, _, ok := strings.Cut(le.Value(), ".")
	if !ok {
		return ""
	}
	return id
}

// Two Lockers whose subscriptions linger both queue at their first
// attempt. A split vote between them where the loser has the lower
// ticket: the winner acquires while the loser's attempt still holds the
// key, marked, on the third master, so the winner keeps its place there
// (leaveScript); the loser's undo then deletes the key without popping
// anyone (the loser is first in line and awake). Nothing ever takes the
// winner out of that queue but a later release there, which gives the
// turn to a waiter that holds nothing and waits for nothing.
//
// With a hand-off, B passes its lease to another goroutine of its Locker
// queued at the gate, and the successor's release must take B's place
// out instead.
//
// In virtual time: A's attempt reaches masters 1 and 2 exactly when the
// scenario says, after B has taken them.
func TestSplitVoteLeavesNoStaleQueueEntry(t *testing.T) {
	for _, handoff := range []bool{false, true} {
		t.Run(fmt.Sprintf("handoff=%v", handoff), func(t *testing.T) {
			simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) { testSplitVoteLeavesNoStaleQueueEntry(t, e, handoff) })
		})
	}
}

func testSplitVoteLeavesNoStaleQueueEntry(t *testing.T, e *env, handoff bool) {
	const res = "split"
	slow := []*latencyProxy{newLatencyProxy(e, e.addrs[1], 0, nil), newLatencyProxy(e, e.addrs[2], 0, nil)}
	cfg := func(c *engine.Config) {
		c.Wait.NotifyLinger = time.Minute
		c.NodeTimeout = time.Second
		c.Wait.FallbackMin, c.Wait.FallbackMax = 20*time.Second, 20*time.Second
	}
	lA := e.locker(func(c *engine.Config) {
		cfg(c)
		c.Masters = []string{e.addrs[0], slow[0].addr(), slow[1].addr()}
	})
	lB := e.locker(cfg)
	holderL := e.locker(nil)

	// Both Lockers wait for the resource once, so that their
	// subscriptions linger.
	holder, got := holdAndQueue(t, e, holderL, []*engine.Locker{lA, lB}, res, []context.Context{context.Background(), context.Background()})
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		if err := r.le.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if lA.Subscriptions() != 1 || lB.Subscriptions() != 1 {
		t.Fatalf("subscriptions %d and %d, want both lingering", lA.Subscriptions(), lB.Subscriptions())
	}

	eventually(t, 5*time.Second, "the warm-up left no key and no queue", func() bool {
		for i := range e.direct {
			if e.get(i, e.key(res)) != "" || len(e.queueOf(i, res)) != 0 {
				return false
			}
		}
		return true
	})
	// A (the lower ticket) sets the key on master 0 at once; its attempt
	// reaches masters 1 and 2 only after B has taken them.
	const delay = 300 * time.Millisecond
	for _, p := range slow {
		p.delay.Store(int64(delay))
	}
	aGot := make(chan result, 1)
	go func() {
		le, err := lA.Lock(context.Background(), res)
		aGot <- result{0, le, err, time.Now()}
	}()
	eventually(t, 5*time.Second, "A's attempt set the key on master 0", func() bool { return e.get(0, e.key(res)) != "" })
	bctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := lB.Lock(bctx, res)
	if err != nil {
		for i := range e.direct {
			t.Logf("master %d: key %q queue %v", i, e.get(i, e.key(res)), e.queueOf(i, res))
		}
		t.Fatal(err)
	}
	bID := waiterID(b)
	if bID == "" {
		t.Fatalf("B's lease %q was not queued: its subscription did not linger", b.Value())
	}
	// A's attempt is refused by B on masters 1 and 2, and undone on 0.
	eventually(t, 5*time.Second, "A's attempt undone on master 0", func() bool { return e.get(0, e.key(res)) == "" })
	time.Sleep(50 * time.Millisecond) // the leave went before the undo (virtual time)
	for _, p := range slow {
		p.delay.Store(0)
	}
	if handoff {
		next := make(chan result, 1)
		go func() {
			le, err := lB.Lock(context.Background(), res)
			next <- result{1, le, err, time.Now()}
		}()
		eventually(t, 5*time.Second, "a second goroutine of B queued at the gate", func() bool { return lB.GateWaiting(res) == 1 })
		if err := b.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		n := <-next
		if n.err != nil {
			t.Fatal(n.err)
		}
		if w := n.le.Wait(); w.Cause != engine.WakeHandoff {
			t.Fatalf("B's successor waited %+v: want the lease handed over at the gate", w)
		}
		b = n.le
	}
	if err := b.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := <-aGot
	if r.err != nil {
		t.Fatal(r.err)
	}
	// B's release takes its place out of master 0's queue without waiting
	// (a master that did not answer B's acquire may be hung), on another
	// connection than A's acquire: in virtual time, it has landed by the
	// time A holds.
	var stale []int
	for i := range e.direct {
		q := e.queueOf(i, res)
		t.Logf("master %d: queue %v while A holds", i, q)
		if slices.Contains(q, bID) {
			stale = append(stale, i)
		}
	}
	if err := r.le.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range e.direct {
		if v := e.get(i, e.key(res)); v != "" {
			t.Errorf("master %d: key %q after the last release with nobody waiting", i, v)
		}
	}
	if len(stale) > 0 {
		t.Errorf("B, which acquired and released, is still queued on masters %v: a later release there gives B the turn", stale)
	}
}

// lingerOn has l wait once for resource (held by holderL), so that its
// subscription lingers afterwards.
func lingerOn(t *testing.T, e *env, holderL, l *engine.Locker, resource string) {
	t.Helper()
	holder, got := holdAndQueue(t, e, holderL, []*engine.Locker{l}, resource, []context.Context{context.Background()})
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := r.le.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l.Subscriptions() != 1 {
		t.Fatalf("%d subscriptions, want 1 lingering", l.Subscriptions())
	}
}

// The first attempt of a resource waited for lately queues: on a free key
// with fencing, tokens still rise, and the release leaves no key and no
// place in the queue; on a key of another type it must still fail at
// once with ErrWrongType, and leave no place in the queue. The first in
// virtual time, where "once that settles" is exact; the second on real
// masters, whose types are the point.
func TestLingeringFirstAttemptEdges(t *testing.T) {
	withAndWithoutFencing(t, func(t *testing.T, fencing bool, base func(*engine.Config)) {
		cfg := func(c *engine.Config) { base(c); c.Wait.NotifyLinger = time.Minute }
		t.Run("free", func(t *testing.T) {
			simTest(t, 3, func(t *testing.T, e *env) { lingeringFirstAttemptOnAFreeKey(t, e, fencing, cfg) })
		})
		t.Run("wrong-type", func(t *testing.T) {
			t.Parallel()
			lingeringFirstAttemptOnAWrongType(t, newEnv(t, 3), cfg)
		})
	})
}

func lingeringFirstAttemptOnAFreeKey(t *testing.T, e *env, fencing bool, cfg func(*engine.Config)) {
	holderL, l := e.locker(cfg), e.locker(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lingerOn(t, e, holderL, l, "free")
	var last int64
	for i := range 3 {
		le, err := l.Lock(ctx, "free")
		if err != nil {
			t.Fatal(err)
		}
		if le.Wait().Attempts != 1 || waiterID(le) == "" {
			t.Fatalf("lock %d: wait %+v value %q, want one queued attempt", i, le.Wait(), le.Value())
		}
		if fencing && le.Token() <= last {
			t.Fatalf("lock %d: token %d after %d", i, le.Token(), last)
		}
		last = le.Token()
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// A master that answered the acquire after the quorum did sets
		// the key after the release, and its late yes is undone: the
		// keys and queues are empty once that settles, a node timeout
		// (100 ms) and a round trip later, and stay so.
		time.Sleep(time.Second)
		for m := range e.direct {
			if v := e.get(m, e.key("free")); v != "" {
				t.Fatalf("lock %d: master %d key %q after release with nobody waiting, and settled", i, m, v)
			}
			if q := e.queueOf(m, "free"); len(q) != 0 {
				t.Fatalf("lock %d: master %d queue %v after release with nobody waiting, and settled", i, m, q)
			}
		}
	}
}

func lingeringFirstAttemptOnAWrongType(t *testing.T, e *env, base func(*engine.Config)) {
	// Keys and queues outlive the test's waits (the queue expires two
	// TTLs after a join): only a release or a leave empties them in time.
	cfg := func(c *engine.Config) { base(c); c.TTL = time.Minute; patient(c) }
	holderL, l := e.locker(cfg), e.locker(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lingerOn(t, e, holderL, l, "wt")
	// A master whose acquire answered late is released when it does.
	eventually(t, 30*time.Second, "no key left", func() bool {
		return e.get(0, e.key("wt"))+e.get(1, e.key("wt"))+e.get(2, e.key("wt")) == ""
	})
	for m := range e.direct {
		if err := e.direct[m].Do(ctx, e.direct[m].B().Lpush().Key(e.key("wt")).Element("x").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	// Its first attempt refused by the wrong type on every master, Lock
	// returns at once, not when its context ends.
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
	defer lcancel()
	if _, err := l.Lock(lctx, "wt"); !errors.Is(err, engine.ErrWrongType) || lctx.Err() != nil {
		t.Fatalf("queued first attempt on a wrong-type key: %v (ctx %v)", err, lctx.Err())
	}
	// Its place, if the attempt took one, is taken out without waiting.
	eventually(t, 30*time.Second, "no place in the queue after a wrong-type Lock", func() bool {
		for m := range e.direct {
			if q := e.queueOf(m, "wt"); len(q) != 0 {
				t.Logf("master %d queue %v", m, q)
				return false
			}
		}
		return true
	})
}

// Lockers whose subscriptions linger contend for one resource: at most one
// holder at a time, fencing tokens rise in the order of the critical
// sections, and no waiter sleeps until its fallback while the others keep
// releasing. In virtual time, on masters with the simulator's LAN
// latency (jitter and spikes): no release times out for want of CPU.
func TestLingeringContention(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("masters=%d", n), func(t *testing.T) { simTest(t, n, testLingeringContention) })
	}
}

func testLingeringContention(t *testing.T, e *env) {
	// Each Locker reaches each master with its own delay, so that
	// releases arrive late on some masters and first attempts split.
	delays := []time.Duration{0, 500 * time.Microsecond, 2 * time.Millisecond}
	k := 0
	cfg := func(c *engine.Config) {
		c.Masters = nil
		for _, a := range e.addrs {
			c.Masters = append(c.Masters, newLatencyProxy(e, a, delays[k%len(delays)], nil).addr())
			k++
		}
		k++
		c.Fencing = true
		c.Wait.DisableGate = true
		c.TTL = 2 * time.Second
		c.Wait.FallbackMin, c.Wait.FallbackMax = 5*time.Second, 5*time.Second
	}
	ls := []*engine.Locker{e.locker(cfg), e.locker(cfg), e.locker(cfg), e.locker(cfg)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		mu                         sync.Mutex
		inside                     bool
		last                       int64
		locks, fallbacks, notified int
	)
	// About what two seconds of contention on real masters gave.
	const rounds = 200
	enough := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return locks >= rounds
	}
	// A stall shows the masters' state while everyone sleeps.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		seen := -1
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			mu.Lock()
			now := locks
			mu.Unlock()
			if now == seen {
				for i := range e.direct {
					t.Logf("stalled: master %d key %q queue %v", i, e.get(i, e.key("hot")), e.queueOf(i, "hot"))
				}
			}
			seen = now
		}
	}()
	var wg sync.WaitGroup
	for _, l := range ls {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !enough() {
					le, err := l.Lock(ctx, "hot")
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if inside {
						t.Errorf("two holders at once")
					}
					if le.Token() <= last {
						t.Errorf("token %d after %d", le.Token(), last)
					}
					inside, last = true, le.Token()
					locks++
					fallbacks += le.Wait().Fallbacks
					notified += le.Wait().Notified
					mu.Unlock()
					time.Sleep(time.Millisecond)
					mu.Lock()
					inside = false
					mu.Unlock()
					if err := le.Release(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d locks, %d notified waits, %d fallbacks", locks, notified, fallbacks)
	if fallbacks > 0 {
		t.Errorf("%d waits ended by the %s fallback while the resource kept being released", fallbacks, 5*time.Second)
	}
}

// Close ends lingering subscriptions: their pub/sub goroutines and idle
// timers do not outlive it, and Subscriptions says so.
// (Not parallel: it counts the process's goroutines.)
func TestNoGoroutineLeakAfterCloseWithLingering(t *testing.T) {
	e := newEnv(t, 3)
	base := e.goroutines()
	cfg := e.config()
	cfg.Wait.NotifyLinger = time.Minute
	patient(&cfg)
	var ls []*engine.Locker
	for range 2 {
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	lingerOn(t, e, ls[0], ls[1], "leak")
	for _, l := range ls {
		l.Close()
	}
	if n := ls[1].Subscriptions(); n != 0 {
		t.Errorf("%d subscriptions after Close", n)
	}
	goroutinesBackTo(t, base)
}

// goroutines is how many goroutines the process runs, with e's direct
// clients connected: the pool's may have dropped an idle connection,
// which the test's first use would open again, and count as its own.
func (e *env) goroutines() int {
	for i := range e.direct {
		e.get(i, e.key("warm-up"))
	}
	return runtime.NumGoroutine()
}

// goroutinesBackTo waits until the process runs at most base goroutines,
// and fails showing the others if they do not end within 30 s.
func goroutinesBackTo(t *testing.T, base int) {
	t.Helper()
	if within(30*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		return
	}
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	t.Fatalf("%d goroutines 30 s after Close, %d before the test:\n%s", runtime.NumGoroutine(), base, b.String())
}

// Turn tokens alone refuse a waiter: a release gave the resource to
// queued waiters of a process that died before taking it. Nobody will
// publish; the tokens expire after 50 ms. The waiter retries once they
// have, not after its (here long) fallback.
//
// In virtual time: the tokens' expiry and the waiter's back-off are exact.
func TestTurnTokensOfAGoneWaiterDoNotWaitForTheFallback(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		const fallback = 5 * time.Second
		const tokenLife = 50 * time.Millisecond
		l := e.locker(func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = fallback, fallback })
		for i, c := range e.direct {
			if err := c.Do(context.Background(), c.B().Set().Key(e.key("gone-turn")).Value("~ghost").Px(tokenLife).Build()).Error(); err != nil {
				t.Fatalf("SET on node %d: %v", i, err)
			}
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*fallback)
		defer cancel()
		le, err := l.Lock(ctx, "gone-turn")
		if err != nil {
			t.Fatal(err)
		}
		defer le.Release(context.Background())
		took := time.Since(start)
		t.Logf("acquired after %s: %+v", took, le.Wait())
		// Refused by the tokens, the waiter backs off for their life plus
		// at most RetryDelayMax, and acquires in a round trip.
		if bound := tokenLife + engine.DefaultRetryDelayMax + time.Millisecond; took > bound {
			t.Fatalf("acquired after %s, want within %s: the waiter slept until its fallback (%s)", took, bound, fallback)
		}
		if w := le.Wait(); w.Fallbacks != 0 || w.Backoffs == 0 {
			t.Errorf("wait %+v: want the retry counted as a back-off, not a fallback", w)
		}
	})
}

// A release gives the turn to the first waiter (A), whose attempt sets
// the key on every master but which gives up (its context ends) during
// the fencing round, before the lease is handed out. Its undo finds A
// first in the queue (its attempt re-queued it) and deletes the key
// without waking anyone; then A leaves the queue. The next waiter (B, of
// another Locker) was never told, and must not sleep until its fallback
// while the resource is free. A's commands reach the masters through a
// latency proxy, so that its context ends between the acquire's reply
// and the fencing round's.
func TestWokenWaiterThatGivesUpPassesTheTurn(t *testing.T) {
	simTestWith(t, 3, steadyMasters, testWokenWaiterThatGivesUpPassesTheTurn)
}

func testWokenWaiterThatGivesUpPassesTheTurn(t *testing.T, e *env) {
	const res = "giveup"
	const fallback = 5 * time.Second
	var slow []*latencyProxy
	for _, a := range e.addrs {
		slow = append(slow, newLatencyProxy(e, a, 0, nil))
	}
	cfg := func(c *engine.Config) {
		c.Fencing = true
		c.Wait.FallbackMin, c.Wait.FallbackMax = fallback, fallback
	}
	lA := e.locker(func(c *engine.Config) {
		cfg(c)
		c.Masters = nil
		for _, p := range slow {
			c.Masters = append(c.Masters, p.addr())
		}
		c.NodeTimeout = time.Second
	})
	lB := e.locker(cfg)
	holderL := e.locker(cfg)

	actx, acancel := context.WithCancel(context.Background())
	defer acancel()
	bctx, bcancel := context.WithTimeout(context.Background(), 2*fallback)
	defer bcancel()
	holder, got := holdAndQueue(t, e, holderL, []*engine.Locker{lA, lB}, res, []context.Context{actx, bctx})
	const delay = 300 * time.Millisecond
	for _, p := range slow {
		p.delay.Store(int64(delay))
	}
	released := time.Now()
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A is woken at once (the release's message is not delayed); its
	// attempt reaches the masters at 300 ms, its fencing round at 600 ms.
	eventually(t, 5*time.Second, "A's attempt set the key", func() bool {
		v := e.get(0, e.key(res))
		return v != "" && v[0] != '~'
	})
	time.Sleep(100 * time.Millisecond) // virtual time: A's fencing round is on its way
	acancel()
	for range 2 {
		r := <-got
		switch r.i {
		case 0:
			if r.err == nil {
				r.le.Release(context.Background())
				t.Fatal("set-up: A acquired before it gave up")
			}
		case 1:
			if r.err != nil {
				t.Fatal(r.err)
			}
			took := time.Since(released)
			t.Logf("B acquired %s after the release: %+v", took, r.le.Wait())
			r.le.Release(context.Background())
			if w := r.le.Wait(); w.Cause != engine.WakeNotified {
				t.Errorf("B's wait %+v: want woken by A's quit", w)
			}
			// A's fencing round lands at 2 delays, and its undo and quit,
			// sent when it answers, at 3; B's attempt and fence round
			// take a few round trips more.
			if bound := 3*delay + 2*time.Millisecond; took > bound {
				t.Errorf("B acquired %s after the release, want within %s: it slept towards its fallback (%s) while the resource was free", took, bound, fallback)
			}
		}
	}
}

// A waiter that acquired, whose work overran the TTL, releases late: its
// Release fails (ErrLeaseExpired), but it must still leave the masters'
// queues. Left there, it is a ghost: the next holder's release pops it and
// gives it the turn, and the real waiter behind it sleeps until its
// fallback although the resource is free.
//
// In virtual time: the lease's expiry is the scenario.
func TestExpiredLeaseLeavesTheQueueOnRelease(t *testing.T) {
	withAndWithoutFencing(t, func(t *testing.T, fencing bool, cfg func(*engine.Config)) {
		simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) { testExpiredLeaseLeavesTheQueueOnRelease(t, e, cfg) })
	})
}

func testExpiredLeaseLeavesTheQueueOnRelease(t *testing.T, e *env, cfg func(*engine.Config)) {
	ctx := context.Background()
	const res = "ghost"
	slow := func(c *engine.Config) {
		cfg(c)
		c.TTL = 300 * time.Millisecond
		c.Wait.FallbackMin, c.Wait.FallbackMax = 20*time.Second, 20*time.Second
	}
	holderL, aL, cL, dL := e.locker(slow), e.locker(slow), e.locker(slow), e.locker(slow)

	// A waits for the holder and acquires through the queue.
	held, err := holderL.TryLock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	aGot := make(chan *engine.Lease, 1)
	go func() {
		le, err := aL.Lock(ctx, res)
		if err != nil {
			t.Error(err)
		}
		aGot <- le
	}()
	eventually(t, 5*time.Second, "A queued", func() bool { return e.queued(res, 1) })
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-aGot
	if a == nil || waiterID(a) == "" {
		t.Fatalf("set-up: A did not acquire through the queue: %v", a)
	}

	// A's work overruns its TTL; its deferred Release comes late.
	eventually(t, 5*time.Second, "A's keys expired", func() bool {
		for i := range e.direct {
			if e.get(i, e.key(res)) != "" {
				return false
			}
		}
		return true
	})
	if err := a.Release(ctx); !errors.Is(err, engine.ErrLeaseExpired) {
		t.Fatalf("A's late Release: want ErrLeaseExpired, got %v", err)
	}
	for i := range e.direct {
		if q := e.queueOf(i, res); slices.Contains(q, waiterID(a)) {
			t.Fatalf("master %d: A is still in the queue after its Release: %v", i, q)
		}
	}

	// The next holder's release wakes D, the real waiter.
	c, err := cL.TryLock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	dGot := make(chan *engine.Lease, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		le, err := dL.Lock(lctx, res)
		if err != nil {
			t.Error(err)
		}
		dGot <- le
	}()
	eventually(t, 5*time.Second, "D queued", func() bool { return e.queued(res, 1) })
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-dGot:
		if d == nil {
			t.Fatal("D did not acquire")
		}
		if w := d.Wait(); w.Cause != engine.WakeNotified {
			t.Errorf("D's wait %+v: want woken by the release", w)
		}
		d.Release(ctx)
	case <-time.After(10 * time.Millisecond):
		// A few round trips; a ghost's turn token would hold the key for
		// 50 ms, and D would sleep until its fallback (20 s).
		t.Fatal("D still waits 10 ms after the release of a free resource: the release woke a ghost")
	}
}

// A lease acquired through the queue leaves the masters' queues when it
// ends without a Release that reaches them: it expired and its holder
// never released it, or its Locker closed while it was held. Either
// way, left there, it would be given the next turn until the queue itself
// expires, two TTLs after its last join. On real masters (a liveness
// claim of the README's); the test keeps the queues from expiring while
// it waits, so that only the leave can empty them.
func TestEndedLeaseLeavesTheQueue(t *testing.T) {
	for _, how := range []string{"expired, never released", "Locker closed", "expired unwatched, gate off"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 3)
			ctx := context.Background()
			const res = "left"
			// Short enough to wait out; its node timeout (just under 2.5 s)
			// long enough for any reply of a loaded machine.
			const ttl = 5 * time.Second
			cfg := func(c *engine.Config) { c.TTL = ttl; patient(c) }
			holderL, aL := e.locker(cfg), e.locker(func(c *engine.Config) {
				cfg(c)
				// Without the gate and auto-extension, nothing but the
				// queue needs the lease's expiry watch.
				c.Wait.DisableGate = how == "expired unwatched, gate off"
			})
			held, err := holderL.TryLock(ctx, res)
			if err != nil {
				t.Fatal(err)
			}
			aGot := make(chan *engine.Lease, 1)
			go func() {
				le, err := aL.Lock(ctx, res)
				if err != nil {
					t.Error(err)
				}
				aGot <- le
			}()
			eventually(t, 30*time.Second, "A queued", func() bool { return e.queued(res, 1) })
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			a := <-aGot
			if a == nil || waiterID(a) == "" {
				t.Fatalf("set-up: A did not acquire through the queue: %v", a)
			}
			// A keeps its place in the queues while it holds. Give them a
			// life beyond the test's waits (the engine sets it at joins
			// only), so that their expiry cannot take A out.
			q := "\xffredlock:queue:" + e.key(res)
			queued := 0
			for i, c := range e.direct {
				if slices.Contains(e.queueOf(i, res), waiterID(a)) {
					queued++
				}
				if err := c.Do(ctx, c.B().Pexpire().Key(q).Milliseconds(10*time.Minute.Milliseconds()).Build()).Error(); err != nil {
					t.Fatalf("PEXPIRE on master %d: %v", i, err)
				}
			}
			if queued == 0 {
				t.Fatal("set-up: A holds no place in any queue")
			}
			switch how {
			case "Locker closed":
				aL.Close()
			case "expired unwatched, gate off":
				// Nobody asks the lease anything (Done, Err, Validity
				// would watch it): its keys just expire.
				eventually(t, 30*time.Second, "A's keys expired", func() bool {
					for i := range e.direct {
						if e.get(i, e.key(res)) != "" {
							return false
						}
					}
					return true
				})
			default:
				<-a.Done()
			}
			eventually(t, 30*time.Second, "A out of every master's queue", func() bool {
				for i := range e.direct {
					if slices.Contains(e.queueOf(i, res), waiterID(a)) {
						return false
					}
				}
				return true
			})
		})
	}
}

// An auto-extension that misses the quorum because two masters are slow
// (not because the keys are gone) ends the lease with ErrLockLost while
// its keys are still ours on every master. The lost lease runs its
// release at once (see Lease.freeEnded): it deletes them as a release
// does, passing the turn to the waiter that marked them, who is woken
// without waiting for the holder's Release; that Release, when it comes,
// finds nothing of its own and harms nothing.
//
// In virtual time: the masters turn slow for the one extension.
func TestLostLeaseStillHeldReleasesToTheNextWaiter(t *testing.T) {
	simTestWith(t, 3, steadyMasters, testLostLeaseStillHeldReleasesToTheNextWaiter)
}

func testLostLeaseStillHeldReleasesToTheNextWaiter(t *testing.T, e *env) {
	ctx := context.Background()
	const res = "slow"
	aL, proxies := e.proxiedLocker(func(c *engine.Config) {
		c.TTL, c.AutoExtend, c.ExtendEvery = 2*time.Second, true, 300*time.Millisecond
		c.NodeTimeout = 100 * time.Millisecond
	})
	slowCfg := func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = 20*time.Second, 20*time.Second }
	holderL, bL := e.locker(slowCfg), e.locker(slowCfg)

	// A acquires through the queue, so that its lease has a place there.
	held, err := holderL.TryLock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	aGot := make(chan *engine.Lease, 1)
	go func() {
		le, err := aL.Lock(ctx, res)
		if err != nil {
			t.Error(err)
		}
		aGot <- le
	}()
	eventually(t, 5*time.Second, "A queued", func() bool { return e.queued(res, 1) })
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-aGot
	if a == nil || waiterID(a) == "" {
		t.Fatalf("set-up: A did not acquire through the queue: %v", a)
	}
	// A holds a quorum; a master its attempt reached before the holder's
	// release (refused there) never gets A's key.
	var heldBy []int
	for i := range e.direct {
		if strings.HasPrefix(e.get(i, e.key(res)), waiterID(a)+".") {
			heldBy = append(heldBy, i)
		}
	}
	// B waits behind A, and marks A's keys.
	bGot := make(chan *engine.Lease, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		le, err := bL.Lock(lctx, res)
		if err != nil {
			t.Error(err)
		}
		bGot <- le
	}()
	eventually(t, 5*time.Second, "B queued", func() bool {
		for i := range e.direct {
			q := e.queueOf(i, res)
			if len(slices.DeleteFunc(q, func(id string) bool { return id == waiterID(a) })) != 1 {
				return false
			}
		}
		return true
	})

	// Masters 1 and 2 turn slow: the next auto-extension misses its quorum.
	const slow = 400 * time.Millisecond
	proxies[1].delay.Store(int64(slow))
	proxies[2].delay.Store(int64(slow))
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("set-up: the auto-extension did not miss its quorum")
	}
	if !errors.Is(a.Err(), engine.ErrLockLost) {
		t.Fatalf("set-up: A ended with %v, want ErrLockLost", a.Err())
	}
	lost := time.Now()
	proxies[1].delay.Store(0)
	proxies[2].delay.Store(0)
	if len(heldBy) == 0 {
		t.Fatal("set-up: A's key on no master")
	}
	// The lost lease's release reaches masters 1 and 2 behind the slow
	// extension; B's attempt, and its fence round, take a few round
	// trips more.
	select {
	case b := <-bGot:
		if b == nil {
			t.Fatal("B did not acquire")
		}
		if w := b.Wait(); w.Cause != engine.WakeNotified {
			t.Errorf("B's wait %+v: want woken by A's lost lease's release", w)
		}
		t.Logf("B acquired %s after A's lease was lost: %+v", time.Since(lost), b.Wait())
		if took, bound := time.Since(lost), slow+5*time.Millisecond; took > bound {
			t.Errorf("B acquired %s after A's lease was lost, want within %s", took, bound)
		}
		defer b.Release(ctx)
	case <-time.After(3 * time.Second):
		t.Fatal("B still waits 3 s after A's lease was lost: nothing gave it the turn")
	}
	err = a.Release(ctx)
	if err == nil || !(errors.Is(err, engine.ErrNotHeld) || errors.Is(err, engine.ErrLockLost) || errors.Is(err, engine.ErrLeaseExpired)) {
		t.Errorf("A's late Release after its lost lease was freed: %v, want ErrNotHeld, ErrLockLost or ErrLeaseExpired", err)
	}
}

// A lease that expires while a waiter of another Locker is queued on it
// passes the turn on at once, as its Release would. Left to expire on
// the masters, the key takes the waiter's mark with it: the next holder
// (a newcomer whose SET NX finds the key free) holds an unmarked key,
// its release wakes nobody, and the waiter sleeps until its fallback
// while the resource is free. Both for a lease Lock took at once and for
// one it took through the queue (whose value is a waiter's). In virtual
// time: the expiry is the scenario, and the waiter must have the
// resource within a few round trips of it.
func TestExpiredLeaseWithAWaiterPassesTheTurn(t *testing.T) {
	for _, queued := range []bool{false, true} {
		t.Run(fmt.Sprintf("queued=%v", queued), func(t *testing.T) {
			withAndWithoutFencing(t, func(t *testing.T, fencing bool, cfg func(*engine.Config)) {
				simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
					testExpiredLeaseWithAWaiterPassesTheTurn(t, e, queued, cfg)
				})
			})
		})
	}
}

func testExpiredLeaseWithAWaiterPassesTheTurn(t *testing.T, e *env, queued bool, cfg func(*engine.Config)) {
	ctx := context.Background()
	const res = "expired-turn"
	const ttl = 300 * time.Millisecond
	short := func(c *engine.Config) {
		cfg(c)
		c.TTL = ttl
	}
	holderL, waiterL, newcomerL := e.locker(short), e.locker(short), e.locker(short)
	var held *engine.Lease
	if queued {
		// The holder acquires through the queue, behind a first lease.
		first, err := newcomerL.TryLock(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *engine.Lease, 1)
		go func() {
			le, err := holderL.Lock(ctx, res)
			if err != nil {
				t.Error(err)
			}
			got <- le
		}()
		eventually(t, 5*time.Second, "the holder queued", func() bool { return e.queued(res, 1) })
		first.Release(ctx)
		if held = <-got; held == nil || waiterID(held) == "" {
			t.Fatalf("set-up: the holder did not acquire through the queue: %v", held)
		}
	} else {
		// Lock, not TryLock: a lease Lock returns is watched for its
		// expiry (a TryLock lease only with auto-extension).
		var err error
		if held, err = holderL.Lock(ctx, res); err != nil {
			t.Fatal(err)
		}
	}
	// The holder's work overruns its TTL and it never releases.
	defer held.Release(ctx)

	waited := make(chan *engine.Lease, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		le, err := waiterL.Lock(lctx, res)
		if err != nil {
			t.Error(err)
		}
		waited <- le
	}()
	eventually(t, 5*time.Second, "the waiter queued", func() bool {
		for i := range e.direct {
			// The holder may keep its place while it holds.
			if !slices.ContainsFunc(e.queueOf(i, res), func(id string) bool { return id != waiterID(held) }) {
				return false
			}
		}
		return true
	})
	if !time.Now().Before(held.ValidUntil()) {
		t.Fatal("set-up: the lease expired before the waiter queued")
	}

	// A newcomer takes the resource whenever it finds it free, and lets
	// go at once: its release of an unmarked key publishes nothing.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if le, err := newcomerL.TryLock(ctx, res); err == nil {
				le.Release(ctx)
			}
		}
	}()
	defer wg.Wait()
	defer close(stop)

	// The lease ends at its validity's end, and its release gives the
	// waiter the turn: a round trip to the masters (200µs), one more for
	// the waiter's attempt and one for its fence round.
	const bound = 2 * time.Millisecond
	select {
	case le := <-waited:
		if le == nil {
			t.Fatal("the waiter did not acquire")
		}
		if w := le.Wait(); w.Cause != engine.WakeNotified {
			t.Errorf("the waiter's wait %+v: want woken by the expired lease's turn", w)
		}
		late := time.Since(held.ValidUntil())
		t.Logf("acquired %s after the validity's end: %+v", late, le.Wait())
		if late > bound {
			t.Errorf("the waiter acquired %s after the lease's validity ended, want within %s", late, bound)
		}
		le.Release(ctx)
	case <-time.After(3 * time.Second):
		t.Fatalf("the waiter still waits 3 s after the lease expired (TTL %s, fallback 20s): its mark expired with the key, and no release woke it", ttl)
	}
}

// A waiter that acquired keeps its place where the holder's release is
// still on its way, so that the late release pops it rather than wake the
// next waiter for nothing (TestLateReleaseDoesNotWakeTheNextWaiter). It
// must keep the head of that queue, too: a waiter with an older ticket
// that joins there before the late release arrives (its Lock began
// earlier; its attempt came later) would otherwise be popped and woken,
// to be refused by the new holder's quorum.
//
// In virtual time: the release reaches master 0 exactly when the scenario
// says, after the waiter has acquired.
func TestLateReleaseWakesTheNewHolderBeforeAnOlderWaiter(t *testing.T) {
	withAndWithoutFencing(t, func(t *testing.T, fencing bool, cfg func(*engine.Config)) {
		simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
			ctx := context.Background()
			const res = "late-older"
			slow := newLatencyProxy(e, e.addrs[0], 0, nil)
			holderL := e.locker(func(c *engine.Config) {
				cfg(c)
				c.Masters = []string{slow.addr(), e.addrs[1], e.addrs[2]}
			})
			waiterL := e.locker(cfg)
			held, err := holderL.TryLock(ctx, res)
			if err != nil {
				t.Fatal(err)
			}
			// TryLock returned at quorum: the SET through the proxy may be
			// still on its way, and the waiter's attempt, sent direct,
			// overtake it.
			eventually(t, 5*time.Second, "the holder's key on master 0", func() bool { return e.get(0, e.key(res)) == held.Value() })
			got := make(chan *engine.Lease, 1)
			go func() {
				lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				le, err := waiterL.Lock(lctx, res)
				if err != nil {
					t.Error(err)
				}
				got <- le
			}()
			eventually(t, 5*time.Second, "the waiter queued", func() bool { return e.queued(res, 1) })

			// The release reaches masters 1 and 2 at once, master 0 late.
			slow.delay.Store(int64(500 * time.Millisecond))
			released := make(chan error, 1)
			go func() { released <- held.Release(ctx) }()
			w := <-got
			if w == nil {
				t.Fatal("the waiter did not acquire")
			}
			defer w.Release(ctx)
			id := waiterID(w)
			if v := e.get(0, e.key(res)); v != held.Value()+"+" {
				t.Fatalf("set-up: master 0 holds %q before the late release, want the holder's marked value", v)
			}
			// A waiter with an older ticket joins master 0's queue first.
			const older = "older-waiter"
			q := "\xffredlock:queue:" + e.key(res)
			if err := e.direct[0].Do(ctx, e.direct[0].B().Zadd().Key(q).ScoreMember().ScoreMember(1, older).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if err := <-released; err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "the late release ran on master 0", func() bool { return e.get(0, e.key(res)) != held.Value()+"+" })
			if qq := e.queueOf(0, res); !slices.Contains(qq, older) || slices.Contains(qq, id) {
				t.Errorf("master 0's queue after the late release: %v; want the new holder %s popped (its turn token expires unused), and %s still waiting", qq, id, older)
			}
		})
	})
}

// TestReleasePassesOnATurnALateReleaseGaveIt: where a waiter that acquired
// kept its place for a late release of the lock before it, that release
// may arrive while the new lease is held, pop it and give it a turn it no
// longer needs. The new lease's release must pass that turn on to the next
// waiter there, not merely leave the queue: otherwise the token holds the
// key until it expires and the next waiter there sleeps until its
// fallback. In virtual time, so that the late release comes exactly when
// the scenario says, and the control cannot miss.
func TestReleasePassesOnATurnALateReleaseGaveIt(t *testing.T) {
	mutation.Require(t)
	for _, keep := range []bool{false, true} {
		for _, all := range []bool{false, true} {
			t.Run(fmt.Sprintf("release-keeps-turn=%v/lockall=%v", keep, all), func(t *testing.T) {
				defer mutation.ReleaseKeepsTurn.Set(keep)()
				withAndWithoutFencing(t, func(t *testing.T, fencing bool, cfg func(*engine.Config)) {
					simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
						passed := latePoppedHolderReleases(t, e, all, cfg)
						if passed != !keep {
							t.Errorf("the next waiter on the late master got its turn: %v, want %v", passed, !keep)
						}
					})
				})
			})
		}
	}
}

// latePoppedHolderReleases sets up TestReleasePassesOnATurnALateReleaseGaveIt's
// interleaving on e's three masters, for Lock or LockAll, and reports
// whether the next waiter on the late master got its turn after the new
// holder's release.
func latePoppedHolderReleases(t *testing.T, e *env, all bool, cfg func(*engine.Config)) bool {
	ctx := context.Background()
	names := []string{"late-popped"}
	if all {
		names = []string{"late-popped-b", "late-popped-a"}
	}
	lock := func(ctx context.Context, l *engine.Locker) (*engine.Lease, error) {
		if all {
			return l.LockAll(ctx, names...)
		}
		return l.Lock(ctx, names[0])
	}
	slow := newLatencyProxy(e, e.addrs[0], 0, nil)
	holderL := e.locker(func(c *engine.Config) {
		cfg(c)
		c.Masters = []string{slow.addr(), e.addrs[1], e.addrs[2]}
	})
	waiterL := e.locker(cfg)
	held, err := lock(ctx, holderL)
	if err != nil {
		t.Fatal(err)
	}
	// The holder's lock returned at quorum: its SET through the proxy may
	// still be on its way, and the waiter's attempt, sent direct, overtake it.
	for _, res := range names {
		eventually(t, 5*time.Second, "the holder's key on master 0", func() bool { return e.get(0, e.key(res)) == held.Value() })
	}
	got := make(chan *engine.Lease, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		le, err := lock(lctx, waiterL)
		if err != nil {
			t.Error(err)
		}
		got <- le
	}()
	for _, res := range names {
		eventually(t, 5*time.Second, "the waiter queued", func() bool { return e.queued(res, 1) })
	}

	// The release reaches masters 1 and 2 at once, master 0 a second
	// later, long after the waiter has acquired.
	slow.delay.Store(int64(time.Second))
	released := make(chan error, 1)
	go func() { released <- held.Release(ctx) }()
	w := <-got
	if w == nil {
		t.Fatal("the waiter did not acquire")
	}
	id := waiterID(w)
	const next = "next-waiter"
	for _, res := range names {
		if v := e.get(0, e.key(res)); v != held.Value()+"+" {
			t.Fatalf("set-up: master 0 holds %q before the late release, want the holder's marked value", v)
		}
		q := "\xffredlock:queue:" + e.key(res)
		if err := e.direct[0].Do(ctx, e.direct[0].B().Zadd().Key(q).ScoreMember().ScoreMember(1, next).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	// The late release pops the new holder, at the head, and gives it a
	// turn on master 0 while it holds the lock on masters 1 and 2.
	for _, res := range names {
		eventually(t, 5*time.Second, "the late release ran on master 0", func() bool { return e.get(0, e.key(res)) != held.Value()+"+" })
		if v := e.get(0, e.key(res)); v != "~"+id {
			t.Fatalf("set-up: master 0 holds %q after the late release, want the new holder's turn token", v)
		}
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The release's quit reaches master 0 in a round trip; the turn token
	// would expire in 50 ms, and nothing else pops the next waiter.
	return within(time.Second, func() bool {
		for _, res := range names {
			if slices.Contains(e.queueOf(0, res), next) {
				return false
			}
		}
		return true
	})
}
