package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// slotKey is slot i's key of the semaphore name (no KeyPrefix).
func slotKey(name string, i int) string { return fmt.Sprintf("\xffredlock:sem:{%s}:%d", name, i) }

// slot is slot i's key of the semaphore name for e's Lockers: the
// KeyPrefix goes before the name's braces.
func (e *env) slot(name string, i int) string {
	return fmt.Sprintf("\xffredlock:sem:%s{%s}:%d", e.prefix, name, i)
}

// ours lists, for each master, the slots of the semaphore that hold value
// (marked by a waiter or not).
func (e *env) ours(name string, permits int, value string) [][]int {
	out := make([][]int, len(e.direct))
	for i := range e.direct {
		for s := 0; s < permits; s++ {
			if strings.TrimSuffix(e.get(i, e.slot(name, s)), "+") == value {
				out[i] = append(out[i], s)
			}
		}
	}
	return out
}

// onlyIn reports whether value is found in slot only (or nowhere, for
// slot −1), on every master.
func (e *env) onlyIn(name string, permits int, value string, slot int) bool {
	for _, slots := range e.ours(name, permits, value) {
		for _, s := range slots {
			if s != slot {
				return false
			}
		}
	}
	return true
}

func TestSemaphoreValidatesItsArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	l := e.locker(e.steady(nil))
	for _, c := range []struct {
		name    string
		permits int
		want    string
	}{
		{"", 1, "empty resource name"},
		{"s", 0, "permits must be in 1..1024, got 0"},
		{"s", -3, "permits must be in 1..1024, got -3"},
		{"s", engine.MaxPermits + 1, "permits must be in 1..1024, got 1025"},
	} {
		_, err := l.Semaphore(c.name, c.permits)
		if err == nil || !strings.HasPrefix(err.Error(), "engine: ") || strings.Count(err.Error(), "engine: ") != 1 ||
			!strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Semaphore(%q, %d) = %v, want one line with %q", c.name, c.permits, err, c.want)
		}
	}
	if _, err := l.Semaphore("", 1); !errors.Is(err, engine.ErrEmptyResource) {
		t.Errorf("empty name: %v, want ErrEmptyResource", err)
	}
	for _, p := range []int{1, engine.MaxPermits} {
		s, err := l.Semaphore("s", p)
		if err != nil || s.Permits() != p || s.Name() != "s" {
			t.Errorf("Semaphore(s, %d) = %v, %v", p, s, err)
		}
	}
}

// Every permit is its own slot, held on every master; with all of them
// held, an attempt is contention (ErrNotAcquired), and a release frees
// its slot for the next.
func TestSemaphoreTakesEachSlotOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	l := e.locker(e.steady(nil))
	const name, permits = "slots", 3
	s, err := l.Semaphore(name, permits)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	held := map[int]*engine.Lease{}
	for i := 0; i < permits; i++ {
		le, err := s.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("permit %d of %d: %v", i+1, permits, err)
		}
		if p := le.Permit(); p < 0 || p >= permits || held[p] != nil {
			t.Fatalf("permit %d: slot %d (held already: %v)", i+1, p, held[p] != nil)
		}
		held[le.Permit()] = le
		if le.Resource() != name || le.Validity() <= 0 {
			t.Fatalf("permit %d: resource %q, validity %s", i+1, le.Resource(), le.Validity())
		}
	}
	for p, le := range held {
		eventually(t, 30*time.Second, "every master holds the permit in its slot", func() bool {
			for i := range e.direct {
				if e.get(i, e.slot(name, p)) != le.Value() {
					return false
				}
			}
			return true
		})
	}
	_, err = s.TryAcquire(ctx)
	if !errors.Is(err, engine.ErrNotAcquired) || errors.Is(err, engine.ErrNoQuorum) {
		t.Fatalf("with every permit held: %v, want ErrNotAcquired only", err)
	}
	if err := held[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	le, err := s.TryAcquire(ctx)
	if err != nil || le.Permit() != 1 {
		t.Fatalf("after releasing slot 1: slot %d, %v", le.Permit(), err)
	}
	var lock *engine.Lease
	if lock.Permit() != -1 {
		t.Fatal("a nil lease's Permit is not -1")
	}
	if lock, err = l.TryLock(ctx, name); err != nil || lock.Permit() != -1 {
		t.Fatalf("a lock's lease: Permit %d, %v", lock.Permit(), err)
	}
}

