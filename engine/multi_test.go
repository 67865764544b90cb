package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// oneLine checks the house style of an error: one line, "engine: " once.
func oneLine(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if !strings.HasPrefix(msg, "engine: ") || strings.Count(msg, "engine: ") != 1 || strings.ContainsAny(msg, "\r\n") {
		t.Errorf("not one line starting \"engine: \" once: %q", msg)
	}
}

func TestLockAllValidatesResources(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(e.steady(nil))
	// A name is reserved where the lock key it makes, under KeyPrefix,
	// is in the engine's namespace: with the empty prefix. The Locker
	// refuses it before anything is sent.
	bare := e.locker(e.steady(func(c *engine.Config) { c.KeyPrefix = "" }))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	many := make([]string, engine.MaxResources+1)
	for i := range many {
		many[i] = "many:" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name  string
		names []string
		want  error
	}{
		{"none", nil, engine.ErrNoResources},
		{"too many", many, engine.ErrTooManyResources},
		{"an empty name", []string{"a", ""}, engine.ErrEmptyResource},
		{"a reserved name", []string{"a", "\xffredlock:fence:a"}, engine.ErrReservedResource},
	} {
		l := l
		if tc.want == engine.ErrReservedResource {
			l = bare
		}
		for op, f := range map[string]func(context.Context, ...string) (*engine.Lease, error){"TryLockAll": l.TryLockAll, "LockAll": l.LockAll} {
			le, err := f(ctx, tc.names...)
			if !errors.Is(err, tc.want) || le != nil {
				t.Errorf("%s of %s: got %v, %v; want %v", op, tc.name, le, err, tc.want)
				continue
			}
			oneLine(t, err)
		}
	}
	// Duplicates count once: MaxResources names, each given twice.
	twice := append(slices.Clone(many[:engine.MaxResources]), many[:engine.MaxResources]...)
	le, err := l.TryLockAll(ctx, twice...)
	if err != nil {
		t.Fatalf("TryLockAll of %d names, each twice: %v", engine.MaxResources, err)
	}
	got := le.Resources()
	if len(got) != engine.MaxResources || !slices.IsSorted(got) {
		t.Fatalf("Resources() = %d names (sorted: %v), want the %d distinct ones sorted", len(got), slices.IsSorted(got), engine.MaxResources)
	}
	// The lease holds every key on a quorum; the third master's SETs may
	// still be on their way when TryLockAll returns.
	for _, r := range got {
		var vals []string
		for i := range e.direct {
			vals = append(vals, e.get(i, e.key(r)))
		}
		if n := len(slices.DeleteFunc(slices.Clone(vals), func(v string) bool { return v != le.Value() })); n < 2 {
			t.Fatalf("key %s holds %q on the masters, want the lease's value on a quorum", r, vals)
		}
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	le, err = l.TryLockAll(ctx, "d", "c", "d")
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(ctx)
	if got := le.Resources(); !slices.Equal(got, []string{"c", "d"}) || le.Resource() != "{c,d}" {
		t.Fatalf("Resources() = %q, Resource() = %q; want [c d] and {c,d}", got, le.Resource())
	}
	got[0] = "changed"
	if le.Resources()[0] != "c" {
		t.Fatal("Resources() returned the lease's own slice")
	}
	one, err := l.TryLock(ctx, "single")
	if err != nil {
		t.Fatal(err)
	}
	defer one.Release(ctx)
	if got := one.Resources(); !slices.Equal(got, []string{"single"}) {
		t.Fatalf("Resources() of a lease from TryLock = %q", got)
	}
}

// A refused TryLockAll takes nothing, on any master, and names a
// resource that was held; a split one is undone everywhere.
func TestTryLockAllIsAllOrNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	l, other := e.locker(e.steady(nil)), e.locker(e.steady(nil))
	ctx := context.Background()
	held, err := other.TryLock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns at quorum; its SET on the last masters may still be
	// on its way.
	eventually(t, 30*time.Second, "b held on every master", func() bool {
		for i := range 5 {
			if e.get(i, e.key("b")) != held.Value() {
				return false
			}
		}
		return true
	})
	_, err = l.TryLockAll(ctx, "c", "b", "a")
	var ve *engine.VotesError
	if !errors.Is(err, engine.ErrNotAcquired) || !errors.As(err, &ve) || ve.Held != "b" {
		t.Fatalf("TryLockAll over a held resource: %v (Held %q), want ErrNotAcquired naming b", err, ve.Held)
	}
	if !strings.Contains(err.Error(), `"b" is held`) {
		t.Errorf("the error does not name the held resource: %v", err)
	}
	oneLine(t, err)
	for i := range 5 {
		if a, c := e.get(i, e.key("a")), e.get(i, e.key("c")); a != "" || c != "" {
			t.Fatalf("master %d: a = %q, c = %q after a refused TryLockAll", i, a, c)
		}
		if b := e.get(i, e.key("b")); b != held.Value() {
			t.Fatalf("master %d: b = %q, the holder's key was touched", i, b)
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Split: masters 0 and 1 hold a for someone else, master 2 holds c;
	// masters 3 and 4 say yes, short of the quorum, and are undone.
	e.set(0, e.key("a"), "theirs")
	e.set(1, e.key("a"), "theirs")
	e.set(2, e.key("c"), "theirs")
	_, err = l.TryLockAll(ctx, "a", "c")
	if !errors.Is(err, engine.ErrNotAcquired) || !errors.As(err, &ve) || ve.Held != "a" {
		t.Fatalf("split TryLockAll: %v (Held %q), want ErrNotAcquired naming a, held on more masters than c", err, ve.Held)
	}
	eventually(t, 30*time.Second, "the split attempt undone on masters 3 and 4", func() bool {
		return e.get(3, e.key("a"))+e.get(3, e.key("c"))+e.get(4, e.key("a"))+e.get(4, e.key("c")) == ""
	})
	if e.get(0, e.key("a")) != "theirs" || e.get(2, e.key("c")) != "theirs" || e.get(0, e.key("c")) != "" || e.get(2, e.key("a")) != "" {
		t.Fatal("the undo touched keys that were not the attempt's")
	}
	for i, k := range map[int]string{0: "a", 1: "a", 2: "c"} {
		e.del(i, e.key(k))
	}
	le, err := l.TryLockAll(ctx, "a", "b", "c")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a, b and c held on every master", func() bool {
		for i := range 5 {
			for _, k := range []string{"a", "b", "c"} {
				if v := e.get(i, e.key(k)); v != le.Value() {
					return false
				}
			}
		}
		return true
	})
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Release returns at a quorum; the last masters' deletes may come
	// after it.
	eventually(t, 30*time.Second, "a, b and c deleted on every master after Release", func() bool {
		for i := range 5 {
			for _, k := range []string{"a", "b", "c"} {
				if e.get(i, e.key(k)) != "" {
					return false
				}
			}
		}
		return true
	})
}

