package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// A waiter on a cluster vote listens at the shard that owns its
// resource's slot; when the slot moves to another shard, it must listen
// at the new owner, or it sleeps through the release until its fallback.
// These run in virtual time, where the controls cannot miss and the
// bounds are exact; cluster_notify_test.go has them on real clusters.

// The slot moves by a migration: the old owner ends the subscription
// (SUNSUBSCRIBE) at the hand-over, and the waiter subscribes again at the
// new owner at once, whose release wakes it. With
// cluster-notify-stale-shard on (the control), the waiter takes its ended
// subscription for open and sleeps until its fallback.
func TestClusterNotifyAfterSlotMigrationInVirtualTime(t *testing.T) {
	mutation.Require(t)
	for _, stale := range []bool{false, true} {
		t.Run(map[bool]string{false: "resubscribed", true: "control"}[stale], func(t *testing.T) {
			defer mutation.ClusterNotifyStaleShard.Set(stale)()
			simWaiterAfterMove(t, stale, false, func(t *testing.T, e *simClusterEnv, slot int) *simredis.Master {
				c := e.clusters[0]
				if report, ok := c.Migrate(context.Background(), slot, 0, time.Millisecond); !ok {
					t.Fatal(report)
				}
				return c.Primary(1)
			})
		})
	}
}

// The slot moves by a failover: the old primary dies with the
// subscription's connection, and the waiter subscribes again at the
// promoted replica, whose release wakes it. With
// cluster-notify-stale-shard on (the control), the broken subscription is
// taken for open and the waiter sleeps until its fallback.
func TestClusterNotifyAfterFailoverInVirtualTime(t *testing.T) {
	mutation.Require(t)
	for _, stale := range []bool{false, true} {
		t.Run(map[bool]string{false: "killed", true: "control"}[stale], func(t *testing.T) {
			defer mutation.ClusterNotifyStaleShard.Set(stale)()
			simWaiterAfterMove(t, stale, true, func(t *testing.T, e *simClusterEnv, slot int) *simredis.Master {
				c := e.clusters[0]
				// The replica's copy is taken now, with the lock and the
				// queue: nothing is lost.
				if _, ok := c.Failover(context.Background(), 0, 0); !ok {
					t.Fatal("no failover")
				}
				return c.Primary(0)
			})
		})
	}
}

// simWaiterAfterMove queues a waiter behind a holder on one cluster vote
// of two shards (each with a replica if replicas), moves the resource's
// slot from shard 0 with move, which returns the slot's new owner, and
// checks that the waiter listens there and is woken by the release
// (stale: that it does not listen and sleeps until its fallback).
func simWaiterAfterMove(t *testing.T, stale, replicas bool, move func(*testing.T, *simClusterEnv, int) *simredis.Master) {
	simClusterTest(t, simClusterOptions{Clusters: 1, Shards: 2, Replicas: replicas}, func(t *testing.T, e *simClusterEnv) {
		const fallback = time.Minute
		config := func(c *engine.Config) {
			c.Quarantine = engine.QuarantineOff // a promoted replica votes at once
			c.TTL = time.Hour                   // the holder's lease outlives the control's wait
			c.Wait.FallbackMin, c.Wait.FallbackMax = fallback, fallback
		}
		// When the waiter was first woken by a notification.
		var notified atomic.Pointer[time.Time]
		holderL, waiterL := e.locker(config), e.locker(func(c *engine.Config) {
			config(c)
			c.Observer = &engine.Observer{Wait: func(ev engine.WaitEvent) {
				if now := time.Now(); ev.Kind == engine.WaitRetry && ev.Cause == engine.WakeNotified {
					notified.CompareAndSwap(nil, &now)
				}
			}}
		})
		ctx := context.Background()
		name, _ := shardNames("moved")
		key, channel := clusterKey(name), "redlock:released:"+clusterKey(name)
		slot := keyslot.KeySlot(key)
		from := e.primary(0, slot)
		holder, err := holderL.TryLock(ctx, name)
		if err != nil {
			t.Fatalf("TryLock: %v", err)
		}
		type result struct {
			le  *engine.Lease
			err error
			at  time.Time
		}
		got := make(chan result, 1)
		go func() {
			lctx, cancel := context.WithTimeout(ctx, time.Hour)
			defer cancel()
			le, err := waiterL.Lock(lctx, name)
			got <- result{le, err, time.Now()}
		}()
		time.Sleep(time.Second)
		if n, s := e.queueLen(from, key), shardSubs(from, channel); n != 1 || s != 1 {
			t.Fatalf("before the move: %d queued, %d subscribed at the owner; want the waiter both", n, s)
		}
		to := move(t, e, slot)
		moved := time.Now()
		// A resubscription takes a few round trips (to the old owner, which
		// answers MOVED, then to the new one): 2 or 3 ms here, a latency
		// spike (20 ms) included in the bound.
		const resubscribed = 50 * time.Millisecond
		time.Sleep(resubscribed)
		switch s := shardSubs(to, channel); {
		case !stale && s != 1:
			t.Fatalf("%s after the move the waiter is not subscribed at the new owner (%d)", resubscribed, s)
		case stale && s != 0:
			t.Fatalf("with %s on, the waiter subscribed at the new owner: the test cannot catch it", mutation.ClusterNotifyStaleShard.Name())
		}
		steady(t, holderL, key)
		released := time.Now()
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		r := <-got
		if r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		defer r.le.Release(ctx)
		// The notification wakes the waiter; its first attempts may then
		// meet its client's old view of the shard (the dead primary), and
		// back off until the client has learnt the new one.
		info := r.le.Wait()
		t.Logf("moved, released %v later; the waiter returned %v after the release: %+v", released.Sub(moved), r.at.Sub(released), info)
		switch at := notified.Load(); {
		case !stale && (at == nil || at.Sub(released) > resubscribed || info.Fallbacks != 0):
			t.Fatalf("the waiter was not woken by the release's notification at once: %+v", info)
		case stale && info.Notified != 0:
			t.Fatalf("with %s on, the waiter was woken by the release: the test cannot catch it", mutation.ClusterNotifyStaleShard.Name())
		case stale && (info.Fallbacks == 0 || r.at.Sub(released) > fallback):
			t.Fatalf("the waiter returned %v after the release: %+v; want woken by its fallback", r.at.Sub(released), info)
		}
	})
}
