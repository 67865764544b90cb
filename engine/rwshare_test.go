package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// Readers of one Locker share one entry on the masters (see rwShare in
// engine/rwshare.go): a reader that finds the lock's shared entry live
// joins it with a check of the writers' intents, and the last of them to
// release takes it off the masters.

// readersOn is, on each master, how many readers' entries the lock's
// sorted set at key holds (its marker member left out).
func (e *env) readersOn(key string) []int64 {
	e.t.Helper()
	out := make([]int64, len(e.direct))
	for i, c := range e.direct {
		n, err := c.Do(context.Background(), c.B().Zcount().Key(key).Min("(0").Max("+inf").Build()).AsInt64()
		if err != nil {
			e.t.Fatalf("ZCOUNT on node %d: %v", i, err)
		}
		out[i] = n
	}
	return out
}

// intentOn is how many masters hold the lock's writers' intents key.
func (e *env) intentOn(key string) int {
	e.t.Helper()
	n := 0
	for i, c := range e.direct {
		x, err := c.Do(context.Background(), c.B().Exists().Key(engine.RWIntentsKey(key)).Build()).AsInt64()
		if err != nil {
			e.t.Fatalf("EXISTS on node %d: %v", i, err)
		}
		n += int(x)
	}
	return n
}

func mustRLock(t *testing.T, m *engine.RWMutex, wait bool) *engine.Lease {
	t.Helper()
	var le *engine.Lease
	var err error
	if wait {
		le, err = m.RLock(context.Background())
	} else {
		le, err = m.TryRLock(context.Background())
	}
	if err != nil {
		t.Fatalf("read lock: %v", err)
	}
	return le
}

// TestRWShareJoinAndRelease: three readers of one Locker (TryRLock,
// TryRLock, RLock) hold one entry; the first two releases send nothing
// (the entry stays on every master, and a writer of another Locker is
// still refused); the last one takes it off every master, and the writer
// gets in.
func TestRWShareJoinAndRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	l, other := e.locker(patient), e.locker(patient)
	m, wm := rwMutex(t, l, "share-join"), rwMutex(t, other, "share-join")
	r1 := mustRLock(t, m, false)
	key, value := engine.LeaseKeys(r1)[0], engine.LeaseValue(r1)
	eventually(t, 30*time.Second, "the entry on every master", func() bool { return e.entries(key, value) == 5 })
	r2, r3 := mustRLock(t, m, false), mustRLock(t, m, true)
	for i, r := range []*engine.Lease{r2, r3} {
		if engine.LeaseValue(r) != value {
			t.Fatalf("reader %d did not join: value %q, the entry's %q", i+2, engine.LeaseValue(r), value)
		}
		if !r.ValidUntil().Equal(r1.ValidUntil()) {
			t.Fatalf("reader %d's validity %v is not the entry's %v", i+2, r.ValidUntil(), r1.ValidUntil())
		}
	}
	for i, n := range e.readersOn(key) {
		if n != 1 {
			t.Fatalf("master %d holds %d readers' entries, want the one shared", i, n)
		}
	}
	for i, r := range []*engine.Lease{r1, r2} {
		if err := r.Release(ctx); err != nil {
			t.Fatalf("release %d: %v", i+1, err)
		}
		if !errors.Is(r.Err(), engine.ErrReleased) {
			t.Fatalf("release %d: Err %v", i+1, r.Err())
		}
		// No command was sent: the entry is still on every master.
		if n := e.entries(key, value); n != 5 {
			t.Fatalf("after release %d of 3 the entry is on %d masters, want 5", i+1, n)
		}
		if _, err := wm.TryLock(ctx); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("after release %d of 3 another Locker's writer: %v, want ErrNotAcquired", i+1, err)
		}
	}
	if err := r1.Release(ctx); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("second release: %v, want ErrNotHeld", err)
	}
	if r3.Err() != nil || r3.Validity() <= 0 {
		t.Fatalf("the last reader: Err %v, Validity %s", r3.Err(), r3.Validity())
	}
	if err := r3.Release(ctx); err != nil {
		t.Fatalf("last release: %v", err)
	}
	eventually(t, 30*time.Second, "the entry off every master", func() bool { return e.entries(key, value) == 0 })
	w, err := wm.TryLock(ctx)
	if err != nil {
		t.Fatalf("writer after the last release: %v", err)
	}
	w.Release(ctx)
	// A reader after the last release takes an entry of its own.
	r4 := mustRLock(t, m, false)
	defer r4.Release(ctx)
	if engine.LeaseValue(r4) == value {
		t.Fatal("a reader after the last release joined the released entry")
	}
}

