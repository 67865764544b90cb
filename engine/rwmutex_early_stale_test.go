package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// TestFarBehindMasterGetsNoStaleAcquiresInVirtualTime for a reader of a
// lock waited for lately: its first attempt, sent before it was refused
// (most are admitted at once), is an acquire like any other, and is not
// sent to a master far behind once its round's node timeout has run out.
// A reader waits for a writer once, so that its Locker's subscription to
// the lock lingers; then, while master 0 of five is paused, 100 readers
// acquire and release the lock on the other four, each an attempt of its
// own (the last release of each ends the share). Resumed a second later,
// master 0 admits at most the first reader, not 100 whose votes no
// longer count, each added to the lock's sorted set behind the backlog.
func TestFarBehindMasterGetsNoStaleReaderAcquiresOnAWaitedLock(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		ctx := context.Background()
		const name = "behind-rw"
		lr := rwLocker(e, func(c *engine.Config) {
			c.NodeTimeout = 50 * time.Millisecond
			c.Wait.NotifyLinger = time.Hour
			c.Wait.FallbackMin, c.Wait.FallbackMax = time.Minute, time.Minute
		})
		mr := rwMutex(t, lr, name)
		mw := rwMutex(t, rwLocker(e, func(c *engine.Config) { c.NodeTimeout = 50 * time.Millisecond }), name)
		waitBehindWriter(t, mr, mw)
		time.Sleep(time.Second)
		e.sim[0].Pause()
		logged := len(e.sim[0].KeyLog())
		const cycles = 100
		for i := range cycles {
			le, err := mr.RLock(ctx)
			if err != nil {
				t.Fatalf("cycle %d: %v", i, err)
			}
			if err := le.Release(ctx); err != nil {
				t.Fatalf("cycle %d: release: %v", i, err)
			}
		}
		// Past every round's node timeout, within the connection's
		// timeout (ConnTimeout), which would break it.
		time.Sleep(time.Second)
		e.sim[0].Resume()
		time.Sleep(time.Second) // the resumed master catches up
		// The readers admitted: the entries that appeared in the lock's
		// sorted set on master 0 since the pause.
		entries := make(map[string]bool)
		for _, r := range e.sim[0].KeyLog()[logged:] {
			if r.Key == e.key(name) {
				for member := range r.Scores {
					if member != "#rwlock" { // the key's kind, not a holder
						entries[member] = true
					}
				}
			}
		}
		admitted := len(entries)
		if admitted > 1 {
			t.Errorf("the resumed master admitted %d of the %d readers that waited for it past their node timeout, want at most the first", admitted, cycles)
		}
	})
}
