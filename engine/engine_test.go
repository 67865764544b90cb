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

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// env is a set of real masters with a direct client to each, for set-up and
// inspection that must not go through the engine.
type env struct {
	t       *testing.T
	cluster *redistest.Cluster
	direct  []rueidis.Client
}

func newEnv(t *testing.T, n int) *env {
	t.Helper()
	c := redistest.StartT(t, n)
	e := &env{t: t, cluster: c}
	for _, a := range c.Addrs() {
		cl, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{a}, ForceSingleClient: true, DisableCache: true,
			ClientSetInfo: rueidis.DisableClientSetInfo,
		})
		if err != nil {
			t.Fatalf("direct client %s: %v", a, err)
		}
		t.Cleanup(cl.Close)
		e.direct = append(e.direct, cl)
	}
	return e
}

func (e *env) locker(mutate func(*engine.Config)) *engine.Locker {
	e.t.Helper()
	cfg := engine.DefaultConfig(e.cluster.Addrs()...)
	// The masters were just started and hold no locks: nothing to
	// quarantine them for. Restart tests set their own policy.
	cfg.Quarantine = engine.QuarantineObserved
	if mutate != nil {
		mutate(&cfg)
	}
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		e.t.Fatalf("engine.New: %v", err)
	}
	e.t.Cleanup(func() { l.Close() })
	return l
}

// proxiedLocker is a Locker (mutate as for e.locker) that reaches every
// master through a latency proxy, returned in the masters' order.
func (e *env) proxiedLocker(mutate func(*engine.Config)) (*engine.Locker, []*latencyProxy) {
	var proxies []*latencyProxy
	for _, a := range e.cluster.Addrs() {
		proxies = append(proxies, newLatencyProxy(e.t, a, 0, nil))
	}
	return e.locker(func(c *engine.Config) {
		if mutate != nil {
			mutate(c)
		}
		c.Masters = nil
		for _, p := range proxies {
			c.Masters = append(c.Masters, p.addr())
		}
	}), proxies
}

