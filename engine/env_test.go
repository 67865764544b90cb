package engine_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// pool is the test binary's real masters, started once by TestMain and
// shared by every test that does not break them; each such test keeps to
// a key prefix of its own, so tests on the pool may run in parallel.
var pool struct {
	cluster *redistest.Cluster
	direct  []rueidis.Client
}

// poolMasters is how many masters TestMain starts for the pool.
const poolMasters = 5

// envSeq numbers the envs on the pool, so that a prefix is never reused
// (fence counters outlive a test, and -count may run a test again).
var envSeq atomic.Int64

// startPool starts the pool's masters and their direct clients.
func startPool() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := redistest.Start(ctx, poolMasters, redistest.Options{})
	if err != nil {
		return err
	}
	pool.cluster = c
	for _, a := range c.Addrs() {
		cl, err := directClient(a)
		if err != nil {
			stopPool()
			return fmt.Errorf("direct client %s: %w", a, err)
		}
		pool.direct = append(pool.direct, cl)
	}
	return nil
}

func stopPool() {
	for _, cl := range pool.direct {
		cl.Close()
	}
	if pool.cluster != nil {
		pool.cluster.Stop()
	}
}

func directClient(addr string) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true,
		ClientSetInfo: rueidis.DisableClientSetInfo,
	})
}

// env is a set of real masters with a direct client to each, for set-up and
// inspection that must not go through the engine.
type env struct {
	t *testing.T
	// cluster is set only for masters of this test alone (ownEnv), which
	// it may kill, pause, restart or reconfigure; nil on the pool.
	cluster *redistest.Cluster
	addrs   []string
	// prefix is the KeyPrefix of the env's Lockers: on the pool, one per
	// test; "" on masters of the test's own.
	prefix string
	direct []rueidis.Client

	// sim and net are the simulated masters and their network (simTest);
	// nil on real masters.
	sim []*simredis.Master
	net *simredis.Network

	mu      sync.Mutex
	proxies map[string]*proxy // by address, see startProxy
	clients int               // the simulated network's clients so far
}

// newEnv returns n (at most poolMasters) of the pool's masters under a key
// prefix of the test's own. The test must not break them: one that
// kills, pauses, restarts or reconfigures masters, or reads a master's
// global state (INFO, DBSIZE), takes ownEnv.
func newEnv(t *testing.T, n int) *env {
	t.Helper()
	if n > len(pool.direct) {
		t.Fatalf("newEnv: %d masters asked, the pool has %d (use ownEnv)", n, len(pool.direct))
	}
	name := strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '_' || r == '/' || r == '-' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return r
		}
		return '_'
	}, t.Name())
	return &env{t: t, addrs: pool.cluster.Addrs()[:n], direct: pool.direct[:n],
		prefix: fmt.Sprintf("%s#%d:", name, envSeq.Add(1))}
}

// ownEnv starts n masters for this test alone, stopped when it ends.
func ownEnv(t *testing.T, n int) *env {
	t.Helper()
	c := redistest.StartT(t, n)
	e := &env{t: t, cluster: c, addrs: c.Addrs()}
	for _, a := range c.Addrs() {
		cl, err := directClient(a)
		if err != nil {
			t.Fatalf("direct client %s: %v", a, err)
		}
		t.Cleanup(cl.Close)
		e.direct = append(e.direct, cl)
	}
	return e
}

// addProxy makes a simulated master's proxy reachable by its address
// (see simConfig).
func (e *env) addProxy(p *proxy) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proxies == nil {
		e.proxies = map[string]*proxy{}
	}
	e.proxies[p.addr()] = p
}