// slowFallback makes a waiter's fallback retry come long after the
// releases these tests make: a waiter that acquires in time was woken by
// a release notification.
func slowFallback(c *engine.Config) {
	c.TTL = 10 * time.Second
	c.Wait.FallbackMin, c.Wait.FallbackMax = 8*time.Second, 9*time.Second
}

type lockResult struct {
	le  *engine.Lease
	err error
}

// queuedEverywhere reports whether a waiter other than those of old is in
// resource's queue on every master.
func (e *env) queuedEverywhere(resource string, old map[string]bool) bool {
	count := map[string]int{}
	for i := range e.direct {
		for _, id := range e.queueOf(i, resource) {
			if count[id]++; count[id] == len(e.direct) && !old[id] {
				return true
			}
		}
	}
	return false
}

// queuedNow are the waiters in resource's queue on any master.
func (e *env) queuedNow(resource string) map[string]bool {
	ids := map[string]bool{}
	for i := range e.direct {
		for _, id := range e.queueOf(i, resource) {
			ids[id] = true
		}
	}
	return ids
}

func lockAsync(ctx context.Context, f func(context.Context, ...string) (*engine.Lease, error), names ...string) chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		le, err := f(ctx, names...)
		ch <- lockResult{le, err}
	}()
	return ch
}

