package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// admissionRounds is the multiplex pool's default bound on rounds in
// flight (MaxRounds): past it, rounds wait to be sent.
const admissionRounds = 1024

// acquireAfterAdmissionWait takes x after its attempt waited, to be sent,
// longer than its validity, in virtual time: masters 0-2 of five hang
// (packets held until they heal), and two waves of admissionRounds
// TryLocks of other names go first, each round waiting out the node
// timeout (490ms, just below TTL/2) for the quorum the hung masters
// withhold. x's attempt, sent once the second wave ends past its
// validity (TTL − drift: 988ms), when the masters have healed, reaches
// its quorum at once. It returns x's lease or error, and whether
// another client could take x right after.
func acquireAfterAdmissionWait(t *testing.T) (*engine.Lease, error, bool) {
	n := simredis.NewNetwork(1)
	ms, addrs := simredis.NewMasters(n, 5, simredis.MasterOptions{Uptime: time.Hour, Latency: simredis.Latency{Min: time.Millisecond}})
	for _, m := range ms {
		t.Cleanup(m.Close)
	}
	newLocker := func(name string) *engine.Locker {
		cfg := engine.DefaultConfig(addrs...)
		cfg.TTL, cfg.NodeTimeout = time.Second, 490*time.Millisecond
		cfg.DisableTracking = true // the simulated masters have no CLIENT TRACKING
		cfg.Conn.DialContext = n.Dialer(name)
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	l, other := newLocker("c0"), newLocker("c1")
	ctx := context.Background()
	for _, m := range ms[:3] {
		m.Partition(simredis.Hang)
	}
	var wg sync.WaitGroup
	for i := range 2 * admissionRounds {
		wg.Go(func() {
			if le, err := l.TryLock(ctx, fmt.Sprintf("ahead:%d", i)); err == nil {
				le.Release(ctx)
			}
		})
	}
	synctest.Wait() // the first wave sent, the second waiting to be
	type result struct {
		le  *engine.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		le, err := l.TryLock(ctx, "x")
		got <- result{le, err}
	}()
	synctest.Wait() // x waits behind the second wave
	// The second wave was sent once the first timed out (490ms and up to
	// a watchdog period); heal the masters past x's validity, while it
	// is on its way: its rounds reach their quorum then, and x is sent.
	time.Sleep(time.Second)
	for _, m := range ms[:3] {
		m.Partition(simredis.Connected)
	}
	r := <-got
	wg.Wait()
	le, err := other.TryLock(ctx, "x")
	if err == nil {
		le.Release(ctx)
	}
	return r.le, r.err, err == nil
}

// An attempt whose quorum comes after its validity ran out (it waited
// that long to be sent, behind other rounds) is undone: the caller gets
// ErrNoQuorum, not a lease already expired, and the resource is free at
// once, not kept by its keys for a TTL with nobody holding it.
func TestAcquireOutlastingItsValidityIsUndone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		le, err, free := acquireAfterAdmissionWait(t)
		if err == nil {
			t.Fatalf("x was handed out with %s of validity left, after a quorum reached past its validity", le.Validity())
		}
		if !errors.Is(err, engine.ErrNoQuorum) {
			t.Errorf("x: %v, want ErrNoQuorum (the masters were too slow for the TTL)", err)
		}
		if !free {
			t.Error("x was not free right after its attempt failed: the attempt's keys were left on the masters")
		}
	})
}

// The control: with the check off (mutation.AcquireIgnoresValidity), the
// same schedule hands x out already expired, and its keys keep x from
// another client.
func TestAcquireIgnoresValidityControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.AcquireIgnoresValidity.Set(true)()
	synctest.Test(t, func(t *testing.T) {
		le, err, free := acquireAfterAdmissionWait(t)
		if err != nil || free {
			t.Fatalf("with the check off, x: %v, free after: %v: the schedule did not outlast the validity, and the check cannot fail", err, free)
		}
		t.Logf("caught: x handed out with validity %s, its keys keep it from another client", le.Validity())
		le.Release(context.Background())
	})
}
