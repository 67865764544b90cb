package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// clusterConfig makes each cluster a vote, by all its seeds.
func clusterConfig(clusters []*redistest.RedisCluster, ttl time.Duration) engine.Config {
	cfg := engine.DefaultConfig()
	for _, c := range clusters {
		cfg.Clusters = append(cfg.Clusters, c.Seeds())
	}
	cfg.TTL = ttl
	cfg.Quarantine = engine.QuarantineObserved
	cfg.DisableNotify = true
	return cfg
}

func newLockerT(t *testing.T, cfg engine.Config) *engine.Locker {
	t.Helper()
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// A shard's primary that restarts without persistence forgets its locks;
// its slots sit out MaxTTL, the other shard's keep voting. Cluster 0 of
// two shards and clusters 1 and 2 of one are the votes; A holds a
// resource of shard 0 on clusters 0 and 1 (its key gone from cluster 2);
// shard 0's primary restarts empty. B, once its connection to the node is
// new, is refused; a resource of shard 1, held on cluster 2 for someone
// else, is still B's on clusters 0 and 1. With Quarantine off (the
// control), B gets the resource A holds.
func TestClusterRestartQuarantinesOnlyItsShard(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "quarantined", true: "control"}[off], func(t *testing.T) {
			c0 := redistest.StartClustersT(t, 1, redistest.ClusterOptions{Shards: 2})[0]
			clusters := append([]*redistest.RedisCluster{c0}, redistest.StartClustersT(t, 2, redistest.ClusterOptions{Shards: 1})...)
			time.Sleep(1100 * time.Millisecond)
			ctx := context.Background()
			cfg := clusterConfig(clusters, 10*time.Second)
			if off {
				cfg.Quarantine = engine.QuarantineOff
			}
			a, b := newLockerT(t, cfg), newLockerT(t, cfg)
			fo, other := shardNames("rs")
			held, err := a.TryLock(ctx, fo)
			if err != nil {
				t.Fatal(err)
			}
			key := clusterKey(fo)
			c2 := clusters[2].Seeds()[0]
			eventually(t, 5*time.Second, "A's key on cluster 2", func() bool {
				v, _ := redistest.Do(c2, time.Second, "GET", key)
				return v == fmt.Sprintf("$%d", len(held.Value()))
			})
			directDo(t, c2, func(b rueidis.Builder) rueidis.Completed { return b.Del().Key(key).Build() })
			directDo(t, c2, func(b rueidis.Builder) rueidis.Completed {
				return b.Set().Key(clusterKey(other)).Value("someone-else").Px(time.Minute).Build()
			})
			if err := c0.Shards[0].Nodes[0].Restart(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c0.WaitHealthy(ctx); err != nil {
				t.Fatal(err)
			}
			var second *engine.Lease
			if off {
				// The first attempt may meet the broken connection.
				eventually(t, 5*time.Second, "B's lease on "+fo, func() bool {
					second, err = b.TryLock(ctx, fo)
					return err == nil
				})
				if held.Validity() <= 0 {
					t.Fatal("A's lease ran out: the control proves nothing")
				}
				return
			}
			warm, _ := shardNames("rs-warm")
			eventually(t, 5*time.Second, "B's new connection to the restarted node", func() bool {
				if le, err := b.TryLock(ctx, warm); err == nil {
					le.Release(ctx)
				}
				return b.Nodes()[0].QuarantinedSlots == multiplex.Slots/2
			})
			second, err = b.TryLock(ctx, fo)
			if err == nil {
				second.Release(ctx)
				t.Fatalf("B acquired %q while A's lease (validity %s) is valid", fo, held.Validity())
			}
			if !errors.Is(err, engine.ErrQuarantined) {
				t.Errorf("B's refusal does not name the quarantine: %v", err)
			}
			if le, err := b.TryLock(ctx, other); err != nil {
				t.Errorf("%q, in the shard that did not restart: %v", other, err)
			} else {
				le.Release(ctx)
			}
		})
	}
}