// woken waits for a Lock or LockAll that a release must wake, and checks
// that the notification did, not a fallback retry.
func woken(t *testing.T, what string, ch chan lockResult) *engine.Lease {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		if w := r.le.Wait(); w.Cause != engine.WakeNotified || w.Fallbacks != 0 {
			t.Fatalf("%s: not woken by the release: %+v", what, w)
		}
		return r.le
	case <-time.After(30 * time.Second):
		// A fallback comes first (slowFallback): WaitInfo tells it.
		t.Fatalf("%s: not woken within 30s of the release", what)
	}
	return nil
}

// acquired waits for a Lock or LockAll that a release lets in, however
// it was woken; with notified, woken's check too.
func acquired(t *testing.T, what string, ch chan lockResult, notified bool) *engine.Lease {
	t.Helper()
	if notified {
		return woken(t, what, ch)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.le
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not acquired within 30s of the release", what)
	}
	return nil
}

func pending(t *testing.T, what string, ch chan lockResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned while the resource was held: %v, %v", what, r.le.Resources(), r.err)
	default:
	}
}

// A lease from Lock on one of the resources blocks LockAll, and a lease
// from LockAll blocks Lock on any of its resources: the keys are the
// same. Each waiter is woken by the holder's release: in virtual time,
// where the woken waiter uses the turn its release gave it within the
// turn's 50 ms, as on a loaded machine it may not (then the next waiter
// sleeps until its fallback).
func TestMutexAndLockAllExcludeEachOther(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) { mutexAndLockAll(t, e, true) })
}

// TestMutexAndLockAllExcludeEachOtherOnRealMasters: the same exclusion on
// the pool's masters, each waiter acquiring once the holder releases.
func TestMutexAndLockAllExcludeEachOtherOnRealMasters(t *testing.T) {
	t.Parallel()
	mutexAndLockAll(t, newEnv(t, 5), false)
}

// mutexAndLockAll runs the scenario on e; notified: each waiter must have
// been woken by the release.
func mutexAndLockAll(t *testing.T, e *env, notified bool) {
	la, lb := e.locker(e.steady(slowFallback)), e.locker(e.steady(slowFallback))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	mutex, err := la.Lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	all := lockAsync(ctx, lb.LockAll, "y", "x")
	eventually(t, 30*time.Second, "LockAll queued on x", func() bool { return e.queued("x", 1) })
	pending(t, "LockAll(y, x)", all)
	for i := range 5 {
		if v := e.get(i, e.key("y")); v != "" {
			t.Fatalf("master %d: the waiting LockAll holds y (%q)", i, v)
		}
	}
	if _, err := la.TryLockAll(ctx, "x", "z"); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("TryLockAll(x, z) while Lock holds x: %v", err)
	}
	if err := mutex.Release(ctx); err != nil {
		t.Fatal(err)
	}
	multi := acquired(t, "LockAll(y, x) after the release of x", all, notified)
	for _, r := range []string{"x", "y"} {
		if _, err := la.TryLock(ctx, r); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("TryLock(%s) while LockAll holds it: %v", r, err)
		}
	}

	// LockAll's own place stays in y's queue where it set the key, until
	// its release takes it out.
	old := e.queuedNow("y")
	one := lockAsync(ctx, func(ctx context.Context, names ...string) (*engine.Lease, error) { return la.Lock(ctx, names[0]) }, "y")
	eventually(t, 30*time.Second, "Lock queued on y", func() bool { return e.queuedEverywhere("y", old) })
	pending(t, "Lock(y)", one)
	if err := multi.Release(ctx); err != nil {
		t.Fatal(err)
	}
	le := acquired(t, "Lock(y) after the release of LockAll's lease", one, notified)
	le.Release(ctx)
}

// LockAll holds nothing while it waits: a turn it is given on one of its
// resources while another is still held goes on to the next waiter, or
// leaves the resource free. It acquires, woken by a release, once all are
// free at once. In virtual time, where each woken waiter uses its turn
// within the turn's 50 ms, as on a loaded machine it may not.
func TestLockAllHoldsNothingWhileItWaits(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) { lockAllHoldsNothing(t, e, true) })
}

