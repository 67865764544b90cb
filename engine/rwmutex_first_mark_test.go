package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// evalshas is how many scripts each simulated master has run.
func (e *env) evalshas() []int {
	n := make([]int, len(e.sim))
	for i, m := range e.sim {
		n[i] = m.Commands()["EVALSHA"]
	}
	return n
}

// A reader of a lock its Locker's readers waited for lately (their
// subscription lingers) finds a writer in the way with one attempt on
// each master, the marked one it then sleeps on, not an unmarked one
// first; and the writer's release wakes it, long before its fallback.
// A reader of a lock not waited for lately makes the unmarked attempt
// first, as before: two. In virtual time, where a second is far beyond
// every round trip (simredis's latency is at most 20 ms a way) and the
// fallback takes a minute.
func TestRWReaderOfAWaitedLockMarksAtFirstAttempt(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		ctx := context.Background()
		slow := func(c *engine.Config) {
			c.Wait.FallbackMin, c.Wait.FallbackMax = time.Minute, time.Minute
			c.Wait.NotifyLinger = time.Hour
		}
		mr := rwMutex(t, rwLocker(e, slow), "first-mark")
		mw := rwMutex(t, rwLocker(e, slow), "first-mark")
		for round, want := range []int{2, 1} {
			w, err := mw.TryLock(ctx)
			if err != nil {
				t.Fatalf("round %d: writer: %v", round, err)
			}
			// The writer's attempt and fence round reach the last master.
			time.Sleep(time.Second)
			before := e.evalshas()
			got := make(chan *engine.Lease, 1)
			go func() {
				le, err := mr.RLock(ctx)
				if err != nil {
					t.Errorf("round %d: reader: %v", round, err)
				}
				got <- le
			}()
			time.Sleep(time.Second) // the reader's attempts are done: it sleeps
			after := e.evalshas()
			for i := range after {
				if n := after[i] - before[i]; n != want {
					t.Errorf("round %d: master %d ran %d scripts for the waiting reader, want %d", round, i, n, want)
				}
			}
			if n := e.count(e.rwMark("first-mark")); n != len(e.sim) {
				t.Errorf("round %d: the reader's mark is on %d of %d masters", round, n, len(e.sim))
			}
			released := time.Now()
			release(t, w)
			le := <-got
			if le == nil {
				t.FailNow()
			}
			if d := time.Since(released); d > time.Second {
				t.Errorf("round %d: the reader acquired %s after the writer's release, not woken by it", round, d)
			}
			if a := le.Wait().Attempts; a != want+1 {
				t.Errorf("round %d: the reader made %d attempts, want %d", round, a, want+1)
			}
			release(t, le)
		}
	})
}

// waitBehindWriter has a reader of mr wait once behind a writer of mw,
// then both let go: mr's Locker has waited for the lock lately, and its
// subscription to the lock's releases lingers. In virtual time, where a
// second is far beyond every round trip.
func waitBehindWriter(t *testing.T, mr, mw *engine.RWMutex) {
	t.Helper()
	ctx := context.Background()
	w, err := mw.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the writer's attempt and fence reach every master
	got := make(chan *engine.Lease, 1)
	go func() {
		le, err := mr.RLock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- le
	}()
	time.Sleep(time.Second) // the reader subscribed, marked, and sleeps
	release(t, w)
	le := <-got
	if le == nil {
		t.FailNow()
	}
	release(t, le)
}
