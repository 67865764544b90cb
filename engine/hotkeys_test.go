package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// steadyMasters are simulated masters (simTestWith) whose every write takes
// 100µs one way: no jitter and no spikes, so that a scenario whose
// outcome hangs on the order of messages (a release that reaches one
// master late, the turns that wake a waiter at once) plays the same way
// every run.
var steadyMasters = simredis.MasterOptions{Uptime: time.Hour, Latency: simredis.Latency{Min: 100 * time.Microsecond}}

// sent is the number of commands l has sent to the masters (every vote
// counted, whatever its outcome).
func sent(l *engine.Locker) int64 {
	var n int64
	for _, s := range l.Nodes() {
		n += s.OK + s.Refused + s.Failed + s.TimedOut
	}
	return n
}

// holdAndQueue has a holder take resource, then starts one waiter per
// Locker in ls, in order (so that their tickets are in that order), and
// returns once every one is subscribed and asleep. Each waiter's result
// arrives on the returned channel, in the order they acquire.
func holdAndQueue(t *testing.T, e *env, holderL *engine.Locker, ls []*engine.Locker, resource string, ctxs []context.Context) (*engine.Lease, chan result) {
	t.Helper()
	holder, err := holderL.TryLock(context.Background(), resource)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan result, len(ls))
	for i, l := range ls {
		ctx := ctxs[i]
		go func() {
			le, err := l.Lock(ctx, resource)
			got <- result{i, le, err, time.Now()}
		}()
		eventually(t, 30*time.Second, fmt.Sprintf("waiter %d subscribed and queued", i), func() bool {
			return l.Subscriptions() == 1 && e.queued(resource, i+1)
		})
	}
	return holder, got
}

type result struct {
	i   int
	le  *engine.Lease
	err error
	at  time.Time
}

// withAndWithoutFencing runs f as a subtest with fencing off, then on.
// cfg turns fencing on or off and sets a fallback far beyond the test, so
// that only notifications wake waiters in time.
func withAndWithoutFencing(t *testing.T, f func(t *testing.T, fencing bool, cfg func(*engine.Config))) {
	for _, fencing := range []bool{false, true} {
		t.Run(fmt.Sprintf("fencing=%v", fencing), func(t *testing.T) {
			f(t, fencing, func(c *engine.Config) {
				c.Fencing = fencing
				c.Wait.FallbackMin, c.Wait.FallbackMax = 20*time.Second, 20*time.Second
			})
		})
	}
}

// sentNow is what each Locker of ls has sent so far (see sent).
func sentNow(ls []*engine.Locker) []int64 {
	n := make([]int64, len(ls))
	for i, l := range ls {
		n[i] = sent(l)
	}
	return n
}

// releaseToFirst releases holder and returns the first waiter to acquire,
// which must be waiter 0, the lowest ticket.
func releaseToFirst(t *testing.T, holder *engine.Lease, got chan result) result {
	t.Helper()
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.i != 0 {
		t.Fatalf("waiter %d acquired first, want waiter 0, the lowest ticket", r.i)
	}
	return r
}

