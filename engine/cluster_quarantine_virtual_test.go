package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// TestClusterFailbackKeepsTheOldPrimaryOut in virtual time, with its
// control and the quarantine's length: three simulated clusters of one
// shard are the votes, cluster 0's primary P with a replica R. B sees
// cluster 0 switch over to R (P stays up, a replica: CLUSTER FAILOVER),
// and R's slots sit out exactly MaxTTL from then. A, a Locker started
// since, holds a resource on all three clusters, and its key is then
// deleted from cluster 2. Cluster 0 switches back to P, which lacks A's
// key (deleted on it: what a forced failback after R's crash would have
// lost). B's connection to P dates from before the first switchover; had
// it stayed open, P's yes would count at once, and with cluster 2's make
// B a second holder. The dialer cut it when R's promotion showed P
// demoted, so B's new connection finds P promoted again and its slots
// sit out MaxTTL. With cluster-demoted-conn-kept on (the control), B
// gets the lease A holds.
func TestClusterFailbackKeepsTheOldPrimaryOutInVirtualTime(t *testing.T) {
	mutation.Require(t)
	for _, kept := range []bool{false, true} {
		t.Run(map[bool]string{false: "cut", true: "control"}[kept], func(t *testing.T) {
			defer mutation.ClusterDemotedConnKept.Set(kept)()
			simClusterTest(t, simClusterOptions{Clusters: 3, Shards: 1, Replicas: true}, func(t *testing.T, e *simClusterEnv) {
				const ttl = 5 * time.Second
				config := func(c *engine.Config) {
					c.TTL = ttl
					c.Wait.DisableNotify = true
				}
				ctx := context.Background()
				c0 := e.clusters[0]
				p := c0.Primary(0)
				b := e.locker(config)
				// B sees R promoted once a command of its reaches R; the
				// quarantine begins between the last look that saw none and
				// the first that sees it.
				seen := func(want int) (lastNot, first time.Time) {
					for deadline := time.Now().Add(time.Minute); ; {
						if b.Nodes()[0].QuarantinedSlots == want {
							return lastNot, time.Now()
						}
						if time.Now().After(deadline) {
							t.Fatalf("B sees %d slots of cluster 0 quarantined, want %d", b.Nodes()[0].QuarantinedSlots, want)
						}
						lastNot = time.Now()
						if le, err := b.TryLock(ctx, "warm"); err == nil {
							le.Release(ctx)
						}
						time.Sleep(time.Millisecond)
					}
				}
				seen(0)
				if !c0.Switchover(0) {
					t.Fatal("no switchover to R")
				}
				from, to := seen(keyslot.Slots)
				for b.Nodes()[0].QuarantinedSlots != 0 {
					time.Sleep(time.Millisecond)
				}
				if ended := time.Now(); ended.Before(from.Add(ttl)) || ended.After(to.Add(ttl+time.Millisecond)) {
					t.Errorf("R's quarantine ended %v after the last look that saw none, %v after the first that saw it: want MaxTTL %v after it began, in between",
						ended.Sub(from), ended.Sub(to), ttl)
				}
				a := e.locker(config)
				held, err := a.TryLock(ctx, "fb")
				if err != nil {
					t.Fatal(err)
				}
				key := clusterKey("fb")
				c2 := e.clusters[2].Primary(0)
				// TryLock returned at quorum: the last vote's reply may be on its way.
				for n, _ := e.do(c2, "EXISTS", key).AsInt64(); n != 1; n, _ = e.do(c2, "EXISTS", key).AsInt64() {
					time.Sleep(time.Millisecond)
				}
				if n, err := e.do(c2, "DEL", key).AsInt64(); err != nil || n != 1 {
					t.Fatalf("DEL A's key on cluster 2: %d, %v", n, err)
				}
				if !c0.Switchover(0) {
					t.Fatal("no switchover back to P")
				}
				if n, err := e.do(p, "DEL", key).AsInt64(); err != nil || n != 1 {
					t.Fatalf("DEL A's key on P: %d, %v", n, err)
				}
				second, err := b.TryLock(ctx, "fb")
				switch {
				case err == nil && held.Validity() > 0:
					second.Release(ctx)
					if !kept {
						t.Fatalf("B acquired while A's lease (validity %s) is valid: P voted on its old connection", held.Validity())
					}
				case err == nil:
					t.Fatal("A's lease ran out before B's attempt: the test proves nothing")
				case kept:
					t.Fatalf("with %s on, B was refused (%v): the test cannot catch it", mutation.ClusterDemotedConnKept.Name(), err)
				case !errors.Is(err, engine.ErrQuarantined):
					t.Fatalf("B's TryLock: %v, want refused for the quarantine", err)
				default:
					t.Logf("B refused: %v", err)
				}
			})
		})
	}
}

