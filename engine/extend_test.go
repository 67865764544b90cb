package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// TestExtend: an Extend by the holder moves its validity and the keys'
// TTL on every master; an Extend of keys deleted everywhere fails with
// ErrNotHeld and re-creates none; an Extend after the validity ran out
// fails with ErrLeaseExpired and touches nothing. In virtual time, so that
// the TTL of 300 ms, the expiry and the node timeout (30 ms) are exact;
// TestExtendScriptOnRealMasters runs the script's part on real masters.
func TestExtend(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		l := e.locker(func(c *engine.Config) { c.TTL = 300 * time.Millisecond; c.MaxTTL = 2 * time.Second })
		ctx := context.Background()
		le, err := l.TryLock(ctx, "extend")
		if err != nil {
			t.Fatal(err)
		}
		before := le.ValidUntil()
		time.Sleep(50 * time.Millisecond)
		extendMovesTheKeys(t, e, le, "extend", 2*time.Second, before.Add(time.Second))

		// After expiry, extend fails without touching anything.
		le2, err := l.TryLock(ctx, "extend-expired")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(le2.ValidUntil()))
		if err := le2.Extend(ctx, time.Second); !errors.Is(err, engine.ErrLeaseExpired) {
			t.Fatalf("extend at the end of the validity: want ErrLeaseExpired, got %v", err)
		}
		// The keys outlive the validity by the drift at most, then expire
		// as set: the failed Extend did not lengthen them.
		time.Sleep(50 * time.Millisecond)
		for i := 0; i < 3; i++ {
			if v := e.get(i, "extend-expired"); v != "" {
				t.Fatalf("node %d: key %q exists after expiry and failed extend", i, v)
			}
		}
	})
}

// TestExtendScriptOnRealMasters: TestExtend's Extend of a held lease and
// of deleted keys, on real masters (the script's semantics), with the
// default TTL, far beyond what any round takes.
func TestExtendScriptOnRealMasters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(func(c *engine.Config) { c.MaxTTL = 2 * c.TTL; patient(c) })
	le, err := l.TryLock(context.Background(), "extend")
	if err != nil {
		t.Fatal(err)
	}
	extendMovesTheKeys(t, e, le, "extend", 2*l.Config().TTL, le.ValidUntil().Add(l.Config().TTL/2))
}

// extendMovesTheKeys extends le (on res) to ttl, which must move its
// validity past after and every master's TTL past half of ttl; then
// deletes the keys everywhere, after which an Extend fails with
// ErrNotHeld and re-creates none.
func extendMovesTheKeys(t *testing.T, e *env, le *engine.Lease, res string, ttl time.Duration, after time.Time) {
	t.Helper()
	ctx := context.Background()
	if err := le.Extend(ctx, ttl); err != nil {
		t.Fatalf("extend by holder: %v", err)
	}
	if !le.ValidUntil().After(after) {
		t.Fatalf("validity not moved past %s: %s", after, le.ValidUntil())
	}
	for i := 0; i < 3; i++ {
		// Extend returns at quorum; the last node may answer a little later.
		eventually(t, 30*time.Second, fmt.Sprintf("node %d PTTL > %s after extend", i, ttl/2), func() bool {
			return e.pttl(i, e.key(res)) > (ttl / 2).Milliseconds()
		})
	}

	// Deleted keys are never re-created.
	for i := 0; i < 3; i++ {
		e.del(i, e.key(res))
	}
	if err := le.Extend(ctx, ttl); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("extend of deleted keys: want ErrNotHeld, got %v", err)
	}
	for i := 0; i < 3; i++ {
		if v := e.get(i, e.key(res)); v != "" {
			t.Fatalf("node %d: extend re-created the key (%q)", i, v)
		}
	}
}

