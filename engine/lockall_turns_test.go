package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// A LockAll waiter that a lock holds up takes no place in the queue of
// another of its resources where that one is free (or holds another
// waiter's turn token) on a master: there it would be given turns it
// cannot use and pass each one back, and, re-joining at its old ticket at
// every attempt, stay ahead of a Lock waiter that could take the
// resource. Many such waiters pass a released resource's turns among
// themselves, each master's turn at a different one, so that the Lock
// waiter never collects a quorum of them (the simulator's liveness
// checker found it: see bench/sim/hunt_test.go, lockall-hogs-turns).
//
// In virtual time: on a loaded machine, the turns of x's release reached
// the masters far enough apart for Lock(x) to try before it had a quorum
// of them, be refused, and be woken again by the rest.
func TestLockAllHeldUpTakesNoTurnItCannotUse(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		if errs := lockAllHeldUp(t, e); len(errs) > 0 {
			t.Fatal(strings.Join(errs, "\n"))
		}
	})
}

// TestLockAllHeldUpTakesNoTurnItCannotUseControl: with the waiter keeping
// its places (mutation.LockAllHogsTurns), the check fails.
func TestLockAllHeldUpTakesNoTurnItCannotUseControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.LockAllHogsTurns.Set(true)()
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		errs := lockAllHeldUp(t, e)
		if len(errs) == 0 {
			t.Fatal("the check passed with the LockAll waiter keeping its places: it cannot fail")
		}
		t.Logf("caught: %s", strings.Join(errs, "; "))
	})
}

// lockAllHeldUp has LockAll(x, y) wait while y is held, with x held on
// masters 0 and 1 and lost on master 2 (as after a restart there), then a
// Lock(x) behind it, and returns what went wrong.
func lockAllHeldUp(t *testing.T, e *env) (errs []string) {
	cfg := func(c *engine.Config) {
		slowFallback(c)
		c.NodeTimeout = time.Second
	}
	la, lb, lc, ld := e.locker(cfg), e.locker(cfg), e.locker(cfg), e.locker(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	y, err := la.TryLock(ctx, "y")
	if err != nil {
		t.Fatal(err)
	}
	x, err := lb.TryLock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns on a quorum's yes: the third master's SET may land
	// after it. Delete x there only once it has, and y must be held on
	// every master, as the scenario says.
	eventually(t, 3*time.Second, "x and y set on every master", func() bool {
		for i := range 3 {
			if e.get(i, e.key("x")) == "" || e.get(i, e.key("y")) == "" {
				return false
			}
		}
		return true
	})
	e.del(2, e.key("x"))

	all := lockAsync(ctx, lc.LockAll, "x", "y")
	// Its queueing attempt runs on each master in one script: queued on
	// y, it has queued (and left, where it should) on x there too.
	eventually(t, 3*time.Second, "LockAll queued on y", func() bool { return e.queued("y", 1) })
	h := e.queueOf(0, "y")[0]
	for i := range 2 {
		if q := e.queueOf(i, "x"); !slices.Equal(q, []string{h}) {
			t.Fatalf("x's queue on master %d: %q, want the LockAll waiter %s, which the lock there holds up", i, q, h)
		}
	}
	if q := e.queueOf(2, "x"); len(q) != 0 {
		errs = append(errs, fmt.Sprintf("x's queue on master 2, where x is free, holds %q: the LockAll waiter, held up by y, keeps a place there", q))
	}

	// Lock(x) sets x on master 2 only, and undoes it: its undo gives the
	// turn to the first waiter there, who must not be the LockAll waiter,
	// which would pass it straight back.
	one := lockAsync(ctx, func(ctx context.Context, names ...string) (*engine.Lease, error) { return ld.Lock(ctx, names[0]) }, "x")
	eventually(t, 10*time.Second, "Lock(x) queued on every master and x free on master 2", func() bool {
		if len(e.queueOf(0, "x")) != 2 || len(e.queueOf(1, "x")) != 2 {
			return false
		}
		q := e.queueOf(2, "x")
		return len(q) == 1 && q[0] != h && e.get(2, e.key("x")) == ""
	})
	pending(t, "Lock(x)", one)
	if err := x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	le, why := wokenBy(t, "Lock(x) after x's release", one, true)
	if why != "" {
		errs = append(errs, why+": the LockAll waiter passed it turns while x was held")
	}
	pending(t, "LockAll(x, y)", all)
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := y.Release(ctx); err != nil {
		t.Fatal(err)
	}
	le, why = wokenBy(t, "LockAll(x, y) after y's release", all, false)
	if why != "" {
		errs = append(errs, why)
	}
	le.Release(ctx)
	return errs
}

// wokenBy waits for a Lock or LockAll that a release must wake (once,
// if once), and says how its wait went otherwise: a turn passed back and
// forth wakes it more than once, or never often enough, so that its
// fallback lets it in. Either is what the check looks for, not a failure
// of the set-up: the lease is returned to go on with. It fails t only
// when the attempt does not acquire.
func wokenBy(t *testing.T, what string, ch chan lockResult, once bool) (*engine.Lease, string) {
	t.Helper()
	le := acquired(t, what, ch, false)
	if w := le.Wait(); w.Cause != engine.WakeNotified || w.Fallbacks != 0 || once && w.Notified != 1 {
		return le, fmt.Sprintf("%s: woken %d times, want once, by the release (%+v)", what, w.Notified, w)
	}
	return le, ""
}