// TestClusterRestartMidMigrationKeepsTheHandedOverSlotOut, in virtual
// time: two masters and a simulated cluster of two shards are the votes.
// A holds a resource on all three; its key is then deleted from master 1.
// The resource's slot begins to migrate from its primary P to the other
// shard's primary Q, its keys still on P; P restarts (empty), and the slot
// is handed over to Q without A's key, which P lost. B, a Locker that saw
// the cluster before, reaches P again only now, through its stale slot
// map: P's view no longer shows the slot, but P served it when it
// restarted, so the slot sits out MaxTTL, and B is refused for the
// quarantine. With cluster-restart-slots-as-seen on (the control), Q's
// yes counts at once, and with master 1's makes B a second holder.
func TestClusterRestartMidMigrationKeepsTheHandedOverSlotOut(t *testing.T) {
	mutation.Require(t)
	for _, asSeen := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed", true: "control"}[asSeen], func(t *testing.T) {
			defer mutation.ClusterRestartSlotsAsSeen.Set(asSeen)()
			simClusterTest(t, simClusterOptions{Masters: 2, Clusters: 1, Shards: 2}, func(t *testing.T, e *simClusterEnv) {
				config := func(c *engine.Config) {
					c.TTL = 10 * time.Second
					c.Wait.DisableNotify = true
				}
				ctx := context.Background()
				b := e.locker(config)
				a := e.locker(config)
				held, err := a.TryLock(ctx, "mr")
				if err != nil {
					t.Fatal(err)
				}
				key := clusterKey("mr")
				m1 := e.masters[1]
				// TryLock returned at quorum: the last vote's reply may be on its way.
				for !e.exists(m1, key) {
					time.Sleep(time.Millisecond)
				}
				if n, err := e.do(m1, "DEL", key).AsInt64(); err != nil || n != 1 {
					t.Fatalf("DEL A's key on master 1: %d, %v", n, err)
				}
				mg := &simMigration{e: e}
				mg.begin(t, keyslot.KeySlot(key))
				if !e.exists(mg.from, key) {
					t.Fatal("A's key is not on the slot's primary: the test proves nothing")
				}
				// P down: its connections break, and B's cluster client
				// refreshes its slot map (the slot is still P's) within a
				// second; none is left to run once P is back.
				mg.from.Kill()
				time.Sleep(2 * time.Second)
				mg.from.Start()
				mg.finish()
				if e.exists(mg.to, key) {
					t.Fatal("A's key reached Q: the test proves nothing")
				}
				second, err := b.TryLock(ctx, "mr")
				switch {
				case err == nil && held.Validity() > 0:
					second.Release(ctx)
					if !asSeen {
						t.Fatalf("B acquired while A's lease (validity %s) is valid: Q voted for the slot P lost", held.Validity())
					}
					t.Logf("control: B acquired while A holds")
				case err == nil:
					t.Fatal("A's lease ran out before B's attempt: the test proves nothing")
				case asSeen:
					t.Fatalf("with %s on, B was refused (%v): the test cannot catch it", mutation.ClusterRestartSlotsAsSeen.Name(), err)
				case !errors.Is(err, engine.ErrQuarantined):
					t.Fatalf("B's TryLock: %v, want refused for the quarantine", err)
				default:
					t.Logf("B refused: %v", err)
				}
				if r := b.Nodes()[2].Restarts; r != 1 {
					t.Errorf("B saw %d restarts of the cluster, want 1 (P's, through its stale slot map)", r)
				}
			})
		})
	}
}
