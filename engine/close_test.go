package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// A failed attempt's late yes that arrives while Close drains must still be
// deleted: a key left behind would keep the resource for its whole TTL,
// against every later holder.
func TestCloseDeletesALateYesArrivingWhileItDrains(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
	}{{"late yes", 20 * time.Millisecond}, {"yes at once", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 3)
			slow := newLatencyProxy(t, e.cluster.Addrs()[1], tc.delay, nil)
			cfg := engine.DefaultConfig(e.cluster.Addrs()[0], slow.addr(), e.cluster.Addrs()[2])
			cfg.Quarantine = engine.QuarantineObserved
			cfg.TTL = time.Hour
			cfg.NodeTimeout = time.Second
			l, err := engine.New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			const res = "late-yes-at-close"
			e.set(0, res, "other-owner")
			if err := e.cluster.Nodes[2].Kill(); err != nil {
				t.Fatal(err)
			}
			// Node 0 refuses and node 2 is down: TryLock fails at once,
			// while node 1's yes is still on its way (or just arrived),
			// to come back during Close.
			_, err = l.TryLock(context.Background(), res)
			if !errors.Is(err, engine.ErrNotAcquired) {
				t.Fatalf("want ErrNotAcquired, got %v", err)
			}
			l.Close()
			if v := e.get(1, res); v != "" {
				t.Fatalf("node 1 keeps the failed attempt's key %q after Close", v)
			}
			if v := e.get(0, res); v != "other-owner" {
				t.Fatalf("node 0 holds %q: the other owner's key was touched", v)
			}
		})
	}
}
