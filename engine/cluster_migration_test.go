package engine_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// migrationEnv is two masters (votes 0 and 1) and a Redis Cluster of two
// shards (vote 2), whose slots can be moved between its shards.
type migrationEnv struct {
	t       *testing.T
	masters *redistest.Cluster
	cluster *redistest.RedisCluster
}

func newMigrationEnv(t *testing.T) *migrationEnv {
	t.Helper()
	e := &migrationEnv{t: t, masters: redistest.StartT(t, 2)}
	e.cluster = redistest.StartClustersT(t, 1, redistest.ClusterOptions{Shards: 2})[0]
	time.Sleep(1100 * time.Millisecond) // past a second of uptime
	return e
}

func (e *migrationEnv) locker(mutate func(*engine.Config)) *engine.Locker {
	e.t.Helper()
	cfg := engine.DefaultConfig(e.masters.Addrs()...)
	cfg.Clusters = [][]string{e.cluster.Seeds()[:1]}
	cfg.Quarantine = engine.QuarantineObserved
	cfg.DisableNotify = true
	if mutate != nil {
		mutate(&cfg)
	}
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		e.t.Fatalf("engine.New: %v", err)
	}
	e.t.Cleanup(func() { l.Close() })
	return l
}

// shards returns the primary that serves key's slot, and the other.
func (e *migrationEnv) shards(key string) (slot int, from, to *redistest.Node) {
	slot = multiplex.KeySlot(key)
	a, b := e.cluster.Shards[0].Nodes[0], e.cluster.Shards[1].Nodes[0]
	if slot > e.cluster.Shards[0].Last {
		a, b = b, a
	}
	return slot, a, b
}

// master sends a command to master i.
func (e *migrationEnv) master(i int, args ...string) string {
	e.t.Helper()
	out, err := redistest.Do(e.masters.Nodes[i].Addr(), 5*time.Second, args...)
	if err != nil {
		e.t.Fatalf("%v on master %d: %v", args, i, err)
	}
	return out
}

// A slot in migration must not let a semaphore grant a permit held on the
// source. A holds the one permit of "msem" on master 0 and the cluster
// (its slot's key is gone from master 1, as if its SET there had failed);
// the semaphore's slot starts to move to the other shard, its keys still
// on the source. B's acquire declares the keys' common part, which exists
// nowhere: the source sends it on (ASK) to the target, whose SET NX finds
// the permit's key absent there. With master 1's yes, B would hold the
// permit too. The guard makes the cluster refuse the script while the
// slot migrates, so B is refused; with cluster-migration-unguarded on (the
// control), B gets the permit A holds.
func TestClusterMigrationSemaphoreKeepsItsPermit(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "guarded", true: "control"}[off], func(t *testing.T) {
			defer mutation.ClusterMigrationUnguarded.Set(off)()
			e := newMigrationEnv(t)
			ctx := context.Background()
			a, b := e.locker(nil), e.locker(nil)
			sa, err := a.Semaphore("msem", 1)
			if err != nil {
				t.Fatal(err)
			}
			held, err := sa.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			key := "\xffredlock:sem:{msem}:0"
			eventually(t, 5*time.Second, "A's permit on master 1", func() bool {
				return e.master(1, "GET", key) != "$-1"
			})
			e.master(1, "DEL", key)
			slot, from, to := e.shards(key)
			if err := e.cluster.BeginMigration(ctx, slot, from, to); err != nil {
				t.Fatal(err)
			}
			sb, err := b.Semaphore("msem", 1)
			if err != nil {
				t.Fatal(err)
			}
			second, err := sb.TryAcquire(ctx)
			switch {
			case err == nil && held.Validity() > 0:
				if !off {
					t.Fatalf("B took the permit A holds (validity %s) while its slot migrates", held.Validity())
				}
				second.Release(ctx)
			case err == nil:
				t.Fatal("A's permit ran out before B's acquire: the test proves nothing")
			case off:
				t.Fatalf("with %s on, B was refused (%v): the test cannot catch it", mutation.ClusterMigrationUnguarded.Name(), err)
			case !errors.Is(err, engine.ErrNotAcquired) && !errors.Is(err, engine.ErrNoQuorum):
				t.Fatalf("B's TryAcquire: %v", err)
			case !errors.Is(err, multiplex.ErrSlotMigrating):
				t.Errorf("B's refusal does not name the migration: %v", err)
			default:
				t.Logf("B refused: %v", err)
			}
		})
	}
}

// A slot in migration must not hand out a fencing token below one already
// given. Master 0's counter for "mf" is 3s ahead of the clocks (it is
// max(counter, clock): a master whose clock ran 3s ahead, within the
// skew fencing allows, leaves such counters). A takes "mf" on master 0
// and the cluster (master 1 holds it for someone else) and gets a token
// above that; the fence round raises the counter on both. After A's
// release, the slot starts to move, the counter still on the source; B
// takes "mf" on master 1 and the cluster (master 0 now holds it for
// someone else). The cluster's acquire goes on to the target (the lock's
// key is on neither shard) and reads no counter there: B's token would
// come from the clocks, below A's. With the guard, the cluster refuses
// the script and B gets no quorum; with cluster-migration-unguarded on
// (the control), B's token is below A's.
func TestClusterMigrationFencingStaysMonotonic(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "guarded", true: "control"}[off], func(t *testing.T) {
			defer mutation.ClusterMigrationUnguarded.Set(off)()
			e := newMigrationEnv(t)
			ctx := context.Background()
			fenced := func(c *engine.Config) { c.Fencing = true }
			a, b := e.locker(fenced), e.locker(fenced)
			key := clusterKey("mf")
			ahead := time.Now().Add(3 * time.Second).UnixMicro()
			e.master(0, "SET", "\xffredlock:fence:"+key, strconv.FormatInt(ahead, 10))
			e.master(1, "SET", key, "someone-else", "PX", "60000")
			first, err := a.TryLock(ctx, "mf")
			if err != nil {
				t.Fatal(err)
			}
			if first.Token() <= ahead {
				t.Fatalf("A's token %d, want above master 0's counter %d", first.Token(), ahead)
			}
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			e.master(1, "DEL", key)
			e.master(0, "SET", key, "someone-else", "PX", "60000")
			slot, from, to := e.shards(key)
			if err := e.cluster.BeginMigration(ctx, slot, from, to); err != nil {
				t.Fatal(err)
			}
			second, err := b.TryLock(ctx, "mf")
			switch {
			case err == nil && second.Token() <= first.Token():
				if !off {
					t.Fatalf("B's token %d is not above A's %d", second.Token(), first.Token())
				}
				second.Release(ctx)
			case err == nil:
				second.Release(ctx)
				t.Fatalf("B acquired with token %d above A's %d: the scenario did not split the counter from the lock", second.Token(), first.Token())
			case off:
				t.Fatalf("with %s on, B was refused (%v): the test cannot catch it", mutation.ClusterMigrationUnguarded.Name(), err)
			case !errors.Is(err, engine.ErrNotAcquired) && !errors.Is(err, engine.ErrNoQuorum):
				t.Fatalf("B's TryLock: %v", err)
			default:
				t.Logf("B refused: %v", err)
			}
		})
	}
}
