package engine_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// Adversarial tests of the readers' share (engine/rwshare.go): each
// schedules an interleaving that breaks a claim the share makes, or one
// the read/write lock made before it.

// TestRWShareStreamKeepsTheSemaphoreMark, in virtual time: a stream of
// overlapping readers of one handle (each a fresh TryRLock, held 1 s, one
// every 500 ms, auto-extended) keeps the handle in use for 6 MaxTTL; a
// Semaphore of the same name (another Locker) must still be refused with
// ErrWrongKind ("One name, one kind": the permit count is marked by the
// read/write lock while a handle of it is in use, by its first attempt
// and one every MaxTTL/2 after, for 2 MaxTTL). Without the share every
// reader is an attempt, and the due ones mark; with it every reader after
// the first joins the auto-extended entry and sends no attempt, so the
// mark expires 2 MaxTTL after the first and the semaphore is admitted on
// a name whose readers hold.
func TestRWShareStreamKeepsTheSemaphoreMark(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		ctx := context.Background()
		cfg := func(c *engine.Config) {
			c.TTL, c.MaxTTL, c.AutoExtend = time.Second, 2*time.Second, true
		}
		l := e.locker(cfg)
		m := rwMutex(t, l, "share-kind")
		var held []*engine.Lease
		joined := 0
		for i := range 24 { // 12 s = 6 MaxTTL
			r := mustRLock(t, m, false)
			if len(held) > 0 && engine.LeaseValue(r) == engine.LeaseValue(held[len(held)-1]) {
				joined++
			}
			held = append(held, r)
			if i >= 2 {
				if err := held[i-2].Release(ctx); err != nil {
					t.Fatalf("reader %d's release: %v", i-2, err)
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Logf("%d of 23 readers joined the previous one's entry", joined)
		s, err := e.locker(cfg).Semaphore("share-kind", 2)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.TryAcquire(ctx)
		if err == nil {
			p.Release(ctx)
			t.Fatal("a semaphore of the name was admitted while the read/write lock's readers hold it and its handle takes a read lock every 500 ms")
		}
		if !errors.Is(err, engine.ErrWrongKind) {
			t.Fatalf("the semaphore: %v, want ErrWrongKind", err)
		}
		for _, r := range held[len(held)-2:] {
			r.Release(ctx)
		}
	})
}

// TestRWShareNoJoinAfterUnlock, on real masters: a reader of Locker A is
// stuck (TTL one minute, no auto-extension, nobody watches its Done); an
// operator clears its entry with Unlock, as documented for a stuck lock;
// a writer of Locker B is then admitted. A new TryRLock of A, begun after
// the writer holds, must be refused ("a writer holds it"), as it is
// without the share, where it is an attempt of its own. With the share it
// joins the cleared entry (nothing tells A it went: only the intents key
// is asked, and the writer's TryLock left no intent) and is granted while
// the writer holds.
func TestRWShareNoJoinAfterUnlock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	cfg := func(c *engine.Config) { c.TTL, c.MaxTTL = time.Minute, time.Minute; patient(c) }
	a, b := e.locker(cfg), e.locker(cfg)
	m, wm := rwMutex(t, a, "share-unlock"), rwMutex(t, b, "share-unlock")
	stuck := mustRLock(t, m, false)
	key, value := engine.LeaseKeys(stuck)[0], stuck.Value()
	eventually(t, 30*time.Second, "the entry on every master", func() bool { return e.entries(key, value) == 5 })
	u, err := b.Unlock(ctx, "share-unlock", value)
	if err != nil || u.Released != 5 {
		t.Fatalf("Unlock: %+v, %v", u, err)
	}
	w, err := wm.TryLock(ctx)
	if err != nil {
		t.Fatalf("the writer, once the stuck reader was cleared: %v", err)
	}
	defer w.Release(ctx)
	r, err := m.TryRLock(ctx)
	if err == nil {
		defer r.Release(ctx)
		t.Fatalf("a reader begun while a writer holds was granted (joined the cleared entry: %v), validity %s",
			r.Value() == value, r.Validity())
	}
	if !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("the reader: %v, want ErrNotAcquired", err)
	}
}

