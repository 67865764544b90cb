package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// guessEnv is a Locker whose one vote is a cluster of one shard with two
// replicas, which the cluster lists (after a write: it leaves out a
// replica that has replicated nothing) and the vote's client knows.
type guessEnv struct {
	l        *Locker
	primary  string
	replicas []string
}

func newGuessEnv(t *testing.T) *guessEnv {
	t.Helper()
	c := redistest.StartClustersT(t, 1, redistest.ClusterOptions{Shards: 1, Replicas: 2})[0]
	ctx := context.Background()
	primary := c.Primary(ctx, 0).Addr()
	direct, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{primary}, ForceSingleClient: true,
		DisableCache: true, ClientSetInfo: rueidis.DisableClientSetInfo})
	if err != nil {
		t.Fatalf("connect to %s: %v", primary, err)
	}
	defer direct.Close()
	if err := direct.Do(ctx, direct.B().Set().Key("replicated").Value("1").Build()).Error(); err != nil {
		t.Fatalf("SET on %s: %v", primary, err)
	}
	listed := func() bool {
		slots, err := direct.Do(ctx, direct.B().ClusterSlots().Build()).ToArray()
		if err != nil || len(slots) != 1 {
			return false
		}
		nodes, err := slots[0].ToArray()
		return err == nil && len(nodes) == 2+3 // first, last, the primary, two replicas
	}
	for deadline := time.Now().Add(30 * time.Second); !listed(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the primary does not list both replicas in CLUSTER SLOTS")
		}
	}
	cfg := DefaultConfig()
	cfg.Masters, cfg.Clusters = nil, [][]string{{primary}}
	cfg.Quarantine = QuarantineOff
	l, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	e := &guessEnv{l: l, primary: primary}
	for addr := range l.pool.Client(0).Nodes() {
		if addr != primary {
			e.replicas = append(e.replicas, addr)
		}
	}
	if len(e.replicas) != 2 {
		t.Fatalf("the vote's client knows %v besides the primary, want the two replicas", e.replicas)
	}
	return e
}

// shards is a fresh set of the vote's sharded subscriptions, on a
// notifier of its own whose goroutines do not run: the test drives it.
func (e *guessEnv) shards(t *testing.T) *shards {
	n := newNotifier(e.l.pool, 0)
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
	e := newGuessEnv(t)
	s := e.shards(t)
	c := s.firstConn(append(e.replicas[:2:2], e.primary))
	if c == nil || c.addr != e.primary {
		t.Fatalf("guess over %v then %s: got %v, want the primary's connection", e.replicas, e.primary, c)
	}
}

// A slot's first subscription, whatever order the client lists the
// nodes in, is on the primary after one round of send: the waiters it
// confirms are listened for at once, not after the retry. Fresh shards
// each time, so each round guesses anew (the client's map order; with
// cluster-guess-once a round fails when a replica comes first, 13 times
// in 24 in one run: all 24 pass with a chance of about 1e-8).
func TestClusterFirstSubscriptionLandsAtOnce(t *testing.T) {
	e := newGuessEnv(t)
	for i := range 24 {
		c, later, ready := e.firstRound(t, i)
		if c == nil || c.addr != e.primary || later != 0 || !ready {
			t.Fatalf("round %d: after one send the channel is on %v (want the primary %s), %d left for the retry, confirmed %v", i, c, e.primary, later, ready)
		}
	}
}

// firstRound sends a fresh channel's first subscription, on fresh shards,
// and returns the connection it is on after that one round (nil: none),
// how many channels were left for the retry, and whether its topic was
// confirmed.
func (e *guessEnv) firstRound(t *testing.T, i int) (c *shardConn, later int, ready bool) {
	s := e.shards(t)
	ch := releasedPrefix + fmt.Sprintf("{guess}-%d", i)
	slot := multiplex.KeySlot(ch)
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
// first node.
func TestClusterGuessOnceControl(t *testing.T) {
	defer mutation.ClusterGuessOnce.Set(true)()
	e := newGuessEnv(t)
	if c := e.shards(t).firstConn(append(e.replicas[:2:2], e.primary)); c != nil {
		t.Fatalf("with cluster-guess-once the replicas-first guess opened %s", c.addr)
	}
	failed := 0
	for i := range 24 {
		if c, _, _ := e.firstRound(t, i); c == nil {
			failed++
		}
	}
	t.Logf("with cluster-guess-once, %d of 24 first subscriptions failed their round", failed)
	if failed == 0 {
		t.Fatal("with cluster-guess-once every first subscription landed: the test cannot fail")
	}
}
