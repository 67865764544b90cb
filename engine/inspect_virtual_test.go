package engine_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// TestInspectValidityAndAgesVirtual checks Inspect's clocks in virtual
// time: a lock taken WithTTL(4s), inspected 1s later, is vouched for by
// the quorum for its 3s left less the drift for them (3s × 0.01 + 2ms),
// not for the Locker's TTL; a waiter that queued 2s before is 2s old;
// a lease resumed elsewhere gets the same remote validity.
func TestInspectValidityAndAgesVirtual(t *testing.T) {
	t.Parallel()
	simTest(t, 5, func(t *testing.T, e *env) {
		ctx := context.Background()
		a := e.locker(nil)
		b := e.locker(nil)
		start := time.Now()
		le, err := a.TryLock(ctx, "v", engine.WithTTL(4*time.Second), engine.WithOwner("pid=1"))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := le.ValidUntil().Sub(start), 4*time.Second-(40*time.Millisecond+engine.DriftFloor); got != want {
			t.Fatalf("per-call TTL: valid for %s from the attempt's start, want %s", got, want)
		}
		time.Sleep(time.Second)
		waitCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := b.Lock(waitCtx, "v")
			done <- err
		}()
		synctest.Wait() // b queued on every master and sleeps
		time.Sleep(2 * time.Second)
		in, err := a.Inspect(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		// What is left of the TTL on the masters when asked, less the
		// drift for it; the simulated network's delays (well under 5ms a
		// round trip, and the waiter's ticket reaches the masters' clocks
		// through a few of them) pass before the answer.
		left := time.Second - time.Since(start.Add(3*time.Second))
		want := left - (left/100 + engine.DriftFloor)
		near := func(d time.Duration) bool { return d <= want && d > want-5*time.Millisecond }
		if len(in.Holders) != 1 || !near(in.Holders[0].Validity) || in.Validity != in.Holders[0].Validity || in.Holders[0].Owner != "pid=1" {
			t.Fatalf("Inspect 3s after WithTTL(4s): %+v, want validity %s", in, want)
		}
		if len(in.Waiters) != 1 || in.Waiters[0].Age < 2*time.Second || in.Waiters[0].Age > 2*time.Second+50*time.Millisecond || in.Waiters[0].Masters != 5 {
			t.Fatalf("waiters %+v, want one 2s old on 5 masters", in.Waiters)
		}
		re, err := b.Resume(ctx, "v", le.Value(), 0)
		if err != nil || !near(re.Validity()) {
			t.Fatalf("Resume: validity %s, %v; want %s", re.Validity(), err, want)
		}
		cancel()
		<-done
	})
}

// A read/write lock's waiting writer is listed by Inspect with its Age,
// how long ago it began to wait, as a lock's queued waiter is (above),
// though the intents' set scores each writer by its intent's expiry: the
// writer's id carries when it began. Here a reader holds and a writer
// waits 2 s: its Age must be about 2 s. In virtual time.
func TestInspectRWWriterAgeVirtual(t *testing.T) {
	t.Parallel()
	simTest(t, 3, func(t *testing.T, e *env) {
		ctx := context.Background()
		cfg := func(c *engine.Config) { c.TTL = time.Second; c.AutoExtend = true }
		a, b := e.locker(e.steady(cfg)), e.locker(e.steady(cfg))
		const name = "rw-age"
		r, err := rwMutex(t, a, name).TryRLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release(ctx)
		waitCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := rwMutex(t, b, name).Lock(waitCtx)
			done <- err
		}()
		time.Sleep(2 * time.Second)
		in, err := a.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(in.Waiters) != 1 || in.Waiters[0].Mode != "write" {
			t.Fatalf("waiters %+v, want the waiting writer", in.Waiters)
		}
		if age := in.Waiters[0].Age; age < 0 || age < 2*time.Second-50*time.Millisecond || age > 2*time.Second+50*time.Millisecond {
			t.Fatalf("waiting writer's Age %s after waiting 2s, want about 2s", age)
		}
		cancel()
		<-done
	})
}