// A failover's demoted primary must not vote on its old connection when
// it is promoted again. Clusters of one shard are the votes, cluster 0's
// with a replica R. B sees cluster 0 fail over to R (its slots sit out
// MaxTTL), and waits that out; A, a Locker started since, holds a
// resource on all three clusters, and its key is then deleted from
// cluster 2. Cluster 0 fails back to its first primary P, which lacks
// A's key (deleted on it: what a forced failback after R's crash would
// have lost). B's connection to P dates from before the first failover;
// had it stayed open, P's yes would count at once, and with cluster 2's
// make B a second holder. The dialer cut it when R's promotion showed P
// demoted, so B's new connection finds P promoted again and its slots
// sit out MaxTTL. With cluster-demoted-conn-kept on (the control), B
// gets the lease A holds.
func TestClusterFailbackKeepsTheOldPrimaryOut(t *testing.T) {
	for _, kept := range []bool{false, true} {
		t.Run(map[bool]string{false: "cut", true: "control"}[kept], func(t *testing.T) {
			defer mutation.ClusterDemotedConnKept.Set(kept)()
			c0 := redistest.StartClustersT(t, 1, redistest.ClusterOptions{Shards: 1, Replicas: 1, NodeTimeout: time.Second})[0]
			clusters := append([]*redistest.RedisCluster{c0}, redistest.StartClustersT(t, 2, redistest.ClusterOptions{Shards: 1})...)
			time.Sleep(1100 * time.Millisecond)
			ctx := context.Background()
			cfg := clusterConfig(clusters, 5*time.Second)
			b := newLockerT(t, cfg)
			p, r := c0.Shards[0].Nodes[0], c0.Shards[0].Nodes[1]
			if err := c0.Failover(ctx, r); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "B to see R promoted", func() bool {
				if le, err := b.TryLock(ctx, "warm"); err == nil {
					le.Release(ctx)
				}
				return b.Nodes()[0].QuarantinedSlots == multiplex.Slots
			})
			eventually(t, 2*cfg.TTL, "R's quarantine to end", func() bool { return b.Nodes()[0].QuarantinedSlots == 0 })
			a := newLockerT(t, cfg)
			held, err := a.TryLock(ctx, "fb")
			if err != nil {
				t.Fatal(err)
			}
			key := clusterKey("fb")
			c2 := clusters[2].Seeds()[0]
			eventually(t, 5*time.Second, "A's key on cluster 2", func() bool {
				v, _ := redistest.Do(c2, time.Second, "GET", key)
				return v == fmt.Sprintf("$%d", len(held.Value()))
			})
			directDo(t, c2, func(b rueidis.Builder) rueidis.Completed { return b.Del().Key(key).Build() })
			if err := c0.Failover(ctx, p); err != nil {
				t.Fatal(err)
			}
			directDo(t, p.Addr(), func(b rueidis.Builder) rueidis.Completed { return b.Del().Key(key).Build() })
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
	}
}

// A shard's primary whose clock is far from the others' must not vote
// while fencing relies on the clocks: once it has forgotten its counters
// its clock alone orders its slots' tokens. Each cluster node's clock is
// judged on every new connection, as a master's is, and only its slots
// sit out. Two masters and a cluster of two shards are the votes; shard
// 1's primary is reached through a proxy that puts its clock an hour
// behind. Master 0 holds a resource of each shard for someone else, so
// the cluster's vote decides: shard 0's is taken, shard 1's is refused
// with ErrClockSkew. With cluster-clock-unjudged on (the control), shard
// 1's is taken too.
func TestClusterNodeWithASkewedClockSitsOut(t *testing.T) {
	for _, unjudged := range []bool{false, true} {
		t.Run(map[bool]string{false: "judged", true: "control"}[unjudged], func(t *testing.T) {
			defer mutation.ClusterClockUnjudged.Set(unjudged)()
			e := newMigrationEnv(t)
			var shift atomic.Int64
			shift.Store(-time.Hour.Microseconds())
			skewed := e.cluster.Shards[1].Nodes[0]
			px := shiftedClockProxy(&env{t: t}, skewed.Addr(), &shift)
			l := e.locker(func(c *engine.Config) {
				c.Fencing = true
				c.DialContext = func(ctx context.Context, addr string) (net.Conn, error) {
					if addr == skewed.Addr() {
						addr = px.addr()
					}
					var d net.Dialer
					return d.DialContext(ctx, "tcp", addr)
				}
			})
			ctx := context.Background()
			n0, n1 := shardNames("sk")
			for _, name := range []string{n0, n1} {
				e.master(0, "SET", clusterKey(name), "someone-else", "PX", "60000")
			}
			// A first attempt may meet a connection being replaced.
			var last error
			if !within(5*time.Second, func() bool {
				le, err := l.TryLock(ctx, n0)
				if last = err; err == nil {
					le.Release(ctx)
				}
				return err == nil
			}) {
				t.Errorf("%q, in the shard whose clock is right: %v", n0, last)
			}
			le, err := l.TryLock(ctx, n1)
			switch {
			case err == nil:
				le.Release(ctx)
				if !unjudged {
					t.Fatalf("%q was taken with the vote of a primary an hour behind", n1)
				}
			case unjudged:
				t.Fatalf("with %s on, %q was refused (%v): the test cannot catch it", mutation.ClusterClockUnjudged.Name(), n1, err)
			case !errors.Is(err, engine.ErrClockSkew):
				t.Fatalf("%q: %v, want refused for the clock", n1, err)
			default:
				t.Logf("refused: %v", err)
			}
			// The cluster's clock is its nodes' within: not kept out.
			if s := l.Nodes()[2]; !unjudged && (s.State == engine.StateClockSkewed || !s.ClockKnown || s.ClockOffsetMS < -1000 || s.ClockOffsetMS > 1000) {
				t.Errorf("the cluster's status: %+v, want its clock that of its nodes within", s)
			}
		})
	}
}
