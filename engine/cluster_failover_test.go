package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// A failover inside a cluster promotes a replica that may lack the locks
// its primary granted (replication is asynchronous). Three clusters are
// the votes: cluster 0 of two shards with a replica each, the test's
// own, and two of the shared clusters. A holds a resource of cluster 0's
// shard 0 on clusters 0 and 1 only (its key is gone from cluster 2, as if
// its SET there had failed); shard 0 fails over to a replica that lacks
// the key (deleted on it after the promotion: the writes it had not
// received). B, whose
// Locker saw the clusters before, then asks: clusters 0 and 2 would say
// yes, a quorum. The promoted replica's slots must sit out MaxTTL, so B
// is refused; with cluster-failover-trusted on (the control), B gets a
// second lease while A's is valid. Either way, the other shard's
// resources keep cluster 0's vote: B takes one that cluster 2 holds for
// someone else, on clusters 0 and 1.
func TestClusterFailoverKeepsThePromotedReplicaOut(t *testing.T) {
	mutation.Require(t)
	for _, trusted := range []bool{false, true} {
		name := map[bool]string{false: "quarantined", true: "control"}[trusted]
		t.Run(name, func(t *testing.T) {
			defer mutation.ClusterFailoverTrusted.Set(trusted)()
			double := failoverDoubleGrant(t, trusted)
			switch {
			case !trusted && double:
				t.Fatal("B acquired while A held the lease: the promoted replica's yes counted")
			case trusted && !double:
				t.Fatal("with cluster-failover-trusted on, B was refused: the test cannot catch it")
			}
		})
	}
}

// shardNames are resource names whose keys are in shard 0 and in shard 1
// of a cluster of two shards (slots 0-8191 and 8192-16383).
func shardNames(prefix string) (shard0, shard1 string) { return shardNamesUnder("", prefix) }

// shardNamesUnder are shardNames for Lockers whose KeyPrefix is
// keyPrefix.
func shardNamesUnder(keyPrefix, prefix string) (shard0, shard1 string) {
	for i := 0; shard0 == "" || shard1 == ""; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if keyslot.KeySlot(clusterKey(keyPrefix+name)) < keyslot.Slots/2 {
			shard0 = cmpOr(shard0, name)
		} else {
			shard1 = cmpOr(shard1, name)
		}
	}
	return shard0, shard1
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// directDo sends one command over a connection of its own to the node at
// addr.
func directDo(t *testing.T, addr string, cmd func(rueidis.Builder) rueidis.Completed) {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Do(context.Background(), cmd(c.B())).Error(); err != nil {
		t.Fatalf("on %s: %v", addr, err)
	}
}

// failoverDoubleGrant runs the scenario above and reports whether B got
// a lease while A's was valid. Clusters 1 and 2 are the shared ones.
func failoverDoubleGrant(t *testing.T, trusted bool) bool {
	c0 := ownClusters(t, 1, redistest.ClusterOptions{Shards: 2, Replicas: 1, NodeTimeout: time.Second})[0]
	ce := sharedClusters(t) // started meanwhile
	ctx := context.Background()
	cfg := clusterConfig([]*redistest.RedisCluster{c0, ce.clusters[0], ce.clusters[1]}, time.Minute)
	cfg.KeyPrefix = ce.prefix
	a, b := newLockerT(t, cfg), newLockerT(t, cfg)
	fo, other := shardNamesUnder(ce.prefix, "fo")
	// B sees both shards before the failover, on resources of their
	// own: a release is sent without waiting for it, and one of fo or
	// other still on its way would refuse A's lock, or B's, on a cluster.
	warm0, warm1 := shardNamesUnder(ce.prefix, "fo-warm")
	for _, name := range []string{warm0, warm1} {
		if le, err := b.TryLock(ctx, name); err != nil {
			t.Fatal(err)
		} else {
			le.Release(ctx)
		}
	}
	held, err := a.TryLock(ctx, fo)
	if err != nil {
		t.Fatal(err)
	}
	key := ce.key(fo)
	// TryLock returns at a quorum: A's SET on cluster 2 may still be on
	// its way. Once every cluster has answered, the DEL cannot be
	// overtaken by it.
	awaitAnswered(t, held)
	// The scenario needs A's key on clusters 0 and 1: B would otherwise
	// get a quorum without any failover's help.
	primary, err := directClient(c0.Shards[0].Nodes[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	v, err := primary.Do(ctx, primary.B().Get().Key(key).Build()).ToString()
	primary.Close()
	if err != nil || v != held.Value() || ce.get(0, key) != held.Value() {
		t.Fatalf("set-up: A's key not on clusters 0 and 1 once they answered (cluster 0: %q, %v; cluster 1: %q)", v, err, ce.get(0, key))
	}
	ce.do(1, "DEL", key)
	replica := c0.Shards[0].Nodes[1]
	if err := c0.Failover(ctx, replica); err != nil {
		t.Fatal(err)
	}
	directDo(t, replica.Addr(), func(b rueidis.Builder) rueidis.Completed { return b.Del().Key(key).Build() })
	// The other shard's resource, held on cluster 2 for someone else:
	// B's quorum needs cluster 0's vote.
	ce.do(1, "SET", ce.key(other), "someone-else", "PX", "60000")
	if le, err := b.TryLock(ctx, other); err != nil {
		t.Errorf("%q, in the shard that did not fail over: %v", other, err)
	} else {
		le.Release(ctx)
	}
	second, err := b.TryLock(ctx, fo)
	if err == nil {
		t.Logf("B acquired %q while A's lease (validity %s) is valid", fo, held.Validity())
		second.Release(ctx)
		return held.Validity() > 0
	}
	if !errors.Is(err, engine.ErrNotAcquired) && !errors.Is(err, engine.ErrNoQuorum) {
		t.Fatalf("B's TryLock: %v", err)
	}
	if !trusted {
		if !errors.Is(err, engine.ErrQuarantined) {
			t.Errorf("B's refusal does not name the quarantine: %v", err)
		}
		if s := b.Nodes()[0]; s.QuarantinedSlots != keyslot.Slots/2 || s.State != engine.StateQuarantined {
			t.Errorf("cluster 0: %d slots quarantined, state %s; want %d, quarantined", s.QuarantinedSlots, s.State, keyslot.Slots/2)
		}
	}
	t.Logf("B refused: %v", err)
	return false
}