// hungMasterLease is a lease on res on five simulated masters, TTL 1 s,
// auto-extended every 800 ms with the given node timeout, after which the
// fifth master is stopped (as SIGSTOP does) until the test ends.
func hungMasterLease(t *testing.T, e *env, nodeTimeout time.Duration, res string) *engine.Lease {
	t.Helper()
	l := e.locker(func(c *engine.Config) {
		c.TTL = time.Second
		c.NodeTimeout = nodeTimeout
		c.AutoExtend = true
		c.ExtendEvery = 800 * time.Millisecond
	})
	le, err := l.TryLock(context.Background(), res)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { le.Release(context.Background()) })
	e.pause(4)
	return le
}

// An Extend that a quorum answers at once, with one master hung and less
// validity left than the node timeout: waiting for the hung master must
// not make it fail, nor end an auto-extended lease as lost.
func TestHungMasterDoesNotFailAnExtendAQuorumAnswered(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		le := hungMasterLease(t, e, 400*time.Millisecond, "hung-extend")
		acquired := le.ValidUntil()
		// The first auto-extension comes at 800 ms, with 200 ms of
		// validity left, less than the node timeout; it waits for the
		// hung master until a tenth of that is left, then counts it as
		// timed out, and succeeds.
		time.Sleep(1100 * time.Millisecond)
		if err := le.Err(); err != nil {
			t.Fatalf("auto-extension with four of five masters answering at once: %v", err)
		}
		if n := le.Extensions(); n != 1 {
			t.Fatalf("%d auto-extensions in 1.1 s, want 1", n)
		}
		if !le.ValidUntil().After(acquired.Add(700 * time.Millisecond)) {
			t.Fatalf("the auto-extension moved the validity from %s to %s only", acquired, le.ValidUntil())
		}
	})
}

// An auto-extension that fires while an Extend of the holder's is under
// way, with one master hung: it runs after that Extend moved the validity
// on, and must not be cut short by the validity it saw before, which
// would end a lease valid for another second as lost.
func TestAutoExtensionAfterAnExtendWithAMasterHung(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		ctx := context.Background()
		le := hungMasterLease(t, e, 450*time.Millisecond, "auto-after-extend")
		// The auto-extension fires at 800 ms, during this Extend, which
		// waits for the hung master until shortly before the validity.
		time.Sleep(760 * time.Millisecond)
		if err := le.Extend(ctx, time.Second); err != nil {
			t.Fatalf("Extend with four of five masters answering at once: %v", err)
		}
		if le.Extensions() != 0 {
			t.Fatal("set-up: the auto-extension ran before the Extend")
		}
		time.Sleep(100 * time.Millisecond)
		if err := le.Err(); err != nil {
			t.Fatalf("the lease ended after an Extend that moved its validity on by a second: %v", err)
		}
	})
}

// An Extend whose wait for a hung master is cut short by the validity,
// without a quorum: the error must tell the outage it was (the hung master
// timed out), not a context deadline the caller never set.
func TestExtendCutShortByTheValidityIsNoQuorum(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		const res = "cut-extend"
		l := e.locker(func(c *engine.Config) {
			c.TTL = time.Second
			c.NodeTimeout = 450 * time.Millisecond
		})
		ctx := context.Background()
		le, err := l.TryLock(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		defer le.Release(ctx)
		e.set(2, res, "someone-else")
		e.set(3, res, "someone-else")
		e.pause(4)
		time.Sleep(700 * time.Millisecond) // less validity left than a round
		err = le.Extend(ctx, time.Second)
		t.Logf("Extend: %v", err)
		if err == nil || !errors.Is(err, engine.ErrNoQuorum) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Extend with 2 ok, 2 refused and 1 hung master: %v; want ErrNoQuorum", err)
		}
	})
}

