package sim

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// The engine's deadlines against simulated masters: what the simulator
// found with every fix on, kept as small deterministic cases beside the
// engine's tests against real masters (TestCloseWithAHungMasterReturnsPromptly,
// TestFenceCutByTheDeadlineIsNotAnOutage).

// simMasters starts count masters with a fixed one-way latency, closed
// when the test ends, and returns them with their addresses.
func simMasters(t *testing.T, n *simredis.Network, count int, lat simredis.Latency) ([]*simredis.Master, []string) {
	ms, addrs := simredis.NewMasters(n, count, simredis.MasterOptions{Uptime: time.Hour, Latency: lat})
	for _, m := range ms {
		t.Cleanup(m.Close)
	}
	return ms, addrs
}

// Close returns within its bound (Bounds.Close) with a hung master: a
// Locker with a release subscription (a Lock waiter) on three masters,
// one of which hangs (packets held, as a partition or a stopped process
// does). Closing the pub/sub connection used to wait for a PING's reply,
// until the master answered or rueidis's one-second escape timer fired.
func TestCloseWithAHungMasterKeepsItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := simredis.NewNetwork(1)
		ms, addrs := simMasters(t, n, 3, simredis.Latency{Min: time.Millisecond})
		newLocker := func(name string) *engine.Locker {
			cfg := engine.DefaultConfig(addrs...)
			cfg.TTL = time.Second
			cfg.Conn.DialContext = n.Dialer(name)
			l, err := engine.New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		holder, waiter := newLocker("c0"), newLocker("c1")
		defer holder.Close()
		le, err := holder.TryLock(context.Background(), "r")
		if err != nil {
			t.Fatal(err)
		}
		defer le.Release(context.Background())
		// The waiter subscribes to r's releases: a pub/sub connection to
		// every master.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		go waiter.Lock(ctx, "r")
		time.Sleep(100 * time.Millisecond)
		ms[2].Partition(simredis.Hang)
		defer ms[2].Partition(simredis.Connected)
		bound := boundsOf(waiter.Config()).Close
		began := time.Now()
		waiter.Close()
		if took := time.Since(began); took > bound {
			t.Errorf("Close took %s with one master of three hung: want at most %s (3 × MaxRoundSpan and one more)", took, bound)
		}
	})
}

// A Lock whose context ends during the fencing round reports the
// context's error, not ErrNoQuorum: no master failed. Three masters 10ms
// away one way, no faults: the attempt takes 20ms, and a 30ms deadline
// ends the fencing round half-way.
func TestFenceCutByTheDeadlineIsNotAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := simredis.NewNetwork(1)
		_, addrs := simMasters(t, n, 3, simredis.Latency{Min: 10 * time.Millisecond})
		cfg := engine.DefaultConfig(addrs...)
		cfg.TTL = time.Second
		cfg.Fencing = true
		cfg.Conn.DialContext = n.Dialer("c0")
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		le, err := l.Lock(ctx, "r")
		if err == nil {
			le.Release(context.Background())
			t.Fatal("Lock acquired within 30ms: the fencing round was not cut short")
		}
		if errors.Is(err, engine.ErrNoQuorum) {
			t.Errorf("Lock cut short by its deadline in the fencing round, no master failed: %v: want the context's error, not ErrNoQuorum", err)
		}
	})
}
