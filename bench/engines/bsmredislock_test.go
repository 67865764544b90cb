package engines

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"

	"github.com/redlock-bench/redlock/internal/redistest"
)

// A lease's validity is on the monotonic clock, the TTL from the call;
// releasing it frees the resource; a second TryLock of a held resource is
// contention; and a lease whose key is gone is lost, not a failed release.
func TestBsmRedislockLease(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	ctx := context.Background()
	cfg := testSpec()
	cfg.TTL = 2 * time.Second
	e, err := openT(ctx, BsmRedislock.String(), c.Addrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	start := time.Now()
	l, err := e.TryLock(ctx, "lease")
	end := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	until := l.ValidUntil()
	if !strings.Contains(until.String(), "m=") {
		t.Errorf("ValidUntil %v carries no monotonic reading", until)
	}
	// The TTL from a moment within the call, however long it took.
	if until.Before(start.Add(cfg.TTL)) || until.After(end.Add(cfg.TTL)) {
		t.Errorf("valid until %s after the call began (it took %s), want the %s TTL", until.Sub(start), end.Sub(start), cfg.TTL)
	}
	// The key expires no sooner than the validity says: it was set with
	// the whole TTL. Set after start, read before done, its PTTL is the
	// TTL less that time at most (and a millisecond of the server's
	// rounding), however long the reads took.
	reply, _ := redistest.Do(c.Addrs()[0], 10*time.Second, "PTTL", "lease")
	done := time.Now()
	least := cfg.TTL - done.Sub(start) - time.Millisecond
	if ms, err := strconv.Atoi(strings.TrimPrefix(reply, ":")); err != nil || ms > 2000 || time.Duration(ms)*time.Millisecond < least {
		t.Errorf("key's PTTL %s, %s after the call began: want at most 2000 (ms), at least %s", reply, done.Sub(start), least)
	}
	if _, err := e.TryLock(ctx, "lease"); Classify(err) != Contended {
		t.Errorf("second TryLock of a held resource: %v, classified %d", err, Classify(err))
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("release: %v", err)
	}
	l2, err := e.TryLock(ctx, "lease")
	if err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	if _, err := redistest.Do(c.Addrs()[0], 10*time.Second, "DEL", "lease"); err != nil {
		t.Fatal(err)
	}
	if err := l2.Release(ctx); err == nil || !Lost(err) {
		t.Errorf("release of a deleted key: %v, lost %v", err, Lost(err))
	}
}

// In mode wait, Lock retries until the holder releases.
func TestBsmRedislockLockWaitsForRelease(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	ctx := context.Background()
	e, err := openT(ctx, BsmRedislock.String(), c.Addrs(), testSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := e.TryLock(ctx, "wait")
	if err != nil {
		t.Fatal(err)
	}
	// start before the release is scheduled: the release, hence the
	// acquisition, comes 100ms after it at least.
	start := time.Now()
	time.AfterFunc(100*time.Millisecond, func() { l.Release(ctx) })
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l2, err := e.Lock(wctx, "wait")
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("acquired after %s, before the holder released", d)
	}
	l2.Release(ctx)
	// Held, a wait that runs out is a timeout.
	l3, err := e.TryLock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Release(ctx)
	wctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := e.Lock(wctx, "held"); Classify(err) != TimedOut {
		t.Errorf("wait on a held resource: %v, classified %d", err, Classify(err))
	}
}

// The classification of redislock's errors.
func TestBsmRedislockErrorClassification(t *testing.T) {
	e := &bsmRedislockEngine{}
	live := context.Background()
	for _, c := range []struct {
		name string
		err  error
		want Outcome
	}{
		{"held by another", redislock.ErrNotObtained, Contended},
		{"master gone", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), NoQuorum},
		{"its own deadline", context.DeadlineExceeded, NoQuorum},
	} {
		err := e.acquireError(live, c.err)
		if got := Classify(err); got != c.want {
			t.Errorf("%s: classified %d, want %d (%v)", c.name, got, c.want, err)
		}
		if !strings.HasPrefix(err.Error(), BsmRedislock.String()+": ") || !errors.Is(err, c.err) {
			t.Errorf("%s: %q does not wrap redislock's error", c.name, err)
		}
	}
}
