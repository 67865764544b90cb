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
				if !rwRemoteLost(err) {
					t.Fatalf("%s: the property does not count a loss RemoteValidity's round found: %v", kind, err)
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

// A lease of an auto-extending Locker whose auto-extension misses the
// quorum while RemoteValidity waits for it, with no master killed: three
// of five simulated masters stop answering (paused, as a loaded machine's
// masters answer past the node timeout) once a reader (a joined lease on
// its Locker's share) and a writer are held. The auto-extension's round
// holds the lease's operations until the node timeout, and ends the lease
// (ErrLockLost, as Config.AutoExtend says); RemoteValidity, called during
// that round on a lease whose Err is still nil, waits for it and answers
// that end. No master said the entry was gone, so the error matches
// ErrNoQuorum and not ErrNotHeld, which is what TestRWMutexProperty's
// remote-validity check tells apart (rwRemoteLost).
func TestRemoteValidityDuringAFailingAutoExtension(t *testing.T) {
	for _, writer := range []bool{false, true} {
		kind := "reader"
		if writer {
			kind = "writer"
		}
		t.Run(kind, func(t *testing.T) {
			simTest(t, 5, func(t *testing.T, e *env) {
				const every = time.Second
				l := e.locker(func(c *engine.Config) {
					c.TTL, c.MaxTTL = 3*time.Second, 3*time.Second
					c.NodeTimeout = 100 * time.Millisecond
					c.AutoExtend, c.ExtendEvery = true, every
				})
				m, err := l.RWMutex("rv-auto-" + kind)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				var le *engine.Lease
				if writer {
					le, err = m.TryLock(ctx)
				} else {
					le, err = m.TryRLock(ctx)
				}
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // every master has answered the acquire
				for i := range 3 {
					e.pause(i)
				}
				// The auto-extension fires within ExtendEvery of the
				// acquisition and waits for the paused masters until the
				// node timeout.
				time.Sleep(every)
				synctest.Wait()
				ended := le.Err()
				if ended != nil {
					t.Fatalf("set-up: the lease ended before RemoteValidity is asked: %v", ended)
				}
				v, err := le.RemoteValidity(ctx)
				if !errors.Is(err, engine.ErrLockLost) || !errors.Is(err, engine.ErrNoQuorum) || errors.Is(err, engine.ErrNotHeld) {
					t.Fatalf("%s: RemoteValidity during an auto-extension that timed out on 3 of 5 masters: %s, %v; want ErrLockLost from ErrNoQuorum, not ErrNotHeld", kind, v, err)
				}
				if rwRemoteLost(err) {
					t.Fatalf("%s: the property counts the auto-extension's missed quorum as a loss RemoteValidity found: %v", kind, err)
				}
			})
		})
	}
}