// get returns the key's value on node i, or "" when absent.
func (e *env) get(i int, key string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := e.direct[i].Do(ctx, e.direct[i].B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	if err != nil {
		e.t.Fatalf("GET %s on node %d: %v", key, i, err)
	}
	return v
}

func (e *env) set(i int, key, value string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := e.direct[i].Do(ctx, e.direct[i].B().Set().Key(key).Value(value).Build()).Error(); err != nil {
		e.t.Fatalf("SET on node %d: %v", i, err)
	}
}

func (e *env) del(i int, key string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := e.direct[i].Do(ctx, e.direct[i].B().Del().Key(key).Build()).Error(); err != nil {
		e.t.Fatalf("DEL on node %d: %v", i, err)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestQuorumEverySubsetPreoccupied(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			e := newEnv(t, n)
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
	e := newEnv(t, 5)
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
	e := newEnv(t, 5)
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
	e := newEnv(t, 5)
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
	e := newEnv(t, 3)
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
	e := newEnv(t, 5)
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
		if le.Validity() < le.ValidUntil().Sub(time.Now())-time.Millisecond {
			t.Fatal("validity inconsistent")
		}
		le.Release(context.Background())
	}
	// Early quorum return: no attempt waited for the paused node.
	if worst >= nodeTimeout/2 {
		t.Fatalf("slowest acquire %s: waited for the paused node (timeout %s)", worst, nodeTimeout)
	}
}

// A late yes is cleaned up with one connection per master (ordering) and
// with several (Lease.Late deletes it again).
func TestLateYesIsReleased(t *testing.T) {
	for _, pm := range []int{-1, 1} {
		t.Run(fmt.Sprintf("PipelineMultiplex=%d", pm), func(t *testing.T) { testLateYes(t, pm) })
	}
}

func testLateYes(t *testing.T, pipelineMultiplex int) {
	e := newEnv(t, 3)
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
	e := newEnv(t, 3)
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

func TestExtend(t *testing.T) {
	e := newEnv(t, 3)
	l := e.locker(func(c *engine.Config) { c.TTL = 300 * time.Millisecond; c.MaxTTL = 2 * time.Second })
	ctx := context.Background()

	le, err := l.TryLock(ctx, "extend")
	if err != nil {
		t.Fatal(err)
	}
	before := le.ValidUntil()
	time.Sleep(50 * time.Millisecond)
	if err := le.Extend(ctx, 2*time.Second); err != nil {
		t.Fatalf("extend by holder: %v", err)
	}
	if !le.ValidUntil().After(before.Add(time.Second)) {
		t.Fatalf("validity not moved: %s -> %s", before, le.ValidUntil())
	}
	for i := 0; i < 3; i++ {
		// Extend returns at quorum; the last node may answer a little later.
		eventually(t, 2*time.Second, fmt.Sprintf("node %d PTTL > 1s after extend", i), func() bool {
			pttl, err := e.direct[i].Do(ctx, e.direct[i].B().Pttl().Key("extend").Build()).AsInt64()
			return err == nil && pttl > 1000
		})
	}

	// Deleted keys are never re-created.
	for i := 0; i < 3; i++ {
		e.del(i, "extend")
	}
	if err := le.Extend(ctx, 2*time.Second); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("extend of deleted keys: want ErrNotHeld, got %v", err)
	}
	for i := 0; i < 3; i++ {
		if v := e.get(i, "extend"); v != "" {
			t.Fatalf("node %d: extend re-created the key (%q)", i, v)
		}
	}

	// After expiry, extend fails without touching anything.
	le2, err := l.TryLock(ctx, "extend-expired")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(350 * time.Millisecond)
	if err := le2.Extend(ctx, time.Second); !errors.Is(err, engine.ErrLeaseExpired) {
		t.Fatalf("extend after expiry: want ErrLeaseExpired, got %v", err)
	}
	for i := 0; i < 3; i++ {
		if v := e.get(i, "extend-expired"); v != "" {
			t.Fatalf("node %d: key %q exists after expiry and failed extend", i, v)
		}
	}
}

func TestWrongTypeIsAClearError(t *testing.T) {
	e := newEnv(t, 3)
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
	e := newEnv(t, 3)
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
	e := newEnv(t, 3)
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

func TestConfigValidation(t *testing.T) {
	good := func() engine.Config { return engine.DefaultConfig("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3") }
	tests := []struct {
		name   string
		mutate func(*engine.Config)
		want   string
	}{
		{"no masters", func(c *engine.Config) { c.Masters = nil }, "Config.Masters is empty"},
		{"zero ttl", func(c *engine.Config) { c.TTL = 0 }, "Config.TTL must be > 0, got 0s"},
		{"negative ttl", func(c *engine.Config) { c.TTL = -time.Second }, "Config.TTL must be > 0, got -1s"},
		{"sub-ms ttl", func(c *engine.Config) { c.TTL = 1500 * time.Microsecond }, "whole milliseconds"},
		{"ttl eaten by drift", func(c *engine.Config) { c.TTL = 2 * time.Millisecond; c.NodeTimeout = time.Microsecond }, "leaves no validity"},
		{"duplicate", func(c *engine.Config) { c.Masters = []string{"127.0.0.1:1", "127.0.0.1:1"} }, `Masters[1] "127.0.0.1:1" duplicates Masters[0]`},
		{"no port", func(c *engine.Config) { c.Masters = []string{"127.0.0.1"} }, `Masters[0] "127.0.0.1": want host:port`},
		{"bad port", func(c *engine.Config) { c.Masters = []string{"127.0.0.1:99999"} }, "port must be 1-65535"},
		{"drift negative", func(c *engine.Config) { c.DriftFactor = -0.1 }, "DriftFactor must be in [0, 1), got -0.1"},
		{"drift one", func(c *engine.Config) { c.DriftFactor = 1 }, "DriftFactor must be in [0, 1), got 1"},
		{"node timeout too long", func(c *engine.Config) { c.NodeTimeout = 6 * time.Second }, "NodeTimeout (6s) must be below half the TTL (10s)"},
		{"node timeout negative", func(c *engine.Config) { c.NodeTimeout = -1 }, "NodeTimeout must be > 0"},
		{"retry delays reversed", func(c *engine.Config) { c.RetryDelayMin = time.Second; c.RetryDelayMax = time.Millisecond }, "RetryDelayMax (1ms) is below RetryDelayMin (1s)"},
		{"pipeline multiplex", func(c *engine.Config) { c.PipelineMultiplex = 9 }, "PipelineMultiplex must be <= 8, got 9"},
		{"too many masters", func(c *engine.Config) {
			c.Masters = nil
			for i := 1; i <= 64; i++ {
				c.Masters = append(c.Masters, fmt.Sprintf("127.0.0.1:%d", i))
			}
		}, "64 masters, at most 63"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.mutate(&c)
			_, err := engine.New(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	c := good()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig does not validate: %v", err)
	}
}

func TestNoGoroutineLeakAfterClose(t *testing.T) {
	e := newEnv(t, 3)
	base := runtime.NumGoroutine()
	cfg := engine.DefaultConfig(e.cluster.Addrs()...)
	cfg.Quarantine = engine.QuarantineObserved
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				le, err := l.TryLock(context.Background(), fmt.Sprintf("leak-%d", i%5))
				if err == nil {
					le.Extend(context.Background(), time.Second)
					le.Release(context.Background())
				}
			}
		}()
	}
	wg.Wait()
	l.Close()
	if _, err := l.TryLock(context.Background(), "after-close"); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("TryLock after Close: want ErrClosed, got %v", err)
	}
	eventually(t, 5*time.Second, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= base })
}
