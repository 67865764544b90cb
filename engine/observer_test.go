package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// recorder keeps every event an Observer receives.
type recorder struct {
	mu       sync.Mutex
	acquires []engine.AcquireEvent
	releases []engine.ReleaseEvent
	extends  []engine.ExtendEvent
	waits    []engine.WaitEvent
	handoffs []engine.HandoffEvent
	lost     []engine.LostEvent
	nodes    []engine.NodeStateEvent
}

func (r *recorder) observer() *engine.Observer {
	return &engine.Observer{
		Acquire: func(_ context.Context, e engine.AcquireEvent) {
			r.mu.Lock()
			r.acquires = append(r.acquires, e)
			r.mu.Unlock()
		},
		Release: func(_ context.Context, e engine.ReleaseEvent) {
			r.mu.Lock()
			r.releases = append(r.releases, e)
			r.mu.Unlock()
		},
		Extend: func(_ context.Context, e engine.ExtendEvent) {
			r.mu.Lock()
			r.extends = append(r.extends, e)
			r.mu.Unlock()
		},
		Wait:    func(e engine.WaitEvent) { r.mu.Lock(); r.waits = append(r.waits, e); r.mu.Unlock() },
		Handoff: func(e engine.HandoffEvent) { r.mu.Lock(); r.handoffs = append(r.handoffs, e); r.mu.Unlock() },
		Lost:    func(e engine.LostEvent) { r.mu.Lock(); r.lost = append(r.lost, e); r.mu.Unlock() },
		NodeState: func(e engine.NodeStateEvent) {
			r.mu.Lock()
			r.nodes = append(r.nodes, e)
			r.mu.Unlock()
		},
	}
}

func (r *recorder) lastAcquire(t *testing.T) engine.AcquireEvent {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.acquires) == 0 {
		t.Fatal("no acquire event")
	}
	return r.acquires[len(r.acquires)-1]
}

// In virtual time: the waits and durations the events report are exact,
// and the node timeout is never met by a slow machine.
func TestObserverSeesWhatHappened(t *testing.T) {
	simTest(t, 5, observerSeesWhatHappened)
}

