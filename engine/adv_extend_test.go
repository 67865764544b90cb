package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// An Extend to a shorter TTL whose commands to two of three masters sit in
// connections that then break, to be run later (as a SET may, see
// TestUndoAfterABrokenConnectionIsRetried); a longer Extend on the new
// connections succeeds everywhere; then the stale short PEXPIREs run. The
// lease must not be trusted beyond the keys: a longer Extend cannot know
// whether an earlier, shorter one is still on its way.
func TestStaleShorterExtendAfterALongerOne(t *testing.T) {
	const short = 200 * time.Millisecond
	e := newEnv(t, 3)
	addrs := e.cluster.Addrs()
	lB := e.locker(nil)
	ctx := context.Background()
	pttl := func(i int, res string) int64 {
		c := e.direct[i]
		ms, _ := c.Do(ctx, c.B().Pttl().Key(res).Build()).AsInt64()
		return ms
	}
	// The stalled bytes sometimes miss the master they were held for (the
	// proxy's timing): try the set-up a few times.
	for try := 0; try < 3; try++ {
		res := fmt.Sprintf("stale-extend-%d", try)
		sp := []*stallProxy{newStallProxy(t, addrs[1]), newStallProxy(t, addrs[2])}
		lA := e.locker(func(c *engine.Config) {
			c.Masters = []string{addrs[0], sp[0].addr(), sp[1].addr()}
			c.TTL = 5 * time.Second
			c.NodeTimeout = 100 * time.Millisecond
			c.ConnTimeout = time.Second
		})
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
		for _, p := range sp {
			p.stall.Store(false)
			p.breakStalled()
		}
		// Nothing more goes into the broken connections.
		eventually(t, 5*time.Second, "A on new connections to both masters", func() bool {
			if le, err := lA.TryLock(ctx, "other"); err == nil {
				le.Release(ctx)
			}
			return sp[0].newConns.Load() > 0 && sp[1].newConns.Load() > 0
		})
		if err := a.Extend(ctx, 5*time.Second); err != nil {
			t.Fatalf("the longer Extend, on new connections: %v", err)
		}
		if !within(time.Second, func() bool { return pttl(1, res) > 4000 && pttl(2, res) > 4000 }) {
			t.Logf("set-up %d: the longer Extend went into a broken connection; again", try)
			continue
		}
		t.Logf("after the longer Extend: valid for %s", a.Validity())
		for _, p := range sp {
			p.flushStalled()
		}
		if !within(time.Second, func() bool {
			return pttl(1, res) <= int64(short/time.Millisecond) && pttl(2, res) <= int64(short/time.Millisecond)
		}) {
			t.Logf("set-up %d: a stale PEXPIRE did not run after the longer one; again", try)
			continue
		}
		eventually(t, 5*time.Second, "the keys of masters 1 and 2 expired", func() bool {
			return e.get(1, res) == "" && e.get(2, res) == ""
		})
		b, err := lB.TryLock(ctx, res)
		if err != nil {
			t.Fatalf("B, with the keys gone on two masters: %v", err)
		}
		defer b.Release(ctx)
		if a.Err() == nil && a.Validity() > 0 {
			t.Fatalf("two holders: A's lease is trusted for %s more while B holds the resource", a.Validity())
		}
		return
	}
	t.Fatal("set-up: the stale PEXPIREs never ran after the longer Extend")
}

// within reports whether cond held at some point within d.
func within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
