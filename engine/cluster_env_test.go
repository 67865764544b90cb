package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// The test binary's Redis Clusters. A cluster takes two seconds to start
// however fast the machine (a new primary turns writable only two
// seconds after it started: Redis's CLUSTER_WRITABLE_DELAY), which is
// also why none needs to age before a Locker with QuarantineAlways and a
// TTL under two seconds counts it. So clusters are started ahead:
//
//   - the shared clusters (sharedClusters): three of three shards,
//     started by the first test that asks and stopped by TestMain, for the
//     tests that neither break them nor read a node's global state, each
//     under a key prefix of its own, in parallel if they like; a test that
//     reads global state (INFO, CLIENT LIST) takes them alone
//     (exclusiveClusters), which waits for the others to end;
//   - the listed-replicas cluster (listedReplicasCluster): one shard with
//     two replicas that its primary lists in CLUSTER SLOTS, shared alike;
//   - clusters of a test's own (ownClusters), for a test that migrates
//     slots, fails over or restarts nodes: fresh each time, but started
//     while the tests before it ran (each taken starts the next of its
//     shape).
//
// The first test that asks for any cluster starts the shared ones and
// the listed-replicas one, in the background.

// startingCluster is a cluster whose start may still run.
type startingCluster struct {
	done chan struct{}
	c    *redistest.RedisCluster
	err  error
}

func startCluster(co redistest.ClusterOptions) *startingCluster {
	return startClusterThen(co, nil)
}

// startClusterThen starts a cluster, then runs then on it (unless nil).
func startClusterThen(co redistest.ClusterOptions, then func(*redistest.RedisCluster) error) *startingCluster {
	s := &startingCluster{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		s.c, s.err = redisproc.StartRedisCluster(ctx, co, redisproc.Options{})
		if s.err == nil && then != nil {
			s.err = then(s.c)
		}
	}()
	return s
}

// wait returns the started cluster.
func (s *startingCluster) wait() (*redistest.RedisCluster, error) {
	<-s.done
	return s.c, s.err
}

var clusters struct {
	mu      sync.Mutex
	warm    bool
	shared  []*startingCluster // of sharedClusters
	listed  *startingCluster   // of listedReplicasCluster
	spares  map[redistest.ClusterOptions][]*startingCluster
	stopped bool
	// use is held, shared, by every test on the shared clusters and, alone,
	// by the test that has them alone.
	use sync.RWMutex
}

// warmClusters starts the shared clusters and the listed-replicas one,
// once. The caller holds clusters.mu.
func warmClusters() {
	if clusters.warm {
		return
	}
	clusters.warm = true
	for range 3 {
		clusters.shared = append(clusters.shared, startCluster(redistest.ClusterOptions{Shards: 3}))
	}
	clusters.listed = startClusterThen(redistest.ClusterOptions{Shards: 1, Replicas: 2}, awaitListedReplicas)
}

// stopClusters stops every cluster started for the binary (TestMain).
func stopClusters() {
	clusters.mu.Lock()
	clusters.stopped = true
	all := append([]*startingCluster{clusters.listed}, clusters.shared...)
	for _, q := range clusters.spares {
		all = append(all, q...)
	}
	clusters.mu.Unlock()
	for _, s := range all {
		if s == nil {
			continue
		}
		if c, _ := s.wait(); c != nil {
			c.Stop()
		}
	}
}

// warmed returns the shared clusters' and the listed-replicas cluster's
// starts, begun if they were not, or fails t after TestMain stopped them.
func warmed(t testing.TB) (shared []*startingCluster, listed *startingCluster) {
	t.Helper()
	clusters.mu.Lock()
	defer clusters.mu.Unlock()
	if clusters.stopped {
		t.Fatal("a cluster asked for after TestMain stopped the clusters")
	}
	warmClusters()
	return clusters.shared, clusters.listed
}

