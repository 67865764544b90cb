package redisproc_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

func startCluster(t *testing.T, co redisproc.ClusterOptions) *redisproc.RedisCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := redisproc.StartRedisCluster(ctx, co, redisproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

// A started cluster serves every slot from its primaries, with the
// replicas attached, and Stop leaves no process behind.
func TestRedisClusterServesEverySlot(t *testing.T) {
	c := startCluster(t, redisproc.ClusterOptions{Shards: 3, Replicas: 1})
	if len(c.Shards) != 3 || len(c.Nodes()) != 6 {
		t.Fatalf("%d shards, %d nodes; want 3 and 6", len(c.Shards), len(c.Nodes()))
	}
	if c.Shards[0].First != 0 || c.Shards[2].Last != redisproc.Slots-1 || c.Shards[1].First != c.Shards[0].Last+1 {
		t.Errorf("slot ranges do not cover the slots: %+v %+v %+v", *c.Shards[0], *c.Shards[1], *c.Shards[2])
	}
	ctx := context.Background()
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Seeds(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, k := range []string{"a", "b", "c", "{x}1", "{x}2", "zz"} {
		if err := cl.Do(ctx, cl.B().Set().Key(k).Value(k).Build()).Error(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	shards, err := cl.Do(ctx, cl.B().ClusterShards().Build()).ToArray()
	if err != nil || len(shards) != 3 {
		t.Fatalf("CLUSTER SHARDS: %d, %v", len(shards), err)
	}
	for s := range c.Shards {
		if p := c.Primary(ctx, s); p != c.Shards[s].Nodes[0] {
			t.Errorf("shard %d: primary %v, want the first started", s, p)
		}
	}
	var pids []int
	for _, n := range c.Nodes() {
		pids = append(pids, n.PID())
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("pid %d outlived Stop", pid)
		}
	}
}

// Failover promotes a replica, with its primary up or down, and the
// cluster serves the shard's slots from it.
func TestRedisClusterFailover(t *testing.T) {
	c := startCluster(t, redisproc.ClusterOptions{Shards: 2, Replicas: 1, NodeTimeout: time.Second})
	ctx := context.Background()
	old, replica := c.Shards[1].Nodes[0], c.Shards[1].Nodes[1]
	if err := c.Failover(ctx, replica); err != nil {
		t.Fatal(err)
	}
	if p := c.Primary(ctx, 1); p != replica {
		t.Fatalf("primary after a failover: %v, want %s", p, replica.Addr())
	}
	// Back, with the primary (the first replica) killed: a takeover.
	if err := replica.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.Failover(ctx, old); err != nil {
		t.Fatal(err)
	}
	if p := c.Primary(ctx, 1); p != old {
		t.Fatalf("primary after a takeover: %v, want %s", p, old.Addr())
	}
	if reply, err := redisproc.Do(ctx, old.Addr(), 10*time.Second, "CLUSTER", "COUNTKEYSINSLOT", "16000"); err != nil || !strings.HasPrefix(reply, ":") {
		t.Errorf("the new primary does not serve its slots: %q, %v", reply, err)
	}
}

func TestStartRedisClusterRejectsBadShape(t *testing.T) {
	if _, err := redisproc.StartRedisCluster(context.Background(), redisproc.ClusterOptions{Shards: -1}, redisproc.Options{}); err == nil {
		t.Fatal("a cluster of -1 shards started")
	}
}

// A slot moved step by step ends on the target with its keys, every node
// agreeing, and a client finds them there; with replicas too, which
// refuse SETSLOT and follow their primaries.
func TestRedisClusterMigratesASlot(t *testing.T) {
	for _, replicas := range []int{0, 1} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) { migrateASlot(t, replicas) })
	}
}

func migrateASlot(t *testing.T, replicas int) {
	c := startCluster(t, redisproc.ClusterOptions{Shards: 2, Replicas: replicas})
	ctx := context.Background()
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Seeds(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	keys := []string{"{m}1", "{m}2", "{m}3"}
	for _, k := range keys {
		if err := cl.Do(ctx, cl.B().Set().Key(k).Value(k).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	slot, err := cl.Do(ctx, cl.B().ClusterKeyslot().Key("{m}").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	from, to := c.Shards[0].Nodes[0], c.Shards[1].Nodes[0]
	if int(slot) > c.Shards[0].Last {
		from, to = to, from
	}
	if err := c.BeginMigration(ctx, int(slot), from, to); err != nil {
		t.Fatal(err)
	}
	if n, err := c.MigrateKeys(ctx, int(slot), from, to, keys[0]); err != nil || n != 1 {
		t.Fatalf("MigrateKeys of one key: %d, %v", n, err)
	}
	if n, err := c.MigrateKeys(ctx, int(slot), from, to); err != nil || n != 2 {
		t.Fatalf("MigrateKeys of the rest: %d, %v", n, err)
	}
	if err := c.FinishMigration(ctx, int(slot), from, to); err != nil {
		t.Fatal(err)
	}
	direct, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{to.Addr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	for _, k := range keys {
		if v, err := direct.Do(ctx, direct.B().Get().Key(k).Build()).ToString(); err != nil || v != k {
			t.Errorf("GET %s on the target: %q, %v", k, v, err)
		}
	}
}

// An IMPORTING mark of a slot another node serves, with no key, keeps the
// cluster from looking whole until ClearStaleImports clears it; the owner
// keeps the slot.
func TestRedisClusterClearsStaleImports(t *testing.T) {
	c := startCluster(t, redisproc.ClusterOptions{Shards: 2, Replicas: 1})
	ctx := context.Background()
	owner, other := c.Shards[0].Nodes[0], c.Shards[1].Nodes[0]
	ownerID, err := owner.ID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := redisproc.Do(ctx, other.Addr(), 10*time.Second, "CLUSTER", "SETSLOT", "7", "IMPORTING", ownerID); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := c.WaitHealthy(short); err == nil {
		t.Fatal("WaitHealthy passed with an IMPORTING mark open")
	}
	cleared, err := c.ClearStaleImports(ctx)
	if err != nil || len(cleared) != 1 || cleared[0] != 7 {
		t.Fatalf("ClearStaleImports: %v, %v; want [7]", cleared, err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if cleared, err := c.ClearStaleImports(ctx); err != nil || len(cleared) != 0 {
		t.Errorf("again: %v, %v; want nothing", cleared, err)
	}
}
