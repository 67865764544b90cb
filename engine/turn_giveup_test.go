package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

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
	const res = "giveup"
	e := newEnv(t, 3)
	const fallback = 5 * time.Second
	var slow []*latencyProxy
	for _, a := range e.cluster.Addrs() {
		slow = append(slow, newLatencyProxy(t, a, 0, nil))
	}
	cfg := func(c *engine.Config) {
		c.Fencing = true
		c.FallbackMin, c.FallbackMax = fallback, fallback
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
	for _, p := range slow {
		p.delay.Store(int64(300 * time.Millisecond))
	}
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A is woken at once (the release's message is not delayed); its
	// attempt reaches the masters at 300 ms, its fencing round at 600 ms.
	eventually(t, 5*time.Second, "A's attempt set the key", func() bool {
		v := e.get(0, res)
		return v != "" && v[0] != '~'
	})
	time.Sleep(100 * time.Millisecond)
	acancel()
	start := time.Now()
	for range 2 {
		r := <-got
		switch r.i {
		case 0:
			if r.err == nil {
				r.le.Release(context.Background())
				t.Skip("A acquired before it gave up")
			}
		case 1:
			if r.err != nil {
				t.Fatal(r.err)
			}
			took := time.Since(start)
			t.Logf("B acquired %s after A gave up: %+v", took.Round(time.Millisecond), r.le.Wait())
			r.le.Release(context.Background())
			if took > 2*time.Second {
				t.Errorf("B slept %s, until its fallback (%s), while the resource was free", took, fallback)
			}
		}
	}
}
