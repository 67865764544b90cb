package engine

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// guessEnv is a Locker whose one vote is a simulated cluster of one shard
// with a replica, which the cluster lists in CLUSTER SLOTS (a real one
// does once the replica has replicated something) and the vote's client
// knows, in virtual time (internal/simredis).
type guessEnv struct {
	l        *Locker
	primary  string
	replicas []string
}

// guessTest runs f in a testing/synctest bubble with a guessEnv.
func guessTest(t *testing.T, f func(*testing.T, *guessEnv)) {
	synctest.Test(t, func(t *testing.T) {
		nw := simredis.NewNetwork(1)
		c, nodes := simredis.NewCluster(nw, 1, 0, 1, true, simredis.MasterOptions{Uptime: time.Hour})
		for _, m := range nodes {
			t.Cleanup(m.Close)
		}
		// Cleanups run last first: the Locker closes, then rueidis's
		// cluster client ends, in the bubble, the goroutines of its lazy
		// refreshes five seconds after, then the nodes close.
		t.Cleanup(func() { time.Sleep(5*time.Second + 100*time.Millisecond) })
		cfg := DefaultConfig()
		cfg.Masters, cfg.Clusters = nil, [][]string{c.Seeds()}
		cfg.Quarantine = QuarantineOff
		cfg.DisableTracking = true // the simulated nodes have no CLIENT TRACKING
		cfg.Conn.DialContext = nw.Dialer("c1")
		l, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { l.Close() })
		e := &guessEnv{l: l, primary: c.Primary(0).Addr}
		for addr := range l.pool.Client(0).Nodes() {
			if addr != e.primary {
				e.replicas = append(e.replicas, addr)
			}
		}
		if len(e.replicas) != 1 {
			t.Fatalf("the vote's client knows %v besides the primary, want the replica", e.replicas)
		}
		f(t, e)
	})
}

// shards is a fresh set of the vote's sharded subscriptions, on a
// notifier of its own whose goroutines do not run: the test drives it.
func (e *guessEnv) shards(t *testing.T) *shards {
	n := newNotifier(e.l.pool, e.l.votes, len(e.l.cfg.Masters), len(e.l.cfg.Clusters), e.l.cfg.NodeTimeout, 0)
	s := &shards{n: n, sn: n.nodes[0], client: e.l.pool.Client(0), conns: make(map[string]*shardConn),
		on: make(map[string]*shardConn), owner: make(map[int]string), later: make(map[string]struct{}),
		redirects: make(map[int]int)}
	t.Cleanup(func() {
		s.closeAll()
		n.close()
	})
	return s
}

// A slot's first SSUBSCRIBE goes to a node guessed among those the
// cluster client knows, the replicas included, whose connections the
// dialer refuses: the guess goes on to the next node, and with the
// replicas first it reaches the primary at once. With cluster-guess-once
// it stops at the first replica.
func TestClusterGuessGoesPastReplicas(t *testing.T) {
	guessTest(t, func(t *testing.T, e *guessEnv) {
		s := e.shards(t)
		c := s.firstConn(append(e.replicas[:1:1], e.primary))
		if c == nil || c.addr != e.primary {
			t.Fatalf("guess over %v then %s: got %v, want the primary's connection", e.replicas, e.primary, c)
		}
	})
}

// A slot's first subscription, whatever order the client lists the
// nodes in, is on the primary after one round of send: the waiters it
// confirms are listened for at once, not after the retry. Fresh shards
// each time, so each round guesses anew (the client's map order; with
// cluster-guess-once a round fails when the replica comes first: see
// TestClusterGuessOnceControl).
func TestClusterFirstSubscriptionLandsAtOnce(t *testing.T) {
	guessTest(t, func(t *testing.T, e *guessEnv) {
		for i := range 24 {
			c, later, ready := e.firstRound(t, i)
			if c == nil || c.addr != e.primary || later != 0 || !ready {
				t.Fatalf("round %d: after one send the channel is on %v (want the primary %s), %d left for the retry, confirmed %v", i, c, e.primary, later, ready)
			}
		}
	})
}

// firstRound sends a fresh channel's first subscription, on fresh shards,
// and returns the connection it is on after that one round (nil: none),
// how many channels were left for the retry, and whether its topic was
// confirmed.
func (e *guessEnv) firstRound(t *testing.T, i int) (c *shardConn, later int, ready bool) {
	s := e.shards(t)
	ch := releasedPrefix + fmt.Sprintf("{guess}-%d", i)
	slot := keyslot.KeySlot(ch)
	tp := &topic{awaited: 1, ready: make(chan struct{})}
	s.send(map[int]*shardSub{slot: {slot: slot, channels: []string{ch}, topics: []*topic{tp}}}, nil)
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	select {
	case <-tp.ready:
		ready = true
	default:
	}
	return s.on[ch], len(s.later), ready
}

// The controls: the tests above fail with the guess stopping at its
// first node. Which node the client lists first is Go's map order: its
// two nodes sit in two of a small map's eight slots, and iteration starts
// at a random slot, so the replica comes first in at least one round in
// eight. Up to 104 rounds, to the first that fails: all land with a
// chance of at most (7/8)^104 < 1e-6.
func TestClusterGuessOnceControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.ClusterGuessOnce.Set(true)()
	guessTest(t, func(t *testing.T, e *guessEnv) {
		if c := e.shards(t).firstConn(append(e.replicas[:1:1], e.primary)); c != nil {
			t.Fatalf("with cluster-guess-once the replica-first guess opened %s", c.addr)
		}
		for i := range 104 {
			if c, _, _ := e.firstRound(t, i); c == nil {
				t.Logf("with cluster-guess-once, round %d's first subscription failed its round", i)
				return
			}
		}
		t.Fatal("with cluster-guess-once 104 first subscriptions landed: the test cannot fail")
	})
}
