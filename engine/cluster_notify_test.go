package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// shardEnv is one Redis Cluster, the only vote (quorum 1): nothing but
// its own notifications can wake a waiter, whose fallback is a minute.
type shardEnv struct {
	t       *testing.T
	cluster *redistest.RedisCluster
	prefix  string // the Lockers' KeyPrefix: "" on a cluster of the test's own
	mu      sync.Mutex
	conns   map[string]rueidis.Client // by node address, for inspection
}

// newShardEnv is a cluster shaped by co, of the test's own.
func newShardEnv(t *testing.T, co redistest.ClusterOptions) *shardEnv {
	t.Helper()
	return shardEnvOn(t, ownClusters(t, 1, co)[0], "")
}

// shardEnvOn is a shardEnv of c, whose Lockers keep their keys under
// prefix.
func shardEnvOn(t *testing.T, c *redistest.RedisCluster, prefix string) *shardEnv {
	e := &shardEnv{t: t, cluster: c, prefix: prefix, conns: make(map[string]rueidis.Client)}
	t.Cleanup(func() {
		for _, c := range e.conns {
			c.Close()
		}
	})
	return e
}

// key is the lock key of resource name with the env's Lockers.
func (e *shardEnv) key(name string) string { return clusterKey(e.prefix + name) }

// locker is a Locker whose one vote is the cluster; a waiter's is woken by
// notifications only.
func (e *shardEnv) locker(waiter bool) *engine.Locker {
	e.t.Helper()
	cfg := engine.DefaultConfig()
	cfg.Masters, cfg.Clusters = nil, [][]string{e.cluster.Seeds()[:1]}
	cfg.KeyPrefix = e.prefix
	cfg.Quarantine = engine.QuarantineOff // the failover's promoted replica votes at once
	patientVotes(&cfg)                    // the holder's lease outlives the test's waits
	if waiter {
		waitsForNotification(&cfg)
	}
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		e.t.Fatalf("engine.New: %v", err)
	}
	e.t.Cleanup(func() { l.Close() })
	return l
}

// node sends a command to the node at addr, on a connection of the test's.
func (e *shardEnv) node(addr string, args ...string) rueidis.RedisResult {
	e.mu.Lock()
	c := e.conns[addr]
	if c == nil {
		var err error
		c, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true,
			DisableCache: true, ClientSetInfo: rueidis.DisableClientSetInfo})
		if err != nil {
			e.mu.Unlock()
			return rueidis.NewErrorResult(err)
		}
		e.conns[addr] = c
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Do(ctx, c.B().Arbitrary(args...).Build())
}

// shardSubs is how many clients node addr has subscribed to channel
// (PUBSUB SHARDNUMSUB), -1 if it does not answer.
func (e *shardEnv) shardSubs(addr, channel string) int64 {
	m, err := e.node(addr, "PUBSUB", "SHARDNUMSUB", channel).ToArray()
	if err != nil || len(m) != 2 {
		return -1
	}
	n, _ := m[1].AsInt64()
	return n
}

// stats are a node's counts of the publishes it ran and those it received
// from the others over the cluster bus.
type pubStats struct {
	publish, spublish             int64 // commands run (scripts' calls included)
	busPublish, busPublishShard   int64 // messages received over the bus
	sentPublish, sentPublishShard int64 // and sent
}

