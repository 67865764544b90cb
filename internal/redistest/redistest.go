// Package redistest is the tests' handle on real redis-server processes: it
// starts them for one test and stops them when the test ends. The processes
// themselves are managed by internal/redisproc, which the load generator
// shares; this package only adds what needs package testing, so that the
// shipped binary does not link it. Only _test.go files import it.
package redistest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
)

// The types are redisproc's, so that a test can hand a cluster to code that
// takes a *redisproc.Cluster or *redisproc.Node.
type (
	Options         = redisproc.Options
	Cluster         = redisproc.Cluster
	Node            = redisproc.Node
	RedisCluster    = redisproc.RedisCluster
	ClusterOptions  = redisproc.ClusterOptions
	SentinelGroup   = redisproc.SentinelGroup
	SentinelOptions = redisproc.SentinelOptions
)

// ErrNoServer reports that the redis-server binary could not be found.
var ErrNoServer = redisproc.ErrNoServer

// Start launches n servers; see redisproc.Start. The caller stops them.
func Start(ctx context.Context, n int, opts Options) (*Cluster, error) {
	return redisproc.Start(ctx, n, opts)
}

// StartT starts n servers for a test and stops them in t.Cleanup, whether or
// not the test passes. It fails the test when redis-server is missing.
func StartT(t testing.TB, n int, opts ...Options) *Cluster {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := redisproc.Start(ctx, n, o)
	if err != nil {
		t.Fatalf("start %d redis-server: %v", n, err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

// StartSentinelsT starts a master with replicas under sentinels, shaped by
// so, for a test, and stops them in t.Cleanup, whether or not the test
// passes. It fails the test when redis-server is missing.
func StartSentinelsT(t testing.TB, so SentinelOptions) *SentinelGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, err := redisproc.StartSentinels(ctx, so, Options{})
	if err != nil {
		t.Fatalf("start a sentinel group: %v", err)
	}
	t.Cleanup(func() { g.Stop() })
	return g
}

// StartClustersT starts n Redis Clusters shaped by co for a test, all at
// once, and stops them in t.Cleanup, whether or not the test passes. It
// fails the test when redis-server is missing.
func StartClustersT(t testing.TB, n int, co ClusterOptions, opts ...Options) []*RedisCluster {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := make([]*RedisCluster, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i], errs[i] = redisproc.StartRedisCluster(ctx, co, o) })
	}
	wg.Wait()
	for i, c := range out {
		if c != nil {
			t.Cleanup(func() { c.Stop() })
		}
		if errs[i] != nil {
			t.Fatalf("start Redis Cluster %d: %v", i, errs[i])
		}
	}
	return out
}

// Ping sends PING over a fresh connection and expects PONG (or NOAUTH from
// a server that wants a password). A server that does not answer within
// timeout gives an error that wraps os.ErrDeadlineExceeded.
func Ping(addr string, timeout time.Duration) error { return redisproc.Ping(addr, timeout) }

// Do sends one command over a fresh connection and returns the first line
// of its reply (":0", "+OK", "$40"); see redisproc.Do. It is for test
// set-up (CONFIG SET, DEBUG SLEEP, ...), not for load.
func Do(addr string, timeout time.Duration, args ...string) (string, error) {
	return redisproc.Do(context.Background(), addr, timeout, args...)
}

// Info returns the INFO section of the server at addr, over a fresh
// connection.
func Info(addr, section string) (string, error) {
	c, err := redisproc.NewClient(addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Do(ctx, c.B().Info().Section(section).Build()).ToString()
}
