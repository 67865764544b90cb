package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/internal/mutation"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// closed reports whether ch is closed right now.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// checkEnded asserts what every ended lease must show at once.
func checkEnded(t *testing.T, what string, le *engine.Lease) {
	t.Helper()
	if le.Err() == nil {
		t.Errorf("%s: Err() is nil", what)
	}
	if !closed(le.Done()) {
		t.Errorf("%s: Done() is not closed (Err %v)", what, le.Err())
	}
	if v := le.Validity(); v != 0 {
		t.Errorf("%s: Validity() = %s after the lease ended (%v)", what, v, le.Err())
	}
}

// A gated, auto-extending lease whose keys vanish ends with ErrLockLost;
// the next goroutine in line then wins the lock on the masters. The lost
// lease's Release must not hand it (old value, old validity) to the third.
// In virtual time: the loss is found by the next auto-extension (the
// simulated masters do not track), and the third goroutine is given
// 300 ms, exactly, to show a hand-off.
func TestLostLeaseIsNeverHandedOn(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		if twoHolders := lostLeaseReleased(t, e); twoHolders != "" {
			t.Fatal(twoHolders)
		}
	})
}

// The control: with the hand-off's check of an ended lease turned off,
// the same sequence makes two holders, so the test above can fail. The
// sequence is scheduled in virtual time: it cannot miss.
func TestLostLeaseIsNeverHandedOnControl(t *testing.T) {
	mutation.Require(t)
	engine.SkipHandoffEndCheck(true)
	defer engine.SkipHandoffEndCheck(false)
	simTest(t, 3, func(t *testing.T, e *env) {
		if lostLeaseReleased(t, e) == "" {
			t.Fatal("with the check off, the lost lease was not handed on: the test cannot fail")
		}
	})
}

// lostLeaseReleased runs the sequence and describes the two holders it
// made, or returns "".
func lostLeaseReleased(t *testing.T, e *env) (twoHolders string) {
	l := e.locker(func(c *engine.Config) {
		c.TTL = 900 * time.Millisecond
		c.AutoExtend = true
		c.ExtendEvery = 150 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const res = "lost-handoff"
	g1, err := l.Lock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		who string
		le  *engine.Lease
	}
	leases := make(chan got, 2)
	for _, who := range []string{"g2", "g3"} {
		go func() {
			le, err := l.Lock(ctx, res)
			if err != nil && ctx.Err() == nil {
				t.Error(who, err)
			}
			leases <- got{who, le}
		}()
		n := map[string]int{"g2": 1, "g3": 2}[who]
		eventually(t, 5*time.Second, who+" queued", func() bool { return l.GateWaiting(res) == n })
	}
	for i := 0; i < 3; i++ { // the keys vanish: eviction, FLUSHDB, a clock jump
		e.del(i, e.key(res))
	}
	select {
	case <-g1.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lost lease's Done did not close")
	}
	if !errors.Is(g1.Err(), engine.ErrLockLost) {
		t.Fatalf("g1.Err() = %v, want ErrLockLost", g1.Err())
	}
	checkEnded(t, "g1 after its keys vanished", g1)
	var g2 got
	select {
	case g2 = <-leases:
	case <-time.After(5 * time.Second):
		t.Fatal("the next goroutine in line did not get the lock")
	}
	if g2.le == nil {
		t.FailNow()
	}
	if g2.le.Value() == g1.Value() {
		t.Fatal("the second holder got the lost lease's value")
	}
	// g1's owner saw Done and releases, as documented.
	g1.Release(ctx)
	select {
	case g3 := <-leases:
		if g3.le != nil && g2.le.Err() == nil && g3.le.Err() == nil && g3.le.Validity() > 0 {
			twoHolders = fmt.Sprintf("%s got a lease (value %q, cause %v) while %s holds one (value %q): two holders",
				g3.who, g3.le.Value(), g3.le.Wait().Cause, g2.who, g2.le.Value())
		}
		if g3.le != nil {
			g3.le.Release(ctx)
		}
		g2.le.Release(ctx)
	case <-time.After(300 * time.Millisecond):
		// The third goroutine is handed g2's lease, or its Lock ends
		// with the context.
		g2.le.Release(ctx)
		cancel()
		if g3 := <-leases; g3.le != nil {
			g3.le.Release(context.Background())
		}
	}
	return twoHolders
}

// A manual Extend that finds the keys gone ends the lease.
func TestFailedExtendEndsTheLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(patient)
	ctx := context.Background()
	le, err := l.TryLock(ctx, "extend-lost")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		e.del(i, e.key("extend-lost"))
	}
	if err := le.Extend(ctx, time.Second); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("Extend after the keys vanished: %v, want ErrNotHeld", err)
	}
	checkEnded(t, "after a failed Extend", le)
	if !errors.Is(le.Err(), engine.ErrLockLost) {
		t.Fatalf("Err() = %v, want ErrLockLost", le.Err())
	}
	if err := le.Extend(ctx, time.Second); err == nil {
		t.Fatal("an ended lease extended")
	}
}

