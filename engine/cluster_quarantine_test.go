package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// clusterConfig makes each cluster a vote, by all its seeds.
func clusterConfig(clusters []*redistest.RedisCluster, ttl time.Duration) engine.Config {
	cfg := engine.DefaultConfig()
	for _, c := range clusters {
		cfg.Clusters = append(cfg.Clusters, c.Seeds())
	}
	cfg.TTL = ttl
	cfg.Quarantine = engine.QuarantineObserved
	cfg.Wait.DisableNotify = true
	patientVotes(&cfg)
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
// two shards, the test's own, and two of the shared clusters are the
// votes; A holds a resource of shard 0 on clusters 0 and 1 (its key gone
// from cluster 2); shard 0's primary restarts empty. B, once its
// connection to the node is new, is refused; a resource of shard 1,
// held on cluster 2 for someone else, is still B's on clusters 0 and 1.
// With Quarantine off (the control, a configuration: in parallel), B
// gets the resource A holds.
func TestClusterRestartQuarantinesOnlyItsShard(t *testing.T) {
	t.Parallel()
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "quarantined", true: "control"}[off], func(t *testing.T) {
			t.Parallel()
			c0 := ownClusters(t, 1, redistest.ClusterOptions{Shards: 2})[0]
			ce := sharedClusters(t) // started meanwhile
			ctx := context.Background()
			cfg := clusterConfig([]*redistest.RedisCluster{c0, ce.clusters[0], ce.clusters[1]}, time.Minute)
			cfg.KeyPrefix = ce.prefix
			if off {
				cfg.Quarantine = engine.QuarantineOff
			}
			a, b := newLockerT(t, cfg), newLockerT(t, cfg)
			fo, other := shardNamesUnder(ce.prefix, "rs")
			held, err := a.TryLock(ctx, fo)
			if err != nil {
				t.Fatal(err)
			}
			key := ce.key(fo)
			eventually(t, 30*time.Second, "A's key on cluster 2", func() bool { return ce.get(1, key) == held.Value() })
			ce.do(1, "DEL", key)
			ce.do(1, "SET", ce.key(other), "someone-else", "PX", "60000")
			if err := c0.Shards[0].Nodes[0].Restart(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c0.WaitHealthy(ctx); err != nil {
				t.Fatal(err)
			}
			var second *engine.Lease
			if off {
				// The first attempt may meet the broken connection.
				eventually(t, 30*time.Second, "B's lease on "+fo, func() bool {
					second, err = b.TryLock(ctx, fo)
					return err == nil
				})
				if held.Validity() <= 0 {
					t.Fatal("A's lease ran out: the control proves nothing")
				}
				return
			}
			warm, _ := shardNamesUnder(ce.prefix, "rs-warm")
			eventually(t, 30*time.Second, "B's new connection to the restarted node", func() bool {
				if le, err := b.TryLock(ctx, warm); err == nil {
					le.Release(ctx)
				}
				return b.Nodes()[0].QuarantinedSlots == keyslot.Slots/2
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
// with a replica R, the test's own, and two of the shared clusters. B's
// connection to cluster 0's first primary P dates from before the
// failover to R; had it stayed open, when P is promoted again (a
// failback) P's yes would count at once, unchecked: B's dialer must cut
// it once R's promotion shows P demoted, so that B's next connection
// finds P promoted again and its slots sit out MaxTTL. Here the cut is
// seen (B's connections to P leave P's CLIENT LIST), and after the
// failback B is refused a resource that A holds on cluster 1 alone (its
// key gone from clusters 0 and 2). That B would get it were the
// connection kept (cluster-demoted-conn-kept, the control), once R's
// quarantine has ended, is shown in virtual time:
// TestClusterFailbackKeepsTheOldPrimaryOutInVirtualTime.
func TestClusterFailbackKeepsTheOldPrimaryOut(t *testing.T) {
	t.Parallel()
	c0 := ownClusters(t, 1, redistest.ClusterOptions{Shards: 1, Replicas: 1, NodeTimeout: time.Second})[0]
	ce := sharedClusters(t) // started meanwhile
	ctx := context.Background()
	cfg := clusterConfig([]*redistest.RedisCluster{c0, ce.clusters[0], ce.clusters[1]}, time.Minute)
	cfg.KeyPrefix = ce.prefix
	p, r := c0.Shards[0].Nodes[0], c0.Shards[0].Nodes[1]
	var mu sync.Mutex
	toP := map[string]bool{} // B's connections to P, by their local address
	bcfg := cfg
	bcfg.Conn.DialContext = func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil && addr == p.Addr() {
			mu.Lock()
			toP[conn.LocalAddr().String()] = true
			mu.Unlock()
		}
		return conn, err
	}
	b := newLockerT(t, bcfg)
	if le, err := b.TryLock(ctx, "warm"); err != nil {
		t.Fatal(err)
	} else {
		le.Release(ctx)
	}
	mu.Lock()
	before := maps.Clone(toP)
	mu.Unlock()
	if len(before) == 0 {
		t.Fatal("B has no connection to P: the test proves nothing")
	}
	if err := c0.Failover(ctx, r); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "B to see R promoted", func() bool {
		if le, err := b.TryLock(ctx, "warm"); err == nil {
			le.Release(ctx)
		}
		return b.Nodes()[0].QuarantinedSlots == keyslot.Slots
	})
	eventually(t, 30*time.Second, "B's connections to P, from before the failover, cut", func() bool {
		list, err := clientList(p.Addr())
		if err != nil {
			return false
		}
		for _, f := range strings.Fields(list) {
			if a, ok := strings.CutPrefix(f, "addr="); ok && before[a] {
				return false
			}
		}
		return true
	})
	a := newLockerT(t, cfg)
	held, err := a.TryLock(ctx, "fb")
	if err != nil {
		t.Fatal(err)
	}
	key := ce.key("fb")
	eventually(t, 30*time.Second, "A's key on cluster 2", func() bool { return ce.get(1, key) == held.Value() })
	ce.do(1, "DEL", key)
	if err := c0.Failover(ctx, p); err != nil {
		t.Fatal(err)
	}
	directDo(t, p.Addr(), func(b rueidis.Builder) rueidis.Completed { return b.Del().Key(key).Build() })
	// Until B's client learns of the failback, it sends cluster 0's
	// commands to R, now a replica, whose connection the dialer refuses:
	// that vote fails, and B is refused for want of a quorum, not for the
	// quarantine. Each such refusal makes the client refresh its slots;
	// every attempt must be refused.
	eventually(t, 30*time.Second, "B's TryLock refused for the quarantine", func() bool {
		second, err := b.TryLock(ctx, "fb")
		switch {
		case err == nil:
			second.Release(ctx)
			t.Fatalf("B acquired while A's lease (validity %s) is valid", held.Validity())
		case errors.Is(err, engine.ErrQuarantined):
			t.Logf("B refused: %v", err)
			return true
		case !errors.Is(err, engine.ErrNotAcquired) || !strings.Contains(err.Error(), r.Addr()+" of cluster(") ||
			!strings.Contains(err.Error(), "is a replica"):
			t.Fatalf("B's TryLock: %v, want refused for the quarantine", err)
		}
		return false
	})
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
	mutation.Require(t)
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
				c.Conn.DialContext = func(ctx context.Context, addr string) (net.Conn, error) {
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
			eventually(t, 30*time.Second, fmt.Sprintf("%q, in the shard whose clock is right, taken", n0), func() bool {
				le, err := l.TryLock(ctx, n0)
				if err == nil {
					le.Release(ctx)
				} else {
					t.Logf("%q: %v", n0, err)
				}
				return err == nil
			})
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
