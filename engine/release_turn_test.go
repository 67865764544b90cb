package engine_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// A released lease's kept place may be given a turn by any script that
// passes one on, not only by a late release of the lock before it: here
// another waiter's undo of its split attempt pops the place (at the head,
// where the new holder's leave kept it) and gives it the turn, after
// which the holder releases. The release's quit passes that turn on to
// the next waiter, who would otherwise sleep until its fallback while
// the token held the key (the simulator's seeds 1795683964 and
// 1795685565, where a LockAll's quit gave it). The control turns on
// release-keeps-turn: the release only takes the place out. In virtual
// time, so that the check of the next waiter's turn cannot miss.
func TestReleasePassesOnATurnAnUndoGaveIt(t *testing.T) {
	mutation.Require(t)
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("release-keeps-turn=%v", keep), func(t *testing.T) {
			defer mutation.ReleaseKeepsTurn.Set(keep)()
			simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
				if passed := undoGivesAReleasedPlaceTheTurn(t, e); passed != !keep {
					t.Errorf("the next waiter on master 0 got its turn: %v, want %v", passed, !keep)
				}
			})
		})
	}
}

// undoGivesAReleasedPlaceTheTurn sets up TestReleasePassesOnATurnAnUndoGaveIt's
// interleaving on e's three masters and reports whether the next waiter
// on master 0 got its turn after the holder's release.
func undoGivesAReleasedPlaceTheTurn(t *testing.T, e *env) bool {
	ctx := context.Background()
	const res, other, next = "undo-turn", "other.split-attempt", "next-waiter"
	l := e.locker(nil)
	// Another waiter's attempt holds the key on every master.
	for i := range 3 {
		e.set(i, e.key(res), other)
	}
	got := make(chan *engine.Lease, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		le, err := l.Lock(lctx, res)
		if err != nil {
			t.Error(err)
		}
		got <- le
	}()
	eventually(t, 5*time.Second, "the waiter queued, its marks on the attempt", func() bool {
		return e.queued(res, 1) && e.get(0, e.key(res)) == other+"+" && e.get(1, e.key(res)) == other+"+" && e.get(2, e.key(res)) == other+"+"
	})
	undo := func(i int) {
		t.Helper()
		c := e.direct[i]
		if err := c.Do(ctx, c.B().Eval().Script(engine.UndoScriptBody).Numkeys(1).Key(e.key(res)).Arg(other).Build()).Error(); err != nil {
			t.Fatalf("undo on master %d: %v", i, err)
		}
	}
	// The attempt is undone on masters 1 and 2 first: their turns wake
	// the waiter, which acquires there; on master 0 the marked attempt
	// keeps the new holder's place at the head.
	undo(1)
	undo(2)
	w := <-got
	if w == nil {
		t.Fatal("the waiter did not acquire")
	}
	id := waiterID(w)
	q := "\xffredlock:queue:" + e.key(res)
	eventually(t, 5*time.Second, "the holder's place kept at the head on master 0", func() bool {
		s, err := e.direct[0].Do(ctx, e.direct[0].B().Zscore().Key(q).Member(id).Build()).AsFloat64()
		return err == nil && s == 0
	})
	if err := e.direct[0].Do(ctx, e.direct[0].B().Zadd().Key(q).ScoreMember().ScoreMember(1, next).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// The undo on master 0 pops the holder and gives it the turn there
	// (a token that may expire before the release comes: the release's
	// quit passes on the turn of a popped place either way).
	undo(0)
	if qs := e.queueOf(0, res); !slices.Equal(qs, []string{next}) {
		t.Fatalf("set-up: master 0's queue after the undo is %q, want the next waiter alone", qs)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The release's quit reaches master 0 in a round trip; nothing else
	// pops the next waiter.
	return within(time.Second, func() bool { return !slices.Contains(e.queueOf(0, res), next) })
}