// The guarantee's core, the example of the docs: with five masters and two
// permits, A holds slot 0 on masters {0,1,2} and B slot 1 on {2,3,4}. Every
// master but 2 has a free permit, so a count per master would grant a
// third one; slot by slot, no slot is free on a quorum, and the attempt
// (split between the two slots) must fail and leave nothing behind.
func TestSemaphoreRefusesASplitSlotVote(t *testing.T) {
	t.Parallel()
	if got := splitSlotVote(t); got != "" {
		t.Fatal(got)
	}
}

// The control: granting a permit on a quorum of yes votes whatever slot
// each master took (mutation.SemaphoreSplitVote) makes the third holder,
// so the test above can fail.
func TestSemaphoreRefusesASplitSlotVoteControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.SemaphoreSplitVote.Set(true)()
	if got := splitSlotVote(t); got == "" {
		t.Fatal("with a split vote accepted, no third holder: the test cannot fail")
	}
}

// splitSlotVote sets up A and B and makes the attempt; it describes what
// went wrong, or returns "".
func splitSlotVote(t *testing.T) string {
	e := newEnv(t, 5)
	l := e.locker(e.steady(nil))
	const name = "split"
	s, err := l.Semaphore(name, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 2} {
		e.set(i, e.slot(name, 0), "holderA")
	}
	for _, i := range []int{2, 3, 4} {
		e.set(i, e.slot(name, 1), "holderB")
	}
	le, err := s.TryAcquire(context.Background())
	if err == nil {
		return fmt.Sprintf("a third permit (slot %d) granted while A and B each hold one of two", le.Permit())
	}
	if !errors.Is(err, engine.ErrNotAcquired) || errors.Is(err, engine.ErrNoQuorum) {
		return fmt.Sprintf("the split attempt: %v, want ErrNotAcquired", err)
	}
	// The attempts' slots are undone without waiting: until they are.
	clean := within(30*time.Second, func() bool {
		for i := range e.direct {
			for slot, want := range map[int]string{0: "holderA", 1: "holderB"} {
				if v := e.get(i, e.slot(name, slot)); v != "" && v != want {
					return false
				}
			}
		}
		return true
	})
	if !clean {
		return "the split attempts left keys behind"
	}
	return ""
}

// A minority of masters with a leftover in the first slot chooses the next
// one: the quorum's slot wins, and the minority's is undone. The attempt
// returns at the quorum's answers, and may reach the minority later (on a
// loaded machine, after the checks below began): its late yes is undone
// when it comes, so the checks wait for the undo.
func TestSemaphoreUndoesTheMinoritysSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	l := e.locker(e.steady(nil))
	const name = "minority"
	s, err := l.Semaphore(name, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		for _, m := range []int{0, 1} {
			e.set(m, e.slot(name, 0), "leftover")
		}
		le, err := s.TryAcquire(context.Background())
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		eventually(t, 30*time.Second, "the permit's value only in its slot", func() bool {
			return e.onlyIn(name, 2, le.Value(), le.Permit())
		})
		if err := le.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !within(30*time.Second, func() bool { return e.onlyIn(name, 2, le.Value(), -1) }) {
			t.Fatalf("attempt %d: the permit's value is left after its release: %v", i, e.ours(name, 2, le.Value()))
		}
	}
}

