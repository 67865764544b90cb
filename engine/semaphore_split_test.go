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
	"github.com/redlock-bench/redlock/internal/mutation"
)

// A semaphore's waiter, refused on a quorum, sleeps for a notification
// only where one holder's value refused it on a quorum (as a lock's
// waiter does); refusals by different values are a split, after which it
// backs off and tries again. Its undos publish nothing. These tests hold
// both ends, in virtual time against simulated masters (simTest), where
// the fallback, the back-offs and the watch are exact whatever the
// machine's load: waiters that split a one-permit semaphore's slot retry
// and acquire (a sleep would last until their fallback, the permit free),
// and waiters that collide beside a holder on a bare quorum do not wake
// each other (an undo that publishes would, for as long as the holder
// holds).

// TestSemaphoreSplitWaitersRetry: three waiters of a one-permit
// semaphore, woken by the permit's release, split the masters 2, 1 and 2
// over its slot (gates force it, see forceUndoSplit); each is refused on
// a quorum by the others' values, which differ: a split, so each backs
// off and tries again, and all three acquire, one after another, well
// before their fallback. The control turns on sem-split-waits-fallback:
// each takes its refusal for a holder's and sleeps, the permit free.
func TestSemaphoreSplitWaitersRetry(t *testing.T) {
	mutation.Require(t)
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("sem-split-waits-fallback=%v", on), func(t *testing.T) {
			defer mutation.SemSplitWaitsFallback.Set(on)()
			acquired := semSplit(t)
			switch {
			case on && acquired != 0:
				t.Errorf("%d waiters acquired with a split taken for a holder: the scenario cannot fail", acquired)
			case !on && acquired != 3:
				t.Errorf("%d of 3 waiters acquired within %s of the split (fallback %s)", acquired, undoPrompt, undoFallback)
			}
		})
	}
}

// semSplit runs TestSemaphoreSplitWaitersRetry's scenario and reports
// how many waiters acquired without a fallback within undoPrompt.
func semSplit(t *testing.T) (acquired int) {
	simTest(t, 5, func(t *testing.T, e *env) { acquired = semSplitOn(t, e) })
	return acquired
}

func semSplitOn(t *testing.T, e *env) int {
	const name = "sem-split"
	slot := slotKey(name, 0)
	ctx := context.Background()
	hs, err := e.locker(undoWakeConfig).Semaphore(name, 1)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hs.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unmark := func(i int) {
		t.Helper()
		c := e.direct[i]
		if err := c.Do(ctx, c.B().Set().Key(slot).Value(h.Value()).Xx().Keepttl().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var gates [3][]*gateProxy
	got := make(chan waited, 3)
	for w := range gates {
		l, gs := e.gatedLocker(undoWakeConfig)
		gates[w] = gs
		s, err := l.Semaphore(name, 1)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			le, err := s.Acquire(wctx)
			if err != nil {
				got <- waited{who: w, err: err}
				return
			}
			got <- waited{who: w, wait: le.Wait()}
			le.Release(context.Background())
		}()
		// The waiter sleeps once its subscribed attempt marked the
		// holder's value on every master; the mark goes again, so that
		// the next waiter's shows.
		eventually(t, 5*time.Second, fmt.Sprintf("waiter %d marked the holder on every master", w), func() bool {
			for i := range e.direct {
				if e.get(i, slot) != h.Value()+"+" {
					return false
				}
			}
			return true
		})
		for i := range e.direct {
			if w < len(gates)-1 || i > 0 {
				unmark(i)
			}
		}
	}
	for i := range e.direct {
		if n := e.subscribers(i, "redlock:released:"+slot[:len(slot)-1]); n != 3 {
			t.Fatalf("set-up: %d subscribers on master %d, want the three waiters", n, i)
		}
	}
	// The holder's value is marked on master 0 alone, so that its
	// release publishes there only: each waiter wakes once, and no late
	// notification of it can wake one again after the split.
	for _, gs := range gates {
		for _, g := range gs {
			g.close()
		}
	}
	release(t, h)
	open := forceUndoSplit(t, gates, func(i int) bool {
		v := e.get(i, slot)
		return v != "" && v != h.Value() && v != h.Value()+"+"
	})
	open()
	return collect(t, got, cancel)
}

// TestSemaphoreCollidingWaitersStayAsleep: a one-permit semaphore's slot
// is held on masters 0 to 2, exactly a quorum, and free on 3 and 4. Three
// waiters sleep (fallback 30 s) and a publish on masters 3 and 4 wakes
// them at once: they collide on the free masters, each refused on a
// quorum by the one holder, and undo. The undos publish nothing, so each
// sleeps again: a handful of attempts each in stormFor. The control
// turns on sem-undo-wakes: each undo wakes the others, whose attempts
// collide and undo in turn, for as long as the holder holds (hundreds of
// attempts each in stormFor; the watch ends once one passes stormBound).
func TestSemaphoreCollidingWaitersStayAsleep(t *testing.T) {
	mutation.Require(t)
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("sem-undo-wakes=%v", on), func(t *testing.T) {
			defer mutation.SemUndoWakes.Set(on)()
			most := semStorm(t)
			switch {
			case on && most <= stormBound:
				t.Errorf("at most %d attempts per waiter with the undos waking them: the scenario cannot fail", most)
			case !on && most > stormBound:
				t.Errorf("a waiter made %d attempts in %s beside a holder on a quorum, want at most %d: the waiters wake each other", most, stormFor, stormBound)
			}
		})
	}
}

