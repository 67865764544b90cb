package engines

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/redlock-bench/redlock/internal/redistest"
)

// rueidislock cannot vote over independent masters: its one client, given
// several addresses, wants a Redis Cluster, and independent masters are
// none. This is why it runs on one master (rueidislock.go); if a rueidis
// release starts on them, the shape must be revisited.
func TestRueidislockNeedsOneMasterOrACluster(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 2)
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs()})
	if err == nil {
		cl.Close()
		t.Fatal("rueidis started one client on two independent masters: rueidislock may now span them; revisit its shape")
	}
	if !strings.Contains(strings.ToLower(err.Error()), "cluster") {
		t.Errorf("want rueidis to refuse for want of a cluster, got %v", err)
	}
	if _, err := openT(context.Background(), Rueidislock.String(), c.Addrs(), testSpec()); err == nil {
		t.Error("newRueidislock accepted two masters")
	}
}

// A lease stays valid while its lock's context lives, its key is under
// the run's prefix, releasing it frees the resource, and a second TryLock
// of a held resource is contention.
func TestRueidislockLease(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	ctx := context.Background()
	cfg := testSpec()
	cfg.TTL = 2 * time.Second
	cfg.KeyPrefix = "rl:"
	e, err := openT(ctx, Rueidislock.String(), c.Addrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := e.TryLock(ctx, "rl:lease")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.(SelfExtending); !ok {
		t.Error("a rueidislock lease is not live: the worker would read its validity once")
	}
	until := l.ValidUntil()
	if !strings.Contains(until.String(), "m=") {
		t.Errorf("ValidUntil %v carries no monotonic reading", until)
	}
	if d := time.Until(until); d < cfg.TTL*9/10 || d > cfg.TTL {
		t.Errorf("valid for %s of a %s TTL while held", d, cfg.TTL)
	}
	if n, _ := redistest.Do(c.Addrs()[0], 10*time.Second, "EVAL", "return #redis.call('KEYS', ARGV[1])", "0", "rl:*"); n != ":1" {
		t.Errorf("%s keys under the run's prefix, want rueidislock's one", n)
	}
	if _, err := e.TryLock(ctx, "rl:lease"); Classify(err) != Contended {
		t.Errorf("second TryLock of a held resource: %v, classified %d", err, Classify(err))
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("release: %v", err)
	}
	if v := l.ValidUntil(); v.After(time.Now()) {
		t.Errorf("released, yet valid until %v", v)
	}
	l2, err := e.TryLock(ctx, "rl:lease")
	if err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	l2.Release(ctx)
}

// A lease whose key is deleted under it is lost: rueidislock cancels its
// context on the invalidation, the validity ends then, and the release
// says lost, not failed.
func TestRueidislockLostLease(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	ctx := context.Background()
	cfg := testSpec()
	cfg.KeyPrefix = "rl:"
	e, err := openT(ctx, Rueidislock.String(), c.Addrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := e.TryLock(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	// Taken before the DEL is sent: its invalidation may reach the lease
	// before the DEL's own reply reaches this goroutine.
	deleted := time.Now()
	if _, err := redistest.Do(c.Addrs()[0], 10*time.Second, "DEL", "rl:0:gone"); err != nil {
		t.Fatal(err)
	}
	// The invalidation's arrival is the event; the minute, a hang guard:
	// the lease extends itself, so without it the loop would not end.
	deadline := time.Now().Add(time.Minute)
	for l.ValidUntil().After(time.Now()) {
		if time.Now().After(deadline) {
			t.Fatal("the key was deleted a minute ago and the lease is still valid")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v := l.ValidUntil(); v.Before(deleted) {
		t.Errorf("validity ended at %v, before the key's deletion was sent at %v", v, deleted)
	}
	if err := l.Release(ctx); err == nil || !Lost(err) {
		t.Errorf("release of a lost lease: %v, lost %v", err, Lost(err))
	}
}

// The classification of rueidislock's errors, as rueidislock builds them.
func TestRueidislockErrorClassification(t *testing.T) {
	e := &rueidislockEngine{tryNextAfter: rueidislockTryNextAfter}
	live := context.Background()
	for _, c := range []struct {
		name string
		err  error
		want Outcome
	}{
		{"held by another", fmt.Errorf("%w: key rl:0:x is held by others", rueidislock.ErrNotLocked), Contended},
		{"no majority of keys", fmt.Errorf("%w: failed to acquire the majority of keys (0/1)", rueidislock.ErrNotLocked), Contended},
		{"per-key timeout", context.DeadlineExceeded, NoQuorum},
		{"master gone", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), NoQuorum},
		{"closed", rueidislock.ErrLockerClosed, Failed},
	} {
		err := e.acquireError(live, c.err)
		if got := Classify(err); got != c.want {
			t.Errorf("%s: classified %d, want %d (%v)", c.name, got, c.want, err)
		}
		if !strings.HasPrefix(err.Error(), Rueidislock.String()+": ") || !errors.Is(err, c.err) {
			t.Errorf("%s: %q does not wrap rueidislock's error", c.name, err)
		}
	}
	// Its own per-key deadline is named: a bare "context deadline exceeded"
	// reads as the run's.
	if err := e.acquireError(live, context.DeadlineExceeded); !strings.Contains(err.Error(), e.tryNextAfter.String()+" (TryNextAfter)") {
		t.Errorf("per-key timeout: %q does not name TryNextAfter", err)
	}
	// A wait that ran out is a timeout, whatever rueidislock said.
	ctx, cancel := context.WithTimeout(live, time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	err := e.acquireError(ctx, context.Canceled)
	if Classify(err) != TimedOut || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ctx deadline: %v classified %d", err, Classify(err))
	}
}

// A key attempt that times out (TryNextAfter) while its SET is still on
// its way is cleaned up by rueidislock: the SET lands, holds the key for
// nobody, and the clean-up deletes it. A waiter of that key which tried in
// between learns of the DEL only by the invalidation its own client gets.
// With NoLoopTracking, which rueidislock's README suggests, the client
// hears none of its own writes, so the waiter sleeps until its context
// ends: the configuration the bench runs (rueidislockOption) keeps it off,
// and the control with it on must show the lost wake-up.
func TestRueidislockWaitersWakeAfterATimedOutAttempt(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	cfg := testSpec()
	cfg.TTL = 5 * time.Second
	for _, noLoop := range []bool{false, true} {
		opt := rueidislockOption(c.Addrs(), false, cfg)
		opt.NoLoopTracking = noLoop
		// Longer key attempts than the bench's default leave room for the
		// order below on a loaded machine; the stall outlasts them.
		opt.TryNextAfter = 200 * time.Millisecond
		l, err := rueidislock.NewLocker(opt)
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("stalled-%v", noLoop)
		// Load the scripts: an EVALSHA refused NOSCRIPT is sent again as
		// EVAL only if its context still lives, and a SET that is never
		// sent cannot land late.
		_, unlock, err := l.TryWithContext(context.Background(), "warm")
		if err != nil {
			t.Fatal(err)
		}
		unlock()
		// Stop the master: the attempts below queue in its socket, in
		// order, and time out (TryNextAfter) before it resumes.
		if err := c.Nodes[0].Pause(); err != nil {
			t.Fatal(err)
		}
		resume := time.AfterFunc(time.Second, func() { c.Nodes[0].Resume() })
		ghost := make(chan error, 1)
		go func() {
			_, cancel, err := l.TryWithContext(context.Background(), key)
			if err == nil {
				cancel()
			}
			ghost <- err
		}()
		time.Sleep(50 * time.Millisecond) // the ghost's SET first, its clean-up after ours
		wctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		start := time.Now()
		_, unlock, err = l.WithContext(wctx, key)
		waited := time.Since(start)
		cancel()
		if err == nil {
			unlock()
		}
		if gerr := <-ghost; !errors.Is(gerr, context.DeadlineExceeded) {
			t.Errorf("NoLoopTracking %v: the first attempt was to time out behind the pause, got %v", noLoop, gerr)
		}
		resume.Stop()
		c.Nodes[0].Resume()
		l.Close()
		switch {
		case !noLoop && err != nil:
			t.Errorf("NoLoopTracking off: the waiter missed the clean-up's DEL and waited %s: %v", waited, err)
		case noLoop && err == nil:
			t.Errorf("NoLoopTracking on: the waiter acquired after %s; the control no longer shows the lost wake-up "+
				"(a rueidis release may have fixed it: reconsider NoLoopTracking in rueidislockOption)", waited)
		}
	}
}
