package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// TestRWWriterWokenByFailedReadersUndo: a writer and two readers of other
// Lockers split the masters, as the simulator had them: reader 1 lands
// on masters 2 and 3, reader 2 on master 4, the writer on 0 and 1.
// Refused by the readers on a quorum, the writer takes them for holders
// that will publish when they go, leaves its intent on masters 2 to 4
// and sleeps; the readers, refused on 0 and 1 by the writer's entry and
// elsewhere by its intent, fail too and undo. Their undos free masters 2
// to 4, where the intent lives: they must wake the writer as a release
// would, or the lock, free, waits for its fallback (30 s here). The
// control turns on rw-reader-undo-silent: the undos publish nothing.
func TestRWWriterWokenByFailedReadersUndo(t *testing.T) {
	for _, silent := range []bool{false, true} {
		t.Run(fmt.Sprintf("rw-reader-undo-silent=%v", silent), func(t *testing.T) {
			if silent {
				mutation.Require(t)
			}
			defer mutation.RWReaderUndoSilent.Set(silent)()
			simTestWith(t, 5, steadyMasters, func(t *testing.T, e *env) {
				woken := rwReaderUndoSplit(t, e)
				switch {
				case silent && woken:
					t.Error("the writer acquired though the readers' undos were silent: the scenario cannot fail")
				case !silent && !woken:
					t.Errorf("the writer did not acquire within %s of the readers' undos that freed the lock (fallback %s)", undoPrompt, undoFallback)
				}
			})
		})
	}
}

// rwReaderUndoSplit runs TestRWWriterWokenByFailedReadersUndo's scenario
// and reports whether the writer acquired within undoPrompt of the
// readers' undos, without a fallback. Each Locker reaches each master
// through a gate (see gateProxy); the gates order the commands on each
// master: on 2 and 3, reader 1's attempt, the writer's two (its first,
// then the one that registers its intent), reader 2's; on 4, reader 2's,
// the writer's, reader 1's; on 0 and 1, the writer's first attempt, both
// readers', the writer's undo and second attempt.
func rwReaderUndoSplit(t *testing.T, e *env) bool {
	const name = "reader-undo"
	ctx := context.Background()
	lw, wg := e.gatedLocker(undoWakeConfig)
	l1, g1 := e.gatedLocker(undoWakeConfig)
	l2, g2 := e.gatedLocker(undoWakeConfig)
	// Connected, the acquire script loaded on every master: each attempt
	// below is one command per master, not a NOSCRIPT and its EVAL.
	for _, l := range []*engine.Locker{lw, l1, l2} {
		le, err := rwMutex(t, l, name+"-warm").TryRLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		le.Release(ctx)
	}
	entries := func(key string, i int) int64 {
		c := e.direct[i]
		n, err := c.Do(ctx, c.B().Zcard().Key(key).Build()).AsInt64()
		if err != nil {
			return -1
		}
		return n
	}
	lock, intents := e.key(name), "\xffredlock:rw:"+e.key(name)
	for _, gs := range [][]*gateProxy{g1, g2} {
		for _, g := range gs {
			g.close()
		}
	}
	readers := make(chan error, 2)
	for _, l := range []*engine.Locker{l1, l2} {
		m := rwMutex(t, l, name)
		go func() {
			le, err := m.TryRLock(ctx)
			if err == nil {
				le.Release(ctx)
			}
			readers <- err
		}()
	}
	eventually(t, 5*time.Second, "both readers' attempts held at every gate", func() bool {
		for _, gs := range [][]*gateProxy{g1, g2} {
			for _, g := range gs {
				if !g.holding() {
					return false
				}
			}
		}
		return true
	})
	g1[2].flush()
	g1[3].flush()
	g2[4].flush()
	eventually(t, 5*time.Second, "reader 1's entry on masters 2 and 3, reader 2's on 4", func() bool {
		// The lock's marker member and one reader's entry.
		return entries(lock, 2) == 2 && entries(lock, 3) == 2 && entries(lock, 4) == 2
	})
	wg[0].close()
	wg[1].close()
	got := make(chan waited, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		le, err := rwMutex(t, lw, name).Lock(wctx)
		if err != nil {
			got <- waited{err: err}
			return
		}
		got <- waited{wait: le.Wait()}
		le.Release(ctx)
	}()
	// The writer's first attempt is refused on masters 2 to 4 and waits
	// at the gates of 0 and 1; it lands there, and what follows it (its
	// undo, its second attempt) waits.
	eventually(t, 5*time.Second, "the writer's first attempt held at masters 0 and 1", func() bool {
		return wg[0].holding() && wg[1].holding()
	})
	wg[0].flush()
	wg[1].flush()
	// The second attempt, which registers the intent, goes once the
	// writer is subscribed, or after NodeTimeout (5 s) if a subscription
	// waits at a gate.
	eventually(t, 15*time.Second, "the writer's entry on masters 0 and 1, its intent on 2 to 4", func() bool {
		return entries(lock, 0) == 2 && entries(lock, 1) == 2 &&
			entries(intents, 2) == 1 && entries(intents, 3) == 1 && entries(intents, 4) == 1
	})
	// The readers' attempts on masters 0 and 1 meet the writer's entry.
	for _, g := range []*gateProxy{g1[0], g1[1], g2[0], g2[1]} {
		g.open()
	}
	// Virtual time: the round trip is 200 µs, and nothing else runs.
	time.Sleep(10 * time.Millisecond)
	wg[0].open()
	wg[1].open()
	// The readers' attempts on the other masters meet the intent; both
	// fail, and their undos go.
	for _, gs := range [][]*gateProxy{g1, g2} {
		for _, g := range gs {
			g.open()
		}
	}
	for range 2 {
		if err := <-readers; !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("set-up: a reader's attempt in the split: %v, want ErrNotAcquired", err)
		}
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the writer: %v", r.err)
		}
		t.Logf("the writer acquired: %+v", r.wait)
		return r.wait.Fallbacks == 0
	case <-time.After(undoPrompt):
		return false
	}
}