// ownClusters returns n clusters shaped by co for t alone, stopped when
// it ends; n more are started for the next test that asks.
func ownClusters(t testing.TB, n int, co redistest.ClusterOptions) []*redistest.RedisCluster {
	t.Helper()
	warmed(t)
	clusters.mu.Lock()
	if clusters.spares == nil {
		clusters.spares = make(map[redistest.ClusterOptions][]*startingCluster)
	}
	q := clusters.spares[co]
	var taken []*startingCluster
	for range n {
		if len(q) > 0 {
			taken, q = append(taken, q[0]), q[1:]
		} else {
			taken = append(taken, startCluster(co))
		}
		q = append(q, startCluster(co))
	}
	clusters.spares[co] = q
	clusters.mu.Unlock()
	out := make([]*redistest.RedisCluster, n)
	var errs []error
	for i, s := range taken {
		c, err := s.wait()
		if c != nil {
			t.Cleanup(func() { c.Stop() })
		}
		out[i] = c
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		t.Fatalf("start Redis Clusters %+v: %v", co, errs)
	}
	return out
}

// sharedClusters are the shared clusters, three of three shards, under a
// key prefix of t's own: t must not break them (migrate, fail over,
// restart, reconfigure) nor read a node's global state (INFO, CLIENT
// LIST, DBSIZE, FLUSHALL: exclusiveClusters).
func sharedClusters(t *testing.T) *clusterEnv {
	t.Helper()
	cs := startShared(t)
	clusters.use.RLock()
	t.Cleanup(clusters.use.RUnlock)
	return clusterEnvOn(t, cs, newEnv(t, 0).prefix)
}

// exclusiveClusters are the shared clusters for t alone until it ends,
// under a key prefix of its own: it may read their nodes' global
// state, which no other test changes meanwhile. It must not break them.
func exclusiveClusters(t *testing.T) *clusterEnv {
	t.Helper()
	cs := startShared(t)
	clusters.use.Lock()
	t.Cleanup(clusters.use.Unlock)
	return clusterEnvOn(t, cs, newEnv(t, 0).prefix)
}

func startShared(t *testing.T) []*redistest.RedisCluster {
	t.Helper()
	shared, _ := warmed(t)
	var out []*redistest.RedisCluster
	for _, s := range shared {
		c, err := s.wait()
		if err != nil {
			t.Fatalf("start the shared Redis Clusters: %v", err)
		}
		out = append(out, c)
	}
	return out
}

// clusterEnvOn is a clusterEnv of cs, whose Lockers keep their keys under
// prefix.
func clusterEnvOn(t *testing.T, cs []*redistest.RedisCluster, prefix string) *clusterEnv {
	t.Helper()
	e := &clusterEnv{t: t, clusters: cs, prefix: prefix}
	for _, c := range cs {
		cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Seeds(), DisableCache: true,
			ClientSetInfo: rueidis.DisableClientSetInfo})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		e.direct = append(e.direct, cl)
	}
	return e
}

// listedReplicasCluster is the shared cluster of one shard with two
// replicas, which its primary lists in CLUSTER SLOTS. A cluster lists a
// replica only once it has replicated something (a fresh, idle
// cluster's replicas are left out), and only then does a client of the
// cluster know it: once started, a key is written and the primary
// waited for (a minute at most) until it lists both, as any cluster in
// use does. Tests keep their resources' names apart (a
// prefix of their own); none may break it.
func listedReplicasCluster(t *testing.T) *redistest.RedisCluster {
	t.Helper()
	_, listed := warmed(t)
	c, err := listed.wait()
	if err != nil {
		t.Fatalf("the listed-replicas cluster: %v", err)
	}
	return c
}