func (e *shardEnv) stats(addr string) pubStats {
	e.t.Helper()
	info, err := e.node(addr, "INFO", "commandstats").ToString()
	if err != nil {
		e.t.Fatalf("INFO commandstats on %s: %v", addr, err)
	}
	ci, err := e.node(addr, "CLUSTER", "INFO").ToString()
	if err != nil {
		e.t.Fatalf("CLUSTER INFO on %s: %v", addr, err)
	}
	calls := func(cmd string) int64 {
		_, rest, ok := strings.Cut(info, "cmdstat_"+cmd+":calls=")
		if !ok {
			return 0
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		return n
	}
	field := func(name string) int64 {
		_, rest, ok := strings.Cut(ci, name+":")
		if !ok {
			return 0
		}
		v, _, _ := strings.Cut(rest, "\r\n")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n
	}
	return pubStats{publish: calls("publish"), spublish: calls("spublish"),
		busPublish: field("cluster_stats_messages_publish_received"), busPublishShard: field("cluster_stats_messages_publishshard_received"),
		sentPublish: field("cluster_stats_messages_publish_sent"), sentPublishShard: field("cluster_stats_messages_publishshard_sent")}
}

// primaryOf is the primary that serves key's slot now.
func (e *shardEnv) primaryOf(key string) *redistest.Node {
	e.t.Helper()
	slot := keyslot.KeySlot(key)
	for s, sh := range e.cluster.Shards {
		if sh.First <= slot && slot <= sh.Last {
			return e.cluster.Primary(context.Background(), s)
		}
	}
	e.t.Fatalf("no shard serves slot %d", slot)
	return nil
}

// waiter is a Lock call on its way.
type waiter struct {
	done     chan struct{}
	lease    *engine.Lease
	err      error
	returned time.Time
}

// lockAsync starts l.Lock(name), bounded by within, and waits until the
// waiter is queued and subscribed at the node at addr (which it is
// before it marks the holder: see waitsForNotification).
func (e *shardEnv) lockAsync(l *engine.Locker, name, addr string, within time.Duration) *waiter {
	e.t.Helper()
	w := &waiter{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		w.lease, w.err = l.Lock(ctx, name)
		w.returned = time.Now()
	}()
	key := e.key(name)
	eventually(e.t, 30*time.Second, fmt.Sprintf("waiter for %q queued and subscribed at %s", name, addr), func() bool {
		n, _ := e.node(addr, "ZCARD", "\xffredlock:queue:"+key).AsInt64()
		return n == 1 && e.shardSubs(addr, "redlock:released:"+key) == 1
	})
	return w
}

// woken reports whether w's Lock returned a lease the release's
// notification woke it for: notified, never woken by its fallback. After
// a failover its attempts may then back off a while, until its client
// has learnt the new primary.
func (w *waiter) woken(t *testing.T) bool {
	t.Helper()
	<-w.done
	if w.err != nil {
		t.Logf("waiter: %v", w.err)
		return false
	}
	defer w.lease.Release(context.Background())
	if info := w.lease.Wait(); info.Notified == 0 || info.Fallbacks != 0 {
		t.Logf("waiter not woken by a notification: %+v", info)
		return false
	}
	return true
}

// A waiter on a cluster vote listens on the shard that owns its
// resource's slot (SSUBSCRIBE), and the release's script publishes there
// (SPUBLISH): it wakes the waiter, and the cluster's other shards see
// neither the subscription nor the message. A PUBLISH, as before, went to
// every node over the cluster bus. The release-to-wake latency is logged.
// It counts every node's publishes: it has the shared clusters alone.
func TestClusterNotifyIsSharded(t *testing.T) {
	ce := exclusiveClusters(t)
	e := shardEnvOn(t, ce.clusters[0], ce.prefix)
	holderL, waiterL := e.locker(false), e.locker(true)
	ctx := context.Background()
	var lat []time.Duration
	for i := range 12 {
		name := fmt.Sprintf("sharded-%d", i)
		key := e.key(name)
		channel := "redlock:released:" + key
		owner := e.primaryOf(key).Addr()
		holder, err := holderL.TryLock(ctx, name)
		if err != nil {
			t.Fatalf("TryLock %q: %v", name, err)
		}
		w := e.lockAsync(waiterL, name, owner, 45*time.Second)
		before := map[string]pubStats{}
		for _, n := range e.cluster.Nodes() {
			before[n.Addr()] = e.stats(n.Addr())
			if n.Addr() != owner {
				if got := e.shardSubs(n.Addr(), channel); got != 0 {
					t.Errorf("%q: %s, not its slot's owner, has %d subscribers", name, n.Addr(), got)
				}
			}
		}
		released := time.Now()
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("Release %q: %v", name, err)
		}
		if !w.woken(t) {
			t.Fatalf("%q: the waiter was not woken by the release", name)
		}
		lat = append(lat, w.returned.Sub(released))
		for _, n := range e.cluster.Nodes() {
			a, b := before[n.Addr()], e.stats(n.Addr())
			if b.publish != a.publish || b.busPublish != a.busPublish || b.sentPublish != a.sentPublish {
				t.Errorf("%q: %s saw a PUBLISH: %+v then %+v", name, n.Addr(), a, b)
			}
			if n.Addr() == owner && b.spublish == a.spublish {
				t.Errorf("%q: the owner %s ran no SPUBLISH: %+v then %+v", name, n.Addr(), a, b)
			}
			if n.Addr() != owner && (b.spublish != a.spublish || b.busPublishShard != a.busPublishShard) {
				t.Errorf("%q: %s, another shard, saw a SPUBLISH: %+v then %+v", name, n.Addr(), a, b)
			}
		}
	}
	slices.Sort(lat)
	t.Logf("release to wake: median %v, min %v, max %v over %d", lat[len(lat)/2], lat[0], lat[len(lat)-1], len(lat))
}

