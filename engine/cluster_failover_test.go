package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// A failover inside a cluster promotes a replica that may lack the locks
// its primary granted (replication is asynchronous). Three clusters of one
// shard and one replica each are the votes; A holds a resource on
// clusters 0 and 1 only (its key is gone from cluster 2, as if its SET
// there had failed); cluster 0 fails over to a replica that lacks the key
// (deleted on it after the promotion: the writes it had not received).
// B, whose Locker saw the clusters before, then asks: clusters 0 and 2
// would say yes, a quorum. The promoted replica must sit out MaxTTL, so
// B is refused; with cluster-failover-trusted on (the control), B gets a
// second lease while A's is valid.
func TestClusterFailoverKeepsThePromotedReplicaOut(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		name := map[bool]string{false: "quarantined", true: "control"}[trusted]
		t.Run(name, func(t *testing.T) {
			defer mutation.ClusterFailoverTrusted.Set(trusted)()
			double := failoverDoubleGrant(t)
			switch {
			case !trusted && double:
				t.Fatal("B acquired while A held the lease: the promoted replica's yes counted")
			case trusted && !double:
				t.Fatal("with cluster-failover-trusted on, B was refused: the test cannot catch it")
			}
		})
	}
}

// failoverDoubleGrant runs the scenario above and reports whether B got
// a lease while A's was valid.
func failoverDoubleGrant(t *testing.T) bool {
	clusters := redistest.StartClustersT(t, 3, redistest.ClusterOptions{Shards: 1, Replicas: 1, NodeTimeout: time.Second})
	time.Sleep(1100 * time.Millisecond) // past a second of uptime
	ctx := context.Background()
	cfg := engine.DefaultConfig()
	for _, c := range clusters {
		cfg.Clusters = append(cfg.Clusters, c.Seeds())
	}
	cfg.TTL = 10 * time.Second
	cfg.Quarantine = engine.QuarantineObserved
	cfg.DisableNotify = true
	newLocker := func() *engine.Locker {
		l, err := engine.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := newLocker(), newLocker()
	if le, err := b.TryLock(ctx, "warm"); err != nil {
		t.Fatal(err)
	} else {
		le.Release(ctx)
	}
	held, err := a.TryLock(ctx, "fo")
	if err != nil {
		t.Fatal(err)
	}
	key := clusterKey("fo")
	del := func(addr string) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Do(ctx, c.B().Del().Key(key).Build()).Error(); err != nil {
			t.Fatalf("DEL on %s: %v", addr, err)
		}
	}
	eventually(t, 5*time.Second, "A's key on cluster 2", func() bool {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: clusters[2].Seeds(), DisableCache: true})
		if err != nil {
			return false
		}
		defer c.Close()
		v, _ := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
		return v == held.Value()
	})
	del(clusters[2].Seeds()[0])
	replica := clusters[0].Shards[0].Nodes[1]
	if err := clusters[0].Failover(ctx, replica); err != nil {
		t.Fatal(err)
	}
	del(replica.Addr())
	second, err := b.TryLock(ctx, "fo")
	if err == nil {
		t.Logf("B acquired %q while A's lease (validity %s) is valid", "fo", held.Validity())
		second.Release(ctx)
		return held.Validity() > 0
	}
	if !errors.Is(err, engine.ErrNotAcquired) && !errors.Is(err, engine.ErrNoQuorum) {
		t.Fatalf("B's TryLock: %v", err)
	}
	t.Logf("B refused: %v", err)
	return false
}