// TestRWShareOffWithoutGate: Config.Wait.DisableGate turns sharing off.
func TestRWShareOffWithoutGate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	l := e.locker(func(c *engine.Config) { c.Wait.DisableGate = true; patient(c) })
	m := rwMutex(t, l, "share-off")
	r1, r2 := mustRLock(t, m, false), mustRLock(t, m, false)
	defer r1.Release(context.Background())
	defer r2.Release(context.Background())
	if engine.LeaseValue(r1) == engine.LeaseValue(r2) {
		t.Fatal("readers shared an entry with the gate off")
	}
}

// TestRWShareLost: the shared entry taken off a quorum of masters ends
// every reader on it, as the tracker notices (Done of a joined reader
// watches the entry), with ErrLockLost; a reader after that takes a new
// entry, and the releases report the loss.
func TestRWShareLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	l := e.locker(patient)
	m := rwMutex(t, l, "share-lost")
	r1, r2 := mustRLock(t, m, false), mustRLock(t, m, false)
	key, value := engine.LeaseKeys(r1)[0], engine.LeaseValue(r1)
	if engine.LeaseValue(r2) != value {
		t.Fatal("the second reader did not join")
	}
	eventually(t, 30*time.Second, "the entry on every master", func() bool { return e.entries(key, value) == 5 })
	done := r2.Done()
	for i := range 3 {
		rwLossKinds[0].drop(e, i, r1, key)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a bound on a hang, not a timing
		t.Fatal("the joined reader's Done did not close after its entry left a quorum")
	}
	for i, r := range []*engine.Lease{r1, r2} {
		if !errors.Is(r.Err(), engine.ErrLockLost) {
			t.Fatalf("reader %d: Err %v, want ErrLockLost", i+1, r.Err())
		}
	}
	r3 := mustRLock(t, m, false)
	defer r3.Release(ctx)
	if engine.LeaseValue(r3) == value {
		t.Fatal("a reader joined the lost entry")
	}
	if err := r1.Release(ctx); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("release of a lost reader: %v, want ErrNotHeld", err)
	}
	if err := r2.Release(ctx); err == nil {
		t.Fatal("the last release of a lost entry reported success")
	}
}

// TestRWShareExtend, in virtual time: Extend of a joined reader extends
// the shared entry: every reader's validity moves with it, longer or
// shorter, and the masters vouch for it.
func TestRWShareExtend(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		ctx := context.Background()
		l := e.locker(func(c *engine.Config) { c.TTL, c.MaxTTL = 10*time.Second, 30*time.Second })
		m := rwMutex(t, l, "share-extend")
		r1, r2 := mustRLock(t, m, false), mustRLock(t, m, false)
		defer r1.Release(ctx)
		defer r2.Release(ctx)
		time.Sleep(time.Second)
		if err := r2.Extend(ctx, 25*time.Second); err != nil {
			t.Fatal(err)
		}
		if r1.Validity() < 24*time.Second || !r1.ValidUntil().Equal(r2.ValidUntil()) {
			t.Fatalf("after the joined reader's Extend to 25s: validities %s and %s", r1.Validity(), r2.Validity())
		}
		if v, err := r1.RemoteValidity(ctx); err != nil || v < 24*time.Second {
			t.Fatalf("RemoteValidity after the Extend: %s, %v", v, err)
		}
		if err := r1.Extend(ctx, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if r2.Validity() > 2*time.Second || !r1.ValidUntil().Equal(r2.ValidUntil()) {
			t.Fatalf("after an Extend to 2s: validities %s and %s", r1.Validity(), r2.Validity())
		}
	})
}

