package engine_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// TestClusterReleaseRefusedByTheDemotedPrimaryResentInVirtualTime on a
// real cluster: a release that the vote's client routes to the demoted
// primary, refused there, reaches the promoted replica once the client
// can. The test's own cluster of one shard, P with a replica R, is the
// only vote. A holds "fr" on P; then A is cut off from P and R (see
// cutter), so that its client can fetch no slot map until it reaches a
// node again, and its client drops its connection to P. R takes over
// (CLUSTER FAILOVER, which waits until R has caught up: A's key is on
// it), and A may reach P again, a replica now. Every slot map A's client
// could fetch is the old one or none, so A's release goes to P, where the
// vote refuses it, which Release reports. Once A may reach R, the release,
// sent again a node timeout later, deletes A's key on R. The control is
// in virtual time.
func TestClusterReleaseRefusedByTheDemotedPrimaryResent(t *testing.T) {
	t.Parallel()
	c0 := ownClusters(t, 1, redistest.ClusterOptions{Shards: 1, Replicas: 1, NodeTimeout: time.Second})[0]
	ctx := context.Background()
	p, r := c0.Shards[0].Nodes[0], c0.Shards[0].Nodes[1]
	// A's key outlives the test: only a release removes it.
	cfg := clusterConfig([]*redistest.RedisCluster{c0}, 10*time.Minute)
	// R a seed too: A's client, which P refuses, learns R's promotion from
	// R. (It may not know R otherwise: a primary lists a replica in
	// CLUSTER SLOTS only once the replica has replicated something.)
	cfg.Clusters = [][]string{{p.Addr(), r.Addr()}}
	cfg.DisableTracking = true
	resendSoon(&cfg)
	cut := newCutter(func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	})
	cfg.Conn.DialContext = cut.dial
	a := newLockerT(t, cfg)
	held, err := a.TryLock(ctx, "fr")
	if err != nil {
		t.Fatal(err)
	}
	key := clusterKey("fr")
	start := time.Now()
	cut.set(p.Addr(), true)
	cut.set(r.Addr(), true)
	// A's client drops its connection to P, closed, once it sees it end,
	// or once a command on it fails: a probe in P's slot, until the client
	// dials P (a release on the old connection would fail as sent, not
	// refused).
	probe := "{" + keyslot.SlotTag(keyslot.KeySlot(key)) + "}probe"
	eventually(t, 30*time.Second, "A's client to drop its connection to P", func() bool {
		if le, err := a.TryLock(ctx, probe); err == nil {
			le.Release(ctx)
			t.Fatalf("A took %q, cut off from the cluster", probe)
		}
		return cut.refused(p.Addr())
	})
	if err := c0.Failover(ctx, r); err != nil {
		t.Fatal(err)
	}
	onR := func() bool {
		n, err := redistest.Do(r.Addr(), 5*time.Second, "EXISTS", key)
		if err != nil {
			t.Fatalf("EXISTS on R: %v", err)
		}
		return n == ":1"
	}
	if !onR() {
		t.Fatal("set-up: A's key is not on the promoted replica")
	}
	t.Logf("R took over %v after A was cut off", time.Since(start).Round(time.Millisecond))
	cut.set(p.Addr(), false)
	err = held.Release(ctx)
	if err == nil || !strings.Contains(err.Error(), "is a replica") {
		t.Fatalf("Release: %v; want the vote's refusal of the demoted primary: the test proves nothing", err)
	}
	if !errors.Is(err, multiplex.ErrReplica) || !errors.Is(err, multiplex.ErrNotSent) {
		t.Errorf("Release: %v; the refusal is not ErrReplica and ErrNotSent", err)
	}
	if !onR() {
		t.Fatal("A's key left R though the release was refused")
	}
	cut.set(r.Addr(), false)
	reachable := time.Now()
	eventually(t, 60*time.Second, "A's release, sent again, reaching R", func() bool { return !onR() })
	t.Logf("A's key gone from R %v after A could reach it", time.Since(reachable).Round(time.Millisecond))
}

// cutter is a Locker's DialContext that can cut it off from an address:
// its connections there close, and its dials there fail, until the cut
// ends. A dial under way when the cut begins fails too (its connection is
// closed, or refused once open): no connection the Locker checks after
// the cut began reaches the address.
type cutter struct {
	next  func(ctx context.Context, addr string) (net.Conn, error)
	mu    sync.Mutex
	off   map[string]bool
	conns map[string][]net.Conn
	// tried: the addresses dialled, and refused, since their cut began.
	tried map[string]bool
}

func newCutter(next func(ctx context.Context, addr string) (net.Conn, error)) *cutter {
	return &cutter{next: next, off: map[string]bool{}, conns: map[string][]net.Conn{}, tried: map[string]bool{}}
}

var errCut = errors.New("test: cut off")

func (c *cutter) dial(ctx context.Context, addr string) (net.Conn, error) {
	c.mu.Lock()
	off := c.off[addr]
	if off {
		c.tried[addr] = true
	}
	c.mu.Unlock()
	if off {
		return nil, errCut
	}
	conn, err := c.next(ctx, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off[addr] {
		conn.Close()
		return nil, errCut
	}
	c.conns[addr] = append(c.conns[addr], conn)
	return conn, nil
}

// set begins (off) or ends the cut from addr.
func (c *cutter) set(addr string, off bool) {
	c.mu.Lock()
	c.off[addr] = off
	c.tried[addr] = false
	conns := c.conns[addr]
	if off {
		delete(c.conns, addr)
	}
	c.mu.Unlock()
	if off {
		for _, conn := range conns {
			conn.Close()
		}
	}
}

// refused reports whether a dial to addr was refused since its cut
// began: the Locker had no connection there left to use.
func (c *cutter) refused(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tried[addr]
}