// An Extend to a TTL shorter than the validity left may shorten the keys
// on masters that answer too late to count: their PEXPIRE still runs. The
// lease must not trust its old validity then, whatever the round decided,
// or another Locker takes the resource from under it.
func TestFailedShorterExtendKeepsNoValidityBeyondTheKeys(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		addrs := e.addrs
		slow := []*latencyProxy{newLatencyProxy(e, addrs[1], 0, nil), newLatencyProxy(e, addrs[2], 0, nil)}
		lA := e.locker(func(c *engine.Config) {
			c.Masters = []string{addrs[0], slow[0].addr(), slow[1].addr()}
			c.TTL = 5 * time.Second
			c.NodeTimeout = 100 * time.Millisecond
		})
		lB := e.locker(nil)
		ctx := context.Background()
		a, err := lA.TryLock(ctx, "shorter")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range slow {
			p.delay.Store(int64(300 * time.Millisecond))
		}
		const short = 50 * time.Millisecond
		if err := a.Extend(ctx, short); err == nil {
			t.Fatal("Extend reached a quorum through two 300 ms proxies with a 100 ms node timeout")
		}
		if v := a.Validity(); v > short {
			t.Fatalf("after a failed Extend to %s the lease is trusted for %s more: the masters that ran its PEXPIRE expire the key sooner", short, v)
		}
		// End to end: once the late PEXPIREs have run and the keys
		// expired, another Locker takes the resource, and A must not
		// think it holds it.
		eventually(t, 10*time.Second, "the keys expired on every master after the shortened TTL", func() bool {
			return e.get(0, "shorter") == "" && e.get(1, "shorter") == "" && e.get(2, "shorter") == ""
		})
		b, err := lB.TryLock(ctx, "shorter")
		if err != nil {
			t.Fatalf("B, with the keys gone everywhere: %v", err)
		}
		defer b.Release(ctx)
		if a.Err() == nil && a.Validity() > 0 {
			t.Fatalf("two holders: A's lease is trusted for %s more (Err nil) while B holds the resource", a.Validity())
		}
	})
}

// Done is closed already for a first call made after the validity ran
// out, and Err, Validity and Context agree with it at that instant. On
// real masters (the guarantees' table names it), each lease a millisecond
// past its validity; the node timeout is set beyond what a round takes on
// a loaded machine, and an attempt that still fails (the last lease's
// keys may outlive its validity by the drift) is tried again.
func TestEndedLeaseAgreesAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(func(c *engine.Config) { c.TTL, c.NodeTimeout = 200*time.Millisecond, 90*time.Millisecond })
	deadline := time.Now().Add(time.Minute)
	for i := 0; i < 20; {
		le, err := l.TryLock(context.Background(), "expires")
		if errors.Is(err, engine.ErrNotAcquired) || errors.Is(err, engine.ErrNoQuorum) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no lease in a minute: %v", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(le.ValidUntil()) + time.Millisecond)
		endedLeaseAgrees(t, i, le)
		le.Release(context.Background())
		i++
	}
}