// TestRWShareAutoExtend, in virtual time: the shared entry's
// auto-extension carries every reader on it, the first one released or
// not, up to MaxExtensions counted from the entry's acquisition; with
// none left, a reader takes an entry of its own, and the joined readers
// end when the entry expires. MaxTTL is long enough that no reader's
// attempt is due to mark the name's kind (every MaxTTL/2), which a join
// would leave to an attempt of its own.
func TestRWShareAutoExtend(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		ctx := context.Background()
		const ttl = time.Second
		l := e.locker(func(c *engine.Config) {
			c.TTL, c.AutoExtend, c.ExtendEvery, c.MaxExtensions = ttl, true, ttl/3, 3
			c.MaxTTL = 4 * ttl
		})
		m := rwMutex(t, l, "share-auto")
		r1, r2 := mustRLock(t, m, false), mustRLock(t, m, false)
		if engine.LeaseValue(r2) != engine.LeaseValue(r1) {
			t.Fatal("the second reader did not join")
		}
		if err := r1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2*ttl/3 + ttl/10)
		if n := r2.Extensions(); n != 2 || r2.Err() != nil || r2.Validity() < ttl/2 {
			t.Fatalf("two extension periods in: %d extensions, Err %v, validity %s", n, r2.Err(), r2.Validity())
		}
		r3 := mustRLock(t, m, false)
		if engine.LeaseValue(r3) != engine.LeaseValue(r2) {
			t.Fatal("with an extension left, the reader did not join")
		}
		time.Sleep(ttl / 3)
		if n := r2.Extensions(); n != 3 {
			t.Fatalf("three periods in: %d extensions", n)
		}
		r4 := mustRLock(t, m, false)
		defer r4.Release(ctx)
		if engine.LeaseValue(r4) == engine.LeaseValue(r2) {
			t.Fatal("with no extension left, the reader joined")
		}
		<-r3.Done()
		if !errors.Is(r3.Err(), engine.ErrLeaseExpired) || !errors.Is(r2.Err(), engine.ErrLeaseExpired) {
			t.Fatalf("after MaxExtensions: %v, %v", r2.Err(), r3.Err())
		}
		r2.Release(ctx)
		r3.Release(ctx)
	})
}

// rwShareIntent: a reader of Locker A holds; a writer of Locker B waits
// (Lock), its intent on every master; a second reader of A tries. It
// returns that reader's error (nil: it joined), and checks that the
// writer gets the lock once the readers released.
func rwShareIntent(t *testing.T, e *env) error {
	ctx := context.Background()
	// A TTL that outlasts the test on a loaded machine: were r1 to
	// expire first, the writer would take the lock and its intent go.
	cfg := e.steady(func(c *engine.Config) { c.TTL = time.Minute })
	a, b := e.locker(cfg), e.locker(cfg)
	m, wm := rwMutex(t, a, "share-intent"), rwMutex(t, b, "share-intent")
	r1 := mustRLock(t, m, false)
	key := engine.LeaseKeys(r1)[0]
	// The entry on every master before the writer comes: where it were
	// not yet, the writer would be admitted and undo, leaving no intent
	// there, and sleep (refused by readers on a quorum) until a release.
	eventually(t, 30*time.Second, "the reader's entry on every master", func() bool {
		return !slices.Contains(e.readersOn(key), 0)
	})
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		w, err := wm.Lock(wctx)
		if err == nil {
			w.Release(ctx)
		}
		got <- err
	}()
	eventually(t, 30*time.Second, "the writer's intent on every master", func() bool { return e.intentOn(key) == 5 })
	r2, err := m.TryRLock(ctx)
	if err == nil {
		r2.Release(ctx)
	}
	r1.Release(ctx)
	if werr := <-got; werr != nil {
		t.Fatalf("the writer: %v", werr)
	}
	return err
}

