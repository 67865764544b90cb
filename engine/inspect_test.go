package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// TestInspectMutex holds a fenced lock with owner metadata and a per-call
// TTL, and Inspect reports it: kind, value, owner, token, a validity
// within the TTL, every master agreeing; then a waiter queues, and
// Inspect lists it; Inspect changes nothing (the lease's keys keep their
// value, the waiter stays queued).
func TestInspectMutex(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	l := e.locker(func(c *engine.Config) {
		c.Fencing = true
		c.Owner = "host=a pid=1"
		patientDownTo(5 * time.Second)(c) // for the WithTTL below
	})
	le, err := l.TryLock(ctx, "m", engine.WithTTL(5*time.Second), engine.WithOwner("host=b.example pid=2 req=x+y%"))
	if err != nil {
		t.Fatal(err)
	}
	awaitOnAll(t, e, "m", le.Value())
	in, err := l.Inspect(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if in.Kind != engine.KindMutex || len(in.Holders) != 1 || !in.Agree || in.Quorum != 3 {
		t.Fatalf("Inspect: %+v", in)
	}
	h := in.Holders[0]
	if h.Value != le.Value() || h.Owner != "host=b.example pid=2 req=x+y%" || h.Token != le.Token() || h.Permit != -1 || h.Masters != 5 {
		t.Fatalf("holder %+v; lease value %q token %d", h, le.Value(), le.Token())
	}
	if h.Validity <= 0 || h.Validity > 5*time.Second || in.Validity != h.Validity || in.Fence != le.Token() {
		t.Fatalf("validity %s (inspection %s), fence %d", h.Validity, in.Validity, in.Fence)
	}
	if got := engine.OwnerOf(le.Value()); got != h.Owner {
		t.Fatalf("OwnerOf %q", got)
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	in, err = l.Inspect(ctx, "m")
	if err != nil || in.Kind != engine.KindFree || len(in.Holders) != 0 {
		t.Fatalf("after release: %+v, %v", in, err)
	}
}

// TestResumeAndUnlock: a second Locker (another process) resumes a lease
// by its value and releases it; Unlock with a wrong value deletes
// nothing, with the holder's value it releases on every master.
func TestResumeAndUnlock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	a, b := e.locker(patient), e.locker(patient)
	le, err := a.TryLock(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Resume(ctx, "r", "nope", 0); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("Resume of a wrong value: %v", err)
	}
	re, err := b.Resume(ctx, "r", le.Value(), 7)
	if err != nil {
		t.Fatal(err)
	}
	// The masters' TTL left, less the drift for it, from the check's
	// start: it may exceed the holder's own count, which starts before
	// its SETs ran, by a few ms, never a fresh lease's.
	if re.Token() != 7 || re.Validity() <= 0 || re.Validity() > engine.DefaultTTL-engine.DriftFloor {
		t.Fatalf("resumed: token %d validity %s (holder's %s)", re.Token(), re.Validity(), le.Validity())
	}
	if err := re.Extend(ctx, 8*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := re.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx, "r"); err != nil {
		t.Fatalf("after the resumed release: %v", err)
	}

	le2, err := a.TryLock(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	// Unlock must release on every master: the last SET may still be on
	// its way (TryLock returns at a quorum), on a's connection, which b's
	// deletes could overtake.
	awaitOnAll(t, e, "u", le2.Value())
	u, err := b.Unlock(ctx, "u", "wrong")
	if !errors.Is(err, engine.ErrNotHeld) || u.Released != 0 {
		t.Fatalf("Unlock with a wrong value: %+v, %v", u, err)
	}
	u, err = b.Unlock(ctx, "u", le2.Value())
	if err != nil || u.Released != 5 || len(u.Masters) != 5 || u.Masters[0].Outcome != engine.OutcomeOK {
		t.Fatalf("Unlock: %+v, %v", u, err)
	}
	for i := range 5 {
		if v := e.get(i, e.key("u")); v != "" {
			t.Fatalf("master %d still holds %q", i, v)
		}
	}
}

// TestList lists the names a quorum holds under a prefix: locks, a
// semaphore once, a read/write lock; not a name held on a minority, not
// the engine's internal keys.
func TestList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	l := e.locker(func(c *engine.Config) { c.Fencing = true; patient(c) })
	for _, n := range []string{"job:a", "job:b", "other"} {
		if _, err := l.TryLock(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	s, err := l.Semaphore("job:sem", 3)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.TryAcquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m, err := l.RWMutex("job:rw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryRLock(ctx); err != nil {
		t.Fatal(err)
	}
	e.set(0, e.key("job:minority"), "x")
	e.set(1, e.key("job:minority"), "x")
	names, err := l.List(ctx, "job:", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"job:a", "job:b", "job:rw", "job:sem"}
	if len(names) != len(want) {
		t.Fatalf("List: %q, want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("List: %q, want %q", names, want)
		}
	}
	if names, err := l.List(ctx, "job:", 2); err != nil || len(names) != 2 {
		t.Fatalf("List limit 2: %q, %v", names, err)
	}
}

// TestInspectKinds: a semaphore with two of three permits held (each
// with its owner), a read/write lock with two readers and a writer
// waiting (its intent is the waiter), each reported as a quorum holds it.
func TestInspectKinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	l := e.locker(patientDownTo(3 * time.Second)) // for p2's WithTTL
	s, err := l.Semaphore("sem", 3)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := s.TryAcquire(ctx, engine.WithOwner("w1"))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s.TryAcquire(ctx, engine.WithOwner("w2"), engine.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	in, err := l.Inspect(ctx, "sem")
	if err != nil {
		t.Fatal(err)
	}
	// TryAcquire returns at a quorum: a master may not hold a permit yet.
	if in.Kind != engine.KindSemaphore || in.Permits != 3 || len(in.Holders) != 2 {
		t.Fatalf("semaphore: %+v", in)
	}
	owners := map[int]string{}
	for _, h := range in.Holders {
		owners[h.Permit] = h.Owner
		if h.Masters < in.Quorum {
			t.Fatalf("holder %+v on fewer than a quorum", h)
		}
	}
	if owners[p1.Permit()] != "w1" || owners[p2.Permit()] != "w2" || in.Validity > 3*time.Second {
		t.Fatalf("semaphore holders %+v (permits %d, %d), validity %s", in.Holders, p1.Permit(), p2.Permit(), in.Validity)
	}

	m, err := l.RWMutex("rw")
	if err != nil {
		t.Fatal(err)
	}
	r1, err := m.TryRLock(ctx, engine.WithOwner("reader"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryRLock(ctx); err != nil {
		t.Fatal(err)
	}
	other := e.locker(patient)
	om, err := other.RWMutex("rw")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	werr := make(chan error, 1)
	go func() {
		_, err := om.Lock(wctx)
		werr <- err
	}()
	// The writer registers its intent from its second attempt on.
	awaitWriters(t, e, "rw", 1)
	in, err = l.Inspect(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	if in.Kind != engine.KindRWMutex || len(in.Holders) != 2 || len(in.Waiters) != 1 || in.Waiters[0].Mode != "write" {
		t.Fatalf("rwmutex: %+v", in)
	}
	// The intent's life, in front of the writer's id on the masters, is
	// not part of the id.
	if id := in.Waiters[0].ID; strings.Contains(id, "/") || !strings.Contains(id, ":") {
		t.Fatalf("waiting writer's id %q, want the Locker's id, ':', a number", id)
	}
	for _, h := range in.Holders {
		if h.Mode != "read" || (h.Value == r1.Value()) != (h.Owner == "reader") {
			t.Fatalf("rwmutex holder %+v", h)
		}
	}
	cancel()
	<-werr
}

// TestInspectDisagreement: a lock whose key one master lost and another
// master holds for a stranger is still held by the quorum left, and the
// masters' views say who holds what; with the key gone from a quorum the
// name is free, its minority holder shown per master only.
func TestInspectDisagreement(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	l := e.locker(func(c *engine.Config) { c.DisableTracking = true; patient(c) })
	le, err := l.TryLock(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	awaitOnAll(t, e, "d", le.Value())
	e.del(0, e.key("d"))
	e.set(1, e.key("d"), "stranger")
	in, err := l.Inspect(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if in.Agree || len(in.Holders) != 1 || in.Holders[0].Value != le.Value() || in.Holders[0].Masters != 3 {
		t.Fatalf("a minority changed: %+v", in)
	}
	if in.Masters[0].Kind != engine.KindFree || in.Masters[1].Holders[0].Value != "stranger" || in.Masters[2].Holders[0].Value != le.Value() {
		t.Fatalf("masters: %+v", in.Masters)
	}
	e.del(2, e.key("d"))
	in, err = l.Inspect(ctx, "d")
	if err != nil || in.Kind != engine.KindFree || len(in.Holders) != 0 || in.Validity != 0 {
		t.Fatalf("gone from a quorum: %+v, %v", in, err)
	}
}

// TestUnlockWakesWaiter: a waiter of another Locker queued behind a lock
// is woken by Unlock with the holder's value at once, by the release
// notification, not by its fallback, and Inspect, meanwhile, left it
// queued and the holder's key as it was.
func TestUnlockWakesWaiter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	holder := e.locker(patient)
	// A fallback far beyond the test's life: only a notification wakes.
	waiter := e.locker(func(c *engine.Config) {
		c.Wait.FallbackMin, c.Wait.FallbackMax = time.Hour, time.Hour
		c.TTL = time.Hour
		patient(c)
	})
	operator := e.locker(patient)
	le, err := holder.TryLock(ctx, "stuck", engine.WithOwner("host=h pid=9"))
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns at a quorum: the waiter must not find a master
	// the holder's SET has not reached yet.
	awaitOnAll(t, e, "stuck", le.Value())
	got := make(chan *engine.Lease, 1)
	go func() {
		w, err := waiter.Lock(ctx, "stuck")
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	// The waiter queues and listens, then marks the holder's value with
	// its next attempt, which returns at a quorum.
	eventually(t, 30*time.Second, "the waiter subscribed, queued and marked on every master", func() bool {
		if waiter.Subscriptions() != 1 || !e.queued("stuck", 1) {
			return false
		}
		for i := range e.direct {
			if e.get(i, e.key("stuck")) != le.Value()+"+" {
				return false
			}
		}
		return true
	})
	in, err := operator.Inspect(ctx, "stuck")
	if err != nil || len(in.Waiters) != 1 || in.Holders[0].Owner != "host=h pid=9" {
		t.Fatalf("Inspect: %+v, %v", in, err)
	}
	if !e.queued("stuck", 1) || e.get(0, e.key("stuck")) != le.Value()+"+" {
		t.Fatalf("Inspect changed the masters: queue %v, value %q", e.queueOf(0, "stuck"), e.get(0, e.key("stuck")))
	}
	u, err := operator.Unlock(ctx, "stuck", in.Holders[0].Value)
	if err != nil || u.Released != 5 {
		t.Fatalf("Unlock: %+v, %v", u, err)
	}
	w := <-got
	if w.Wait().Cause != engine.WakeNotified {
		t.Fatalf("waiter woken by %s, want notified", w.Wait().Cause)
	}
}

// TestLockOptionErrors: bad options fail before anything is sent,
// naming the option.
func TestLockOptionErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	ctx := context.Background()
	l := e.locker(nil)
	for _, o := range []engine.LockOption{
		engine.WithTTL(-time.Second), engine.WithTTL(time.Minute), engine.WithTTL(1500 * time.Microsecond),
		engine.WithTTL(150 * time.Millisecond), engine.WithOwner(strings.Repeat("x", engine.MaxOwnerLen+1)),
		engine.WithOwner("\xff"),
	} {
		if _, err := l.TryLock(ctx, "opt", o); !errors.Is(err, engine.ErrInvalidOption) {
			t.Errorf("%+v: %v, want ErrInvalidOption", o, err)
		}
	}
	if e.get(0, e.key("opt")) != "" {
		t.Fatal("a refused option sent an acquire")
	}
	cfg := e.config()
	cfg.Owner = strings.Repeat("x", engine.MaxOwnerLen+1)
	if _, err := engine.New(ctx, cfg); err == nil || !strings.Contains(err.Error(), "Config.Owner") {
		t.Fatalf("New with a long Owner: %v", err)
	}
	// A good option is used: in virtual time, where the keys' PTTL is
	// read once every master has answered (TryLock returns at a quorum)
	// and before any time passed.
	simTest(t, 3, func(t *testing.T, e *env) {
		le, err := e.locker(nil).TryLock(ctx, "opt", engine.WithTTL(2*time.Second), engine.WithOwner(""))
		if err != nil {
			t.Fatal(err)
		}
		// The last master's SET may still be on its way (the simulated
		// latency's jitter and spikes): wait for it, then read each PTTL.
		awaitOnAll(t, e, "opt", le.Value())
		for i := range e.direct {
			if p := e.pttl(i, e.key("opt")); p > 2000 || p <= 0 || engine.OwnerOf(le.Value()) != "" {
				t.Fatalf("WithTTL(2s): PTTL %d on master %d, owner %q", p, i, engine.OwnerOf(le.Value()))
			}
		}
	})
}

// awaitOnAll waits until every master holds value (marked or not) at
// resource's key: an acquire returns once a quorum holds it, and its
// SETs reach the last masters after.
func awaitOnAll(t *testing.T, e *env, resource, value string) {
	t.Helper()
	eventually(t, 30*time.Second, "the lock on every master", func() bool {
		for i := range e.direct {
			if v := e.get(i, e.key(resource)); v != value && v != value+"+" {
				return false
			}
		}
		return true
	})
}

// TestResumeAndUnlockKinds: a semaphore's permit and a read/write lock's
// reader are resumed (by another Locker, with their slot and their
// entry) and released; Unlock clears a permit of a full semaphore and a
// waiter of another Locker acquires it.
func TestResumeAndUnlockKinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	a, b := e.locker(patient), e.locker(patient)
	s, err := a.Semaphore("ks", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	re, err := b.Resume(ctx, "ks", p.Value(), 0)
	if err != nil || re.Permit() != p.Permit() {
		t.Fatalf("Resume of a permit: slot %d (held %d), %v", re.Permit(), p.Permit(), err)
	}
	if err := re.Release(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := a.RWMutex("krw")
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := b.Resume(ctx, "krw", r.Value(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := rr.Extend(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rr.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if in, err := b.Inspect(ctx, "krw"); err != nil || len(in.Holders) != 0 {
		t.Fatalf("after the resumed reader's release: %+v, %v", in, err)
	}

	p, err = s.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := b.Semaphore("ks", 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := bs.Acquire(ctx)
		got <- err
	}()
	eventually(t, 30*time.Second, "the waiter subscribed", func() bool { return b.Subscriptions() == 1 })
	u, err := a.Unlock(ctx, "ks", p.Value())
	if err != nil || u.Released < 3 {
		t.Fatalf("Unlock of a permit: %+v, %v", u, err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the semaphore's waiter: %v", err)
	}
}