// A yes that arrives after the attempt failed is undone when it arrives:
// the script's (a handle's first attempt runs it) and a probe's (its
// next). In virtual time, where the refusal's promptness is exact: it
// comes in a few round trips (simredis's latency is at most 20 ms a
// way), not after the paused masters' 2 s node timeout.
func TestSemaphoreLateYesIsUndone(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) { semLateYes(t, e, 100*time.Millisecond, 3*time.Second) })
}

// TestSemaphoreLateYesIsUndoneOnRealMasters is the same on real masters
// of its own, paused by SIGSTOP: the late yeses run the scripts after
// the refusal, and their undos delete what they took.
func TestSemaphoreLateYesIsUndoneOnRealMasters(t *testing.T) {
	t.Parallel()
	semLateYes(t, ownEnv(t, 5), 0, 30*time.Second)
}

// semLateYes runs the late-yes scenario on e; prompt, when set, bounds
// how long the refusal may take, and undone how long the late yeses stay
// after the masters resume.
func semLateYes(t *testing.T, e *env, prompt, undone time.Duration) {
	l := e.locker(e.steady(func(c *engine.Config) { c.NodeTimeout = 2 * time.Second; c.TTL = 10 * time.Second }))
	const name = "late"
	s, err := l.Semaphore(name, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 2} {
		e.set(i, e.slot(name, 0), "holder")
	}
	for round := 0; round < 2; round++ {
		e.pause(3)
		e.pause(4)
		start := time.Now()
		_, err = s.TryAcquire(context.Background())
		if !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("round %d: slot held on a quorum: %v", round, err)
		}
		if took := time.Since(start); prompt > 0 && took > prompt {
			t.Fatalf("round %d: the refusal took %s, waiting for the paused masters", round, took)
		}
		e.resume(3)
		e.resume(4)
		// The paused masters ran the attempts after all, found the slot
		// free and took it; their late yes must delete it.
		eventually(t, undone, "the late yeses undone", func() bool {
			return e.get(3, e.slot(name, 0)) == "" && e.get(4, e.slot(name, 0)) == ""
		})
	}
}

// A probe of a slot taken on a quorum, or on a minority, is undone where
// it took the slot, and the script's attempt that follows takes a free
// one; the probes' leftovers never block a slot.
func TestSemaphoreProbeThatMissesIsUndone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	l := e.locker(e.steady(nil))
	const name = "probe"
	s, err := l.Semaphore(name, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 2} {
		e.set(i, e.slot(name, 0), "quorum")
	}
	for _, i := range []int{3, 4} {
		e.set(i, e.slot(name, 1), "minority")
	}
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		le, err := s.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if le.Permit() == 0 {
			t.Fatalf("attempt %d: a permit in slot 0, held by another on a quorum", i)
		}
		eventually(t, 30*time.Second, "the permit's value only in its slot", func() bool {
			return e.onlyIn(name, 3, le.Value(), le.Permit())
		})
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Contention reads as contention with a minority of masters down, and an
// outage as an outage; a permit is taken with two of five down.
func TestSemaphoreErrorsAreHonest(t *testing.T) {
	t.Parallel()
	e := ownEnv(t, 5)
	// The masters it kills refuse at once: a live one slowed by a loaded
	// machine must not time out.
	l := e.locker(func(c *engine.Config) { c.NodeTimeout = 4 * time.Second })
	s, err := l.Semaphore("honest", 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.cluster.Nodes[4].Kill()
	e.cluster.Nodes[0].Kill()
	b, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("a free permit with two masters of five down: %v", err)
	}
	if b.Permit() == a.Permit() {
		t.Fatalf("two permits in slot %d", a.Permit())
	}
	for i := 0; i < 10; i++ {
		_, err := s.TryAcquire(ctx)
		if !errors.Is(err, engine.ErrNotAcquired) || errors.Is(err, engine.ErrNoQuorum) {
			t.Fatalf("both permits held, two masters down: %v, want ErrNotAcquired", err)
		}
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	e.cluster.Nodes[1].Kill()
	_, err = s.TryAcquire(ctx)
	if !errors.Is(err, engine.ErrNoQuorum) || errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("a permit free, three masters of five down: %v, want ErrNoQuorum", err)
	}
}

