package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// shardEnv is one Redis Cluster, the only vote (quorum 1): nothing but
// its own notifications can wake a waiter, whose fallback is a minute.
type shardEnv struct {
	t       *testing.T
	cluster *redistest.RedisCluster
	mu      sync.Mutex
	conns   map[string]rueidis.Client // by node address, for inspection
}

func newShardEnv(t *testing.T, co redistest.ClusterOptions) *shardEnv {
	t.Helper()
	e := &shardEnv{t: t, cluster: redistest.StartClustersT(t, 1, co)[0], conns: make(map[string]rueidis.Client)}
	t.Cleanup(func() {
		for _, c := range e.conns {
			c.Close()
		}
	})
	time.Sleep(1100 * time.Millisecond) // past a second of uptime
	return e
}

// locker is a Locker whose one vote is the cluster; a waiter's is woken by
// notifications only.
func (e *shardEnv) locker(waiter bool) *engine.Locker {
	e.t.Helper()
	cfg := engine.DefaultConfig()
	cfg.Masters, cfg.Clusters = nil, [][]string{e.cluster.Seeds()[:1]}
	cfg.Quarantine = engine.QuarantineOff // the failover's promoted replica votes at once
	cfg.TTL = time.Minute                 // the holder's lease outlives the controls' waits
	if waiter {
		cfg.FallbackMin, cfg.FallbackMax = time.Minute, time.Minute
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
	slot := multiplex.KeySlot(key)
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
// waiter is queued and subscribed at the node at addr.
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
	key := clusterKey(name)
	eventually(e.t, 10*time.Second, fmt.Sprintf("waiter for %q queued and subscribed at %s", name, addr), func() bool {
		n, _ := e.node(addr, "ZCARD", "\xffredlock:queue:"+key).AsInt64()
		return n == 1 && e.shardSubs(addr, "redlock:released:"+key) == 1
	})
	return w
}

// woken reports whether w's Lock returned a lease its release's
// notification woke it for.
func (w *waiter) woken(t *testing.T) bool {
	t.Helper()
	<-w.done
	if w.err != nil {
		t.Logf("waiter: %v", w.err)
		return false
	}
	defer w.lease.Release(context.Background())
	if c := w.lease.Wait().Cause; c != engine.WakeNotified {
		t.Logf("waiter woken by %v", c)
		return false
	}
	return true
}

// A waiter on a cluster vote listens on the shard that owns its
// resource's slot (SSUBSCRIBE), and the release's script publishes there
// (SPUBLISH): it wakes the waiter, and the cluster's other shards see
// neither the subscription nor the message. A PUBLISH, as before, went to
// every node over the cluster bus. The release-to-wake latency is logged.
func TestClusterNotifyIsSharded(t *testing.T) {
	e := newShardEnv(t, redistest.ClusterOptions{Shards: 3})
	holderL, waiterL := e.locker(false), e.locker(true)
	ctx := context.Background()
	var lat []time.Duration
	for i := range 12 {
		name := fmt.Sprintf("sharded-%d", i)
		key, channel := clusterKey(name), "redlock:released:"+clusterKey(name)
		owner := e.primaryOf(key).Addr()
		holder, err := holderL.TryLock(ctx, name)
		if err != nil {
			t.Fatalf("TryLock %q: %v", name, err)
		}
		w := e.lockAsync(waiterL, name, owner, 20*time.Second)
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
// away: the old owner ends them (SUNSUBSCRIBE), and the waiter must
// subscribe again at the new owner, whose release publishes there. With
// cluster-notify-stale-shard on (the control), the waiter takes its ended
// subscription for open and sleeps until its fallback.
func TestClusterNotifyAfterSlotMigration(t *testing.T) {
	for _, stale := range []bool{false, true} {
		t.Run(map[bool]string{false: "resubscribed", true: "control"}[stale], func(t *testing.T) {
			defer mutation.ClusterNotifyStaleShard.Set(stale)()
			woken := migratedWaiterWoken(t)
			switch {
			case !stale && !woken:
				t.Fatal("the waiter was not woken by the release after its slot moved")
			case stale && woken:
				t.Fatal("with cluster-notify-stale-shard on, the waiter was woken: the test cannot catch it")
			}
		})
	}
}

func migratedWaiterWoken(t *testing.T) bool {
	e := newShardEnv(t, redistest.ClusterOptions{Shards: 2})
	holderL, waiterL := e.locker(false), e.locker(true)
	ctx := context.Background()
	name, _ := shardNames("migrate")
	key, channel := clusterKey(name), "redlock:released:"+clusterKey(name)
	slot := multiplex.KeySlot(key)
	from, to := e.cluster.Shards[0].Nodes[0], e.cluster.Shards[1].Nodes[0]
	holder, err := holderL.TryLock(ctx, name)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	w := e.lockAsync(waiterL, name, from.Addr(), 15*time.Second)
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
	// the new one (never, in the control: release anyway after a while).
	resubscribed := within(5*time.Second, func() bool { return e.shardSubs(to.Addr(), channel) == 1 })
	t.Logf("subscribed again at the new owner: %v; at the old: %d", resubscribed, e.shardSubs(from.Addr(), channel))
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return w.woken(t)
}

// A failover moves the shard's slots to its replica. Killed, the old
// primary takes the subscriptions with its connection: the waiter
// subscribes again at the promoted replica, whose release wakes it. With
// cluster-notify-stale-shard on (the control), the broken subscription is
// taken for open and the waiter sleeps until its fallback. Demoted alive
// (CLUSTER FAILOVER), the old primary is cut by the Locker's checks or
// keeps the subscription as a replica, which its shard's messages reach:
// either way the release wakes the waiter.
func TestClusterNotifyAfterFailover(t *testing.T) {
	for _, c := range []struct {
		name        string
		kill, stale bool
	}{{"killed", true, false}, {"demoted", false, false}, {"control", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			defer mutation.ClusterNotifyStaleShard.Set(c.stale)()
			woken := failedOverWaiterWoken(t, c.kill)
			switch {
			case !c.stale && !woken:
				t.Fatal("the waiter was not woken by the release after the failover")
			case c.stale && woken:
				t.Fatal("with cluster-notify-stale-shard on, the waiter was woken: the test cannot catch it")
			}
		})
	}
}

func failedOverWaiterWoken(t *testing.T, kill bool) bool {
	e := newShardEnv(t, redistest.ClusterOptions{Shards: 2, Replicas: 1})
	holderL, waiterL := e.locker(false), e.locker(true)
	ctx := context.Background()
	name, _ := shardNames("failover")
	key, channel := clusterKey(name), "redlock:released:"+clusterKey(name)
	old, replica := e.cluster.Shards[0].Nodes[0], e.cluster.Shards[0].Nodes[1]
	holder, err := holderL.TryLock(ctx, name)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	w := e.lockAsync(waiterL, name, old.Addr(), 20*time.Second)
	// The replica has the lock and the queue before its primary goes.
	if n, err := e.node(old.Addr(), "WAIT", "1", "5000").AsInt64(); err != nil || n != 1 {
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
	if kill {
		// Never, in the control: release anyway after a while.
		again := within(5*time.Second, func() bool { return e.shardSubs(replica.Addr(), channel) == 1 })
		t.Logf("subscribed again at the promoted replica: %v", again)
	} else {
		t.Logf("subscribers at the promoted replica: %d; at the demoted primary: %d",
			e.shardSubs(replica.Addr(), channel), e.shardSubs(old.Addr(), channel))
	}
	// The holder's Locker reaches the promoted replica, steadily, before
	// it releases: its client may still know the old primary, whose
	// connections the Locker cuts, and a release that fails is not tried
	// again.
	probe := "{" + multiplex.SlotTag(multiplex.KeySlot(key)) + "}probe" // in the resource's slot
	steady := 0
	eventually(t, 20*time.Second, "the holder's Locker reaching the shard", func() bool {
		p, err := holderL.TryLock(ctx, probe)
		if err == nil {
			err = p.Release(ctx)
		}
		if steady++; err != nil {
			steady = 0
		}
		time.Sleep(50 * time.Millisecond)
		return steady >= 5
	})
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return w.woken(t)
}
