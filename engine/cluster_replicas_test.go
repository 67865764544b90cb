package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// A cluster lists a replica in CLUSTER SLOTS only once it has replicated
// something (a fresh, idle cluster's replicas are left out), and only then
// does a client of the cluster know it: these tests share a cluster of
// one shard with two replicas that its primary lists, as any cluster in
// use does (listedReplicasCluster). The controls of the first-waiter
// test run in virtual time (cluster_first_waiter_test.go).

// newListedReplicasEnv is a shardEnv of the listed-replicas cluster,
// under a key prefix of the test's own.
func newListedReplicasEnv(t *testing.T) *shardEnv {
	t.Helper()
	return shardEnvOn(t, listedReplicasCluster(t), newEnv(t, 0).prefix)
}

// New over a cluster vote whose client knows the replicas reads the vote's
// INFO server from a primary: sent through the cluster client, a command
// without a key goes to any node it knows, and the dialer refuses a
// replica's connection ("is a replica"), which failed New about one time
// in three (12 of 40). Sixteen Lockers, each with a client of its own.
func TestClusterVoteNewWithListedReplicas(t *testing.T) {
	t.Parallel()
	if failed := newLockersFailing(t, 16); failed != "" {
		t.Fatal(failed)
	}
}

// The control: with cluster-info-any-node, New fails over such a vote.
// The node a keyless command goes to is the first of the client's
// connections in Go's map order: the three nodes sit in three of a small
// map's eight slots, and iteration starts at a random slot, so each
// replica comes first at least one time in eight, one of the two at
// least one time in four (about one in three was seen). Up to 50
// Lockers, to the first that fails: all start with a chance of at most
// (3/4)^50 < 1e-6.
func TestClusterVoteNewWithListedReplicasControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.ClusterInfoAnyNode.Set(true)()
	failed := newLockersFailing(t, 50)
	t.Log(failed)
	if failed == "" {
		t.Fatal("with cluster-info-any-node fifty Lockers started: the test cannot fail")
	}
}

// newLockersFailing makes up to n Lockers, one after the other, over a
// vote of one shard whose primary lists its two replicas, each taking
// and releasing a lock; it describes the first that failed, or is empty.
func newLockersFailing(t *testing.T, n int) string {
	e := newListedReplicasEnv(t)
	for i := range n {
		cfg := engine.DefaultConfig()
		cfg.Masters, cfg.Clusters = nil, [][]string{e.cluster.Seeds()[:1]}
		cfg.KeyPrefix = e.prefix
		cfg.Quarantine = engine.QuarantineOff
		patientVotes(&cfg)
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			return fmt.Sprintf("Locker %d: engine.New: %v", i, err)
		}
		lease, err := l.TryLock(context.Background(), fmt.Sprintf("listed-replicas-%d", i))
		if err != nil {
			l.Close()
			return fmt.Sprintf("Locker %d: TryLock: %v", i, err)
		}
		lease.Release(context.Background())
		l.Close()
	}
	return ""
}

// A fresh Locker's first waiter on a cluster vote whose client knows the
// replicas is listened for at the primary once it is queued, and a
// release at once wakes it by notification (its fallback is a minute).
// Its first SSUBSCRIBE goes to a node guessed among those the client
// knows; with cluster-guess-once a replica guessed first left the slot
// unsubscribed until the retry (100 ms), and the release in between woke
// nobody. Eight rounds, each with a fresh waiter's Locker.
func TestClusterFirstWaiterWokenWithListedReplicas(t *testing.T) {
	t.Parallel()
	if missed := firstWaitersMissed(t, 8); missed > 0 {
		t.Fatalf("%d of 8 fresh waiters were not listened for, or not woken, when queued", missed)
	}
}

// firstWaitersMissed runs rounds of a fresh waiter's Locker queued behind
// a holder, which releases as soon as the waiter's queue entry is seen,
// and counts the waiters not subscribed at the primary then, or not woken
// by the release's notification.
func firstWaitersMissed(t *testing.T, rounds int) (missed int) {
	e := newListedReplicasEnv(t)
	primary := e.cluster.Primary(context.Background(), 0).Addr()
	holderL := e.locker(false)
	for i := range rounds {
		name := fmt.Sprintf("first-waiter-%d", i)
		key := e.key(name)
		lease, err := holderL.TryLock(context.Background(), name)
		if err != nil {
			t.Fatalf("holder: %v", err)
		}
		cfg := engine.DefaultConfig()
		cfg.Masters, cfg.Clusters = nil, [][]string{e.cluster.Seeds()[:1]}
		cfg.KeyPrefix = e.prefix
		cfg.Quarantine = engine.QuarantineOff
		waitsForNotification(&cfg)
		waiterL, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("engine.New: %v", err)
		}
		w := &waiter{done: make(chan struct{})}
		go func() {
			defer close(w.done)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			w.lease, w.err = waiterL.Lock(ctx, name)
		}()
		eventually(t, 30*time.Second, "the waiter queued", func() bool {
			n, _ := e.node(primary, "ZCARD", "\xffredlock:queue:"+key).AsInt64()
			return n == 1
		})
		subscribed := e.shardSubs(primary, "redlock:released:"+key) == 1
		if err := lease.Release(context.Background()); err != nil {
			t.Fatalf("release: %v", err)
		}
		woken := w.woken(t)
		if !subscribed || !woken {
			t.Logf("round %d: subscribed at the primary when queued %v, woken by the release %v", i, subscribed, woken)
			missed++
		}
		waiterL.Close()
	}
	return missed
}
