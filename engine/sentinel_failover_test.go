package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// A Sentinel failover promotes a replica that may lack the locks the old
// master granted (replication is asynchronous): seed problem 1 of
// Redlock. The votes are two shared masters and a Sentinel vote. A holds
// a resource on master 0 and the Sentinel vote only (its key is gone from
// master 1, as if its SET there had failed); the sentinels fail over to
// a replica that lacks the key (deleted on it after the promotion: the
// writes it had not received). B, whose Locker saw the old master, then
// asks: master 1 and the promoted master would say yes, a quorum. The
// promoted master's new run_id must keep the vote out for MaxTTL, so B
// is refused, and an Observer sees the vote quarantined; with the
// quarantine off (the control), B gets a second lease while A's is
// valid.
func TestSentinelFailoverKeepsThePromotedReplicaOut(t *testing.T) {
	for _, policy := range []engine.QuarantinePolicy{engine.QuarantineObserved, engine.QuarantineOff} {
		t.Run(policy.String(), func(t *testing.T) {
			double := sentinelDoubleGrant(t, policy)
			switch {
			case policy != engine.QuarantineOff && double:
				t.Fatal("B acquired while A held the lease: the promoted master's yes counted")
			case policy == engine.QuarantineOff && !double:
				t.Fatal("with the quarantine off, B was refused: the test cannot catch it")
			}
		})
	}
}

func sentinelDoubleGrant(t *testing.T, policy engine.QuarantinePolicy) bool {
	g := redistest.StartSentinelsT(t, redistest.SentinelOptions{})
	e := newEnv(t, 2)
	ctx := context.Background()
	quarantined := make(chan engine.NodeStateEvent, 1)
	mk := func(observe bool) *engine.Locker {
		return e.locker(func(c *engine.Config) {
			c.Sentinels = []engine.SentinelVote{{Master: g.Master, Addrs: g.SentinelAddrs()}}
			// A's lease outlives anything the test waits for.
			c.TTL, c.Quarantine = time.Minute, policy
			patient(c)
			if observe {
				c.Observer = &engine.Observer{NodeState: func(ev engine.NodeStateEvent) {
					if ev.Node == 2 && ev.State == engine.StateQuarantined {
						select {
						case quarantined <- ev:
						default:
						}
					}
				}}
			}
		})
	}
	a, b := mk(false), mk(true)
	const res = "sentinel-fo"
	held, err := a.TryLock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	key := e.key(res)
	// TryLock returns at quorum: master 1's SET may still be on its way.
	eventually(t, 30*time.Second, "A's key on master 1", func() bool { return e.get(1, key) == held.Value() })
	e.del(1, key)
	old := g.Data[0].Addr()
	if st := b.Nodes()[2]; st.Master != old || st.State != engine.StateUp {
		t.Fatalf("B's Sentinel vote before the failover: %+v, want up on %s", st, old)
	}
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	promoted, err := g.Failover(fctx)
	if err != nil {
		t.Fatal(err)
	}
	directDo(t, promoted, func(b rueidis.Builder) rueidis.Completed { return b.Del().Key(key).Build() })
	// The event: B's client follows the sentinels to the promoted master.
	eventually(t, time.Minute, "B's Sentinel vote on the promoted master", func() bool { return b.Nodes()[2].Master == promoted })
	second, err := b.TryLock(ctx, res)
	if err == nil {
		t.Logf("B acquired %q while A's lease (validity %s) is valid", res, held.Validity())
		second.Release(ctx)
		return held.Validity() > 0
	}
	if !errors.Is(err, engine.ErrNotAcquired) && !errors.Is(err, engine.ErrNoQuorum) {
		t.Fatalf("B's TryLock: %v", err)
	}
	if policy != engine.QuarantineOff {
		if !errors.Is(err, engine.ErrQuarantined) {
			t.Errorf("B's refusal does not name the quarantine: %v", err)
		}
		if st := b.Nodes()[2]; st.State != engine.StateQuarantined || st.Restarts != 1 {
			t.Errorf("B's Sentinel vote: %+v, want quarantined after 1 run_id change", st)
		}
		select {
		case ev := <-quarantined:
			if ev.QuarantinedUntil.IsZero() {
				t.Errorf("NodeState event without QuarantinedUntil: %+v", ev)
			}
		case <-time.After(time.Minute): // the watcher polls every NodeWatchInterval
			t.Error("no NodeState event for the quarantined Sentinel vote")
		}
	}
	return false
}
