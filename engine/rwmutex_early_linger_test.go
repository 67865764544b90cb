package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// A reader's subscription outlives the last reader that waited by
// NotifyLinger, however many readers come after and acquire at their
// first attempt: a reader that never waits is no waiter, and must not
// keep the lock "waited for lately" (subscribed on every master, every
// RLock subscribing and marking at its first attempt) for as long as
// reads keep coming. In virtual time: the writer's release wakes the one
// reader that waits; then, with no writer about, a reader acquires and
// releases every 2 s for a minute, well past the 10 s linger.
func TestRWReadersThatNeverWaitLetTheSubscriptionEnd(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		ctx := context.Background()
		const linger = 10 * time.Second
		lr := rwLocker(e, func(c *engine.Config) {
			c.Wait.FallbackMin, c.Wait.FallbackMax = time.Minute, time.Minute
			c.Wait.NotifyLinger = linger
		})
		mr := rwMutex(t, lr, "linger-reads")
		mw := rwMutex(t, rwLocker(e, nil), "linger-reads")
		waitBehindWriter(t, mr, mw)
		waited := time.Now()
		for time.Since(waited) < 6*linger {
			time.Sleep(2 * time.Second)
			le, err := mr.RLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if a := le.Wait().Attempts; a != 1 {
				t.Fatalf("a reader with no writer about made %d attempts", a)
			}
			release(t, le)
		}
		if n := lr.Subscriptions(); n != 0 {
			t.Errorf("%d subscriptions %s after the last reader that waited, want none after the %s linger: "+
				"readers that never waited kept it", n, time.Since(waited).Round(time.Second), linger)
		}
	})
}
