package engine_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// RemoteValidity of a read/write lease on simulated masters, in virtual
// time: the lease's own entry, not the key, answers. A reader (TTL 10s)
// beside another reader of a longer TTL (60s), whose entry keeps the key
// alive; the masters' clocks of a quorum step 20s forward, past our
// entry's expiry but not the other's: our entry is expired there while
// the key lives, and the lease is lost. The same for a writer, whose
// entry is scored by minus its expiry, with the key kept by nothing else.
// Before the step, each is vouched for at about its TTL.
func TestRemoteValidityOfReadWriteLeasesOnSimulatedMasters(t *testing.T) {
	for _, writer := range []bool{false, true} {
		kind := "reader"
		if writer {
			kind = "writer"
		}
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := simredis.NewNetwork(1)
				ms, addrs := simredis.NewMasters(n, 3, simredis.MasterOptions{Uptime: time.Hour, Latency: simredis.Latency{Min: time.Millisecond}})
				for _, m := range ms {
					defer m.Close()
				}
				newLocker := func(client string, ttl time.Duration) *engine.Locker {
					cfg := engine.DefaultConfig(addrs...)
					cfg.TTL, cfg.MaxTTL = ttl, time.Minute
					cfg.DisableTracking = true
					cfg.Conn.DialContext = n.Dialer(client)
					l, err := engine.New(context.Background(), cfg)
					if err != nil {
						t.Fatal(err)
					}
					return l
				}
				ours, other := newLocker("c0", 10*time.Second), newLocker("c1", time.Minute)
				defer ours.Close()
				defer other.Close()
				ctx := context.Background()
				m, err := ours.RWMutex("r")
				if err != nil {
					t.Fatal(err)
				}
				var le *engine.Lease
				if writer {
					le, err = m.TryLock(ctx)
				} else {
					om, oerr := other.RWMutex("r")
					if oerr != nil {
						t.Fatal(oerr)
					}
					if _, err := om.TryRLock(ctx); err != nil {
						t.Fatal(err)
					}
					le, err = m.TryRLock(ctx)
				}
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // every master has answered the acquire
				v, err := le.RemoteValidity(ctx)
				if err != nil || v < 9*time.Second || v > le.Validity() {
					t.Fatalf("fresh %s: RemoteValidity %s, %v; Validity %s", kind, v, err, le.Validity())
				}
				for _, sm := range ms[:2] {
					sm.JumpClock(20 * time.Second)
				}
				v, err = le.RemoteValidity(ctx)
				if !errors.Is(err, engine.ErrLockLost) {
					t.Fatalf("%s whose entry expired on a quorum (the clocks stepped past it): RemoteValidity %s, %v; want ErrLockLost", kind, v, err)
				}
				select {
				case <-le.Done():
				default:
					t.Fatalf("%s: lost, Done still open", kind)
				}
			})
		})
	}
}