// TestEndedLeaseAgreesAtTheInstant is TestEndedLeaseAgreesAtOnce in
// virtual time, where the first call comes at the very instant the
// validity ends.
func TestEndedLeaseAgreesAtTheInstant(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		l := e.locker(func(c *engine.Config) { c.TTL = 200 * time.Millisecond })
		for i := 0; i < 6; i++ {
			le, err := l.TryLock(context.Background(), fmt.Sprintf("expires-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Until(le.ValidUntil()))
			endedLeaseAgrees(t, i, le)
			le.Release(context.Background())
		}
	})
}

// endedLeaseAgrees checks a lease whose validity has run out: round i
// makes its first call Done, Err or Context, then every one.
func endedLeaseAgrees(t *testing.T, i int, le *engine.Lease) {
	t.Helper()
	switch i % 3 {
	case 0:
		if !closed(le.Done()) {
			t.Fatalf("round %d: Done() not closed at the first call after expiry", i)
		}
	case 1:
		if le.Err() == nil {
			t.Fatalf("round %d: Err() nil after expiry", i)
		}
	case 2:
		if le.Context().Err() == nil {
			t.Fatalf("round %d: Context() not cancelled at the first call after expiry", i)
		}
	}
	checkEnded(t, "after expiry", le)
}

// Restart every master in turn, each sitting out its quarantine, so that
// every fencing counter is forgotten: the next token must still be
// higher than the last one issued before.
//
// The quarantine is MaxTTL, here the TTL of 2 s, with a node timeout of
// 600 ms that rounds on a loaded machine do not reach: the test waits
// for the masters' states, not for durations.
func TestFencingTokensSurviveARollingRestart(t *testing.T) {
	t.Parallel()
	e := ownEnv(t, 3)
	const ttl = 2 * time.Second
	mk := func() *engine.Locker {
		return e.locker(func(c *engine.Config) {
			c.Fencing = true
			c.TTL, c.NodeTimeout = ttl, 600*time.Millisecond
			c.Quarantine = engine.QuarantineObserved
		})
	}
	l := mk()
	ctx := context.Background()
	var last int64
	for i := 0; i < 5; i++ {
		le, err := l.TryLock(ctx, "rolling")
		if err != nil {
			t.Fatal(err)
		}
		if le.Token() <= last {
			t.Fatalf("token %d after %d", le.Token(), last)
		}
		last = le.Token()
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := range e.cluster.Nodes {
		if err := e.cluster.Nodes[i].Restart(ctx); err != nil {
			t.Fatal(err)
		}
		// Wake the pool's connection so it sees the new run_id, then sit
		// out the quarantine it imposes.
		eventually(t, 30*time.Second, "the restart was noticed", func() bool {
			l.TryLock(ctx, "probe")
			return l.Nodes()[i].Restarts > 0
		})
		eventually(t, 30*time.Second, "the quarantine ended", func() bool {
			return l.Nodes()[i].State == "up"
		})
	}
	for i := range e.cluster.Nodes {
		if v, _ := redistest.Do(e.cluster.Nodes[i].Addr(), time.Second, "EXISTS", engine.FenceKey("rolling")); v != ":0" {
			t.Fatalf("node %d still has the counter (%q): the restart did not wipe it", i, v)
		}
	}
	var le *engine.Lease
	eventually(t, 30*time.Second, "a lock after the rolling restart", func() bool {
		var err error
		le, err = l.TryLock(ctx, "rolling")
		return err == nil
	})
	if le.Token() <= last {
		t.Fatalf("token %d after a rolling restart, but %d was issued before: tokens went backwards", le.Token(), last)
	}
	le.Release(ctx)
	// A Locker started afterwards agrees.
	le2, err := mk().TryLock(ctx, "rolling")
	if err != nil {
		t.Fatal(err)
	}
	if le2.Token() <= le.Token() {
		t.Fatalf("token %d after %d", le2.Token(), le.Token())
	}
}

// A fenced acquire whose counter cannot be read fails before it writes:
// no lock key is left behind to refuse everyone for a TTL.
func TestFailedFencedAcquireLeavesNoKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	// A node timeout far beyond a round: every master answers the attempt.
	l := e.locker(func(c *engine.Config) { c.Fencing, c.NodeTimeout = true, 3*time.Second })
	const res = "bad-counter"
	for i := 0; i < 3; i++ {
		c := e.direct[i]
		if err := c.Do(context.Background(), c.B().Hset().Key(engine.FenceKey(e.key(res))).FieldValue().FieldValue("f", "v").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.TryLock(context.Background(), res)
	if err == nil {
		t.Fatal("acquired with a counter of the wrong type")
	}
	// TryLock returns once the vote is decided: wait for every master's
	// answer, after which a SET the script ran would be there.
	eventually(t, 30*time.Second, "every master answered the attempt", func() bool {
		for _, st := range l.Nodes() {
			if st.OK+st.Refused+st.Failed == 0 {
				return false
			}
		}
		return true
	})
	for i := 0; i < 3; i++ {
		if v := e.get(i, e.key(res)); v != "" {
			t.Fatalf("node %d keeps the failed attempt's key %q: %v", i, v, err)
		}
	}
	// A locker without fencing is not refused by a key left behind.
	plain := e.locker(patient)
	le, err := plain.TryLock(context.Background(), res)
	if err != nil {
		t.Fatalf("a plain locker after the failed fenced attempt: %v", err)
	}
	le.Release(context.Background())
}

// No resource name reaches a fencing counter: the old counter name is an
// ordinary resource, and the internal namespace is refused by name.
//
// Without a KeyPrefix, which would keep every name out of the namespace:
// the resource's name is the test's own instead.
func TestResourceNamesCannotReachTheCounters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	x := e.key("x")
	l := e.locker(func(c *engine.Config) { c.Fencing, c.KeyPrefix = true, ""; patient(c) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	le, err := l.Lock(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	le.Release(ctx)
	for _, name := range []string{"redlock:fence:" + x, engine.FenceKey(x)} {
		other, err := l.Lock(ctx, name)
		switch {
		case strings.HasPrefix(name, "\xff"):
			if !errors.Is(err, engine.ErrReservedResource) {
				t.Fatalf("Lock(%q) = %v, want ErrReservedResource", name, err)
			}
			if _, err := l.TryLock(ctx, name); !errors.Is(err, engine.ErrReservedResource) {
				t.Fatalf("TryLock(%q) = %v, want ErrReservedResource", name, err)
			}
		case err != nil:
			t.Fatalf("Lock(%q): %v", name, err)
		default:
			other.Release(ctx)
		}
	}
	prefixed := e.locker(func(c *engine.Config) { c.KeyPrefix = "\xffredlock:" })
	if _, err := prefixed.TryLock(ctx, "fence:"+x); !errors.Is(err, engine.ErrReservedResource) {
		t.Fatalf("a KeyPrefix into the namespace: %v, want ErrReservedResource", err)
	}
}

// A handed-off successor inherits less validity than a fresh lease; its
// first auto-extension must come before that runs out, whatever
// ExtendEvery is. In virtual time, the hand-off comes with exactly 560 ms
// of the 1 s TTL left, so that ExtendEvery (700 ms) from the hand-off
// would come too late.
func TestHandedOffSuccessorIsExtendedInTime(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		l := e.locker(func(c *engine.Config) {
			c.TTL = time.Second
			c.AutoExtend = true
			c.ExtendEvery = 700 * time.Millisecond
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		first, err := l.Lock(ctx, "successor")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *engine.Lease, 1)
		go func() {
			le, err := l.Lock(ctx, "successor")
			if err != nil {
				t.Error(err)
			}
			got <- le
		}()
		eventually(t, 5*time.Second, "second goroutine queued", func() bool { return l.GateWaiting("successor") == 1 })
		// Hand off with a little over half the TTL left.
		time.Sleep(time.Until(first.ValidUntil()) - 560*time.Millisecond)
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		second := <-got
		if second == nil {
			t.FailNow()
		}
		if second.Wait().Cause != engine.WakeHandoff {
			t.Fatalf("set-up: not handed off (%v)", second.Wait().Cause)
		}
		handedAt, inherited := time.Now(), second.ValidUntil()
		if left := time.Until(inherited); left > 560*time.Millisecond {
			t.Fatalf("set-up: the successor inherited %s of validity, want 560 ms at most", left)
		}
		time.Sleep(time.Until(inherited))
		if err := second.Err(); err != nil {
			t.Fatalf("the successor ended at the end of the validity it inherited, after %d extensions: %v", second.Extensions(), err)
		}
		if second.Extensions() == 0 {
			t.Fatal("the successor was not extended within the validity it inherited")
		}
		time.Sleep(time.Until(handedAt.Add(1500 * time.Millisecond)))
		if err := second.Err(); err != nil {
			t.Fatalf("the successor ended after %d extensions: %v", second.Extensions(), err)
		}
		second.Release(ctx)
	})
}

func TestExtendRefusesATTLAboveMaxTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(func(c *engine.Config) { c.TTL = 10 * time.Second; c.MaxTTL = 20 * time.Second; patient(c) })
	le, err := l.TryLock(context.Background(), "max-ttl")
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(context.Background())
	if err := le.Extend(context.Background(), 30*time.Second); err == nil || !strings.Contains(err.Error(), "MaxTTL") {
		t.Fatalf("Extend past MaxTTL: %v", err)
	}
	if err := le.Extend(context.Background(), 20*time.Second); err != nil {
		t.Fatalf("Extend to MaxTTL: %v", err)
	}
}

// Releases go out even when the context has ended and every admission
// slot is taken: the lease is already marked released, so keys left
// behind would refuse everyone for a full TTL. In virtual time, where the
// rounds that fill the slots wait on the stopped masters until they all
// are blocked.
func TestReleaseWithAnEndedContextStillDeletes(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		l := e.locker(func(c *engine.Config) { c.NodeTimeout = 2 * time.Second })
		ctx := context.Background()
		le, err := l.TryLock(ctx, "ended-release")
		if err != nil {
			t.Fatal(err)
		}
		for i := range e.sim {
			e.pause(i)
		}
		// Fill every admission slot with rounds that wait on paused
		// masters.
		var wg sync.WaitGroup
		for i := 0; i < 1100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.TryLock(ctx, "filler")
			}()
		}
		synctest.Wait()
		ended, cancel := context.WithCancel(ctx)
		cancel()
		if err := le.Release(ended); err == nil {
			t.Fatal("Release with an ended context reported success")
		}
		for i := range e.sim {
			e.resume(i)
		}
		wg.Wait()
		eventually(t, 5*time.Second, "the released keys are deleted", func() bool {
			for i := 0; i < 3; i++ {
				if e.get(i, "ended-release") != "" {
					return false
				}
			}
			return true
		})
	})
}

