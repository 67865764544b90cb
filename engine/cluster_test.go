package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
	"pgregory.net/rapid"
)

// clusterEnv is votes that are Redis Clusters, with a cluster client to
// each for inspection that must not go through the engine. On the shared
// clusters (see cluster_env_test.go) its Lockers keep their keys under a
// prefix of the test's own.
type clusterEnv struct {
	t        *testing.T
	clusters []*redistest.RedisCluster
	direct   []rueidis.Client
	prefix   string // the Lockers' KeyPrefix: "" on clusters of the test's own
}

// newClusterEnv is n clusters of shards primaries each, of the test's
// own.
func newClusterEnv(t *testing.T, n, shards int) *clusterEnv {
	t.Helper()
	return clusterEnvOn(t, ownClusters(t, n, redistest.ClusterOptions{Shards: shards}), "")
}

// votes makes every cluster a vote, each given by one seed, under the
// env's prefix.
func (e *clusterEnv) votes(c *engine.Config) {
	c.Masters, c.Clusters = nil, nil
	for _, cl := range e.clusters {
		c.Clusters = append(c.Clusters, cl.Seeds()[:1])
	}
	c.KeyPrefix = e.prefix
}

// key is the lock key of resource name with the env's Lockers.
func (e *clusterEnv) key(name string) string { return clusterKey(e.prefix + name) }