// TestLockAllHoldsNothingWhileItWaitsOnRealMasters: on the pool's masters,
// the waiting LockAll holds nothing, and each waiter acquires once what
// it waits for is released.
func TestLockAllHoldsNothingWhileItWaitsOnRealMasters(t *testing.T) {
	t.Parallel()
	lockAllHoldsNothing(t, newEnv(t, 5), false)
}

// lockAllHoldsNothing runs the scenario on e; notified: each waiter must
// have been woken by a release, LockAll by each of the two.
func lockAllHoldsNothing(t *testing.T, e *env, notified bool) {
	la, lb, lc, ld := e.locker(e.steady(slowFallback)), e.locker(e.steady(slowFallback)), e.locker(e.steady(slowFallback)), e.locker(e.steady(slowFallback))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x, err := la.TryLock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	y, err := lb.TryLock(ctx, "y")
	if err != nil {
		t.Fatal(err)
	}
	all := lockAsync(ctx, lc.LockAll, "x", "y")
	eventually(t, 30*time.Second, "LockAll queued on x and y", func() bool { return e.queued("x", 1) && e.queued("y", 1) })
	// Lock(x), queued behind LockAll: the release of x gives LockAll the
	// turn first, which must pass it on since y is still held.
	one := lockAsync(ctx, func(ctx context.Context, names ...string) (*engine.Lease, error) { return ld.Lock(ctx, names[0]) }, "x")
	eventually(t, 30*time.Second, "Lock queued on x behind LockAll", func() bool { return e.queued("x", 2) })
	if err := x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	x2 := acquired(t, "Lock(x) behind a LockAll that still waits for y", one, notified)
	pending(t, "LockAll(x, y)", all)

	// y's turn goes to LockAll, which passes it on: nobody else waits,
	// so y is left free.
	if err := y.Release(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "y free after LockAll passed its turn on", func() bool {
		le, err := la.TryLock(ctx, "y")
		if err != nil {
			return false
		}
		le.Release(ctx)
		return true
	})
	pending(t, "LockAll(x, y)", all)
	if err := x2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	le := acquired(t, "LockAll(x, y) after both were released", all, notified)
	if w := le.Wait(); notified && w.Notified < 2 {
		t.Errorf("LockAll woken %d times, want one per release it was given the turn by: %+v", w.Notified, w)
	}
	le.Release(ctx)
}

// Goroutines of several Lockers take overlapping sets in opposite orders,
// mixed with Lock on single resources: every call returns with the lease,
// and no resource has two holders. On the pool's masters, for the
// goroutines' real races; the TTL outlasts the calls' deadline, so that
// neither a deadlock nor a stalled holder is ended by an expiry.
func TestLockAllInOpposedOrdersDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	fast := func(c *engine.Config) {
		c.TTL = 2 * time.Minute
		c.Wait.RetryDelayMin, c.Wait.RetryDelayMax = time.Millisecond, 5*time.Millisecond
	}
	lockers := []*engine.Locker{e.locker(e.steady(fast)), e.locker(e.steady(fast))}
	sets := [][]string{{"a", "b", "c"}, {"c", "b", "a"}, {"b", "a"}, {"c", "a"}, {"a"}, {"c"}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	owner := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, len(sets)*len(lockers))
	for li, l := range lockers {
		for si, set := range sets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				me := fmt.Sprintf("L%d/%v", li, set)
				for range 8 {
					var le *engine.Lease
					var err error
					if len(set) == 1 && si%2 == 0 {
						le, err = l.Lock(ctx, set[0])
					} else {
						le, err = l.LockAll(ctx, set...)
					}
					if err != nil {
						errs <- fmt.Errorf("%s: %v", me, err)
						return
					}
					mu.Lock()
					for _, r := range le.Resources() {
						if o := owner[r]; o != "" {
							errs <- fmt.Errorf("%s acquired %s, held by %s", me, r, o)
						}
						owner[r] = me
					}
					mu.Unlock()
					time.Sleep(time.Millisecond) // the hold, while the others try
					mu.Lock()
					for _, r := range le.Resources() {
						delete(owner, r)
					}
					mu.Unlock()
					le.Release(ctx)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Release, Extend and auto-extension act on every key of the lease, and
// losing any one of them on a majority loses the lease: in virtual time,
// where the keys' TTLs after an Extend (8 s, less the round trips: above
// 7.9 s), the auto-extension's schedule and the notice of the loss are
// exact.
func TestMultiLeaseActsOnAllItsKeys(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		multiLeaseExtend(t, e, 7900)
		multiLeaseAutoExtend(t, e)
	})
}