// An Extend to a shorter TTL whose commands to two of three masters sit in
// connections that then break, to be run later (as a SET may, see
// TestUndoAfterABrokenConnectionIsRetried); a longer Extend on the new
// connections succeeds everywhere; then the stale short PEXPIREs run. The
// lease must not be trusted beyond the keys: a longer Extend cannot know
// whether an earlier, shorter one is still on its way.
func TestStaleShorterExtendAfterALongerOne(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		const short = 200 * time.Millisecond
		const res = "stale-extend"
		lB := e.locker(nil)
		ctx := context.Background()
		lA, sp := e.stalledLocker(5*time.Second, 0)
		a, err := lA.TryLock(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range sp {
			p.stall.Store(true)
		}
		if err := a.Extend(ctx, short); err == nil {
			t.Fatal("set-up: Extend reached a quorum with two masters stalled")
		}
		breakAndReconnect(t, lA, sp)
		if err := a.Extend(ctx, 5*time.Second); err != nil {
			t.Fatalf("the longer Extend, on new connections: %v", err)
		}
		e.staleExtendRan(t, sp, lB, a, res, 4000, short.Milliseconds())
	})
}

// breakAndReconnect lets sp's connections go and breaks them under what
// they held back, then waits until lA reaches both masters again on new
// connections: nothing more goes into the broken ones.
func breakAndReconnect(t *testing.T, lA *engine.Locker, sp []*stallProxy) {
	t.Helper()
	ctx := context.Background()
	for _, p := range sp {
		p.stall.Store(false)
		p.breakStalled()
	}
	eventually(t, 5*time.Second, "A on new connections to both masters", func() bool {
		if le, err := lA.TryLock(ctx, "other"); err == nil {
			le.Release(ctx)
		}
		return sp[0].newConns.Load() > 0 && sp[1].newConns.Load() > 0
	})
}

// staleExtendRan checks the end of the stale-PEXPIRE attacks: once a
// longer Extend left more than longMS on masters 1 and 2, the shorter
// PEXPIREs held back in sp are let through; once they ran (shortMS or
// less left) and the keys expired there, lB takes res, and lease a must
// not be trusted. In virtual time nothing is late by chance: the longer
// Extend reached both masters on the new connections, and the stale
// PEXPIREs run after it.
func (e *env) staleExtendRan(t *testing.T, sp []*stallProxy, lB *engine.Locker, a *engine.Lease, res string, longMS, shortMS int64) {
	t.Helper()
	if !within(time.Second, func() bool { return e.pttl(1, res) > longMS && e.pttl(2, res) > longMS }) {
		t.Fatal("set-up: the longer Extend went into a broken connection")
	}
	for _, p := range sp {
		p.flushStalled()
	}
	if !within(time.Second, func() bool { return e.pttl(1, res) <= shortMS && e.pttl(2, res) <= shortMS }) {
		t.Fatal("set-up: a stale PEXPIRE did not run after the longer one")
	}
	eventually(t, 5*time.Second, "the keys of masters 1 and 2 expired", func() bool {
		return e.get(1, res) == "" && e.get(2, res) == ""
	})
	ctx := context.Background()
	b, err := lB.TryLock(ctx, res)
	if err != nil {
		t.Fatalf("B, with the keys gone on two masters: %v", err)
	}
	defer b.Release(ctx)
	if a.Err() == nil && a.Validity() > 0 {
		t.Fatalf("two holders: the extended lease is trusted for %s more while B holds the resource", a.Validity())
	}
}

// The same across a hand-off at the gate: an Extend that two masters did
// not answer, then the lease is handed to the next goroutine, whose longer
// Extend succeeds on new connections before the stale PEXPIREs run. The
// successor inherits the keys, and what may still reach them.
func TestStaleExtendAfterAHandOff(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		const ttl = time.Second
		const res = "stale-handoff"
		lB := e.locker(nil)
		ctx := context.Background()
		lA, sp := e.stalledLocker(ttl, 3*ttl)
		a1, err := lA.Lock(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		a2c := lockAtGate(t, ctx, lA, res)
		for _, p := range sp {
			p.stall.Store(true)
		}
		if err := a1.Extend(ctx, ttl); err == nil {
			t.Fatal("set-up: Extend reached a quorum with two masters stalled")
		}
		if err := a1.Release(ctx); err != nil {
			t.Fatalf("set-up: the hand-off: %v", err)
		}
		a2 := <-a2c
		if a2.err != nil || a2.le.Wait().Cause != engine.WakeHandoff {
			t.Fatalf("set-up: the second goroutine was not handed the lease: %v", a2.err)
		}
		breakAndReconnect(t, lA, sp)
		if err := a2.le.Extend(ctx, 3*ttl); err != nil {
			t.Fatalf("the successor's longer Extend, on new connections: %v", err)
		}
		e.staleExtendRan(t, sp, lB, a2.le, res, 2000, 1000)
	})
}