// semStorm runs TestSemaphoreCollidingWaitersStayAsleep's scenario and
// reports the most attempts a waiter made.
func semStorm(t *testing.T) (most int) {
	simTest(t, 5, func(t *testing.T, e *env) { most = semStormOn(t, e) })
	return most
}

func semStormOn(t *testing.T, e *env) int {
	const name = "sem-storm"
	slot := slotKey(name, 0)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		c := e.direct[i]
		if err := c.Do(ctx, c.B().Set().Key(slot).Value("holder").Px(time.Minute).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var attempts, waits [3]atomic.Int64
	// storm closes once a waiter has woken more than stormBound times,
	// each wake followed by an attempt: the watch may end there.
	storm := make(chan struct{})
	var stormOnce sync.Once
	done := make(chan error, 3)
	for w := range attempts {
		l := e.locker(func(c *engine.Config) {
			undoWakeConfig(c)
			c.Observer = &engine.Observer{
				Acquire: func(_ context.Context, ev engine.AcquireEvent) {
					attempts[w].Store(int64(ev.Attempts))
				},
				Wait: func(ev engine.WaitEvent) {
					if ev.Err == nil && waits[w].Add(1) > stormBound {
						stormOnce.Do(func() { close(storm) })
					}
				},
			}
		})
		s, err := l.Semaphore(name, 1)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			le, err := s.Acquire(wctx)
			if err == nil {
				le.Release(context.Background())
				err = fmt.Errorf("waiter %d acquired a permit held on a quorum", w)
			}
			done <- err
		}()
	}
	// The waiters sleep: each subscribed on every master, the holder
	// marked on its masters, the free masters' slot undone.
	channel := "redlock:released:" + slot[:len(slot)-1]
	eventually(t, 5*time.Second, "three waiters subscribed, the holder marked, masters 3 and 4 free", func() bool {
		for i := range e.direct {
			want := ""
			if i < 3 {
				want = "holder+"
			}
			if e.subscribers(i, channel) != 3 || e.get(i, slot) != want {
				return false
			}
		}
		return true
	})
	for i := 3; i < 5; i++ {
		c := e.direct[i]
		if err := c.Do(ctx, c.B().Publish().Channel(channel).Message("").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	// The watch lasts stormFor of virtual time, or until the storm shows.
	select {
	case <-time.After(stormFor):
	case <-storm:
	}
	cancel()
	for range attempts {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("waiter: %v", err)
		}
	}
	// Each waiter's Acquire event came before its Acquire returned.
	most := 0
	for w := range attempts {
		most = max(most, int(attempts[w].Load()))
	}
	t.Logf("attempts per waiter: %d %d %d", attempts[0].Load(), attempts[1].Load(), attempts[2].Load())
	return most
}
