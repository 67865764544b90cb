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

// hungMasterLease is a lease on res on five masters, TTL 1 s, auto-extended
// every 800 ms with the given node timeout, after which the fifth master
// is stopped (SIGSTOP) until the test ends.
func hungMasterLease(t *testing.T, nodeTimeout time.Duration, res string) *engine.Lease {
	t.Helper()
	e := newEnv(t, 5)
	l := e.locker(func(c *engine.Config) {
		c.TTL = time.Second
		c.NodeTimeout = nodeTimeout
		c.AutoExtend = true
		c.ExtendEvery = 800 * time.Millisecond
	})
	le, err := l.TryLock(context.Background(), res)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { le.Release(context.Background()) })
	if err := e.cluster.Nodes[4].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cluster.Nodes[4].Resume() })
	return le
}

// An Extend that a quorum answers at once, with one master hung (SIGSTOP)
// and less validity left than the node timeout: waiting for the hung
// master must not make it fail, nor end an auto-extended lease as lost.
func TestHungMasterDoesNotFailAnExtendAQuorumAnswered(t *testing.T) {
	le := hungMasterLease(t, 400*time.Millisecond, "hung-extend")
	// The first auto-extension comes with 200 ms of validity left, less
	// than the node timeout.
	time.Sleep(1100 * time.Millisecond)
	if err := le.Err(); err != nil {
		t.Fatalf("auto-extension with four of five masters answering at once: %v", err)
	}
	if n := le.Extensions(); n < 1 {
		t.Fatalf("no auto-extension in 1.1 s")
	}
}

// Release racing Close: a Release that reports success has deleted the
// keys; one that did not may leave them, but must say so.
func TestReleaseRacingClose(t *testing.T) {
	const delay = 40 * time.Millisecond
	e := newEnv(t, 3)
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
		for m := range e.direct {
			if v := e.get(m, les[i].Resource()); v != "" {
				t.Errorf("Release %d returned nil but master %d keeps %q", i, m, v)
			}
		}
	}
	t.Logf("%d of %d Releases succeeded", ok, n)
}

// Many goroutines Lock one resource (gate, fencing, a slow link) while the
// Locker closes: every Lock returns, Close does not wait its full bound,
// and unless a Lock handed out a lease, no key is left.
func TestLockStormRacingClose(t *testing.T) {
	const delay = 40 * time.Millisecond
	const res = "storm-close"
	e := newEnv(t, 3)
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
}

// An auto-extension that fires while an Extend of the holder's is under
// way, with one master hung: it runs after that Extend moved the validity
// on, and must not be cut short by the validity it saw before, which
// would end a lease valid for another second as lost.
func TestAutoExtensionAfterAnExtendWithAMasterHung(t *testing.T) {
	ctx := context.Background()
	le := hungMasterLease(t, 450*time.Millisecond, "auto-after-extend")
	// The auto-extension fires at 800 ms, during this Extend, which waits
	// for the hung master until shortly before the validity (988 ms).
	time.Sleep(760 * time.Millisecond)
	if err := le.Extend(ctx, time.Second); err != nil {
		t.Fatalf("Extend with four of five masters answering at once: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := le.Err(); err != nil {
		t.Fatalf("the lease ended after an Extend that moved its validity on by a second: %v", err)
	}
}

// An Extend whose wait for a hung master is cut short by the validity,
// without a quorum: the error must tell the outage it was (the hung master
// timed out), not a context deadline the caller never set.
func TestExtendCutShortByTheValidityIsNoQuorum(t *testing.T) {
	const res = "cut-extend"
	e := newEnv(t, 5)
	l := e.locker(func(c *engine.Config) {
		c.TTL = time.Second
		c.NodeTimeout = 450 * time.Millisecond
	})
	ctx := context.Background()
	le, err := l.TryLock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(ctx)
	e.set(2, res, "someone-else")
	e.set(3, res, "someone-else")
	if err := e.cluster.Nodes[4].Pause(); err != nil {
		t.Fatal(err)
	}
	defer e.cluster.Nodes[4].Resume()
	time.Sleep(700 * time.Millisecond) // less validity left than a round
	err = le.Extend(ctx, time.Second)
	t.Logf("Extend: %v", err)
	if err == nil || !errors.Is(err, engine.ErrNoQuorum) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Extend with 2 ok, 2 refused and 1 hung master: %v; want ErrNoQuorum", err)
	}
}
