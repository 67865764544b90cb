package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// A Release that hands its lease on at the gate while its Locker closes:
// the goroutine it hands to leaves the gate (ErrClosed) while the hand-off
// raises the fencing counters, a round on a slow link. Release must not
// report the lock released while its keys stay on the masters for the TTL,
// leaving the waiters of other processes to their fallback.
func TestHandOffRacingCloseLeavesNoKey(t *testing.T) {
	const res = "handoff-close"
	const delay = 150 * time.Millisecond
	e := newEnv(t, 3)
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
	var left []string
	for i := range e.direct {
		if v := e.get(i, res); v != "" {
			left = append(left, fmt.Sprintf("master %d: %q", i, v))
		}
	}
	if len(left) > 0 {
		t.Errorf("Release returned nil and nobody holds the lease, but the key stays for its TTL: %v", left)
	}
}

// A TryLock on a slow link when its Locker closes: it must not hand out a
// lease whose keys nobody can delete (Release after Close deletes
// nothing), leaving them for the TTL.
func TestTryLockRacingCloseLeavesNoKey(t *testing.T) {
	const res = "trylock-close"
	const delay = 150 * time.Millisecond
	e := newEnv(t, 3)
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