// Contention is not an outage: with a minority of masters down, a
// resource held elsewhere reads as ErrNotAcquired, never ErrNoQuorum. On
// the pool's real masters (the master of the wrong type is Redis's
// WRONGTYPE): the one down is reached through a proxy, killed, which
// refuses connections as a stopped master does. The node timeout is far
// beyond a round, so that only the masters' answers decide.
func TestContentionWithAMinorityDownIsNotAcquired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	front := newLatencyProxy(e, e.addrs[4], 0, nil)
	masters := append(append([]string(nil), e.addrs[:4]...), front.addr())
	mk := func() *engine.Locker {
		return e.locker(func(c *engine.Config) { c.Masters, c.NodeTimeout = masters, 3*time.Second })
	}
	holder := mk()
	le, err := holder.TryLock(context.Background(), "contended")
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(context.Background())
	eventually(t, 30*time.Second, "every master answered the holder", func() bool {
		n := 0
		for _, st := range holder.Nodes() {
			n += int(st.OK)
		}
		return n == 5
	})
	other := mk()
	front.kill()
	e.del(3, e.key("contended"))
	c := e.direct[3]
	if err := c.Do(context.Background(), c.B().Hset().Key(e.key("contended")).FieldValue().FieldValue("f", "v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		_, err := other.TryLock(context.Background(), "contended")
		if !errors.Is(err, engine.ErrNotAcquired) || errors.Is(err, engine.ErrNoQuorum) {
			t.Fatalf("attempt %d with the resource held, one master down and one of the wrong type: %v", i, err)
		}
	}
}