// TestRWShareForgetsExpiredEntries, in virtual time: readers of 100
// names, nobody watching them (no Done, no auto-extension; the simulated
// env also runs without tracking), let expire and dropped without
// Release, as a caller may drop a lease that ended. Without the share
// nothing of them is left in the Locker (no timer, no tracker entry
// holds them). With it the Locker keeps each name's share (its base, and
// the sharers in it) until a later reader of the same name replaces it:
// one per name ever read, for the Locker's life.
func TestRWShareForgetsExpiredEntries(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		l := e.locker(func(c *engine.Config) { c.TTL = time.Second })
		const names = 100
		for i := range names {
			mustRLock(t, rwMutex(t, l, "share-forget-"+strconv.Itoa(i)), false)
		}
		time.Sleep(2 * time.Second)
		if n := l.RWShares(); n != 0 {
			t.Fatalf("%d names' shares kept after all their readers expired and were dropped, want 0", n)
		}
	})
}

// TestRWShareNoJoinOnExpiredEntries, in virtual time: a join must count
// only masters where the entry lives as long as the validity it takes.
// Locker A's reader (TTL 1 s) is admitted on all five masters; its
// Extend to 3 s reaches masters 0-2 only (3 and 4 refuse connections), so
// there the entry keeps its first expiry, 1 s. The entry is then cleared
// on masters 0 and 1 (an operator, FLUSHDB, eviction), and Locker C's
// reader, admitted at 0.5 s, keeps the key on every master past 1 s. At
// 1.1 s the entry is still on masters 2-4, a quorum, but expired on 3 and
// 4: a new reader of A that joined on those three answers would take the
// base's validity (to 3 s), yet once C's reader releases, which takes the
// key off every master where no live entry is left (0, 1, 3, 4), a
// writer of Locker B is admitted there. The new reader must be refused
// the join (and go the normal way, its own entry keeping the writer
// out).
func TestRWShareNoJoinOnExpiredEntries(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		ctx := context.Background()
		cfg := func(c *engine.Config) { c.TTL, c.MaxTTL = time.Second, 4*time.Second }
		a, b, c := e.locker(cfg), e.locker(cfg), e.locker(cfg)
		m := rwMutex(t, a, "share-stale")
		r1 := mustRLock(t, m, false)
		defer r1.Release(ctx)
		key := engine.LeaseKeys(r1)[0]
		time.Sleep(100 * time.Millisecond)
		e.sim[3].Partition(simredis.Refuse)
		e.sim[4].Partition(simredis.Refuse)
		if err := r1.Extend(ctx, 3*time.Second); err != nil {
			t.Fatalf("the Extend on masters 0-2: %v", err)
		}
		e.sim[3].Partition(simredis.Connected)
		e.sim[4].Partition(simredis.Connected)
		e.del(0, key)
		e.del(1, key)
		time.Sleep(400 * time.Millisecond)
		other := mustRLock(t, rwMutex(t, c, "share-stale"), false)
		time.Sleep(600 * time.Millisecond)
		r2, err := m.TryRLock(ctx)
		if err != nil {
			t.Fatalf("the second reader: %v", err)
		}
		defer r2.Release(ctx)
		if err := other.Release(ctx); err != nil {
			t.Fatalf("Locker C's reader: %v", err)
		}
		w, err := rwMutex(t, b, "share-stale").TryLock(ctx)
		if err == nil {
			defer w.Release(ctx)
			t.Fatalf("a writer was admitted while a reader holds (it joined: %v, validity %s)",
				r2.Value() == r1.Value(), r2.Validity())
		}
		if !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("the writer: %v, want ErrNotAcquired", err)
		}
	})
}
