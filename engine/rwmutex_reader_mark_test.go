package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// A waiting reader is woken by the release that frees the lock only if
// its mark (one key per lock, shared by its waiting readers) is still
// there when the release runs. The mark must outlive the reader's sleep
// between attempts, which a per-call TTL shorter than the Locker's
// undercut, and a reader with a shorter TTL must not cut it short for
// the others: as the writers' intents (TestRWWriterIntentOutlivesItsFallback,
// TestRWShortIntentKeepsAnothersAlive). Here a writer holds
// (auto-extended, so no expiry frees the lock), a reader waits with the
// longest fallback, and the writer releases well within it: the reader
// must be woken by that release. In virtual time.
func TestRWReaderMarkOutlivesItsFallback(t *testing.T) {
	for _, c := range []struct {
		name string
		// short: a reader of another Locker with a 200 ms TTL marks after
		// the waiting reader did, then gives up.
		short bool
		opts  []engine.LockOption
	}{
		{"the Locker's TTL alone", false, nil},
		{"per-call TTL", false, []engine.LockOption{engine.WithTTL(200 * time.Millisecond)}},
		{"another reader's shorter TTL", true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			simTest(t, 3, func(t *testing.T, e *env) {
				ctx := context.Background()
				cfg := fallbackIsTTL(time.Second)
				writerL, readerL, shortL := e.locker(e.steady(cfg)), e.locker(e.steady(cfg)), e.locker(e.steady(cfg))
				const name = "reader-mark"
				w, err := rwMutex(t, writerL, name).TryLock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				type result struct {
					le  *engine.Lease
					err error
				}
				got := make(chan result, 1)
				go func() {
					rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					le, err := rwMutex(t, readerL, name).RLock(rctx, c.opts...)
					got <- result{le, err}
				}()
				// Virtual time: the reader's two attempts (the second
				// marks) are done long before this.
				time.Sleep(50 * time.Millisecond)
				if c.short {
					sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
					_, err := rwMutex(t, shortL, name).RLock(sctx, engine.WithTTL(200*time.Millisecond))
					cancel()
					if err == nil {
						t.Fatal("the short reader acquired while the writer held")
					}
				}
				time.Sleep(400 * time.Millisecond)
				released := time.Now()
				if err := w.Release(ctx); err != nil {
					t.Fatal(err)
				}
				r := <-got
				if r.err != nil {
					t.Fatalf("reader: %v", r.err)
				}
				defer r.le.Release(ctx)
				if wi := r.le.Wait(); wi.Cause != engine.WakeNotified || time.Since(released) > 50*time.Millisecond {
					t.Fatalf("reader in %s after the release that freed the lock, woken by %s (%+v): its mark had lapsed",
						time.Since(released), wi.Cause, wi)
				}
			})
		})
	}
}

// TestRWReaderMarkOutlivesItsFallbackOnRealMasters is the per-call TTL
// case on real masters: a writer holds, a reader waits with a TTL a
// quarter of the Locker's (whose fallback is the Locker's TTL), and the
// reader's mark must stay on the masters that refused it all along. It
// waits for events, not durations: the mark on a quorum, then two
// renewals of it on one master (a mark that lapses before the reader's
// next attempt is gone first); then the writer releases, and the reader
// acquires. A machine stall longer than half the mark's life between two
// of the reader's attempts is what could fail it falsely.
func TestRWReaderMarkOutlivesItsFallbackOnRealMasters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	ctx := context.Background()
	const ttl = 2 * time.Second
	cfg := func(c *engine.Config) {
		fallbackIsTTL(4 * ttl)(c)
		patientDownTo(ttl)(c)
	}
	writerL, readerL := e.locker(cfg), e.locker(cfg)
	const name = "reader-mark"
	mark := "\xffredlock:rwmark:" + e.key(name)
	w, err := rwMutex(t, writerL, name).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(ctx)
	got := make(chan error, 1)
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() {
		le, err := rwMutex(t, readerL, name).RLock(rctx, engine.WithTTL(ttl))
		if err == nil {
			le.Release(ctx)
		}
		got <- err
	}()
	on := awaitOnQuorum(t, e, "the reader's mark", func(i int) bool { return e.pttl(i, mark) > 0 }, got, "the reader returned while the writer held")
	renewals, last := 0, e.pttl(on, mark)
	for renewals < 2 {
		p := e.pttl(on, mark)
		if p <= 0 {
			t.Fatalf("the waiting reader's mark lapsed on master %d after %d renewals (PTTL %d)", on, renewals, p)
		}
		if p > last {
			renewals++
		}
		last = p
		time.Sleep(time.Millisecond) // a poll's pace, to spare the shared masters
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the reader did not acquire once the writer released: %v", err)
	}
}

// fallbackIsTTL is a Locker's configuration for the wake-up tests of a
// read/write lock: TTL ttl, auto-extended holders (so that no expiry frees
// the lock), and a fallback of exactly the TTL, the longest the engine
// draws, so that a wake-up the test expects cannot come from it.
func fallbackIsTTL(ttl time.Duration) func(*engine.Config) {
	return func(c *engine.Config) {
		c.TTL = ttl
		c.AutoExtend = true
		c.Wait.FallbackMin, c.Wait.FallbackMax = ttl, ttl
	}
}

// awaitOnQuorum waits until has holds on a quorum of e's masters, what
// it names, and returns one where it does; a value on ended first fails
// the test with gone (the waiter it watches returned too soon). A mark
// or an intent is left where a waiter was refused: a quorum, not every
// master (one that missed the holder's entry admits the waiter there).
func awaitOnQuorum(t *testing.T, e *env, what string, has func(i int) bool, ended <-chan error, gone string) int {
	t.Helper()
	on := -1
	eventually(t, 30*time.Second, what+" on a quorum", func() bool {
		select {
		case err := <-ended:
			t.Fatalf("%s: %v", gone, err)
		default:
		}
		n := 0
		for i := range e.direct {
			if has(i) {
				n, on = n+1, i
			}
		}
		return n > len(e.direct)/2
	})
	return on
}