// TestRWShareIntentStopsJoin: a waiting writer's intent stops a join as it
// stops a new reader: refused, as contention.
func TestRWShareIntentStopsJoin(t *testing.T) {
	t.Parallel()
	if err := rwShareIntent(t, newEnv(t, 5)); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("a reader beside a shared entry while a writer waits: %v, want ErrNotAcquired", err)
	}
}

// TestRWShareIntentStopsJoinInVirtualTime is the same in virtual time.
func TestRWShareIntentStopsJoinInVirtualTime(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		if err := rwShareIntent(t, e); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("a reader beside a shared entry while a writer waits: %v, want ErrNotAcquired", err)
		}
	})
}

// TestRWShareJoinIgnoringIntentControl: with the join's intent check
// undone (mutation.RWJoinIgnoresIntent), the same schedule, in virtual
// time, has the reader join while the writer waits.
func TestRWShareJoinIgnoringIntentControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.RWJoinIgnoresIntent.Set(true)()
	simTest(t, 5, func(t *testing.T, e *env) {
		if err := rwShareIntent(t, e); err != nil {
			t.Fatalf("with the intent check undone the reader was refused (%v): the test cannot fail", err)
		}
	})
}

// TestRWShareFloor, in virtual time: a reader joins while the shared
// entry keeps at least half its TTL of validity, with the entry's
// validity, never more; past that floor it takes an entry of its own.
// The joined readers end when the entry expires.
func TestRWShareFloor(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		ctx := context.Background()
		const ttl = time.Second
		l := e.locker(func(c *engine.Config) { c.TTL = ttl })
		m := rwMutex(t, l, "share-floor")
		r1 := mustRLock(t, m, false)
		time.Sleep(ttl / 4)
		r2 := mustRLock(t, m, false)
		if engine.LeaseValue(r2) != engine.LeaseValue(r1) || !r2.ValidUntil().Equal(r1.ValidUntil()) {
			t.Fatalf("a quarter TTL in, the reader did not join with the entry's validity (%v, entry's %v)", r2.ValidUntil(), r1.ValidUntil())
		}
		time.Sleep(ttl / 3)
		r3 := mustRLock(t, m, false)
		defer r3.Release(ctx)
		if engine.LeaseValue(r3) == engine.LeaseValue(r1) {
			t.Fatalf("with %s of validity left of a TTL of %s, the reader joined", r1.Validity(), ttl)
		}
		<-r2.Done()
		if !errors.Is(r2.Err(), engine.ErrLeaseExpired) || time.Now().Before(r1.ValidUntil()) {
			t.Fatalf("joined reader ended at %v (entry valid until %v): %v", time.Now(), r1.ValidUntil(), r2.Err())
		}
		if !errors.Is(r1.Err(), engine.ErrLeaseExpired) {
			t.Fatalf("the first reader: %v", r1.Err())
		}
		// The next reader joins r3's entry, not the expired one.
		r4 := mustRLock(t, m, false)
		defer r4.Release(ctx)
		if engine.LeaseValue(r4) != engine.LeaseValue(r3) {
			t.Fatal("a reader did not join the live entry")
		}
	})
}

// TestRWShareClose: a Locker closed refuses joins, and a joined reader's
// Release sends nothing, as any lease's.
func TestRWShareClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	l := e.locker(patient)
	m := rwMutex(t, l, "share-close")
	r1, r2 := mustRLock(t, m, false), mustRLock(t, m, false)
	l.Close()
	if _, err := m.TryRLock(context.Background()); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("a read lock after Close: %v, want ErrClosed", err)
	}
	if err := r2.Release(context.Background()); err != nil {
		t.Fatalf("a joined reader's Release after Close: %v", err)
	}
	if err := r1.Release(context.Background()); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("the last Release after Close: %v, want ErrClosed", err)
	}
}

