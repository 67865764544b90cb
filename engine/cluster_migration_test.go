package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// migrationEnv is two masters (votes 0 and 1) and a Redis Cluster of two
// shards (vote 2), whose slots can be moved between its shards, all of
// the test's own.
type migrationEnv struct {
	t       *testing.T
	masters *redistest.Cluster
	cluster *redistest.RedisCluster
}

func newMigrationEnv(t *testing.T) *migrationEnv {
	t.Helper()
	e := &migrationEnv{t: t, masters: redistest.StartT(t, 2)}
	e.cluster = ownClusters(t, 1, redistest.ClusterOptions{Shards: 2})[0]
	return e
}

// locker is a Locker on the env's votes, patient (patientVotes).
func (e *migrationEnv) locker(mutate func(*engine.Config)) *engine.Locker {
	e.t.Helper()
	cfg := engine.DefaultConfig(e.masters.Addrs()...)
	cfg.Clusters = [][]string{e.cluster.Seeds()[:1]}
	cfg.Quarantine = engine.QuarantineObserved
	cfg.Wait.DisableNotify = true
	patientVotes(&cfg)
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
	slot = keyslot.KeySlot(key)
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
	mutation.Require(t)
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
			key := clusterSemKey("msem", 0)
			eventually(t, 30*time.Second, "A's permit on master 1", func() bool {
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
			case !errors.Is(err, engine.ErrSlotMigrating):
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
	mutation.Require(t)
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

// holders is an overlap checker: who holds each resource now, by the
// validity each holder's lease had when it was handed out.
type holders struct {
	mu         sync.Mutex
	held       map[string]map[*engine.Lease]time.Time
	token      map[string]int64
	violations []string
}

// take records le on resource, which admits limit holders at once.
func (h *holders) take(resource string, limit int, le *engine.Lease) {
	now := time.Now()
	until := now.Add(le.Validity())
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[resource] == nil {
		h.held[resource] = make(map[*engine.Lease]time.Time)
	}
	valid := 0
	for _, u := range h.held[resource] {
		if u.After(now) {
			valid++
		}
	}
	if valid >= limit {
		h.violations = append(h.violations, fmt.Sprintf("%s: a holder while %d valid ones (limit %d)", resource, valid, limit))
	}
	if limit == 1 && le.Token() != 0 {
		if last := h.token[resource]; le.Token() <= last {
			h.violations = append(h.violations, fmt.Sprintf("%s: token %d after %d", resource, le.Token(), last))
		}
		h.token[resource] = le.Token()
	}
	h.held[resource][le] = until
}

func (h *holders) drop(resource string, le *engine.Lease) {
	h.mu.Lock()
	delete(h.held[resource], le)
	h.mu.Unlock()
}

// Slots move back and forth between the shards of each of three
// clusters, step by step as a reshard does (IMPORTING and MIGRATING, the
// keys moved with MIGRATE, SETSLOT NODE), while three Lockers with
// fencing take two locks and a semaphore of two permits, all in the
// moving slot, with TryLock, Lock and TryAcquire. No resource has more
// holders than it admits within their validity, and each lock's tokens
// increase. The engine never writes a key on the target that the source
// still holds: a MIGRATE never finds its key there (BUSYKEY). With
// cluster-migration-unguarded on, scripts run on the target with the
// ASKING flag and write fencing counters and semaphore keys that the
// source still has, and the first MIGRATE of them fails so.
func TestClusterMigrationUnderLoad(t *testing.T) {
	t.Parallel()
	clusters := ownClusters(t, 3, redistest.ClusterOptions{Shards: 2})
	cfg := clusterConfig(clusters, 2*time.Second)
	// Short leases and the node timeout they imply: the load tolerates
	// timeouts, and runs until enough has happened.
	cfg.TTL, cfg.MaxTTL, cfg.NodeTimeout = 2*time.Second, 0, 0
	cfg.Fencing = true
	lockers := []*engine.Locker{newLockerT(t, cfg), newLockerT(t, cfg), newLockerT(t, cfg)}
	locks := []string{"{hot}:a", "{hot}:b"}
	slot := keyslot.KeySlot(clusterKey(locks[0]))
	h := &holders{held: make(map[string]map[*engine.Lease]time.Time), token: make(map[string]int64)}
	run := 8 * time.Second
	if testing.Short() {
		run = 3 * time.Second
	}
	ctx, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	var wg sync.WaitGroup
	var moves, acquired, migrating atomic.Int64
	// The load runs for run, and on (within the minute) until enough has
	// happened to prove something, however loaded the machine.
	enough := func() bool { return moves.Load() >= 6 && acquired.Load() >= 100 && migrating.Load() > 0 }
	wg.Go(func() {
		time.Sleep(run)
		for ctx.Err() == nil && !enough() {
			time.Sleep(50 * time.Millisecond)
		}
		stop()
	})
	for _, c := range clusters {
		wg.Go(func() {
			from, to := c.Shards[0].Nodes[0], c.Shards[1].Nodes[0]
			for ctx.Err() == nil {
				// Background: the moves run to their end after the load.
				// The pauses shape the load (a slot migrating, then not, a
				// while each); nothing waits on them.
				bg := context.Background()
				if err := c.BeginMigration(bg, slot, from, to); err != nil {
					t.Errorf("begin: %v", err)
					return
				}
				time.Sleep(30 * time.Millisecond)
				if _, err := c.MigrateKeys(bg, slot, from, to); err != nil {
					t.Errorf("MIGRATE: %v", err)
					return
				}
				time.Sleep(30 * time.Millisecond)
				if err := c.FinishMigration(bg, slot, from, to); err != nil {
					t.Errorf("finish: %v", err)
					return
				}
				moves.Add(1)
				from, to = to, from
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	for w := range 6 {
		l := lockers[w%len(lockers)]
		sem, err := l.Semaphore("hot", 2)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				name, limit := locks[(w+i)%2], 1
				var le *engine.Lease
				var err error
				switch i % 3 {
				case 0:
					le, err = l.TryLock(ctx, name)
				case 1:
					lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
					le, err = l.Lock(lctx, name)
					cancel()
				default:
					name, limit = "sem:hot", 2
					le, err = sem.TryAcquire(ctx)
				}
				if errors.Is(err, engine.ErrSlotMigrating) {
					migrating.Add(1)
				}
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				acquired.Add(1)
				h.take(name, limit, le)
				time.Sleep(time.Duration(i%5) * time.Millisecond)
				h.drop(name, le)
				le.Release(context.Background())
			}
		})
	}
	wg.Wait()
	for _, v := range h.violations {
		t.Error(v)
	}
	t.Logf("%d slot moves, %d leases, %d refusals naming a migration", moves.Load(), acquired.Load(), migrating.Load())
	if !enough() {
		t.Errorf("too little happened to prove anything: %d moves, %d leases, %d refusals naming a migration",
			moves.Load(), acquired.Load(), migrating.Load())
	}
}