// onlyChosenSent fails t if a waiter other than chosen sent anything
// since before.
func onlyChosenSent(t *testing.T, ls []*engine.Locker, before []int64, chosen int, why string) {
	t.Helper()
	for i, l := range ls {
		d := sent(l) - before[i]
		t.Logf("waiter %d sent %d commands after the release", i, d)
		if i != chosen && d != 0 {
			t.Errorf("waiter %d sent %d commands: %s", i, d, why)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// releaseInOrder releases le, then each waiter's lease as it comes from
// got: waiters first+1.. must acquire in ticket order, each woken by the
// release before it.
func releaseInOrder(t *testing.T, le *engine.Lease, got chan result, first, n int) {
	t.Helper()
	for want := first + 1; want < n; want++ {
		if err := le.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.i != want || r.le.Wait().Cause != engine.WakeNotified {
			t.Fatalf("waiter %d acquired (wait %+v), want waiter %d woken by the release", r.i, r.le.Wait(), want)
		}
		le = r.le
	}
	le.Release(context.Background())
}

// A release of a resource that waiters of several Lockers (processes, in
// production) wait for wakes one of them, not all: the others stay asleep
// and send nothing. Waking them all made them race for the masters and
// split the vote. The waiters' fallback is far beyond the test, so that
// every attempt counted is a wake-up's. In virtual time: the others must
// stay quiet for a while, which on real masters only a sleep could tell.
func TestReleaseWakesOneWaiterAcrossLockers(t *testing.T) {
	withAndWithoutFencing(t, func(t *testing.T, fencing bool, cfg func(*engine.Config)) {
		simTestWith(t, 5, steadyMasters, func(t *testing.T, e *env) { releaseWakesOneWaiterAcrossLockers(t, e, cfg) })
	})
}

func releaseWakesOneWaiterAcrossLockers(t *testing.T, e *env, cfg func(*engine.Config)) {
	holderL := e.locker(cfg)
	var ls []*engine.Locker
	var ctxs []context.Context
	for range 5 {
		ls = append(ls, e.locker(cfg))
		ctxs = append(ctxs, context.Background())
	}
	holder, got := holdAndQueue(t, e, holderL, ls, "hot", ctxs)
	before := sentNow(ls)
	r := releaseToFirst(t, holder, got)
	if w := r.le.Wait(); w.Cause != engine.WakeNotified {
		t.Errorf("first waiter's wait %+v: want woken by the release", w)
	}
	// Give a crowd woken by the same release time to show itself.
	time.Sleep(300 * time.Millisecond)
	onlyChosenSent(t, ls, before, r.i, "the release did not choose it, yet woke it too")
	if len(got) != 0 {
		t.Fatal("a waiter the release did not choose acquired")
	}
	// The chain goes on: each release hands the resource to the next
	// waiter in ticket order, woken by the release.
	releaseInOrder(t, r.le, got, r.i, len(ls))
}

// The waiter whose turn it is may be gone: its process killed (its
// connections cut, its place in the masters' queues left behind) or its
// Lock cancelled. The others must still get the lock, within their fallback
// delay (plus the turn token's life) when nobody can wake them. In
// virtual time: that bound is exact.
func TestWaitersOutliveTheFirstWaiter(t *testing.T) {
	for _, how := range []string{"killed", "cancelled"} {
		t.Run(how, func(t *testing.T) {
			simTestWith(t, 5, steadyMasters, func(t *testing.T, e *env) { waitersOutliveTheFirstWaiter(t, e, how) })
		})
	}
}

func waitersOutliveTheFirstWaiter(t *testing.T, e *env, how string) {
	const fallback = 100 * time.Millisecond
	queue := "\xffredlock:queue:" + e.key("gone") // the resource's queue on each master
	cfg := func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = fallback, fallback }
	holderL := e.locker(cfg)
	// The first waiter reaches the masters through proxies, which
	// "killed" cuts.
	var links []*latencyProxy
	mortal := e.locker(func(c *engine.Config) {
		cfg(c)
		c.Masters = nil
		for _, a := range e.addrs {
			links = append(links, newLatencyProxy(e, a, 0, nil))
			c.Masters = append(c.Masters, links[len(links)-1].addr())
		}
	})
	ls := []*engine.Locker{mortal, e.locker(cfg), e.locker(cfg)}
	firstCtx, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	ctxs := []context.Context{firstCtx, context.Background(), context.Background()}
	holder, got := holdAndQueue(t, e, holderL, ls, "gone", ctxs)
	// Each waiter is queued on every master its attempts reached:
	// at least a quorum (an attempt refused by a quorum is decided
	// without the others).
	queued := 0
	for i := range e.direct {
		c := e.direct[i]
		n, err := c.Do(context.Background(), c.B().Zcard().Key(queue).Build()).AsInt64()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		queued += int(n)
	}
	if queued < 3*3 {
		t.Fatalf("%d places in the masters' queues, want each of 3 waiters on a quorum of 5", queued)
	}
	// The first waiter has the lowest ticket wherever it is queued.
	// An attempt that timed out on a loaded host still reaches its
	// master, later: the queues agree once it has.
	first, heads := "", ""
	eventually(t, 5*time.Second, "the masters' queues order the waiters alike", func() bool {
		first, heads = "", ""
		for _, c := range e.direct {
			if m, _ := c.Do(context.Background(), c.B().Zrange().Key(queue).Min("0").Max("0").Build()).AsStrSlice(); len(m) == 1 {
				heads += " " + m[0]
				if first != "" && m[0] != first {
					return false
				}
				first = m[0]
			}
		}
		return true
	})
	t.Logf("the masters' queues start with%s", heads)
	switch how {
	case "killed":
		for _, p := range links {
			p.kill()
		}
		ls[0].Close() // cannot reach the masters: its place in the queues stays
	case "cancelled":
		cancelFirst()
	}
	if r := <-got; r.i != 0 || r.err == nil {
		t.Fatalf("waiter %d returned %v first, want waiter 0's error", r.i, r.err)
	}
	if how == "cancelled" {
		eventually(t, 5*time.Second, "the cancelled waiter left the queues", func() bool {
			for _, c := range e.direct {
				if err := c.Do(context.Background(), c.B().Zscore().Key(queue).Member(first).Build()).Error(); err == nil {
					return false
				}
			}
			return true
		})
	}
	released := time.Now()
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Killed: the release gives the turn to the dead waiter, whose
	// token expires (50 ms); the others' fallback retries then find
	// the key free, or the token, which they back off from until it
	// has expired (at most a fallback). Cancelled: the waiter left
	// the queue, and the release wakes the next one at once.
	bound := fallback + 50*time.Millisecond + time.Millisecond
	if how == "cancelled" {
		bound = time.Millisecond
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.at.Sub(released); d > bound {
		t.Fatalf("waiter %d acquired %s after the release, want within %s", r.i, d, bound)
	}
	w := r.le.Wait()
	t.Logf("waiter %d acquired %s after the release: %+v", r.i, r.at.Sub(released).Round(time.Millisecond), w)
	if how == "cancelled" && (r.i != 1 || w.Cause != engine.WakeNotified) {
		t.Fatalf("waiter %d (wait %+v): want waiter 1 woken by the release, the cancelled waiter having left the queue", r.i, w)
	}
	r.le.Release(context.Background())
	last := <-got
	if last.err != nil {
		t.Fatal(last.err)
	}
	last.le.Release(context.Background())
}

// The chosen waiter can acquire before the release reaches every master:
// its attempt is refused where the release is still on its way. It must
// keep its place in those masters' queues, so that the late release gives
// the turn to it (who holds the lock already) and not to the next waiter,
// who would wake only to be refused by a quorum and split the vote with
// nobody. The holder reaches two masters through proxies that delay its
// release well past the waiter's attempt. In virtual time: the release
// reaches those masters exactly when the scenario says.
func TestLateReleaseDoesNotWakeTheNextWaiter(t *testing.T) {
	withAndWithoutFencing(t, func(t *testing.T, fencing bool, cfg func(*engine.Config)) {
		simTestWith(t, 5, steadyMasters, func(t *testing.T, e *env) { lateReleaseDoesNotWakeTheNextWaiter(t, e, cfg) })
	})
}

func lateReleaseDoesNotWakeTheNextWaiter(t *testing.T, e *env, cfg func(*engine.Config)) {
	addrs := e.addrs
	slow := []*latencyProxy{newLatencyProxy(e, addrs[3], 0, nil), newLatencyProxy(e, addrs[4], 0, nil)}
	holderL := e.locker(func(c *engine.Config) {
		cfg(c)
		c.Masters = []string{addrs[0], addrs[1], addrs[2], slow[0].addr(), slow[1].addr()}
	})
	ls := []*engine.Locker{e.locker(cfg), e.locker(cfg), e.locker(cfg)}
	ctxs := []context.Context{context.Background(), context.Background(), context.Background()}
	holder, got := holdAndQueue(t, e, holderL, ls, "late", ctxs)
	before := sentNow(ls)
	const delay = 30 * time.Millisecond // below the node timeout, so that the release succeeds
	for _, p := range slow {
		p.delay.Store(int64(delay))
	}
	r := releaseToFirst(t, holder, got)
	// The delayed releases have reached their masters, and whoever
	// they woke has had time to try.
	time.Sleep(delay + 100*time.Millisecond)
	onlyChosenSent(t, ls, before, r.i, "waiter 0 held the lock, yet the late release woke it")
	for _, p := range slow {
		p.delay.Store(0)
	}
	// The rest of the queue still follows ticket order.
	releaseInOrder(t, r.le, got, r.i, len(ls))
}
