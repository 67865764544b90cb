package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// queueOf lists the waiter ids in resource's queue on master i.
func (e *env) queueOf(i int, resource string) []string {
	e.t.Helper()
	c := e.direct[i]
	m, err := c.Do(context.Background(), c.B().Zrange().Key("\xffredlock:queue:"+resource).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		e.t.Fatalf("ZRANGE on node %d: %v", i, err)
	}
	return m
}

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
func TestSplitVoteLeavesNoStaleQueueEntry(t *testing.T) {
	const res = "split"
	e := newEnv(t, 3)
	addrs := e.cluster.Addrs()
	slow := []*latencyProxy{newLatencyProxy(t, addrs[1], 0, nil), newLatencyProxy(t, addrs[2], 0, nil)}
	cfg := func(c *engine.Config) {
		c.NotifyLinger = time.Minute
		c.NodeTimeout = time.Second
		c.FallbackMin, c.FallbackMax = 20*time.Second, 20*time.Second
	}
	lA := e.locker(func(c *engine.Config) {
		cfg(c)
		c.Masters = []string{addrs[0], slow[0].addr(), slow[1].addr()}
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
			if e.get(i, res) != "" || len(e.queueOf(i, res)) != 0 {
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
	eventually(t, 5*time.Second, "A's attempt set the key on master 0", func() bool { return e.get(0, res) != "" })
	bctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := lB.Lock(bctx, res)
	if err != nil {
		for i := range e.direct {
			t.Logf("master %d: key %q queue %v", i, e.get(i, res), e.queueOf(i, res))
		}
		t.Fatal(err)
	}
	bID := waiterID(b)
	if bID == "" {
		t.Fatalf("B's lease %q was not queued: its subscription did not linger", b.Value())
	}
	// A's attempt is refused by B on masters 1 and 2, and undone on 0.
	eventually(t, 5*time.Second, "A's attempt undone on master 0", func() bool { return e.get(0, res) == "" })
	time.Sleep(50 * time.Millisecond) // the leave went before the undo
	for _, p := range slow {
		p.delay.Store(0)
	}
	if err := b.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := <-aGot
	if r.err != nil {
		t.Fatal(r.err)
	}
	for i := range e.direct {
		t.Logf("master %d: queue %v while A holds", i, e.queueOf(i, res))
	}
	stale := []int{}
	for i := range e.direct {
		for _, id := range e.queueOf(i, res) {
			if id == bID {
				stale = append(stale, i)
			}
		}
	}
	if err := r.le.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range e.direct {
		if v := e.get(i, res); v != "" {
			t.Errorf("master %d: key %q after the last release with nobody waiting", i, v)
		}
	}
	if len(stale) > 0 {
		t.Errorf("B, which acquired and released, is still queued on masters %v: a later release there gives B the turn", stale)
	}
}
