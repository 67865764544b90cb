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
	"github.com/redlock-bench/redlock/internal/simredis"
)

func TestQuorumEverySubsetPreoccupied(t *testing.T) {
	t.Parallel()
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, n)
			l := e.locker(everyVoteAnswered)
			quorum := n/2 + 1
			for mask := 0; mask < 1<<n; mask++ {
				res := fmt.Sprintf("subset-%d-%d", n, mask)
				busy := 0
				for i := 0; i < n; i++ {
					if mask&(1<<i) != 0 {
						e.set(i, e.key(res), "other-owner")
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
						if v := e.get(i, e.key(res)); v != "other-owner" {
							t.Fatalf("mask %0*b: node %d value %q, want other-owner", n, mask, i, v)
						}
						continue
					}
					// Early quorum return: the last free node may answer
					// later, and an undo is sent without waiting.
					if err == nil {
						eventually(t, 30*time.Second, fmt.Sprintf("our value on node %d", i), func() bool { return e.get(i, e.key(res)) == le.Value() })
					} else {
						eventually(t, 30*time.Second, fmt.Sprintf("undo on node %d", i), func() bool { return e.get(i, e.key(res)) == "" })
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
	t.Parallel()
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
		ls[i] = e.locker(func(c *engine.Config) {
			everyVoteAnswered(c) // a release that timed out would fail the test
			c.Wait.RetryDelayMin, c.Wait.RetryDelayMax = time.Millisecond, 5*time.Millisecond
		})
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
	t.Parallel()
	e := ownEnv(t, 5)
	e.kill(0)
	e.kill(3)
	// Connecting with a minority down works, and so does locking.
	l := e.locker(everyVoteAnswered)
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

// With a majority down, TryLock fails as soon as the node timeout shows
// the last silent master silent: within one round's span (the node
// timeout, and the watchdog's period that notices it), in virtual time,
// and not after the 10 s TTL.
func TestMajorityDownFailsFast(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		const nodeTimeout = 100 * time.Millisecond
		l := e.locker(func(c *engine.Config) { c.NodeTimeout = nodeTimeout })
		// Two killed (errors at once) and one paused (only the timeout tells).
		e.kill(1)
		e.kill(2)
		e.pause(4)
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
			if !errors.As(err, &ne) || !strings.Contains(err.Error(), e.addrs[1]) {
				t.Fatalf("error should name the failed nodes: %v", err)
			}
			// Two masters said yes: the paused one's vote could still
			// make a quorum, so the attempt waits for its node timeout,
			// and no longer.
			if took < nodeTimeout || took > l.RoundSpan() {
				t.Fatalf("TryLock took %s, want within [%s, %s]: the node timeout, noticed within a watchdog period", took, nodeTimeout, l.RoundSpan())
			}
		}
	})
}

// New fails when a majority refuses connections, naming each of them and
// only them, and at once: a refused dial is an answer, not a wait for
// the dial timeout (virtual time).
func TestConnectFailsWhenMajorityUnreachable(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		e.kill(0)
		e.kill(2)
		cfg := e.config()
		cfg.Conn.DialTimeout = time.Second
		start := time.Now()
		_, err := engine.New(context.Background(), cfg)
		if err == nil {
			t.Fatal("New succeeded with 2 of 3 masters down")
		}
		for _, i := range []int{0, 2} {
			if !strings.Contains(err.Error(), e.addrs[i]) {
				t.Fatalf("error does not name %s: %v", e.addrs[i], err)
			}
		}
		if strings.Contains(err.Error(), e.addrs[1]) {
			t.Fatalf("error names the reachable node: %v", err)
		}
		if took := time.Since(start); took >= cfg.Conn.DialTimeout {
			t.Fatalf("New took %s to fail, the dial timeout (%s) or more", took, cfg.Conn.DialTimeout)
		}
	})
}

// One paused master of five does not slow an acquire: the quorum's
// answers decide it, one round trip after it began (virtual time, each
// way oneWay), however long the node timeout.
func TestPausedNodeDoesNotDelayAcquire(t *testing.T) {
	const oneWay = 100 * time.Microsecond
	simTestWith(t, 5, simredis.MasterOptions{Uptime: time.Hour, Latency: simredis.Latency{Min: oneWay}}, func(t *testing.T, e *env) {
		const nodeTimeout = 2 * time.Second
		l := e.locker(func(c *engine.Config) { c.NodeTimeout = nodeTimeout })
		e.pause(2)
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
		if worst >= nodeTimeout/2 || worst > 2*oneWay {
			t.Fatalf("slowest acquire %s: waited for more than the quorum's round trip (%s; node timeout %s)", worst, 2*oneWay, nodeTimeout)
		}
	})
}

func TestWrongTypeIsAClearError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(everyVoteAnswered)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := e.direct[i].Do(ctx, e.direct[i].B().Lpush().Key(e.key("a-list")).Element("x").Build()).Error(); err != nil {
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
	// Lock gives up at once instead of retrying a key that can never be a
	// lock: its error is not the context's, which only a Lock that kept
	// trying for 30 s would meet.
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := l.Lock(lctx, "a-list"); !errors.Is(err, engine.ErrWrongType) || lctx.Err() != nil {
		t.Fatalf("Lock on a wrong-type key: %v (ctx %v)", err, lctx.Err())
	}
}

func TestOddResourceNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(everyVoteAnswered)
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

// A Lock whose context ends wraps the context's error and keeps the last
// attempt's cause: its deadline falls after an attempt was refused
// (virtual time: the attempts take microseconds, the deadline 50 ms).
func TestContextErrorsAreWrapped(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
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
	})
}
