package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// TestFarBehindMasterGetsNoStaleAcquiresInVirtualTime: a master far
// behind the others is not sent the acquires still waiting for it once
// their rounds' node timeouts have run out. While master 0 of five is
// paused, 200 locks are acquired and released on the other four; resumed
// a second later, it runs at most the one batch its worker had sent before
// the pause held it, not 200 SETs whose votes no longer count and which
// would each leave a key to undo (a slow master gathered tens of thousands
// in a bench run, left on it when the client closed). No key of theirs is
// left on any master.
func TestFarBehindMasterGetsNoStaleAcquiresInVirtualTime(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		l := e.locker(func(c *engine.Config) { c.NodeTimeout = 50 * time.Millisecond })
		ctx := context.Background()
		e.sim[0].Pause()
		const cycles = 200
		for i := range cycles {
			le, err := l.TryLock(ctx, fmt.Sprintf("behind%d", i))
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
		before := e.sim[0].Commands()["SET"]
		e.sim[0].Resume()
		time.Sleep(time.Second) // the resumed master catches up
		if sets := e.sim[0].Commands()["SET"] - before; sets > 1 {
			t.Errorf("the resumed master ran %d of the %d acquires that waited for it past their node timeout, want at most the first", sets, cycles)
		}
		l.Close()
		for i, m := range e.sim {
			if keys := m.Keys(); len(keys) != 0 {
				t.Errorf("master %d holds %d keys after the Locker closed: %v", i, len(keys), keys[:min(len(keys), 3)])
			}
		}
	})
}