// awaitListedReplicas writes a key to c's primary and waits until it
// lists its two replicas in CLUSTER SLOTS.
func awaitListedReplicas(c *redistest.RedisCluster) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	primary := c.Primary(ctx, 0)
	if primary == nil {
		return fmt.Errorf("no primary")
	}
	cl, err := redisproc.NewClient(primary.Addr(), 5*time.Second)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.Do(ctx, cl.B().Set().Key("replicated").Value("1").Build()).Error(); err != nil {
		return fmt.Errorf("SET on %s: %w", primary.Addr(), err)
	}
	for {
		slots, err := cl.Do(ctx, cl.B().ClusterSlots().Build()).ToArray()
		if err == nil && len(slots) == 1 {
			if nodes, err := slots[0].ToArray(); err == nil && len(nodes) == 2+3 { // first, last, the primary, two replicas
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s does not list both replicas in CLUSTER SLOTS: %w", primary.Addr(), ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// delMatching deletes every key that matches pattern on the node at addr
// (a primary: each key it lists is its own).
func delMatching(ctx context.Context, addr, pattern string) error {
	cl, err := redisproc.NewClient(addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer cl.Close()
	var cursor uint64
	for {
		e, err := cl.Do(ctx, cl.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("SCAN on %s: %w", addr, err)
		}
		for _, k := range e.Elements {
			if err := cl.Do(ctx, cl.B().Del().Key(k).Build()).Error(); err != nil {
				return fmt.Errorf("DEL %q on %s: %w", k, addr, err)
			}
		}
		if e.Cursor == 0 {
			return nil
		}
		cursor = e.Cursor
	}
}

// clientList is CLIENT LIST of the node at addr.
func clientList(addr string) (string, error) {
	cl, err := redisproc.NewClient(addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Do(ctx, cl.B().ClientList().Build()).ToString()
}

// patientVotes makes a Locker wait for every vote's reply up to 25 s,
// however slow the machine: the cluster tests tell a vote's refusal from
// its yes, and neither from a vote that timed out, which is what a
// loaded machine makes of the default node timeout (a hundredth of the
// TTL). Its leases last a minute at least (the node timeout must stay
// under half the TTL). A script a cluster refused is sent again a node
// timeout later: not for the tests of that.
func patientVotes(c *engine.Config) {
	c.TTL = max(c.TTL, time.Minute)
	c.NodeTimeout = 25 * time.Second
	// New dials every node of every cluster: under load that took more
	// than the default 2 s.
	c.Conn.DialTimeout = 30 * time.Second
}

// waitsForNotification makes a Locker's waiters wake for a release's
// notification only (a fallback retry of a minute), and listen before
// they ask to be notified, however slow the machine: a waiter marks the
// holder once its subscription is confirmed or the node timeout passed,
// and one marked before it listened would sleep through the release.
func waitsForNotification(c *engine.Config) {
	c.TTL, c.NodeTimeout = 2*time.Minute, 30*time.Second
	c.Wait.FallbackMin, c.Wait.FallbackMax = time.Minute, time.Minute
}

// exists reports whether key exists in cluster i.
func (e *clusterEnv) exists(i int, key string) bool {
	e.t.Helper()
	c := e.direct[i]
	n, err := c.Do(context.Background(), c.B().Exists().Key(key).Build()).AsInt64()
	if err != nil {
		e.t.Fatalf("EXISTS %q in cluster %d: %v", key, i, err)
	}
	return n == 1
}

// otherSlot is base, or the first of base1, base2, ... whose key with
// the env's Lockers is in another slot than name's.
func (e *clusterEnv) otherSlot(name, base string) string {
	b := base
	for i := 1; keyslot.KeySlot(e.key(b)) == keyslot.KeySlot(e.key(name)); i++ {
		b = fmt.Sprintf("%s%d", base, i)
	}
	return b
}

// sameShard reports whether keys a and b are served by one shard in any
// of the env's clusters.
func (e *clusterEnv) sameShard(a, b string) bool {
	sa, sb := int(keyslot.KeySlot(a)), int(keyslot.KeySlot(b))
	for _, c := range e.clusters {
		for _, sh := range c.Shards {
			if sh.First <= sa && sa <= sh.Last && sh.First <= sb && sb <= sh.Last {
				return true
			}
		}
	}
	return false
}

// do sends a command whose first argument is its key to cluster i,
// through its cluster client.
func (e *clusterEnv) do(i int, args ...string) {
	e.t.Helper()
	c := e.direct[i]
	if err := c.Do(context.Background(), c.B().Arbitrary(args[0]).Keys(args[1]).Args(args[2:]...).Build()).Error(); err != nil {
		e.t.Fatalf("%q in cluster %d: %v", args, i, err)
	}
}
