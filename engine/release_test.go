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

// A late yes is cleaned up with one connection per master (ordering) and
// with several (Lease.Late deletes it again).
func TestLateYesIsReleased(t *testing.T) {
	for _, pm := range []int{-1, 1} {
		t.Run(fmt.Sprintf("PipelineMultiplex=%d", pm), func(t *testing.T) { testLateYes(t, pm) })
	}
}

func testLateYes(t *testing.T, pipelineMultiplex int) {
	e := ownEnv(t, 3)
	l := e.locker(func(c *engine.Config) {
		c.NodeTimeout = 200 * time.Millisecond
		c.PipelineMultiplex = pipelineMultiplex
	})
	const res = "late-yes"
	e.set(0, res, "other-owner")
	if err := e.cluster.Nodes[1].Pause(); err != nil {
		t.Fatal(err)
	}
	// Node 0 refuses, node 2 says yes, node 1 is paused: no quorum, and
	// node 1's SET is queued in its socket to run when it resumes.
	_, err := l.TryLock(context.Background(), res)
	if !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("want ErrNotAcquired, got %v", err)
	}
	var ve *engine.VotesError
	if !errors.As(err, &ve) || ve.Votes[1].Outcome.String() != "timeout" {
		t.Fatalf("node 1 should have timed out: %v", err)
	}
	if err := e.cluster.Nodes[1].Resume(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "late SET on node 1 released", func() bool { return e.get(1, res) == "" })
	eventually(t, 3*time.Second, "node 2 released", func() bool { return e.get(2, res) == "" })
	// Stays gone: not re-created by anything still queued.
	time.Sleep(100 * time.Millisecond)
	if v := e.get(1, res); v != "" {
		t.Fatalf("node 1 holds %q after the late yes", v)
	}
	if v := e.get(0, res); v != "other-owner" {
		t.Fatalf("node 0 value %q, the other owner's lock was touched", v)
	}
}

func TestReleaseOfExpiredOrForeignLockChangesNothing(t *testing.T) {
	e := ownEnv(t, 3)
	l := e.locker(func(c *engine.Config) { c.TTL = 200 * time.Millisecond })
	other := e.locker(nil)

	le, err := l.TryLock(context.Background(), "expired")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past the TTL: the keys are gone
	le2, err := other.TryLock(context.Background(), "expired")
	if err != nil {
		t.Fatalf("second owner after expiry: %v", err)
	}
	err = le.Release(context.Background())
	if !errors.Is(err, engine.ErrLeaseExpired) {
		t.Fatalf("release of expired lease: want ErrLeaseExpired, got %v", err)
	}
	for i := 0; i < 3; i++ {
		if v := e.get(i, "expired"); v != le2.Value() {
			t.Fatalf("node %d: the new owner's key was touched: %q", i, v)
		}
	}

	// Someone else's lock: the keys were overwritten while the lease was
	// still valid by its own clock.
	le3, err := other.TryLock(context.Background(), "foreign")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		e.set(i, "foreign", "intruder")
	}
	if err := le3.Release(context.Background()); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("release of a foreign lock: want ErrNotHeld, got %v", err)
	}
	for i := 0; i < 3; i++ {
		if v := e.get(i, "foreign"); v != "intruder" {
			t.Fatalf("node %d: foreign key changed to %q", i, v)
		}
	}
	if err := le2.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := le2.Release(context.Background()); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("double release: want ErrNotHeld, got %v", err)
	}
}

// After Release returns, the same process can take the resource again at
// once: the deletes it sent have all landed, so none is overtaken by the
// new SET. Many goroutines make the masters' queues deep.
func TestReacquireRightAfterRelease(t *testing.T) {
	e := ownEnv(t, 5)
	// Not a test of node timeouts, which a loaded machine runs out of.
	l := e.locker(func(c *engine.Config) { c.NodeTimeout = time.Second })
	ctx := context.Background()
	var wg sync.WaitGroup
	var once sync.Once
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("reacquire:%d", g)
			prev := ""
			for i := 0; i < 200; i++ {
				le, err := l.TryLock(ctx, name)
				if err != nil {
					once.Do(func() {
						vals := []string{}
						for n := 0; n < 5; n++ {
							vals = append(vals, e.get(n, name))
						}
						t.Errorf("iter %d: %v\nprev=%s\nvalues now=%q", i, err, prev, vals)
					})
					return
				}
				prev = le.Value()
				if err := le.Release(ctx); err != nil {
					t.Errorf("release: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// Liveness: a failed attempt's undo whose connection breaks with the
// delete on it is sent again. Sent once, the key would refuse everyone on
// that master for the rest of its TTL.
func TestUndoLostWithItsConnectionIsResent(t *testing.T) {
	e := ownEnv(t, 3)
	const res = "undo-lost"
	addrs := e.cluster.Addrs()
	e.set(1, res, "someone")
	e.set(2, res, "someone")
	dp := newDropProxy(e, addrs[0])
	cfg := engine.DefaultConfig(dp.addr(), addrs[1], addrs[2])
	cfg.Quarantine = engine.QuarantineObserved
	cfg.TTL = 10 * time.Second
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The plain acquire is SET NX GET; the first script on this
	// connection afterwards is the undo.
	needle := []byte("EVALSHA")
	dp.needle.Store(&needle)
	if _, err := l.TryLock(context.Background(), res); err == nil {
		t.Fatal("set-up: acquired a resource held on two of three masters")
	}
	eventually(t, 2*time.Second, "the undo was cut off", dp.dropped.Load)
	eventually(t, 2*time.Second, "the failed attempt's key on m0 is deleted", func() bool { return e.get(0, res) == "" })
}

// Liveness: a lease whose acquire's connection to one master broke with
// the SET on its way, released after acquiring on the others, deletes on
// that master again later: the SET may run after the first delete and
// would leave the key there for a full TTL.
func TestReleaseAfterABrokenAcquireConnection(t *testing.T) {
	e := ownEnv(t, 3)
	const res = "broken-release"
	px := newStallProxy(e, e.cluster.Nodes[0].Addr())
	cfg := engine.DefaultConfig(px.addr(), e.cluster.Nodes[1].Addr(), e.cluster.Nodes[2].Addr())
	cfg.Quarantine = engine.QuarantineObserved
	cfg.ConnTimeout = time.Second
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	px.stall.Store(true)
	le, err := l.TryLock(context.Background(), res)
	if err != nil {
		t.Fatalf("set-up: TryLock with two of three masters: %v", err)
	}
	// The SET to m0 sits in the proxy (TryLock returned on m1 and m2: on
	// a loaded machine the SET may not have reached it yet); its
	// connection breaks, so the lease counts m0 as unsure.
	eventually(t, 5*time.Second, "set-up: the SET to m0 held in the proxy", px.holding)
	px.stall.Store(false)
	px.breakStalled()
	eventually(t, 5*time.Second, "the lease heard of the broken connection", func() bool { return l.Nodes()[0].Failed > 0 })
	if err := le.Release(context.Background()); err != nil {
		t.Logf("Release: %v", err)
	}
	eventually(t, 5*time.Second, "set-up: the release reached m0 on a new connection", func() bool { return px.newConns.Load() > 0 })
	px.flushStalled() // the SET reaches m0 after the delete did
	deadline := time.Now().Add(2 * time.Second)
	for v := e.get(0, res); v != ""; v = e.get(0, res) {
		if time.Now().After(deadline) {
			t.Fatalf("m0 keeps %q (the released lease's value is %q) 2 s after its late SET", v, le.Value())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
