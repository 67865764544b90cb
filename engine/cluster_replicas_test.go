package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// A cluster lists a replica in CLUSTER SLOTS only once it has replicated
// something (a fresh, idle cluster's replicas are left out), and only then
// does a client of the cluster know it: these tests start a cluster of one
// shard with two replicas and wait, after a write, until its primary lists
// both, as any cluster in use does.

// newListedReplicasEnv is a shardEnv of one shard with two replicas that
// its primary lists in CLUSTER SLOTS.
func newListedReplicasEnv(t *testing.T) *shardEnv {
	t.Helper()
	e := newShardEnv(t, redistest.ClusterOptions{Shards: 1, Replicas: 2})
	primary := e.cluster.Primary(context.Background(), 0).Addr()
	if err := e.node(primary, "SET", "replicated", "1").Error(); err != nil {
		t.Fatalf("SET on %s: %v", primary, err)
	}
	eventually(t, 30*time.Second, "the primary lists both replicas in CLUSTER SLOTS", func() bool {
		slots, err := e.node(primary, "CLUSTER", "SLOTS").ToArray()
		if err != nil || len(slots) != 1 {
			return false
		}
		nodes, err := slots[0].ToArray()
		return err == nil && len(nodes) == 2+3 // first, last, the primary, two replicas
	})
	return e
}

// New over a cluster vote whose client knows the replicas reads the vote's
// INFO server from a primary: sent through the cluster client, a command
// without a key goes to any node it knows, and the dialer refuses a
// replica's connection ("is a replica"), which failed New about one time
// in three (12 of 40). Sixteen Lockers, each with a client of its own.
func TestClusterVoteNewWithListedReplicas(t *testing.T) {
	e := newListedReplicasEnv(t)
	for i := range 16 {
		cfg := engine.DefaultConfig()
		cfg.Masters, cfg.Clusters = nil, [][]string{e.cluster.Seeds()[:1]}
		cfg.Quarantine = engine.QuarantineOff
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("Locker %d: engine.New: %v", i, err)
		}
		lease, err := l.TryLock(context.Background(), fmt.Sprintf("listed-replicas-%d", i))
		if err != nil {
			t.Fatalf("Locker %d: TryLock: %v", i, err)
		}
		lease.Release(context.Background())
		l.Close()
	}
}