// The same name with another permit count is refused by name, and leaves
// the semaphore's holders alone.
func TestSemaphorePermitCountIsChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	ctx := context.Background()
	two, err := e.locker(e.steady(nil)).Semaphore("count", 2)
	if err != nil {
		t.Fatal(err)
	}
	le, err := two.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	three, err := e.locker(e.steady(nil)).Semaphore("count", 3)
	if err != nil {
		t.Fatal(err)
	}
	_, err = three.TryAcquire(ctx)
	if !errors.Is(err, engine.ErrPermitCount) || !strings.Contains(err.Error(), "asked with 3 permits, the masters keep 2") {
		t.Fatalf("another count: %v, want ErrPermitCount naming both", err)
	}
	// It keeps checking, although slot 2, which only it counts, is free.
	for i := 0; i < 3; i++ {
		if _, err := three.Acquire(ctx); !errors.Is(err, engine.ErrPermitCount) {
			t.Fatalf("Acquire with another count: %v", err)
		}
	}
	if le.Err() != nil {
		t.Fatalf("the holder's permit: %v", le.Err())
	}
	if err := le.Extend(ctx, 5*time.Second); err != nil {
		t.Fatalf("Extend of a permit: %v", err)
	}
}

// A permit is a lease: Extend, Done and Err, and with fencing a token
// that only increases for its slot. In virtual time: its TTL, the
// validity an Extend gives, and the expiry of a vanished holder's permit
// are exact.
func TestSemaphorePermitIsALease(t *testing.T) {
	simTest(t, 3, testSemaphorePermitIsALease)
}

