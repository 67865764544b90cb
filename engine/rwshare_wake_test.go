package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// TestRWShareWatchedExpiryWakesWriter, in virtual time: a reader (TTL
// 1 s, no auto-extension) whose Done is watched is dropped without
// Release; a writer of another Locker waits (its fallback 30 s). When the
// reader's validity ends, its expiry clean-up takes the entry off and
// publishes on the writers' channel, as the release it stands for would
// ("the release (or expiry clean-up of a watched lease) that leaves a
// master with no live holder publishes there", see RWMutex): the writer
// must be admitted within a second of that, not at its fallback. Run
// with the readers' share on and off (Config.Wait.DisableGate): the same
// reader must wake the writer either way.
func TestRWShareWatchedExpiryWakesWriter(t *testing.T) {
	for _, share := range []bool{true, false} {
		t.Run(fmt.Sprintf("share=%v", share), func(t *testing.T) {
			simTestWith(t, 5, steadyMasters, func(t *testing.T, e *env) {
				ctx := context.Background()
				rl := e.locker(func(c *engine.Config) {
					c.TTL, c.MaxTTL = time.Second, undoFallback
					c.Wait.DisableGate = !share
				})
				wl := e.locker(undoWakeConfig)
				r := mustRLock(t, rwMutex(t, rl, "share-expiry-wake"), false)
				done := r.Done()
				start := time.Now()
				got := make(chan waited, 1)
				go func() {
					le, err := rwMutex(t, wl, "share-expiry-wake").Lock(ctx)
					if err != nil {
						got <- waited{err: err}
						return
					}
					got <- waited{wait: le.Wait()}
					le.Release(ctx)
				}()
				<-done
				expired := time.Since(start)
				select {
				case w := <-got:
					if w.err != nil {
						t.Fatalf("the writer: %v", w.err)
					}
					t.Logf("reader expired after %s; writer: %+v", expired, w.wait)
				case <-time.After(time.Second):
					t.Fatalf("the writer was not admitted within 1 s of the watched reader's expiry (%s after it began; fallback %s): nothing published",
						expired, undoFallback)
				}
			})
		})
	}
}
