package engine_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// env is a set of real masters with a direct client to each, for set-up and
// inspection that must not go through the engine.
type env struct {
	t       *testing.T
	cluster *redistest.Cluster
	direct  []rueidis.Client
}

func newEnv(t *testing.T, n int) *env {
	t.Helper()
	c := redistest.StartT(t, n)
	e := &env{t: t, cluster: c}
	for _, a := range c.Addrs() {
		cl, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{a}, ForceSingleClient: true, DisableCache: true,
			ClientSetInfo: rueidis.DisableClientSetInfo,
		})
		if err != nil {
			t.Fatalf("direct client %s: %v", a, err)
		}
		t.Cleanup(cl.Close)
		e.direct = append(e.direct, cl)
	}
	return e
}

func (e *env) locker(mutate func(*engine.Config)) *engine.Locker {
	e.t.Helper()
	cfg := engine.DefaultConfig(e.cluster.Addrs()...)
	// The masters were just started and hold no locks: nothing to
	// quarantine them for. Restart tests set their own policy.
	cfg.Quarantine = engine.QuarantineObserved
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
	for _, a := range e.cluster.Addrs() {
		proxies = append(proxies, newLatencyProxy(e.t, a, 0, nil))
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
	addrs := e.cluster.Addrs()
	sp := []*stallProxy{newStallProxy(e.t, addrs[1]), newStallProxy(e.t, addrs[2])}
	return e.locker(func(c *engine.Config) {
		c.Masters = []string{addrs[0], sp[0].addr(), sp[1].addr()}
		c.TTL = ttl
		if maxTTL > 0 {
			c.MaxTTL = maxTTL
		}
		c.NodeTimeout = 100 * time.Millisecond
		c.ConnTimeout = time.Second
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

// queueOf lists the waiter ids in resource's queue on master i.
func (e *env) queueOf(i int, resource string) []string {
	e.t.Helper()
	c := e.direct[i]
	m, err := c.Do(context.Background(), c.B().Zrange().Key("\xffredlock:queue:"+resource).Min("0").Max("-1").Build()).AsStrSlice()
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

// publishes returns how many PUBLISH commands each master has run.
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