// TestMultiLeaseActsOnAllItsKeysOnRealMasters: Extend sets every key's
// TTL on the pool's masters (beyond the lease's first TTL of a second),
// and a key lost on a majority loses the lease.
func TestMultiLeaseActsOnAllItsKeysOnRealMasters(t *testing.T) {
	t.Parallel()
	multiLeaseExtend(t, newEnv(t, 5), 1000)
}

// multiLeaseExtend extends a lease on p, q and r to 8 s, checks that
// every key's TTL on every master is then above minTTL ms, and that
// Extend ends the lease once q is lost on a majority.
func multiLeaseExtend(t *testing.T, e *env, minTTL int64) {
	l := e.locker(e.steady(func(c *engine.Config) { c.TTL, c.MaxTTL = time.Second, 10*time.Second }))
	ctx := context.Background()
	le, err := l.TryLockAll(ctx, "p", "q", "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := le.Extend(ctx, 8*time.Second); err != nil {
		t.Fatal(err)
	}
	// Extend returns at a quorum: the last masters' PEXPIREs (and, on
	// real masters, even their SETs) may land after it. Until then a key
	// there keeps less than its first TTL of a second, at most minTTL.
	for i := range 5 {
		for _, k := range []string{"p", "q", "r"} {
			eventually(t, 30*time.Second, fmt.Sprintf("master %d: %s expires in more than %d ms after Extend to 8s", i, k, minTTL), func() bool {
				return e.pttl(i, e.key(k)) > minTTL
			})
		}
	}
	// q lost on a majority: Extend finds the lease not held, and ends it.
	for _, i := range []int{0, 2, 4} {
		e.del(i, e.key("q"))
	}
	err = le.Extend(ctx, 8*time.Second)
	if !errors.Is(err, engine.ErrNotHeld) || !errors.Is(le.Err(), engine.ErrLockLost) || !isClosed(le.Done()) {
		t.Fatalf("Extend with q lost on a majority: %v; Err() = %v", err, le.Err())
	}
	oneLine(t, err)
	le.Release(ctx)
}

// multiLeaseAutoExtend: an auto-extended lease on s and t is extended
// twice within 700 ms of a 300 ms TTL, and ends within a second of t's
// loss on a majority; its Release then reports the loss and deletes s.
func multiLeaseAutoExtend(t *testing.T, e *env) {
	ctx := context.Background()
	auto := e.locker(e.steady(func(c *engine.Config) { c.TTL, c.AutoExtend = 300*time.Millisecond, true }))
	le, err := auto.TryLockAll(ctx, "s", "t")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	if le.Err() != nil || le.Extensions() < 2 {
		t.Fatalf("auto-extended lease: Err() = %v after %d extensions", le.Err(), le.Extensions())
	}
	for _, i := range []int{1, 2, 3} {
		e.del(i, e.key("t"))
	}
	select {
	case <-le.Done():
		if !errors.Is(le.Err(), engine.ErrLockLost) {
			t.Fatalf("Done closed with %v, want ErrLockLost", le.Err())
		}
	case <-time.After(time.Second):
		t.Fatal("Done not closed after one key of an auto-extended lease was lost on a majority")
	}
	// Release returns at a quorum, and the last masters' deletes may
	// come a latency spike after it: wait for them, with s given a life
	// beyond that wait, so that only the deletes can take it.
	for i, c := range e.direct {
		if err := c.Do(ctx, c.B().Pexpire().Key(e.key("s")).Milliseconds(time.Minute.Milliseconds()).Build()).Error(); err != nil {
			t.Fatalf("PEXPIRE on master %d: %v", i, err)
		}
	}
	if err := le.Release(ctx); err == nil {
		t.Fatal("Release of a lost lease reported success")
	}
	for i := range 5 {
		eventually(t, time.Second, fmt.Sprintf("master %d: s deleted by the Release of the lost lease", i), func() bool {
			return e.get(i, e.key("s")) == ""
		})
	}
}

