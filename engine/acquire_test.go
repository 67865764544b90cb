package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

func TestQuorumEverySubsetPreoccupied(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			e := ownEnv(t, n)
			l := e.locker(nil)
			quorum := n/2 + 1
			for mask := 0; mask < 1<<n; mask++ {
				res := fmt.Sprintf("subset-%d-%d", n, mask)
				busy := 0
				for i := 0; i < n; i++ {
					if mask&(1<<i) != 0 {
						e.set(i, res, "other-owner")
						busy++
					}
				}
				le, err := l.TryLock(context.Background(), res)
				want := n-busy >= quorum
				if got := err == nil; got != want {
					t.Fatalf("mask %0*b (%d busy): granted=%v, want %v (err %v)", n, mask, busy, got, want, err)
				}
				if err != nil {
					if !errors.Is(err, engine.ErrNotAcquired) {
						t.Fatalf("mask %0*b: want ErrNotAcquired, got %v", n, mask, err)
					}
					var ve *engine.VotesError
					if !errors.As(err, &ve) || ve.Refused+ve.Pending < busy-(n-quorum) {
						t.Fatalf("mask %0*b: votes not carried: %v", n, mask, err)
					}
				} else if le.Validity() <= 0 || le.Resource() != res {
					t.Fatalf("mask %0*b: bad lease validity %s resource %q", n, mask, le.Validity(), le.Resource())
				}
				// Occupied nodes keep the other owner's value; free nodes end
				// up with ours only when granted, and empty after the undo.
				for i := 0; i < n; i++ {
					if mask&(1<<i) != 0 {
						if v := e.get(i, res); v != "other-owner" {
							t.Fatalf("mask %0*b: node %d value %q, want other-owner", n, mask, i, v)
						}
						continue
					}
					if err == nil {
						// Early quorum return: the last free node may answer later.
						eventually(t, 2*time.Second, fmt.Sprintf("our value on node %d", i), func() bool { return e.get(i, res) == le.Value() })
					} else {
						eventually(t, 2*time.Second, fmt.Sprintf("undo on node %d", i), func() bool { return e.get(i, res) == "" })
					}
				}
				if le != nil {
					if err := le.Release(context.Background()); err != nil {
						t.Fatalf("mask %0*b: release: %v", n, mask, err)
					}
				}
			}
		})
	}
}

func TestMutualExclusionUnderConcurrency(t *testing.T) {
	e := ownEnv(t, 5)
	const lockers, perLocker, rounds = 3, 4, 25
	var (
		counter atomic.Int64 // read and written in two steps: only the lock prevents lost updates
		inside  atomic.Int32
		overlap atomic.Int32
		wg      sync.WaitGroup
	)
	ls := make([]*engine.Locker, lockers)
	for i := range ls {
		ls[i] = e.locker(func(c *engine.Config) { c.RetryDelayMin, c.RetryDelayMax = time.Millisecond, 5*time.Millisecond })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make(chan error, lockers*perLocker)
	for _, l := range ls {
		for g := 0; g < perLocker; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					le, err := l.Lock(ctx, "shared-counter")
					if err != nil {
						errs <- err
						return
					}
					if inside.Add(1) != 1 {
						overlap.Add(1)
					}
					v := counter.Load()
					runtime.Gosched()
					counter.Store(v + 1)
					inside.Add(-1)
					if err := le.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("lock/release: %v", err)
	}
	if got, want := counter.Load(), int64(lockers*perLocker*rounds); got != want {
		t.Fatalf("counter = %d, want %d: lost updates", got, want)
	}
	if o := overlap.Load(); o != 0 {
		t.Fatalf("%d overlapping holders", o)
	}
}

func TestMinorityDownStillGrants(t *testing.T) {
	e := ownEnv(t, 5)
	e.cluster.Nodes[0].Kill()
	e.cluster.Nodes[3].Kill()
	// Connecting with a minority down works, and so does locking.
	l := e.locker(nil)
	for i := 0; i < 20; i++ {
		le, err := l.TryLock(context.Background(), fmt.Sprintf("minority-%d", i))
		if err != nil {
			t.Fatalf("TryLock with 2 of 5 down: %v", err)
		}
		if err := le.Release(context.Background()); err != nil {
			t.Fatalf("Release with 2 of 5 down: %v", err)
		}
	}
}

func TestMajorityDownFailsFast(t *testing.T) {
	e := ownEnv(t, 5)
	const nodeTimeout = 100 * time.Millisecond
	l := e.locker(func(c *engine.Config) { c.NodeTimeout = nodeTimeout })
	// Two killed (errors at once) and one paused (only the timeout tells).
	e.cluster.Nodes[1].Kill()
	e.cluster.Nodes[2].Kill()
	if err := e.cluster.Nodes[4].Pause(); err != nil {
		t.Fatal(err)
	}
	defer e.cluster.Nodes[4].Resume()
	for i := 0; i < 5; i++ {
		start := time.Now()
		_, err := l.TryLock(context.Background(), fmt.Sprintf("majority-down-%d", i))
		took := time.Since(start)
		if !errors.Is(err, engine.ErrNoQuorum) {
			t.Fatalf("want ErrNoQuorum, got %v", err)
		}
		if errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("an outage must not look like contention: %v", err)
		}
		var ne *engine.NodeError
		if !errors.As(err, &ne) || !strings.Contains(err.Error(), e.cluster.Nodes[1].Addr()) {
			t.Fatalf("error should name the failed nodes: %v", err)
		}
		// Bounded by the node timeout, not the 10s TTL. The bound is loose
		// on purpose: this checks "does not wait for the TTL", not speed.
		if took > 4*nodeTimeout {
			t.Fatalf("TryLock took %s with node timeout %s", took, nodeTimeout)
		}
	}
}