// flush deletes the env's keys: every key under its prefix on the shared
// clusters, every key on clusters of its own.
func (e *clusterEnv) flush() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range e.clusters {
		for _, n := range c.Nodes() {
			if e.prefix == "" {
				if _, err := redistest.Do(n.Addr(), 5*time.Second, "FLUSHALL"); err != nil {
					return fmt.Errorf("FLUSHALL on %s: %w", n.Addr(), err)
				}
				continue
			}
			if err := delMatching(ctx, n.Addr(), "*"+e.prefix+"*"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *clusterEnv) locker(mutate func(*engine.Config)) *engine.Locker {
	e.t.Helper()
	cfg := engine.DefaultConfig()
	e.votes(&cfg)
	cfg.Quarantine = engine.QuarantineObserved
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

// get is key's value in cluster i, "" when absent.
func (e *clusterEnv) get(i int, key string) string {
	e.t.Helper()
	c := e.direct[i]
	v, err := c.Do(context.Background(), c.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	if err != nil {
		e.t.Fatalf("GET %q in cluster %d: %v", key, i, err)
	}
	return v
}

// clusterKey is the lock key the engine uses for name with cluster votes
// (see engine/cluster.go), computed here independently of it.
func clusterKey(name string) string {
	slotTag := func(k string) string { return "{" + keyslot.SlotTag(keyslot.KeySlot(k)) + "}" }
	if !keyslot.HasTag(name) {
		return slotTag(name) + name
	}
	// A name spelled as another's key, "{T}a" or "{T}{T}a" (T the tag of
	// a's slot), has the tag put in front once more.
	first, end := strings.IndexByte(name, '{'), strings.IndexByte(name, '}')
	if first != 0 {
		return name
	}
	tag := name[:end+1]
	rest := name
	for strings.HasPrefix(rest, tag) {
		rest = rest[len(tag):]
	}
	if !keyslot.HasTag(rest) && slotTag(rest) == tag {
		return tag + name
	}
	return name
}

// spelledAsKey is a name spelled as the name "plain"'s key.
var spelledAsKey = "{" + keyslot.SlotTag(keyslot.KeySlot("plain")) + "}plain"

// clusterSemKey is the key of slot i of semaphore name with cluster
// votes: a tag of the name's lock key's slot goes first (see
// Locker.semBase).
func clusterSemKey(name string, i int) string {
	return fmt.Sprintf("\xffredlock:sem:{%s}{%s}:%d", keyslot.SlotTag(keyslot.KeySlot(clusterKey(name))), name, i)
}

// clusterNames are resource names whose braces make a hash tag, make none
// (empty or unclosed), or are absent, and one spelled as another's key.
var clusterNames = []string{"plain", "a}b", "x{}y", "{t}z", "open{", "}{q}", spelledAsKey}

// TestClusterVotesLeaseLifecycle is the lease lifecycle property (see
// lifecycle_test.go) over three Redis Clusters of three shards each, one
// vote each, with resources named with and without hash tags: exclusion,
// fencing order, hand-offs of live leases only, Release ending the lease,
// after every step. Key loss and restarts are left to the per-shard
// quarantine's tests. Not parallel: it sets rapid's flags.
func TestClusterVotesLeaseLifecycle(t *testing.T) {
	ce := sharedClusters(t)
	lcRapidDefaults(t)
	opts := lcOptions{resources: 3, votes: ce.votes, flush: ce.flush,
		names:   []string{"lifecycle-%d-r%d", "lc}{%d-r%d{}", "{lc%d}-r%d"},
		actions: []string{"trylock", "lock", "lock", "release", "release", "extend", "cancel", "sleep"}}
	rapid.Check(t, func(rt *rapid.T) {
		m := newLifecycle(rt, &lcEnv{}, opts, nil)
		defer m.close()
		rt.Repeat(m.actions())
	})
}

// Every key of one resource, its lock, fence counter and waiter queue,
// and the channel its release publishes on, is in the resource's slot,
// whatever braces its name holds: each of these operations runs one
// script on one shard, which a key in another slot would fail.
func TestClusterVotesKeepAResourceInOneSlot(t *testing.T) {
	t.Parallel()
	e := sharedClusters(t)
	holderL := e.locker(func(c *engine.Config) {
		c.Fencing = true
		c.TTL = time.Minute // the lease outlives the waits below, however slow
	})
	waiterL := e.locker(func(c *engine.Config) {
		c.Fencing = true
		waitsForNotification(c)
	})
	ctx := context.Background()
	for _, name := range clusterNames {
		holder, err := holderL.TryLock(ctx, name)
		if err != nil {
			t.Fatalf("TryLock %q: %v", name, err)
		}
		key := e.key(name)
		// TryLock returned at quorum: the last vote's reply may be on its way.
		eventually(t, 30*time.Second, fmt.Sprintf("%q: key %q with the lease's value and a fencing counter in every cluster", name, key), func() bool {
			for i := range e.clusters {
				if e.get(i, key) != holder.Value() || e.get(i, "\xffredlock:fence:"+key) == "" {
					return false
				}
			}
			return true
		})
		if err := holder.Extend(ctx, time.Minute); err != nil {
			t.Errorf("Extend %q: %v", name, err)
		}
		got := make(chan *engine.Lease, 1)
		go func() {
			lctx, cancel := context.WithTimeout(ctx, 45*time.Second)
			defer cancel()
			le, err := waiterL.Lock(lctx, name)
			if err != nil {
				t.Errorf("Lock %q: %v", name, err)
			}
			got <- le
		}()
		eventually(t, 30*time.Second, "waiter queued", func() bool {
			c := e.direct[0]
			n, _ := c.Do(ctx, c.B().Zcard().Key("\xffredlock:queue:"+key).Build()).AsInt64()
			return waiterL.Subscriptions() == 1 && n == 1
		})
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("Release %q: %v", name, err)
		}
		le := <-got
		if le == nil {
			t.FailNow()
		}
		if w := le.Wait(); w.Cause != engine.WakeNotified {
			t.Errorf("%q: waiter's wait %+v, want woken by the release's notification", name, w)
		}
		if le.Token() <= holder.Token() {
			t.Errorf("%q: token %d after %d", name, le.Token(), holder.Token())
		}
		if err := le.Release(ctx); err != nil {
			t.Errorf("Release %q: %v", name, err)
		}
	}
	for _, name := range []string{"sem", "}sem"} {
		s, err := holderL.Semaphore(name, 3)
		if err != nil {
			t.Fatal(err)
		}
		var permits []*engine.Lease
		for range 3 {
			p, err := s.TryAcquire(ctx)
			if err != nil {
				t.Fatalf("semaphore %q: %v", name, err)
			}
			permits = append(permits, p)
		}
		for _, p := range permits {
			if err := p.Release(ctx); err != nil {
				t.Errorf("semaphore %q: Release: %v", name, err)
			}
		}
	}
}

// A read/write lock over cluster votes keeps its holders, intents and
// fence counter in the name's slot, whatever braces the name holds:
// readers share, a writer waits for them and is woken by their release.
func TestClusterVotesRWMutex(t *testing.T) {
	t.Parallel()
	e := sharedClusters(t)
	l := e.locker(func(c *engine.Config) {
		c.Fencing = true
		c.TTL = time.Minute // the readers' leases outlive the waits below, however slow
	})
	waiterL := e.locker(func(c *engine.Config) {
		c.Fencing = true
		waitsForNotification(c)
	})
	ctx := context.Background()
	for _, name := range clusterNames {
		m, err := l.RWMutex(name)
		if err != nil {
			t.Fatal(err)
		}
		r1, err := m.TryRLock(ctx)
		if err != nil {
			t.Fatalf("TryRLock %q: %v", name, err)
		}
		r2, err := m.TryRLock(ctx)
		if err != nil {
			t.Fatalf("second TryRLock %q: %v", name, err)
		}
		wm, err := waiterL.RWMutex(name)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *engine.Lease, 1)
		go func() {
			lctx, cancel := context.WithTimeout(ctx, 45*time.Second)
			defer cancel()
			w, err := wm.Lock(lctx)
			if err != nil {
				t.Errorf("Lock %q: %v", name, err)
			}
			got <- w
		}()
		// The writer's intent, which its second attempt leaves once it
		// listens for the release, is on a quorum of clusters (a round
		// that a quorum refused may end before the last vote's script is
		// sent), whose releases will wake it.
		intents := "\xffredlock:rw:" + e.key(name)
		eventually(t, 30*time.Second, fmt.Sprintf("%q: the writer's intent on a quorum of clusters", name), func() bool {
			n := 0
			for i := range e.clusters {
				if e.exists(i, intents) {
					n++
				}
			}
			return n >= len(e.clusters)/2+1
		})
		for _, r := range []*engine.Lease{r1, r2} {
			if err := r.Release(ctx); err != nil {
				t.Fatalf("Release %q: %v", name, err)
			}
		}
		w := <-got
		if w == nil {
			t.FailNow()
		}
		if w.Token() == 0 {
			t.Errorf("%q: the writer has no fencing token", name)
		}
		if _, err := m.TryRLock(ctx); !errors.Is(err, engine.ErrNotAcquired) {
			t.Errorf("%q: TryRLock while a writer holds: %v, want ErrNotAcquired", name, err)
		}
		if err := w.Release(ctx); err != nil {
			t.Errorf("Release %q: %v", name, err)
		}
	}
}

// A multi-resource lock over cluster votes takes resources of one slot
// all or nothing, and refuses resources in several with ErrCrossSlot.
func TestClusterVotesMultiLockNeedsOneSlot(t *testing.T) {
	t.Parallel()
	e := sharedClusters(t)
	l := e.locker(nil)
	ctx := context.Background()
	le, err := l.TryLockAll(ctx, "{order:1}:items", "{order:1}:invoice")
	if err != nil {
		t.Fatalf("TryLockAll in one slot: %v", err)
	}
	if _, err := l.TryLock(ctx, "{order:1}:items"); !errors.Is(err, engine.ErrNotAcquired) {
		t.Errorf("TryLock of a resource held by a multi-lock: %v", err)
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := e.otherSlot("a", "b")
	_, err = l.TryLockAll(ctx, "a", b)
	if !errors.Is(err, engine.ErrCrossSlot) || !strings.HasPrefix(err.Error(), "engine: ") || strings.Count(err.Error(), "engine: ") != 1 {
		t.Fatalf("TryLockAll over two slots: %v, want ErrCrossSlot", err)
	}
	for _, k := range []string{e.key("a"), e.key(b)} {
		if v := e.get(0, k); v != "" {
			t.Errorf("a refused multi-lock left %q = %q", k, v)
		}
	}
}

// No node may serve two votes: a cluster given as two votes (by two of
// its nodes) is refused at New, naming both votes and a node they share.
func TestClusterVoteSharingANodeIsRefused(t *testing.T) {
	mutation.Require(t)
	e := newClusterEnv(t, 2, 2)
	cfg := engine.DefaultConfig()
	cfg.Quarantine = engine.QuarantineObserved
	shared := e.clusters[1].Seeds()[1]
	cfg.Clusters = [][]string{e.clusters[0].Seeds()[:1], e.clusters[1].Seeds()[:1], {shared}}
	l, err := engine.New(context.Background(), cfg)
	if err == nil {
		l.Close()
		t.Fatal("New accepted a cluster given as two votes")
	}
	if !errors.Is(err, engine.ErrNotIndependent) || !strings.HasPrefix(err.Error(), "engine: ") {
		t.Fatalf("New: %v, want ErrNotIndependent", err)
	}
	for _, s := range []string{"(vote 1)", "(vote 2)", "one server in two votes"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not say %q", err, s)
		}
	}
	// Either vote may reach any node of the cluster first, so the node
	// named is whichever both votes reached: one of the cluster's, named
	// once for each vote.
	named := ""
	for _, n := range e.clusters[1].Nodes() {
		if strings.Count(err.Error(), "node "+n.Addr()+" of ") == 2 {
			named = n.Addr()
		}
	}
	if named == "" {
		t.Errorf("%q does not name one node of %v under both votes", err, e.clusters[1].Seeds())
	}
	// The control: without the comparison across votes, New accepts it.
	defer mutation.ClusterVotesShareNode.Set(true)()
	l, err = engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("with %s on, New still refused: %v", mutation.ClusterVotesShareNode.Name(), err)
	}
	l.Close()
}

// The control of the keys' slots: with cluster-keys-untagged on, a
// resource's fence counter and queue land in other slots than its lock,
// and its scripts fail on the clusters.
func TestClusterKeysUntaggedControl(t *testing.T) {
	mutation.Require(t)
	e := sharedClusters(t)
	defer mutation.ClusterKeysUntagged.Set(true)()
	l := e.locker(func(c *engine.Config) { c.Fencing = true })
	// The fencing script reads the counter under pcall, and reports the
	// refusal as a counter it cannot read. A script without flags may
	// touch keys of other slots on its own node, so the name is one whose
	// counter lives on another shard than its lock key, where the node
	// refuses the read: with the test's key prefix, "plain" may not be.
	name := "plain"
	for i := 1; e.sameShard(e.prefix+name, engine.FenceKey(e.prefix+name)); i++ {
		name = fmt.Sprintf("plain%d", i)
	}
	if _, err := l.TryLock(context.Background(), name); err == nil {
		t.Fatalf("TryLock of %q succeeded with the lock key untagged: the test cannot catch it", name)
	}
}

// Two names, one spelled as the other's key with cluster votes ("plain"
// is kept at "{T}plain", T a tag of its slot, and "{T}plain" is a name
// too), are two resources: each is held at once by its own holder, at
// its own key in every cluster.
func TestClusterVotesKeyEachNameApart(t *testing.T) {
	e := newClusterEnv(t, 3, 3)
	ctx := context.Background()
	plain, err := e.locker(nil).TryLock(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	spelled, err := e.locker(nil).TryLock(ctx, spelledAsKey)
	if err != nil {
		t.Fatalf("TryLock %q while %q is held: %v", spelledAsKey, "plain", err)
	}
	// Each TryLock returned at quorum: the last vote's reply may be on its way.
	eventually(t, 30*time.Second, "each lease's value at its own key in every cluster", func() bool {
		for i := range e.clusters {
			if e.get(i, clusterKey("plain")) != plain.Value() || e.get(i, clusterKey(spelledAsKey)) != spelled.Value() {
				return false
			}
		}
		return true
	})
	for _, le := range []*engine.Lease{plain, spelled} {
		if err := le.Release(ctx); err != nil {
			t.Errorf("Release %q: %v", le.Resource(), err)
		}
	}
}

// Close leaves no connection open on any node of any cluster: none of
// the connections the Locker dialed is in the CLIENT LIST of the node it
// was dialed to. (Other tests' clients of the shared clusters are in the
// lists too, and one to another node may have the local port of one of
// ours: the kernel picks a connection's port per destination.)
func TestClusterVotesCloseLeavesNoConnections(t *testing.T) {
	t.Parallel()
	e := sharedClusters(t)
	var mu sync.Mutex
	// The connections, as {the node's address, the local address}: two
	// to different nodes may share a local port.
	dialed := map[[2]string]bool{}
	l := e.locker(func(c *engine.Config) {
		c.Conn.DialContext = func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				mu.Lock()
				dialed[[2]string{addr, conn.LocalAddr().String()}] = true
				mu.Unlock()
			}
			return conn, err
		}
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				name := fmt.Sprintf("close-%d", (g+i)%5)
				lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				if le, err := l.Lock(lctx, name); err == nil {
					le.Release(ctx)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) == 0 {
		t.Fatal("the Locker dialed nothing: the test proves nothing")
	}
	// Every address dialed is a node's, as the nodes name themselves, so
	// that each connection is looked for in the list where it would be.
	nodes := map[string]bool{}
	for _, c := range e.clusters {
		for _, n := range c.Nodes() {
			nodes[n.Addr()] = true
		}
	}
	for c := range dialed {
		if !nodes[c[0]] {
			t.Fatalf("set-up: the Locker dialed %s, which is none of the clusters' nodes %v", c[0], slices.Sorted(maps.Keys(nodes)))
		}
	}
	// A closed connection leaves the node's list once the node reads the
	// close.
	eventually(t, 30*time.Second, "none of the Locker's connections on any node", func() bool {
		for _, c := range e.clusters {
			for _, n := range c.Nodes() {
				list, err := clientList(n.Addr())
				if err != nil {
					return false
				}
				for _, line := range strings.Split(list, "\n") {
					for _, f := range strings.Fields(line) {
						if a, ok := strings.CutPrefix(f, "addr="); ok && dialed[[2]string{n.Addr(), a}] {
							return false
						}
					}
				}
			}
		}
		return true
	})
}

// Config.Clusters is checked with the masters, naming the bad entry.
func TestClusterConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		masters  []string
		clusters [][]string
		want     string
	}{
		{nil, [][]string{{}}, "engine: Config.Clusters[0] has no addresses"},
		{nil, [][]string{{"a:1"}, {"b"}}, `engine: Config.Clusters[1][0] "b": want host:port`},
		{[]string{"a:1"}, [][]string{{"b:2", "a:1"}}, `engine: Config.Clusters[0][1] "a:1" duplicates Config.Masters[0]`},
		{[]string{"a:1", "bad"}, [][]string{{"b:2"}}, `engine: Config.Masters[1] "bad": want host:port`},
	} {
		cfg := engine.DefaultConfig(tc.masters...)
		cfg.Clusters = tc.clusters
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: %v, want %q", tc.masters, tc.clusters, err, tc.want)
		}
	}
	cfg := engine.DefaultConfig()
	cfg.Clusters = [][]string{{"a:1", "b:2"}, {"c:3"}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("clusters alone: %v", err)
	}
}