func observerSeesWhatHappened(t *testing.T, e *env) {
	var r recorder
	newStart := time.Now()
	l := e.locker(func(c *engine.Config) {
		c.Observer = r.observer()
		c.NodeTimeout = 100 * time.Millisecond
	})
	newEnd := time.Now()
	ctx := context.Background()
	r.mu.Lock()
	if len(r.nodes) != 5 || r.nodes[0].State != engine.StateUp || r.nodes[0].Previous != "" || r.nodes[0].Duration != 0 {
		t.Fatalf("New must report each master's first state: %+v", r.nodes)
	}
	r.mu.Unlock()

	le, err := l.TryLock(ctx, "obs")
	if err != nil {
		t.Fatal(err)
	}
	a := r.lastAcquire(t)
	if a.Op != engine.OpTryLock || a.Result != engine.ResultAcquired || a.Resource != "obs" || a.Attempts != 1 ||
		a.Votes.Count(engine.OutcomeOK) < a.Quorum || a.Quorum != 3 || len(a.Masters) != 5 || a.Duration <= 0 {
		t.Fatalf("acquired: %+v", a)
	}
	// Contention: another owner holds it.
	if _, err := l.TryLock(ctx, "obs"); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("second TryLock: %v", err)
	}
	if a := r.lastAcquire(t); a.Result != engine.ResultContended || a.Votes.Count(engine.OutcomeRefused) < 3 || a.Votes.Outcome(0) == engine.OutcomeOK {
		t.Fatalf("contended: %+v", a)
	}
	if err := le.Extend(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A release of a released lease fails, and says so.
	le.Release(ctx)
	r.mu.Lock()
	if len(r.extends) != 1 || r.extends[0].Result != engine.ResultExtended || r.extends[0].Auto ||
		r.extends[0].Votes.Count(engine.OutcomeOK) < 3 {
		t.Fatalf("extends: %+v", r.extends)
	}
	if len(r.releases) != 2 || r.releases[0].Result != engine.ResultReleased || r.releases[0].Held <= 0 ||
		r.releases[0].Votes.Count(engine.OutcomeOK) < 3 || r.releases[1].Result != engine.ResultNotHeld {
		t.Fatalf("releases: %+v", r.releases)
	}
	if len(r.lost) != 0 {
		t.Fatalf("no lease was lost: %+v", r.lost)
	}
	r.mu.Unlock()

	// Lock behind a holder in this process: a gate wait ended by the
	// hand-off, and a hand-off event from the releasing goroutine.
	firstStart := time.Now()
	first, err := l.Lock(ctx, "gated")
	if err != nil {
		t.Fatal(err)
	}
	firstGot := time.Now()
	got := make(chan *engine.Lease)
	go func() {
		le, err := l.Lock(ctx, "gated")
		if err != nil {
			t.Error(err)
		}
		got <- le
	}()
	eventually(t, 5*time.Second, "second Lock queued", func() bool { return l.GateWaiting("gated") == 1 })
	heldAtLeast := time.Since(firstGot) // the keys were set before Lock returned
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	heldAtMost := time.Since(firstStart)
	second := <-got
	if a := r.lastAcquire(t); a.Op != engine.OpLock || a.Result != engine.ResultAcquired || !a.Handoff || a.Attempts != 0 ||
		a.Votes.Count(engine.OutcomeOK) < 3 {
		t.Fatalf("handed over: %+v", a)
	}
	r.mu.Lock()
	if len(r.handoffs) != 1 || r.handoffs[0].InARow != 1 || r.handoffs[0].Validity <= 0 || r.handoffs[0].Resource != "gated" ||
		r.handoffs[0].Held < heldAtLeast || r.handoffs[0].Held > heldAtMost {
		t.Fatalf("handoffs: %+v, want held in [%v, %v]", r.handoffs, heldAtLeast, heldAtMost)
	}
	if n := len(r.releases); r.releases[n-1].Result != engine.ResultHandedOff {
		t.Fatalf("release by hand-off: %+v", r.releases[n-1])
	}
	if n := len(r.waits); n == 0 || r.waits[n-1].Kind != engine.WaitGate || r.waits[n-1].Cause != engine.WakeHandoff {
		t.Fatalf("gate wait: %+v", r.waits)
	}
	r.mu.Unlock()

	// Lock against a holder elsewhere: sleeps between attempts, each
	// reported, then acquired once the holder released.
	other := e.locker(nil)
	held, err := other.TryLock(ctx, "waited")
	if err != nil {
		t.Fatal(err)
	}
	const holdFor = 100 * time.Millisecond
	time.AfterFunc(holdFor, func() { held.Release(context.Background()) })
	le, err = l.Lock(ctx, "waited")
	if err != nil {
		t.Fatal(err)
	}
	a = r.lastAcquire(t)
	if a.Result != engine.ResultAcquired || a.Attempts < 2 || a.Duration < holdFor {
		t.Fatalf("waited: %+v, want at least %d attempts over %s", a, 2, holdFor)
	}
	r.mu.Lock()
	if n := len(r.waits); r.waits[n-1].Kind != engine.WaitRetry || r.waits[n-1].Duration <= 0 {
		t.Fatalf("retry wait: %+v", r.waits)
	}
	r.mu.Unlock()

	// A lost lease: its keys are deleted behind its back, and its next
	// extension finds them gone.
	for i := range e.direct {
		e.del(i, "waited")
	}
	if err := le.Extend(ctx, 5*time.Second); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("extend of a lost lock: %v", err)
	}
	r.mu.Lock()
	if len(r.lost) != 1 || !errors.Is(r.lost[0].Err, engine.ErrLockLost) || r.lost[0].Result != engine.ResultNotHeld ||
		r.lost[0].Resource != "waited" || r.lost[0].Held <= 0 {
		t.Fatalf("lost: %+v", r.lost)
	}
	if n := len(r.extends); r.extends[n-1].Result != engine.ResultNotHeld {
		t.Fatalf("failed extend: %+v", r.extends[n-1])
	}
	r.mu.Unlock()
	second.Release(ctx)

	// No quorum: three of five masters killed.
	killed := time.Now()
	for _, i := range []int{0, 2, 4} {
		e.kill(i)
	}
	if _, err := l.TryLock(ctx, "outage"); !errors.Is(err, engine.ErrNoQuorum) {
		t.Fatalf("TryLock with 3 of 5 down: %v", err)
	}
	if a := r.lastAcquire(t); a.Result != engine.ResultNoQuorum || a.Votes.Count(engine.OutcomeFailed)+a.Votes.Count(engine.OutcomeTimeout) < 3 {
		t.Fatalf("no quorum: %+v", a)
	}
	eventually(t, 5*time.Second, "the watcher reports the killed masters down", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		down := map[int]bool{}
		for _, n := range r.nodes {
			if n.State == engine.StateDown && n.Previous == engine.StateUp {
				down[n.Node] = true
				// Up from New's first poll until at least the kill.
				if n.Duration < killed.Sub(newEnd) || n.Duration > time.Since(newStart) {
					t.Fatalf("master %d was up %v, want between %v and %v", n.Node, n.Duration, killed.Sub(newEnd), time.Since(newStart))
				}
			}
		}
		return len(down) == 3 && down[0] && down[2] && down[4]
	})
}