// TestRWBareQuorumReaderKeepsWaitersQuiet: a reader holds the lock on
// exactly a quorum (masters 0 to 2); three writers wait, refused there by
// it, and two readers wait, refused there by the writers' intents. Woken
// at once by a publish on masters 3 and 4, they collide there: the
// writers are refused by the holder on a quorum and sleep, the readers by
// the intents; a reader's undo that frees a master where a writer's
// intent lives wakes the writers, but nothing a writer does wakes a
// reader, so they settle: a few attempts each, as with a writer holding
// (TestRWBareQuorumHolderKeepsWritersQuiet). The control turns on
// rw-undo-wakes: every undo publishes as a release does, and the writers
// wake each other for as long as the reader holds.
func TestRWBareQuorumReaderKeepsWaitersQuiet(t *testing.T) {
	for _, wakes := range []bool{false, true} {
		t.Run(fmt.Sprintf("rw-undo-wakes=%v", wakes), func(t *testing.T) {
			if wakes {
				mutation.Require(t)
			}
			defer mutation.RWUndoWakes.Set(wakes)()
			// As in TestRWBareQuorumHolderKeepsWritersQuiet: the control
			// passes the bound in a tenth of the window.
			window := stormFor
			if wakes {
				window = stormFor / 10
			}
			simTestWith(t, 5, steadyMasters, func(t *testing.T, e *env) {
				attempts := rwBareQuorumReaderAttempts(t, e, window)
				t.Logf("attempts per writer, then per reader, in %s: %v", window, attempts)
				most := slices.Max(attempts[:3])
				switch {
				case wakes && most <= stormBound:
					t.Errorf("attempts %v with the undos waking the waiters: the scenario cannot fail", attempts)
				case !wakes && slices.Max(attempts) > stormBound:
					t.Errorf("attempts %v in %s while one reader held the lock on a bare quorum: want at most %d each", attempts, window, stormBound)
				}
			})
		})
	}
}

// rwBareQuorumReaderAttempts runs TestRWBareQuorumReaderKeepsWaitersQuiet's
// scenario until window after the publish and returns each writer's
// attempts, then each reader's (those before the publish included).
func rwBareQuorumReaderAttempts(t *testing.T, e *env, window time.Duration) []int {
	const name = "bare-quorum-reader"
	ctx := context.Background()
	live := strconv.FormatInt(time.Now().Add(time.Minute).UnixMicro(), 10)
	for i := 0; i < 3; i++ {
		c := e.direct[i]
		if err := c.Do(ctx, c.B().Arbitrary("ZADD").Keys(e.key(name)).Args("0", "#rwlock", live, "holder").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	// The waits end window after the publish that wakes them all.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lock, intents := e.key(name), "\xffredlock:rw:"+e.key(name)
	waitFor := func(channel string, n int64) {
		eventually(t, 5*time.Second, fmt.Sprintf("%d waiters subscribed to %q on every master", n, channel), func() bool {
			for i := range e.direct {
				if e.subscribers(i, "redlock:released:"+channel) != n {
					return false
				}
			}
			return true
		})
	}
	type result struct {
		writer bool
		err    error
	}
	errs := make(chan result, 5)
	for i := range 5 {
		writer := i < 3
		m := rwMutex(t, e.locker(undoWakeConfig), name)
		go func() {
			var err error
			if writer {
				_, err = m.Lock(wctx)
			} else {
				_, err = m.RLock(wctx)
			}
			errs <- result{writer, err}
		}()
		if i == 2 {
			// The writers' intents are in before the readers come.
			waitFor(intents, 3)
		}
	}
	waitFor(lock, 2)
	for i := 3; i < 5; i++ {
		c := e.direct[i]
		for _, ch := range []string{intents, lock} {
			if err := c.Do(ctx, c.B().Publish().Channel("redlock:released:"+ch).Message("").Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.AfterFunc(window, cancel)
	attempts := make([]int, 0, 5)
	var readers []int
	for range 5 {
		r := <-errs
		var n int
		if i := strings.Index(fmt.Sprint(r.err), "gave up after "); r.err == nil || i < 0 {
			t.Fatalf("a waiter's lock while the reader held: %v", r.err)
		} else if _, serr := fmt.Sscanf(fmt.Sprint(r.err)[i:], "gave up after %d attempts", &n); serr != nil {
			t.Fatalf("attempts in %q: %v", r.err, serr)
		}
		if r.writer {
			attempts = append(attempts, n)
		} else {
			readers = append(readers, n)
		}
	}
	return append(attempts, readers...)
}