// A slot that moves to another shard takes its sharded subscriptions
// away: the old owner ends them (SUNSUBSCRIBE), and the waiter subscribes
// again at the new owner, whose release publishes there and wakes it.
// The control, and how soon it subscribes again, are in
// TestClusterNotifyAfterSlotMigrationInVirtualTime.
func TestClusterNotifyAfterSlotMigration(t *testing.T) {
	t.Parallel()
	e := newShardEnv(t, redistest.ClusterOptions{Shards: 2})
	holderL, waiterL := e.locker(false), e.locker(true)
	ctx := context.Background()
	name, _ := shardNames("migrate")
	key := e.key(name)
	channel := "redlock:released:" + key
	slot := keyslot.KeySlot(key)
	from, to := e.cluster.Shards[0].Nodes[0], e.cluster.Shards[1].Nodes[0]
	holder, err := holderL.TryLock(ctx, name)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	w := e.lockAsync(waiterL, name, from.Addr(), 2*time.Minute)
	if err := e.cluster.BeginMigration(ctx, slot, from, to); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cluster.MigrateKeys(ctx, slot, from, to); err != nil {
		t.Fatal(err)
	}
	if err := e.cluster.FinishMigration(ctx, slot, from, to); err != nil {
		t.Fatal(err)
	}
	// The old owner ended the subscription; the waiter subscribes again at
	// the new one.
	eventually(t, 30*time.Second, "the waiter subscribed again at the new owner", func() bool {
		return e.shardSubs(to.Addr(), channel) == 1
	})
	if n := e.shardSubs(from.Addr(), channel); n != 0 {
		t.Errorf("the old owner still has %d subscribers", n)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if !w.woken(t) {
		t.Fatal("the waiter was not woken by the release after its slot moved")
	}
}

// A failover moves the shard's slots to its replica. Killed, the old
// primary takes the subscriptions with its connection; demoted alive
// (CLUSTER FAILOVER), it keeps them as a replica, until the waiter's
// Locker, once it reaches the promoted replica, cuts its connections to
// the demoted node (which a waiter's Locker does only when it next sends
// the shard a command: here a probe makes it). Either way the waiter
// subscribes again at the promoted replica, whose release wakes it. The
// control is in TestClusterNotifyAfterFailoverInVirtualTime.
func TestClusterNotifyAfterFailover(t *testing.T) {
	t.Parallel()
	for _, kill := range []bool{true, false} {
		t.Run(map[bool]string{true: "killed", false: "demoted"}[kill], func(t *testing.T) {
			t.Parallel()
			if !failedOverWaiterWoken(t, kill) {
				t.Fatal("the waiter was not woken by the release after the failover")
			}
		})
	}
}

func failedOverWaiterWoken(t *testing.T, kill bool) bool {
	e := newShardEnv(t, redistest.ClusterOptions{Shards: 2, Replicas: 1})
	holderL, waiterL := e.locker(false), e.locker(true)
	ctx := context.Background()
	name, _ := shardNames("failover")
	key := e.key(name)
	channel := "redlock:released:" + key
	old, replica := e.cluster.Shards[0].Nodes[0], e.cluster.Shards[0].Nodes[1]
	holder, err := holderL.TryLock(ctx, name)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	w := e.lockAsync(waiterL, name, old.Addr(), 2*time.Minute)
	// The replica has the lock and the queue before its primary goes.
	if n, err := e.node(old.Addr(), "WAIT", "1", "30000").AsInt64(); err != nil || n != 1 {
		t.Fatalf("WAIT on %s: %d, %v", old.Addr(), n, err)
	}
	if kill {
		if err := old.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.cluster.Failover(ctx, replica); err != nil {
		t.Fatal(err)
	}
	if v := e.node(replica.Addr(), "GET", key); v.Error() != nil {
		t.Fatalf("GET %q on the promoted replica: %v", key, v.Error())
	}
	if !kill {
		t.Logf("subscribers at the demoted primary after the failover: %d", e.shardSubs(old.Addr(), channel))
		steadyOnShard(t, waiterL, key)
	}
	eventually(t, 30*time.Second, "the waiter subscribed again at the promoted replica", func() bool {
		return e.shardSubs(replica.Addr(), channel) == 1
	})
	if !kill {
		if n := e.shardSubs(old.Addr(), channel); n != 0 {
			t.Errorf("the demoted primary still has %d subscribers", n)
		}
	}
	// The holder's Locker reaches the promoted replica, steadily, before
	// it releases: a release that fails is not tried again.
	steadyOnShard(t, holderL, key)
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return w.woken(t)
}

// steadyProbes numbers steadyOnShard's probes.
var steadyProbes atomic.Int64

// steadyOnShard returns once l takes and releases a lock in key's slot
// five times in a row, 50 ms apart: after a failover its client may still
// know the old primary, whose connections the Locker cuts once it reaches
// the promoted one, and until the client learns the new slot map a
// command it routes to the old primary fails ("is a replica"). A probe
// taken on the promoted primary whose release went that way stays held
// for l's TTL, longer than this waits: each try, of any call's, takes a
// lock of its own.
func steadyOnShard(t *testing.T, l *engine.Locker, key string) {
	t.Helper()
	ctx := context.Background()
	tag := keyslot.SlotTag(keyslot.KeySlot(key)) // the resource's slot
	ok, try := 0, 0
	var last error
	if !within(60*time.Second, func() bool {
		try++
		p, err := l.TryLock(ctx, fmt.Sprintf("{%s}probe-%d", tag, steadyProbes.Add(1)))
		if err == nil {
			err = p.Release(ctx)
		}
		if ok++; err != nil {
			ok, last = 0, err
		}
		time.Sleep(50 * time.Millisecond) // spaced, so that a refresh of the client's, under way, shows
		return ok >= 5
	}) {
		t.Fatalf("not within 1m: the Locker reaching the shard steadily (%d tries; the last failed: %v)", try, last)
	}
}
