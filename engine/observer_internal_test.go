package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/internal/simredis"
	"github.com/redlock-bench/redlock/multiplex"
)

// The events of a TryLock+Release cycle, built and handed to an Observer
// whose hooks do nothing, allocate nothing: an observer costs a service no
// garbage. The network is left out, so that nothing else allocates while
// AllocsPerRun counts; BenchmarkTryLockReleaseObserved measures a whole
// cycle.
//
// The Locker runs on simulated masters (in a synctest bubble): nothing
// of the network moves while the test's goroutine counts, since virtual
// time stands still while it runs.
func TestObserverEventsDoNotAllocate(t *testing.T) {
	synctest.Test(t, observerEventsDoNotAllocate)
}

func observerEventsDoNotAllocate(t *testing.T) {
	nw := simredis.NewNetwork(1)
	masters, addrs := simredis.NewMasters(nw, 3, simredis.MasterOptions{Uptime: time.Hour})
	for _, m := range masters {
		defer m.Close()
	}
	nop := &Observer{
		Acquire: func(context.Context, AcquireEvent) {},
		Release: func(context.Context, ReleaseEvent) {},
		Lost:    func(LostEvent) {},
		Wait:    func(WaitEvent) {},
	}
	cfg := DefaultConfig(addrs...)
	cfg.Quarantine, cfg.Observer = QuarantineObserved, nop
	cfg.Conn.DialContext, cfg.DisableTracking = nw.Dialer("c1"), true
	l, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	synctest.Wait()
	le := l.newLease("r", nil, acquireOpts{})
	le.start = time.Now()
	for i := range le.votes {
		le.votes[i] = multiplex.Vote{Outcome: multiplex.OK}
	}
	ctx := context.Background()
	refused := l.acquireError("r", multiplex.Tally{Votes: le.votes, Quorum: 2, Refused: 3})
	ctxEnded, cancel := context.WithCancel(ctx)
	cancel()
	gaveUpErr := gaveUp("r", ctxEnded, &WaitInfo{Attempts: 3}, refused)
	for name, f := range map[string]func(){
		"acquired": func() { l.observeAcquire(ctx, OpTryLock, "r", le.start, le, nil, 1) },
		"refused":  func() { l.observeAcquire(ctx, OpTryLock, "r", le.start, nil, refused, 1) },
		"gave up":  func() { l.observeAcquire(ctx, OpLock, "r", le.start, nil, gaveUpErr, 3) },
		"released": func() {
			var err error
			le.observeRelease(ctx, le.start, &err)
		},
		"ended": func() { le.observeEnd(true, ErrReleased) },
		"wait":  func() { l.observeWait("r", le.start, WakeNotified, nil) },
	} {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s: %.1f allocations per event with a no-op observer, want 0", name, n)
		}
	}
}