// TestRWShareJoinKeepsTheEntryWhileItAsks, in virtual time: a join whose
// intent check is held at the gates counts on the share, so the other
// reader's Release, the last but for it, sends nothing; once the check
// comes back with no intent the reader joins the entry still on every
// master; with an intent on a quorum it gives the entry up, as the last
// reader on it, and is refused.
func TestRWShareJoinKeepsTheEntryWhileItAsks(t *testing.T) {
	for _, intent := range []bool{false, true} {
		simTest(t, 5, func(t *testing.T, e *env) {
			ctx := context.Background()
			l, gates := e.gatedLocker(nil)
			m := rwMutex(t, l, "share-ask")
			r1 := mustRLock(t, m, false)
			key, value := engine.LeaseKeys(r1)[0], engine.LeaseValue(r1)
			eventually(t, 5*time.Second, "the entry on every master", func() bool { return e.entries(key, value) == 5 })
			if intent {
				for _, c := range e.direct[:3] {
					score := float64(time.Now().Add(time.Hour).UnixMicro())
					if err := c.Do(ctx, c.B().Zadd().Key(engine.RWIntentsKey(key)).ScoreMember().ScoreMember(score, "w").Build()).Error(); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, g := range gates {
				g.close()
			}
			type result struct {
				le  *engine.Lease
				err error
			}
			got := make(chan result, 1)
			go func() {
				le, err := m.TryRLock(ctx)
				got <- result{le, err}
			}()
			eventually(t, 5*time.Second, "the join's check held at every gate", func() bool {
				for _, g := range gates {
					if !g.holding() {
						return false
					}
				}
				return true
			})
			if err := r1.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if n := e.entries(key, value); n != 5 {
				t.Fatalf("released while a join asked: the entry on %d masters, want 5", n)
			}
			for _, g := range gates {
				g.open()
			}
			r := <-got
			if !intent {
				if r.err != nil || engine.LeaseValue(r.le) != value {
					t.Fatalf("no intent: the reader did not join (%v)", r.err)
				}
				if err := r.le.Release(ctx); err != nil {
					t.Fatal(err)
				}
			} else if !errors.Is(r.err, engine.ErrNotAcquired) {
				t.Fatalf("an intent on a quorum: the reader got %v, want ErrNotAcquired", r.err)
			}
			eventually(t, 5*time.Second, "the entry off every master", func() bool { return e.entries(key, value) == 0 })
		})
	}
}

// TestRWShareReadersWaitForOneAttempt, in virtual time: readers of one
// Locker that find no entry while one of them acquires the lock on the
// masters wait for it and join what it acquired: one entry on every
// master, not one each.
func TestRWShareReadersWaitForOneAttempt(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		ctx := context.Background()
		l, gates := e.gatedLocker(nil)
		m := rwMutex(t, l, "share-flight")
		for _, g := range gates {
			g.close()
		}
		const readers = 3
		got := make(chan *engine.Lease, readers)
		for range readers {
			go func() {
				le, err := m.TryRLock(ctx)
				if err != nil {
					t.Errorf("reader: %v", err)
				}
				got <- le
			}()
		}
		eventually(t, 5*time.Second, "an attempt held at every gate", func() bool {
			for _, g := range gates {
				if !g.holding() {
					return false
				}
			}
			return true
		})
		for _, g := range gates {
			g.open()
		}
		var les []*engine.Lease
		for range readers {
			les = append(les, <-got)
		}
		key := engine.LeaseKeys(les[0])[0]
		for i, le := range les {
			if engine.LeaseValue(le) != engine.LeaseValue(les[0]) {
				t.Fatalf("reader %d holds an entry of its own", i)
			}
		}
		for i, n := range e.readersOn(key) {
			if n != 1 {
				t.Fatalf("master %d holds %d readers' entries, want 1", i, n)
			}
		}
		for _, le := range les {
			le.Release(ctx)
		}
	})
}