func testSemaphorePermitIsALease(t *testing.T, e *env) {
	l := e.locker(e.steady(func(c *engine.Config) {
		c.Fencing = true
		c.TTL = time.Second
		c.MaxTTL = 3 * time.Second
	}))
	s, err := l.Semaphore("lease", 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var last int64
	for i := 0; i < 3; i++ {
		le, err := s.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if le.Token() <= last {
			t.Fatalf("token %d after %d", le.Token(), last)
		}
		last = le.Token()
		if err := le.Extend(ctx, 3*time.Second); err != nil || le.Validity() < 2*time.Second {
			t.Fatalf("Extend: %v (validity %s)", err, le.Validity())
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
		checkEnded(t, "released permit", le)
		if !errors.Is(le.Err(), engine.ErrReleased) {
			t.Fatalf("Err after Release: %v", le.Err())
		}
	}
	// A dead holder's permit comes back after its TTL.
	if _, err := s.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(ctx); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("the only permit held: %v", err)
	}
	ctx5, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	le, err := s.Acquire(ctx5)
	if err != nil {
		t.Fatalf("Acquire after the holder vanished: %v", err)
	}
	if le.Token() <= last {
		t.Fatalf("token %d after %d", le.Token(), last)
	}
}

// A fencing counter of the wrong type is ErrWrongType, and the slot the
// attempt took on the way is given back.
func TestSemaphoreFencingCounterOfTheWrongType(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(e.steady(func(c *engine.Config) { c.Fencing = true }))
	const name = "wrongfence"
	s, err := l.Semaphore(name, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range e.direct {
		c := e.direct[i]
		if err := c.Do(context.Background(), c.B().Hset().Key(engine.FenceKey(e.slot(name, 0))).FieldValue().FieldValue("f", "v").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.TryAcquire(context.Background())
	if !errors.Is(err, engine.ErrWrongType) || errors.Is(err, engine.ErrNoQuorum) {
		t.Fatalf("fencing counters of the wrong type: %v, want ErrWrongType", err)
	}
	for i := range e.direct {
		if v := e.get(i, e.slot(name, 0)); v != "" {
			t.Fatalf("master %d kept slot 0 (%q) after refusing", i, v)
		}
	}
}

// Acquire sleeps while every permit is held elsewhere and wakes at the
// release's notification, long before its fallback: in virtual time, a
// few round trips after the release (simredis's latency is at most 20 ms
// a way), where the fallback would take 5 s.
func TestSemaphoreAcquireIsWokenByARelease(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		semWokenByARelease(t, e, 5*time.Second, 100*time.Millisecond)
	})
}

// TestSemaphoreAcquireIsWokenByARelease on the pool's real masters: with
// a fallback of a minute, the waiter that acquires was woken by the
// release's notification (WaitInfo says which).
func TestSemaphoreAcquireIsWokenByAReleaseOnRealMasters(t *testing.T) {
	t.Parallel()
	semWokenByARelease(t, newEnv(t, 5), time.Minute, 0)
}

// semWokenByARelease runs the scenario on e with the waiter's fallback;
// prompt, when set, bounds the time from the release to the acquisition.
func semWokenByARelease(t *testing.T, e *env, fallback, prompt time.Duration) {
	slow := func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = fallback, fallback }
	holder, waiter := e.locker(e.steady(slow)), e.locker(e.steady(slow))
	const name = "woken"
	hs, _ := holder.Semaphore(name, 2)
	ws, _ := waiter.Semaphore(name, 2)
	ctx := context.Background()
	a, err := hs.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := hs.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		le  *engine.Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	wctx, cancel := context.WithTimeout(ctx, fallback-time.Second)
	defer cancel()
	go func() {
		le, err := ws.Acquire(wctx)
		got <- result{le, err, time.Now()}
	}()
	// The waiter sleeps once subscribed and its marking attempt marked
	// both holders on a quorum: their releases publish.
	eventually(t, 30*time.Second, "the waiter subscribed, the holders marked on a quorum", func() bool {
		if waiter.Subscriptions() != 1 {
			return false
		}
		marked := 0
		for i := range e.direct {
			if e.get(i, e.slot(name, a.Permit())) == a.Value()+"+" && e.get(i, e.slot(name, b.Permit())) == b.Value()+"+" {
				marked++
			}
		}
		return marked > len(e.direct)/2
	})
	released := time.Now()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Acquire: %v", r.err)
	}
	w := r.le.Wait()
	if r.le.Permit() != a.Permit() || w.Cause != engine.WakeNotified || w.Fallbacks != 0 || (prompt > 0 && r.at.Sub(released) > prompt) {
		t.Fatalf("woken after %s by %s into slot %d (freed: %d); wait %+v", r.at.Sub(released), w.Cause, r.le.Permit(), a.Permit(), w)
	}
	t.Logf("woken %s after the release: %+v", r.at.Sub(released), w)
}

// Goroutines of one Locker waiting for one semaphore queue at its gate:
// each release lets the next one in, and each gets a permit.
func TestSemaphoreWaitersOfOneLockerQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(e.steady(nil))
	s, _ := l.Semaphore("queue", 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var held []*engine.Lease
	for i := 0; i < 2; i++ {
		le, err := s.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, le)
	}
	const waiters = 4
	got := make(chan *engine.Lease, waiters)
	for i := 0; i < waiters; i++ {
		go func() {
			le, err := s.Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- le
		}()
	}
	eventually(t, 30*time.Second, "three goroutines queued behind the first", func() bool {
		return l.SemGateWaiting(s) == waiters-1
	})
	for i := 0; i < waiters; i++ {
		le := held[0]
		held = held[1:]
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-got
		if next == nil {
			t.FailNow()
		}
		for _, h := range held {
			if h.Permit() == next.Permit() {
				t.Fatalf("two permits in slot %d", h.Permit())
			}
		}
		held = append(held, next)
	}
}