func TestReleaseOfANilLease(t *testing.T) {
	t.Parallel()
	var le *engine.Lease
	if err := le.Release(context.Background()); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("Release on nil: %v", err)
	}
	if err := le.Extend(context.Background(), time.Second); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("Extend on nil: %v", err)
	}
}

// An acquire whose connection broke while its SET was still on its way is
// undone even if the SET reaches the master after the first delete, sent
// on a new connection, did. In virtual time, with masters 1 and 2 slower
// than master 0, so that the SET to master 0 is sent before their
// refusals decide the attempt.
func TestUndoAfterABrokenConnectionIsRetried(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		const res = "broken-undo"
		e.set(1, res, "someone")
		e.set(2, res, "someone")
		for _, m := range e.sim[1:] {
			m.SetLatency(simredis.Latency{Min: 5 * time.Millisecond})
		}
		px := newStallProxy(e, e.addrs[0])
		l := e.locker(func(c *engine.Config) {
			c.Masters = []string{px.addr(), e.addrs[1], e.addrs[2]}
			c.Conn.ConnTimeout = time.Second
		})
		px.stall.Store(true)
		if _, err := l.TryLock(context.Background(), res); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("TryLock: %v", err)
		}
		synctest.Wait()
		if !px.holding() {
			t.Fatal("set-up: the SET to master 0 did not reach the proxy")
		}
		// The SET sits in the proxy. Break the client's connection: its
		// reply is lost, so the attempt is undone on a new connection,
		// which the proxy passes straight through, ahead of the SET.
		px.stall.Store(false)
		px.breakStalled()
		eventually(t, 5*time.Second, "the undo overtook the SET", func() bool { return px.newConns.Load() > 0 })
		// The undo's round trip, well within a node timeout.
		time.Sleep(200 * time.Millisecond)
		sets := func() int {
			n := 0
			for _, r := range e.sim[0].KeyLog() {
				if r.Key == res && !r.Gone {
					n++
				}
			}
			return n
		}
		if sets() != 0 {
			t.Fatal("set-up: the SET ran before the first undo")
		}
		px.flushStalled()
		eventually(t, 5*time.Second, "the held SET ran", func() bool { return sets() == 1 })
		eventually(t, 5*time.Second, "the SET that came after the first undo is undone", func() bool {
			return e.get(0, res) == ""
		})
	})
}

// Validity 0 means the lease has ended: Done is closed and Err set at that
// instant. Validity reading the clock twice (once to end an expired
// lease, once for the time left) would leave a gap where it returns 0 and
// Done is still open; a tight loop over the last microseconds of a short
// lease finds it.
//
// On real masters: the clock must run while the loop spins, which virtual
// time does not do.
func TestValidityZeroMeansDone(t *testing.T) {
	e := newEnv(t, 3)
	l := e.locker(func(c *engine.Config) { c.TTL = 40 * time.Millisecond })
	const res = "validity"
	for try := 0; try < 25; try++ {
		le, err := l.TryLock(context.Background(), res)
		if errors.Is(err, engine.ErrNoQuorum) || errors.Is(err, engine.ErrNotAcquired) {
			// A loaded machine misses the 4 ms node timeout of this TTL
			// now and then, and the last lease's delete can be later than
			// its expiry; the property is about a lease that was held.
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