func TestConnectFailsWhenMajorityUnreachable(t *testing.T) {
	e := ownEnv(t, 3)
	e.cluster.Nodes[0].Kill()
	e.cluster.Nodes[2].Kill()
	cfg := engine.DefaultConfig(e.cluster.Addrs()...)
	cfg.DialTimeout = time.Second
	start := time.Now()
	_, err := engine.New(context.Background(), cfg)
	if err == nil {
		t.Fatal("New succeeded with 2 of 3 masters down")
	}
	for _, i := range []int{0, 2} {
		if !strings.Contains(err.Error(), e.cluster.Nodes[i].Addr()) {
			t.Fatalf("error does not name %s: %v", e.cluster.Nodes[i].Addr(), err)
		}
	}
	if strings.Contains(err.Error(), e.cluster.Nodes[1].Addr()) {
		t.Fatalf("error names the reachable node: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("New took %s to fail", time.Since(start))
	}
}

func TestPausedNodeDoesNotDelayAcquire(t *testing.T) {
	e := ownEnv(t, 5)
	const nodeTimeout = 2 * time.Second
	l := e.locker(func(c *engine.Config) { c.NodeTimeout = nodeTimeout })
	if err := e.cluster.Nodes[2].Pause(); err != nil {
		t.Fatal(err)
	}
	defer e.cluster.Nodes[2].Resume()
	var worst time.Duration
	for i := 0; i < 10; i++ {
		start := time.Now()
		le, err := l.TryLock(context.Background(), fmt.Sprintf("paused-%d", i))
		worst = max(worst, time.Since(start))
		if err != nil {
			t.Fatalf("TryLock with one node paused: %v", err)
		}
		if le.Validity() < time.Until(le.ValidUntil())-time.Millisecond {
			t.Fatal("validity inconsistent")
		}
		le.Release(context.Background())
	}
	// Early quorum return: no attempt waited for the paused node.
	if worst >= nodeTimeout/2 {
		t.Fatalf("slowest acquire %s: waited for the paused node (timeout %s)", worst, nodeTimeout)
	}
}

func TestWrongTypeIsAClearError(t *testing.T) {
	e := ownEnv(t, 3)
	l := e.locker(nil)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := e.direct[i].Do(ctx, e.direct[i].B().Lpush().Key("a-list").Element("x").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.TryLock(ctx, "a-list")
	if !errors.Is(err, engine.ErrWrongType) {
		t.Fatalf("want ErrWrongType, got %v", err)
	}
	if !strings.Contains(err.Error(), "wrong type") {
		t.Fatalf("message should say wrong type: %v", err)
	}
	// Lock gives up at once instead of retrying a key that can never be a lock.
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := l.Lock(lctx, "a-list"); !errors.Is(err, engine.ErrWrongType) || lctx.Err() != nil {
		t.Fatalf("Lock on a wrong-type key: %v (ctx %v)", err, lctx.Err())
	}
}

func TestOddResourceNames(t *testing.T) {
	e := ownEnv(t, 3)
	l := e.locker(nil)
	ctx := context.Background()
	if _, err := l.TryLock(ctx, ""); !errors.Is(err, engine.ErrEmptyResource) {
		t.Fatalf("empty name: want ErrEmptyResource, got %v", err)
	}
	for _, name := range []string{"\x00\xff\r\n binary", strings.Repeat("k", 64<<10)} {
		le, err := l.TryLock(ctx, name)
		if err != nil {
			t.Fatalf("name of %d bytes: %v", len(name), err)
		}
		if _, err := l.TryLock(ctx, name); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("second TryLock of %d-byte name: want ErrNotAcquired, got %v", len(name), err)
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestContextErrorsAreWrapped(t *testing.T) {
	e := ownEnv(t, 3)
	l := e.locker(nil)
	holder, err := l.TryLock(context.Background(), "ctx")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = l.Lock(ctx, "ctx")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want context.DeadlineExceeded wrapped, got %v", err)
	}
	if !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("the last attempt's cause should be kept: %v", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if _, err := l.TryLock(cctx, "ctx2"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: want context.Canceled, got %v", err)
	}
}
