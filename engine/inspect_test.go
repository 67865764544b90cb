package engine_test

import (
	"context"
	"errors"
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
	l := e.locker(func(c *engine.Config) { c.Fencing = true; c.Owner = "host=a pid=1" })
	le, err := l.TryLock(ctx, "m", engine.WithTTL(5*time.Second), engine.WithOwner("host=b.example pid=2 req=x+y%"))
	if err != nil {
		t.Fatal(err)
	}
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
	a, b := e.locker(nil), e.locker(nil)
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
	if re.Token() != 7 || re.Validity() <= 0 || re.Validity() > le.Validity()+time.Millisecond {
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
	l := e.locker(func(c *engine.Config) { c.Fencing = true })
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