// The cap of an unanswered Extend must not catch a master that is merely
// slower than the quorum: a longer Extend after a shorter one that every
// master answered within the node timeout is trusted for its own TTL.
func TestSlowMasterDoesNotCapLaterExtends(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		addrs := e.addrs
		slow := []*latencyProxy{newLatencyProxy(e, addrs[3], 0, nil), newLatencyProxy(e, addrs[4], 0, nil)}
		l := e.locker(func(c *engine.Config) {
			c.Masters = []string{addrs[0], addrs[1], addrs[2], slow[0].addr(), slow[1].addr()}
			c.TTL, c.MaxTTL = 2*time.Second, 10*time.Second
			c.NodeTimeout = 500 * time.Millisecond
		})
		ctx := context.Background()
		le, err := l.TryLock(ctx, "slow-cap")
		if err != nil {
			t.Fatal(err)
		}
		defer le.Release(ctx)
		for _, p := range slow {
			p.delay.Store(int64(30 * time.Millisecond))
		}
		if err := le.Extend(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := le.Extend(ctx, 8*time.Second); err != nil {
			t.Fatal(err)
		}
		if v := le.Validity(); v < 5*time.Second {
			t.Fatalf("after Extend(1s) answered by every master, Extend(8s) is trusted for %s", v)
		}
	})
}

// Release, Extend and auto-extension race on one lease from many
// goroutines (the lease's op lock hands itself from one to the next): every
// call returns, one Release deletes the keys, the others say the lease
// was already released, and no Extend or auto-extension revives it.
//
// On real masters, whose goroutines run at once rather than at virtual
// instants; the node timeout is far beyond what a round takes, so that
// only the races decide.
func TestReleaseExtendAndAutoExtensionRacing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(func(c *engine.Config) {
		c.TTL, c.AutoExtend, c.ExtendEvery = 10*time.Second, true, time.Millisecond
		c.NodeTimeout = 3 * time.Second
	})
	ctx := context.Background()
	for round := range 20 {
		res := fmt.Sprintf("race-%d", round)
		le, err := l.TryLock(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var released atomic.Int32
		start := make(chan struct{})
		for g := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if g%3 == 0 {
					if err := le.Release(ctx); err == nil {
						released.Add(1)
					} else if !errors.Is(err, engine.ErrNotHeld) {
						t.Errorf("Release: %v", err)
					}
					return
				}
				for range 5 {
					if err := le.Extend(ctx, 10*time.Second); err != nil && !errors.Is(err, engine.ErrReleased) {
						t.Errorf("Extend: %v", err)
					}
				}
			}()
		}
		close(start)
		finished := make(chan struct{})
		go func() { wg.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			t.Fatal("Release and Extend calls still blocked after 30 s")
		}
		if n := released.Load(); n != 1 {
			t.Fatalf("round %d: %d Releases succeeded, want 1", round, n)
		}
		if !errors.Is(le.Err(), engine.ErrReleased) || le.Validity() != 0 {
			t.Fatalf("round %d: after the Release: Err %v, validity %s", round, le.Err(), le.Validity())
		}
		// Release returns at quorum: the last master may get its delete
		// after it.
		eventually(t, 30*time.Second, fmt.Sprintf("round %d: every master's key deleted", round), func() bool {
			for i := range e.direct {
				if e.get(i, e.key(res)) != "" {
					return false
				}
			}
			return true
		})
	}
}