// An auto-extension that finds the lock gone ends the lease: one Lost
// event, from the timer goroutine, and an Extend event marked Auto.
//
// In virtual time: the extensions come on their schedule, and the one
// after the keys vanished ends the lease.
func TestObserverSeesAutoExtensionLoss(t *testing.T) {
	simTest(t, 3, observerSeesAutoExtensionLoss)
}

func observerSeesAutoExtensionLoss(t *testing.T, e *env) {
	var r recorder
	l := e.locker(func(c *engine.Config) {
		c.Observer = r.observer()
		c.TTL = 600 * time.Millisecond
		c.AutoExtend = true
		c.ExtendEvery = 100 * time.Millisecond
		// The extension, not the tracker, is to find the keys gone.
		c.DisableTracking = true
	})
	le, err := l.TryLock(context.Background(), "auto")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "an auto-extension", func() bool { return le.Extensions() > 0 })
	for i := range e.direct {
		e.del(i, "auto")
	}
	// The next extension is due within ExtendEvery, and its round lasts
	// no longer than a round's span.
	deleted := time.Now()
	select {
	case <-le.Done():
		if took, most := time.Since(deleted), l.Config().ExtendEvery+l.RoundSpan(); took > most {
			t.Fatalf("the lease ended %s after its keys vanished, more than ExtendEvery and a round's span (%s)", took, most)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lease did not end")
	}
	// Done closes as the lease ends; the events follow on the same
	// goroutine.
	eventually(t, 5*time.Second, "the lost and the failed extension's events", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.lost) == 1 && len(r.extends) > 0 && r.extends[len(r.extends)-1].Result != engine.ResultExtended
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if !errors.Is(r.lost[0].Err, engine.ErrLockLost) || r.lost[0].Result != engine.ResultNotHeld || r.lost[0].Held <= 0 {
		t.Fatalf("lost: %+v", r.lost[0])
	}
	var ok, failed int
	for _, x := range r.extends {
		if !x.Auto {
			t.Fatalf("extension not marked auto: %+v", x)
		}
		switch x.Result {
		case engine.ResultExtended:
			ok++
		case engine.ResultNotHeld:
			failed++
		}
	}
	if ok == 0 || failed != 1 {
		t.Fatalf("auto extensions: %d ok, %d not held, want >0 and 1: %+v", ok, failed, r.extends)
	}
}