// Close ends a waiting Acquire with ErrClosed.
func TestSemaphoreAcquireEndsAtClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	l := e.locker(e.steady(nil))
	s, _ := l.Semaphore("closing", 1)
	if _, err := s.TryAcquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := s.Acquire(context.Background())
			errs <- err
		}()
	}
	eventually(t, 30*time.Second, "one waiting, one queued", func() bool { return l.SemGateWaiting(s) == 1 })
	l.Close()
	for i := 0; i < 2; i++ {
		select {
		case err := <-errs:
			if !errors.Is(err, engine.ErrClosed) {
				t.Fatalf("Acquire at Close: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Acquire still waiting after Close")
		}
	}
}

// An Observer sees a semaphore's acquisitions as TryLock and Lock of its
// name, and its permits' releases as any lease's.
func TestSemaphoreIsObserved(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	var mu sync.Mutex
	var got []string
	l := e.locker(e.steady(func(c *engine.Config) {
		c.Observer = &engine.Observer{
			Acquire: func(_ context.Context, ev engine.AcquireEvent) {
				mu.Lock()
				got = append(got, fmt.Sprintf("%s %s %s", ev.Op, ev.Resource, ev.Result))
				mu.Unlock()
			},
			Release: func(_ context.Context, ev engine.ReleaseEvent) {
				mu.Lock()
				got = append(got, fmt.Sprintf("release %s %s", ev.Resource, ev.Result))
				mu.Unlock()
			},
		}
	}))
	s, _ := l.Semaphore("observed", 1)
	ctx := context.Background()
	le, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.TryAcquire(ctx)
	le.Release(ctx)
	if le, err = s.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	le.Release(ctx)
	want := []string{"try_lock observed acquired", "try_lock observed contended", "release observed released",
		"lock observed acquired", "release observed released"}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An attempt whose connection to a master broke under it may still run
// there after its undo, which went on a new connection: the slot it took
// there is deleted again later, whichever slot that was. In virtual
// time, where the attempt reaches master 0's proxy and is held there
// every time, and the late run lands between the undo and the second
// sweep, which comes min(ConnTimeout, TTL/2) after it.
func TestSemaphoreAttemptUnderABrokenConnectionIsSwept(t *testing.T) {
	simTest(t, 3, testSemaphoreAttemptUnderABrokenConnectionIsSwept)
}

func testSemaphoreAttemptUnderABrokenConnectionIsSwept(t *testing.T, e *env) {
	const name = "broken"
	for _, i := range []int{1, 2} {
		e.set(i, e.slot(name, 0), "someone")
		e.set(i, e.slot(name, 1), "someone")
	}
	px := newStallProxy(e, e.addrs[0])
	l := e.locker(e.steady(func(c *engine.Config) {
		c.Masters = []string{px.addr(), e.addrs[1], e.addrs[2]}
		c.Conn.ConnTimeout = time.Second
	}))
	s, err := l.Semaphore(name, 2)
	if err != nil {
		t.Fatal(err)
	}
	px.stall.Store(true)
	// The refusals of masters 1 and 2 decide the attempt; it was sent to
	// master 0 before they came back, and waits at the proxy.
	if _, err := s.TryAcquire(context.Background()); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("TryAcquire: %v", err)
	}
	eventually(t, 500*time.Millisecond, "the attempt held at master 0's proxy", px.holding)
	px.stall.Store(false)
	px.breakStalled()
	eventually(t, 5*time.Second, "the undo overtook the attempt", func() bool { return px.newConns.Load() > 0 })
	// The undo runs on the new connection: well within 200 ms, and long
	// before the second sweep, a second after it.
	time.Sleep(200 * time.Millisecond)
	px.flushStalled() // master 0, whose slots are free, runs the attempts now
	eventually(t, 100*time.Millisecond, "the late attempt took a slot on master 0", func() bool {
		return e.get(0, e.slot(name, 0)) != "" || e.get(0, e.slot(name, 1)) != ""
	})
	eventually(t, 5*time.Second, "the slots taken after the first undo are freed", func() bool {
		return e.get(0, e.slot(name, 0)) == "" && e.get(0, e.slot(name, 1)) == ""
	})
}