// dialMaster connects to one of e's masters, bypassing any proxy.
func (e *env) dialMaster(ctx context.Context, addr string) (net.Conn, error) {
	if e.net != nil {
		return e.net.Dialer("proxy")(ctx, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// key is the key the env's Lockers keep resource under.
func (e *env) key(resource string) string { return e.prefix + resource }

// config is the env's base Locker configuration, as locker uses it.
func (e *env) config() engine.Config {
	cfg := engine.DefaultConfig(e.addrs...)
	cfg.KeyPrefix = e.prefix
	// The masters hold no locks of this test's: nothing to quarantine
	// them for. Restart tests set their own policy.
	cfg.Quarantine = engine.QuarantineObserved
	if e.net != nil {
		e.simConfig(&cfg)
	}
	return cfg
}

// locker is a Locker on e's masters, closed when the test ends; mutate,
// when set, changes its configuration first.
func (e *env) locker(mutate func(*engine.Config)) *engine.Locker {
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

// proxiedLocker is a Locker (mutate as for e.locker) that reaches every
// master through a latency proxy, returned in the masters' order.
func (e *env) proxiedLocker(mutate func(*engine.Config)) (*engine.Locker, []*latencyProxy) {
	var proxies []*latencyProxy
	for _, a := range e.addrs {
		proxies = append(proxies, newLatencyProxy(e, a, 0, nil))
	}
	return e.locker(func(c *engine.Config) {
		if mutate != nil {
			mutate(c)
		}
		c.Masters = nil
		for _, p := range proxies {
			c.Masters = append(c.Masters, p.addr())
		}
	}), proxies
}

// stalledLocker is a Locker on e's three masters that reaches masters 1
// and 2 through proxies that can hold its commands back and break the
// connections under them (maxTTL 0 keeps the default).
func (e *env) stalledLocker(ttl, maxTTL time.Duration) (*engine.Locker, []*stallProxy) {
	addrs := e.addrs
	sp := []*stallProxy{newStallProxy(e, addrs[1]), newStallProxy(e, addrs[2])}
	return e.locker(func(c *engine.Config) {
		c.Masters = []string{addrs[0], sp[0].addr(), sp[1].addr()}
		c.TTL = ttl
		if maxTTL > 0 {
			c.MaxTTL = maxTTL
		}
		c.NodeTimeout = 100 * time.Millisecond
		c.Conn.ConnTimeout = time.Second
	}), sp
}

// get returns the key's value on node i, or "" when absent.
func (e *env) get(i int, key string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := e.direct[i].Do(ctx, e.direct[i].B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	if err != nil {
		e.t.Fatalf("GET %s on node %d: %v", key, i, err)
	}
	return v
}

func (e *env) set(i int, key, value string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := e.direct[i].Do(ctx, e.direct[i].B().Set().Key(key).Value(value).Build()).Error(); err != nil {
		e.t.Fatalf("SET on node %d: %v", i, err)
	}
}

func (e *env) del(i int, key string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := e.direct[i].Do(ctx, e.direct[i].B().Del().Key(key).Build()).Error(); err != nil {
		e.t.Fatalf("DEL on node %d: %v", i, err)
	}
}

// pttl is the key's remaining time to live on node i, in milliseconds.
func (e *env) pttl(i int, key string) int64 {
	c := e.direct[i]
	ms, _ := c.Do(context.Background(), c.B().Pttl().Key(key).Build()).AsInt64()
	return ms
}

// scan returns the keys on master i that match pattern.
func (e *env) scan(i int, pattern string) []string {
	e.t.Helper()
	c := e.direct[i]
	var keys []string
	var cursor uint64
	for {
		se, err := c.Do(context.Background(), c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
		if err != nil {
			e.t.Fatalf("SCAN on master%d: %v", i, err)
		}
		keys = append(keys, se.Elements...)
		if se.Cursor == 0 {
			return keys
		}
		cursor = se.Cursor
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// within reports whether cond held at some point within d.
func within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// numsub returns the number of subscribers of channel on node i.
func (e *env) numsub(i int, channel string) int64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c := e.direct[i]
	a, err := c.Do(ctx, c.B().PubsubNumsub().Channel(channel).Build()).ToArray()
	if err != nil || len(a) != 2 {
		e.t.Fatalf("PUBSUB NUMSUB %s on node %d: %v (%d elements)", channel, i, err, len(a))
	}
	n, err := a[1].AsInt64()
	if err != nil {
		e.t.Fatalf("PUBSUB NUMSUB %s on node %d: %v", channel, i, err)
	}
	return n
}

// queueOf lists the waiter ids in resource's queue on master i (resource
// without the env's prefix).
func (e *env) queueOf(i int, resource string) []string {
	e.t.Helper()
	c := e.direct[i]
	m, err := c.Do(context.Background(), c.B().Zrange().Key("\xffredlock:queue:"+e.key(resource)).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		e.t.Fatalf("ZRANGE on node %d: %v", i, err)
	}
	return m
}

// queued reports whether resource's queue holds n waiters on every master.
func (e *env) queued(resource string, n int) bool {
	for i := range e.direct {
		if len(e.queueOf(i, resource)) != n {
			return false
		}
	}
	return true
}

// subscribers is how many connections are subscribed to channel on
// master i: PUBSUB NUMSUB on a real master, the simulated master's own
// count on a simulated one.
func (e *env) subscribers(i int, channel string) int64 {
	e.t.Helper()
	if e.sim == nil {
		return e.numsub(i, channel)
	}
	var n int64
	for _, s := range e.sim[i].Subscriptions() {
		if strings.HasSuffix(s, ": "+channel) {
			n++
		}
	}
	return n
}

// publishes returns how many PUBLISH commands each master has run: a
// count over the whole server, so only for masters of the test's own.
func (e *env) publishes() []int {
	e.t.Helper()
	out := make([]int, len(e.direct))
	for i, c := range e.direct {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		info, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
		cancel()
		if err != nil {
			e.t.Fatalf("INFO commandstats on node %d: %v", i, err)
		}
		if _, rest, ok := strings.Cut(info, "cmdstat_publish:calls="); ok {
			out[i], _ = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		}
	}
	return out
}

// The faults a test injects, on real masters of its own (ownEnv) or on
// simulated ones (simTest) alike.

// kill stops master i at once, as SIGKILL does: its connections break and
// it refuses new ones until restart.
func (e *env) kill(i int) {
	e.t.Helper()
	if e.sim != nil {
		e.sim[i].Kill()
		return
	}
	if err := e.own().Nodes[i].Kill(); err != nil {
		e.t.Fatalf("kill master %d: %v", i, err)
	}
}

// restart starts master i again, empty (no persistence): it forgot every
// lock, and a new run_id and uptime tell so.
func (e *env) restart(i int) {
	e.t.Helper()
	if e.sim != nil {
		e.sim[i].Restart()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.own().Nodes[i].Restart(ctx); err != nil {
		e.t.Fatalf("restart master %d: %v", i, err)
	}
}

// pause freezes master i, as SIGSTOP does: connections stay open and
// nothing is answered until resume, which the test's end also does.
func (e *env) pause(i int) {
	e.t.Helper()
	if e.sim != nil {
		e.sim[i].Pause()
		e.t.Cleanup(e.sim[i].Resume)
		return
	}
	n := e.own().Nodes[i]
	if err := n.Pause(); err != nil {
		e.t.Fatalf("pause master %d: %v", i, err)
	}
	e.t.Cleanup(func() { n.Resume() })
}

// resume lets a paused master i answer again.
func (e *env) resume(i int) {
	e.t.Helper()
	if e.sim != nil {
		e.sim[i].Resume()
		return
	}
	if err := e.own().Nodes[i].Resume(); err != nil {
		e.t.Fatalf("resume master %d: %v", i, err)
	}
}

// own is e's masters of its own, for a fault; a test on the pool that
// asks for one is told to take ownEnv.
func (e *env) own() *redistest.Cluster {
	e.t.Helper()
	if e.cluster == nil {
		e.t.Fatal("a fault on the pool's masters: take ownEnv (or simTest)")
	}
	return e.cluster
}