// A lease on several resources has one token, larger than every earlier
// token of each of them; it raises each one's counter to it, so that every
// later holder of any of them, on one resource or on several, gets a
// larger one. Each resource's store sees its tokens increase.
func TestMultiLeaseFencingTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	l := e.locker(e.steady(func(c *engine.Config) { c.Fencing = true }))
	ctx := context.Background()
	last := map[string]int64{}
	take := func(names ...string) {
		t.Helper()
		var le *engine.Lease
		var err error
		if len(names) == 1 {
			le, err = l.TryLock(ctx, names[0])
		} else {
			le, err = l.TryLockAll(ctx, names...)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range names {
			if le.Token() <= last[r] {
				t.Fatalf("%v: token %d, not above %d, the last of %s", names, le.Token(), last[r], r)
			}
			last[r] = le.Token()
			raised := 0
			for i := range 5 {
				if e.get(i, engine.FenceKey(e.key(r))) == strconv.FormatInt(le.Token(), 10) {
					raised++
				}
			}
			if raised < 3 {
				t.Fatalf("%v: %s's counter is at the token on %d masters, want a quorum", names, r, raised)
			}
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Counters far ahead of the clocks on some resources: a later lease
	// on several must pass the highest of its resources'. On a quorum, as
	// an earlier token is: a token passes the counters a quorum reports,
	// and on two masters of five the answers of the other three may decide.
	for i := 1; i <= 3; i++ {
		e.set(i, engine.FenceKey(e.key("c")), "9000000000000000")
	}
	last["c"] = 9000000000000000
	for _, names := range [][]string{{"a"}, {"a", "b"}, {"b"}, {"b", "c"}, {"a"}, {"c"}, {"a", "b", "c"}, {"b"}} {
		take(names...)
	}
}

// A failed LockAll attempt is undone on every master, including one whose
// yes arrives after the attempt was decided: in virtual time, where the
// paused master times out after exactly the node timeout, and nothing
// else comes once the bubble is still.
func TestLateYesToTryLockAllIsUndone(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		lateYesToTryLockAll(t, e, 200*time.Millisecond, 3*time.Second)
		// Every command in flight has landed 100 ms on (simredis's
		// latency is at most 20 ms a way): none set late-a again.
		time.Sleep(100 * time.Millisecond)
		if v := e.get(1, "late-a"); v != "" {
			t.Fatalf("master 1 holds %q after the late yes", v)
		}
	})
}

// TestLateYesToTryLockAllIsUndoneOnRealMasters is the same on real
// masters of its own, master 1 paused by SIGSTOP.
func TestLateYesToTryLockAllIsUndoneOnRealMasters(t *testing.T) {
	t.Parallel()
	lateYesToTryLockAll(t, ownEnv(t, 3), 2*time.Second, 30*time.Second)
}

// lateYesToTryLockAll pauses master 1 under a TryLockAll refused on
// master 0, and checks that its attempt, which master 1 does not answer
// within nodeTimeout, is undone on masters 1 and 2 within undone of
// master 1's resume, master 0's keys untouched.
func lateYesToTryLockAll(t *testing.T, e *env, nodeTimeout, undone time.Duration) {
	l := e.locker(e.steady(func(c *engine.Config) { c.NodeTimeout = nodeTimeout }))
	e.set(0, e.key("late-b"), "theirs")
	e.pause(1)
	_, err := l.TryLockAll(context.Background(), "late-a", "late-b")
	e.resume(1)
	var ve *engine.VotesError
	if !errors.Is(err, engine.ErrNotAcquired) || !errors.As(err, &ve) || ve.Votes[1].Outcome != engine.OutcomeTimeout {
		t.Fatalf("want ErrNotAcquired with master 1 timed out, got %v", err)
	}
	for _, i := range []int{1, 2} {
		eventually(t, undone, fmt.Sprintf("the attempt undone on master %d", i), func() bool {
			return e.get(i, e.key("late-a"))+e.get(i, e.key("late-b")) == ""
		})
	}
	if e.get(0, e.key("late-b")) != "theirs" || e.get(0, e.key("late-a")) != "" {
		t.Fatal("master 0's keys were touched")
	}
}

