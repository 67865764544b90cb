package engine_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// simClusterEnv is simulated Redis Clusters (internal/simredis), and
// simulated masters, in a testing/synctest bubble: what a cluster test
// decides by the clock (the node timeout, fallback and retry timers, how
// soon a waiter subscribes again after its slot moved) happens when it is
// due however loaded the machine, and waiting costs no wall time. The
// clusters route as Redis 7 does (MOVED, ASK, TRYAGAIN, CROSSSLOT,
// sharded pub/sub), migrate slots and fail over (see simredis.Cluster);
// the tests on real clusters stay for what only Redis shows.
type simClusterEnv struct {
	t        *testing.T
	net      *simredis.Network
	clusters []*simredis.Cluster
	nodes    [][]*simredis.Master // each cluster's: every shard's primary, then its replica
	masters  []*simredis.Master
	addrs    []string // the masters'

	mu      sync.Mutex
	clients int
	direct  map[string]rueidis.Client // by node address
}

// simClusterOptions shape a simClusterEnv: Masters masters (the first
// votes), then Clusters clusters of Shards shards each, with a replica
// each if Replicas.
type simClusterOptions struct {
	Masters, Clusters, Shards int
	Replicas                  bool
}

// simClusterTest runs f in a bubble with the masters and clusters o
// shapes, every node up for an hour.
func simClusterTest(t *testing.T, o simClusterOptions, f func(t *testing.T, e *simClusterEnv)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		e := &simClusterEnv{t: t, net: simredis.NewNetwork(1), direct: make(map[string]rueidis.Client)}
		mo := simredis.MasterOptions{Uptime: time.Hour}
		e.masters, e.addrs = simredis.NewMasters(e.net, o.Masters, mo)
		all := e.masters
		for i := range o.Clusters {
			c, nodes := simredis.NewCluster(e.net, 1, o.Masters+i, o.Shards, o.Replicas, mo)
			e.clusters, e.nodes = append(e.clusters, c), append(e.nodes, nodes)
			all = append(all, nodes...)
		}
		for _, m := range all {
			t.Cleanup(m.Close)
		}
		// Cleanups run last first: the Lockers close, then this, then the
		// nodes. rueidis's cluster client ends, in the bubble, the
		// goroutines of its lazy refreshes and the connections they
		// replaced five seconds after.
		t.Cleanup(func() { time.Sleep(5*time.Second + 100*time.Millisecond) })
		f(t, e)
	})
}

// config is the env's base Locker configuration: every master and every
// cluster (by all its seeds) a vote, a simulated client of its own.
func (e *simClusterEnv) config() engine.Config {
	cfg := engine.DefaultConfig(e.addrs...)
	for _, c := range e.clusters {
		cfg.Clusters = append(cfg.Clusters, c.Seeds())
	}
	cfg.Quarantine = engine.QuarantineObserved
	cfg.DisableTracking = true // the simulated masters have no CLIENT TRACKING
	e.mu.Lock()
	e.clients++
	cfg.Conn.DialContext = e.net.Dialer(fmt.Sprintf("c%d", e.clients))
	e.mu.Unlock()
	return cfg
}

// locker is a Locker on the env's votes, closed when the test ends;
// mutate, when set, changes its configuration first.
func (e *simClusterEnv) locker(mutate func(*engine.Config)) *engine.Locker {
	e.t.Helper()
	cfg := e.config()
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

// do sends a command to node m on a connection of the test's own.
func (e *simClusterEnv) do(m *simredis.Master, args ...string) rueidis.RedisResult {
	e.mu.Lock()
	c := e.direct[m.Addr]
	if c == nil {
		dial := e.net.Dialer("direct")
		var err error
		c, err = rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{m.Addr}, ForceSingleClient: true, DisableCache: true,
			ClientSetInfo: rueidis.DisableClientSetInfo,
			DialCtxFn: func(ctx context.Context, addr string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
				return dial(ctx, addr)
			},
		})
		if err != nil {
			e.mu.Unlock()
			e.t.Fatalf("direct client %s: %v", m.Addr, err)
		}
		e.direct[m.Addr] = c
		e.t.Cleanup(c.Close)
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Do(ctx, c.B().Arbitrary(args...).Build())
}

// primary is the node that serves slot in cluster i, before any slot
// moved: shard s of n serves s*Slots/n to (s+1)*Slots/n-1.
func (e *simClusterEnv) primary(i, slot int) *simredis.Master {
	c := e.clusters[i]
	n := c.Shards()
	s := 0
	for slot > (s+1)*keyslot.Slots/n-1 {
		s++
	}
	return c.Primary(s)
}

// shardSubs is how many of node m's connections are subscribed to the
// sharded channel.
func shardSubs(m *simredis.Master, channel string) int {
	n := 0
	for _, s := range m.ShardSubscriptions() {
		if strings.HasSuffix(s, ": "+channel) {
			n++
		}
	}
	return n
}

// queueLen is how many waiters the queue of key (a lock key) holds on
// node m.
func (e *simClusterEnv) queueLen(m *simredis.Master, key string) int64 {
	e.t.Helper()
	n, err := e.do(m, "ZCARD", "\xffredlock:queue:"+key).AsInt64()
	if err != nil {
		e.t.Fatalf("ZCARD on %s: %v", m.Addr, err)
	}
	return n
}

// exists reports whether node m holds key.
func (e *simClusterEnv) exists(m *simredis.Master, key string) bool {
	e.t.Helper()
	n, err := e.do(m, "EXISTS", key).AsInt64()
	if err != nil {
		e.t.Fatalf("EXISTS on %s: %v", m.Addr, err)
	}
	return n == 1
}

// steady returns once l takes and releases a lock in key's slot five
// times in a row, a virtual 50 ms apart: after a failover its client may
// still know the old primary, and a release that fails is not tried
// again.
func steady(t *testing.T, l *engine.Locker, key string) {
	t.Helper()
	ctx := context.Background()
	probe := "{" + keyslot.SlotTag(keyslot.KeySlot(key)) + "}probe"
	deadline := time.Now().Add(time.Minute)
	for ok := 0; ok < 5; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the Locker did not take and release a lock in %q's slot five times in a row within a minute", key)
		}
		p, err := l.TryLock(ctx, probe)
		if err == nil {
			err = p.Release(ctx)
		}
		if ok++; err != nil {
			ok = 0
		}
	}
}
