package engine_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// Once a violation (c): two holders, one after the other, get the same
// fencing token; see successiveHolders.
func TestReviewSuccessiveHoldersGetDistinctTokens(t *testing.T) {
	successiveHolders(t, true)
}

// The same race with A's fence to m1 delivered: A raises m1's counter
// before its release deletes the key there (one connection, in order), so
// B reads it on m1 and its token is higher, although it read m2 before
// A's raise. The lost fence is what breaks the order.
func TestReviewSuccessiveHoldersFenceDelivered(t *testing.T) {
	successiveHolders(t, false)
}

// successiveHolders runs A then B on one resource and checks that B's
// token is above A's. With cutFence, A's fence to m1 is lost with its
// connection, which gave both the same token while the fence round
// counted raises on masters where A held no key. The token argument says two successive holders' quorums share a master
// whose counter the earlier holder raised; but the fence round counts a
// raise on any quorum, not on masters where the lease holds its key, so
// the shared master can be one the later acquirer read before the raise
// (its own key kept the earlier holder out there).
//
// Three masters; the counters are high (a master whose clock runs ahead,
// within the MaxTTL/2 that New accepts, issued the last tokens), so the
// counters, not the clocks, decide the tokens.
//
//	B: SET m2 (ok, reads counter c)   B's SET to m1 is 400 ms on its way, m0 is cut off
//	A: SET m0 ok, m1 ok, m2 refused (B's key)      token c+1
//	A: fence m0 ok, m2 ok (raised after B read it), m1 lost with its connection
//	A: release m0, m1 (m1 on a new connection)
//	B: SET m1 arrives: ok, reads c                  token c+1, fence ok on m1, m2
func successiveHolders(t *testing.T, cutFence bool) {
	e := newEnv(t, 3)
	const res = "review-fence-order"
	addrs := e.cluster.Addrs()
	// Counters 2 s ahead of the clocks.
	c := time.Now().UnixMicro() + 2_000_000
	for i := range addrs {
		e.set(i, engine.FenceKey(res), strconv.FormatInt(c, 10))
	}
	mk := func(masters []string, mutate func(*engine.Config)) *engine.Locker {
		cfg := engine.DefaultConfig(masters...)
		cfg.Quarantine = engine.QuarantineObserved
		cfg.Fencing = true
		cfg.TTL = 6 * time.Second
		cfg.MaxTTL = 6 * time.Second
		if mutate != nil {
			mutate(&cfg)
		}
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("engine.New: %v", err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	dp := newDropProxy(t, addrs[1])
	a := mk([]string{addrs[0], dp.addr(), addrs[2]}, nil)
	sp0 := newStallProxy(t, addrs[0])
	lp1 := newLatencyProxy(t, addrs[1], 0, nil)
	b := mk([]string{sp0.addr(), lp1.addr(), addrs[2]}, func(c *engine.Config) { c.NodeTimeout = time.Second })
	defer sp0.breakStalled()

	sp0.stall.Store(true)
	lp1.delay.Store(int64(400 * time.Millisecond))
	type result struct {
		le  *engine.Lease
		err error
	}
	bDone := make(chan result, 1)
	go func() {
		le, err := b.TryLock(context.Background(), res)
		bDone <- result{le, err}
	}()
	eventually(t, 2*time.Second, "B's SET on m2", func() bool { return e.get(2, res) != "" })

	if cutFence {
		needle := []byte(strconv.FormatInt(c+1, 10)) // A's fence command carries its token
		dp.needle.Store(&needle)
	}
	la, err := a.TryLock(context.Background(), res)
	if dp.dropped.Load() != cutFence {
		t.Fatalf("set-up: A's fence to m1 cut off: %v, want %v (TryLock: %v)", dp.dropped.Load(), cutFence, err)
	}
	if err != nil {
		// Refusing A, whose counters went up on too few of its own
		// masters, keeps the order: B's token has nothing to follow.
		t.Logf("A's fenced acquire failed: %v", err)
		select {
		case <-bDone:
		case <-time.After(5 * time.Second):
			t.Fatal("B's TryLock did not return")
		}
		return
	}
	if cutFence {
		time.Sleep(50 * time.Millisecond) // the client sees the connection gone
	}
	if err := la.Release(context.Background()); err != nil {
		t.Logf("A's release: %v", err)
	}
	for i := 0; i < 2; i++ {
		if v := e.get(i, res); v != "" {
			t.Fatalf("set-up: A's release left %q on m%d", v, i)
		}
	}
	var rb result
	select {
	case rb = <-bDone:
	case <-time.After(5 * time.Second):
		t.Fatal("B's TryLock did not return")
	}
	if rb.err != nil {
		t.Fatalf("set-up: B's TryLock after A released: %v", rb.err)
	}
	// B is not released: m0 is cut off from it, and the servers go with the test.
	if rb.le.Token() <= la.Token() {
		t.Fatalf("B acquired after A released, yet B's token %d is not above A's %d", rb.le.Token(), la.Token())
	}
}

// Once a violation (b). Validity reads the clock twice: once in inspect,
// which ends a lease whose validity ran out, and again for the time left.
// Between the two, the validity can run out: Validity returns 0 while the
// lease has not ended, so Done is open and Err nil at that instant (the
// expiry timer closes Done later). A tight loop over the last
// microseconds of a short lease hits the gap.
func TestReviewValidityZeroMeansDone(t *testing.T) {
	e := newEnv(t, 3)
	l := e.locker(func(c *engine.Config) { c.TTL = 40 * time.Millisecond })
	const res = "review-validity"
	for try := 0; try < 25; try++ {
		le, err := l.TryLock(context.Background(), res)
		if errors.Is(err, engine.ErrNoQuorum) {
			// A loaded machine misses the 4 ms node timeout of this TTL
			// now and then; the property is about a lease that was held.
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		done := le.Done() // taken early, as a holder does
		for {
			v := le.Validity()
			if v > 0 {
				continue
			}
			// Validity said 0: the lease must already have ended. closed
			// reads the channel without asking the lease anything.
			if !closed(done) {
				t.Fatalf("attempt %d: Validity() = 0 while Done() is open: the lease had not ended (Err now %v)", try, le.Err())
			}
			break
		}
		le.Release(context.Background())
	}
}

// Suspected (d), liveness. A failed attempt's undo to a master whose
// acquire reply arrived is posted once. If that connection breaks with
// the delete on it, nothing sends it again (only an acquire whose own
// connection broke gets the retried delete), and the key refuses
// everyone on that master for the rest of its TTL.
func TestReviewUndoLostWithItsConnectionIsResent(t *testing.T) {
	e := newEnv(t, 3)
	const res = "review-undo-lost"
	addrs := e.cluster.Addrs()
	e.set(1, res, "someone")
	e.set(2, res, "someone")
	dp := newDropProxy(t, addrs[0])
	cfg := engine.DefaultConfig(dp.addr(), addrs[1], addrs[2])
	cfg.Quarantine = engine.QuarantineObserved
	cfg.TTL = 10 * time.Second
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The plain acquire is SET NX GET; the first script on this
	// connection afterwards is the undo.
	needle := []byte("EVALSHA")
	dp.needle.Store(&needle)
	if _, err := l.TryLock(context.Background(), res); err == nil {
		t.Fatal("set-up: acquired a resource held on two of three masters")
	}
	eventually(t, 2*time.Second, "the undo was cut off", dp.dropped.Load)
	eventually(t, 2*time.Second, "the failed attempt's key on m0 is deleted", func() bool { return e.get(0, res) == "" })
}

// Suspected (e). Close does not wake Lock callers queued at the gate:
// they wait for the holder's lease to run out (a full TTL), then fail.
func TestReviewCloseWakesGateWaiters(t *testing.T) {
	e := newEnv(t, 3)
	l := e.locker(func(c *engine.Config) { c.TTL = 10 * time.Second })
	const res = "review-close-gate"
	ctx := context.Background()
	held, err := l.Lock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	errc := make(chan error, 1)
	go func() {
		le, err := l.Lock(ctx, res)
		if le != nil {
			le.Release(ctx)
		}
		errc <- err
	}()
	eventually(t, 2*time.Second, "the waiter queued", func() bool { return l.GateWaiting(res) == 1 })
	l.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("Lock succeeded after Close")
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("a Lock queued at the gate still waits 2 s after Close (the holder's validity is %s)", held.Validity())
	}
}

// Suspected (e). A Release after Close still hands the lease to a Lock
// queued at the gate (the hand-off needs no round trip without fencing):
// Lock returns a lease after Close, which can neither extend nor delete.
func TestReviewNoHandoffAfterClose(t *testing.T) {
	e := newEnv(t, 3)
	l := e.locker(func(c *engine.Config) { c.TTL = 10 * time.Second })
	const res = "review-close-handoff"
	ctx := context.Background()
	held, err := l.Lock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		le  *engine.Lease
		err error
	}
	gc := make(chan got, 1)
	go func() {
		le, err := l.Lock(ctx, res)
		gc <- got{le, err}
	}()
	eventually(t, 2*time.Second, "the waiter queued", func() bool { return l.GateWaiting(res) == 1 })
	l.Close()
	held.Release(ctx)
	select {
	case g := <-gc:
		if g.err == nil {
			t.Fatalf("Lock returned a lease (cause %v, validity %s) after Close", g.le.Wait().Cause, g.le.Validity())
		}
	case <-time.After(12 * time.Second):
		t.Fatal("the waiter never returned")
	}
}

// Suspected (d), liveness. The retried delete that covers an acquire
// whose connection broke with its SET on the way is used by undo only. A
// lease that acquired on the other masters and is then released deletes
// once on that master; the SET that was still on its way runs after the
// delete and leaves the key there for a full TTL.
func TestReviewReleaseAfterABrokenAcquireConnection(t *testing.T) {
	e := newEnv(t, 3)
	const res = "review-broken-release"
	px := newStallProxy(t, e.cluster.Nodes[0].Addr())
	cfg := engine.DefaultConfig(px.addr(), e.cluster.Nodes[1].Addr(), e.cluster.Nodes[2].Addr())
	cfg.Quarantine = engine.QuarantineObserved
	cfg.ConnTimeout = time.Second
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	px.stall.Store(true)
	le, err := l.TryLock(context.Background(), res)
	if err != nil {
		t.Fatalf("set-up: TryLock with two of three masters: %v", err)
	}
	// The SET to m0 sits in the proxy; its connection breaks, so the
	// lease counts m0 as unsure.
	px.stall.Store(false)
	px.breakStalled()
	eventually(t, 5*time.Second, "the lease heard of the broken connection", func() bool { return l.Nodes()[0].Failed > 0 })
	if err := le.Release(context.Background()); err != nil {
		t.Logf("Release: %v", err)
	}
	eventually(t, 5*time.Second, "set-up: the release reached m0 on a new connection", func() bool { return px.newConns.Load() > 0 })
	px.flushStalled() // the SET reaches m0 after the delete did
	deadline := time.Now().Add(2 * time.Second)
	for v := e.get(0, res); v != ""; v = e.get(0, res) {
		if time.Now().After(deadline) {
			t.Fatalf("m0 keeps %q (the released lease's value is %q) 2 s after its late SET", v, le.Value())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