// A key of another type among the resources is ErrWrongType, named, not
// an outage, and nothing is written.
func TestLockAllOverAKeyOfTheWrongType(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(e.steady(func(c *engine.Config) { c.Fencing = true }))
	ctx := context.Background()
	for i := range 3 {
		if err := e.direct[i].Do(ctx, e.direct[i].B().Hset().Key(e.key("wt-b")).FieldValue().FieldValue("f", "1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.TryLockAll(ctx, "wt-a", "wt-b")
	if !errors.Is(err, engine.ErrWrongType) || errors.Is(err, engine.ErrNoQuorum) {
		t.Fatalf("want ErrWrongType, got %v", err)
	}
	if !strings.Contains(err.Error(), "wt-b") {
		t.Errorf("the error does not name the key: %v", err)
	}
	oneLine(t, err)
	for i := range 3 {
		if v := e.get(i, e.key("wt-a")); v != "" {
			t.Fatalf("master %d: wt-a = %q after a refused attempt", i, v)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := l.LockAll(cctx, "wt-a", "wt-b"); !errors.Is(err, engine.ErrWrongType) || cctx.Err() != nil {
		t.Fatalf("LockAll must not wait on a key of the wrong type: %v", err)
	}
}

// Close takes a waiting LockAll out of every one of its resources'
// queues, and it returns ErrClosed.
//
// The holder's keys are on every master before LockAll begins: TryLock
// returns at a quorum, and LockAll's first attempt may take a key on the
// third master before the holder's write comes there, which is then
// refused. The resource stays free on that master, where LockAll, which
// takes no turn it cannot use, leaves that resource's queue. The holder's
// TTL outlasts any wait for that.
func TestCloseLeavesLockAllsQueues(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	holder := e.locker(e.steady(func(c *engine.Config) { c.TTL = time.Minute }))
	cfg := e.config()
	e.steady(nil)(&cfg)
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range []string{"cq-a", "cq-b"} {
		le, err := holder.TryLock(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, r+" held on every master", func() bool {
			for i := range e.direct {
				if e.get(i, e.key(r)) != le.Value() {
					return false
				}
			}
			return true
		})
	}
	all := lockAsync(ctx, l.LockAll, "cq-a", "cq-b", "cq-c")
	eventually(t, 30*time.Second, "LockAll queued", func() bool { return e.queued("cq-a", 1) && e.queued("cq-b", 1) })
	l.Close()
	select {
	case r := <-all:
		if !errors.Is(r.err, engine.ErrClosed) {
			t.Fatalf("LockAll after Close: %v", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("LockAll did not return after Close")
	}
	for _, r := range []string{"cq-a", "cq-b", "cq-c"} {
		eventually(t, 30*time.Second, r+"'s queue empty", func() bool { return e.queued(r, 0) })
	}
}

// Resource is a label that does not escape the names: a set whose names
// hold ',' can share it with another set, and Resources tells them apart.
func TestResourcesTellApartSetsThatShareALabel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(e.steady(nil))
	ctx := context.Background()
	one, err := l.TryLockAll(ctx, "a,b")
	if err != nil {
		t.Fatal(err)
	}
	defer one.Release(ctx)
	two, err := l.TryLockAll(ctx, "a", "b")
	if err != nil {
		t.Fatalf("TryLockAll(a, b) while a lease holds \"a,b\": %v", err)
	}
	defer two.Release(ctx)
	if one.Resource() != "{a,b}" || two.Resource() != "{a,b}" {
		t.Fatalf("labels %q and %q, want both {a,b}", one.Resource(), two.Resource())
	}
	if got := one.Resources(); !slices.Equal(got, []string{"a,b"}) {
		t.Fatalf("Resources() of the lease on \"a,b\" = %q", got)
	}
	if got := two.Resources(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Resources() of the lease on a and b = %q", got)
	}
}
