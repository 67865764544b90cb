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
	"github.com/redlock-bench/redlock/internal/mutation"
)

// rwLocker is a Locker on e's masters for the read/write lock's tests:
// fencing on, short back-offs, and a TTL and node timeout far beyond
// what a test on real masters waits for, so that a loaded machine
// neither expires a lease nor times a master out under it; the tests
// that the clock decides run in virtual time (mutate may change more).
func rwLocker(e *env, mutate func(*engine.Config)) *engine.Locker {
	return e.locker(func(c *engine.Config) {
		c.TTL = 30 * time.Second
		c.NodeTimeout = 10 * time.Second
		c.Fencing = true
		c.Wait.RetryDelayMin, c.Wait.RetryDelayMax = 2*time.Millisecond, 10*time.Millisecond
		if mutate != nil {
			mutate(c)
		}
	})
}

func rwMutex(t *testing.T, l *engine.Locker, name string) *engine.RWMutex {
	t.Helper()
	m, err := l.RWMutex(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func release(t *testing.T, le *engine.Lease) {
	t.Helper()
	if err := le.Release(context.Background()); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// Readers of several Lockers hold at once; a writer is refused while any
// holds, and holds alone; readers are refused while it holds.
func TestRWMutexReadersShareAndWritersExclude(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	var ms []*engine.RWMutex
	for range 3 {
		ms = append(ms, rwMutex(t, rwLocker(e, nil), "doc"))
	}
	var readers []*engine.Lease
	for i, m := range ms {
		le, err := m.TryRLock(ctx)
		if err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
		if le.Token() != 0 || le.Validity() <= 0 || le.Resource() != "doc" {
			t.Fatalf("reader %d: token %d, validity %s, resource %q", i, le.Token(), le.Validity(), le.Resource())
		}
		readers = append(readers, le)
	}
	_, err := ms[0].TryLock(ctx)
	if !errors.Is(err, engine.ErrNotAcquired) || !strings.Contains(err.Error(), "readers hold it") {
		t.Fatalf("writer while readers hold: %v", err)
	}
	for _, le := range readers {
		release(t, le)
	}
	w, err := ms[1].TryLock(ctx)
	if err != nil {
		t.Fatalf("writer after the readers left: %v", err)
	}
	if w.Token() == 0 {
		t.Fatal("a fenced writer has no token")
	}
	_, err = ms[2].TryRLock(ctx)
	if !errors.Is(err, engine.ErrNotAcquired) || !strings.Contains(err.Error(), "a writer holds it") {
		t.Fatalf("reader while a writer holds: %v", err)
	}
	// The refused reader's undo reaches the masters it was admitted on
	// after TryRLock returns; a writer's attempt there before it would be
	// refused by that reader's entry too.
	eventually(t, 30*time.Second, "the refused reader's entries undone", func() bool {
		return !slices.ContainsFunc(e.readersOn(e.key("doc")), func(n int64) bool { return n != 0 })
	})
	_, err = ms[2].TryLock(ctx)
	if !errors.Is(err, engine.ErrNotAcquired) || !strings.Contains(err.Error(), "a writer holds it") {
		t.Fatalf("writer while a writer holds: %v", err)
	}
	release(t, w)
	w2, err := ms[2].TryLock(ctx)
	if err != nil {
		t.Fatalf("second writer: %v", err)
	}
	if w2.Token() <= w.Token() {
		t.Fatalf("second writer's token %d, not above the first's %d", w2.Token(), w.Token())
	}
	release(t, w2)
	// Nothing is left behind: the lock's key goes with its last holder
	// (on a slow master, once the release reaches it).
	eventually(t, 30*time.Second, "the lock's key is gone from every master", func() bool {
		return !e.onAny(e.key("doc"))
	})
}

// onAny reports whether key exists on any master.
func (e *env) onAny(key string) bool {
	for i := range e.direct {
		if e.exists(i, key) {
			return true
		}
	}
	return false
}

// count is the number of masters where key exists.
func (e *env) count(key string) int {
	n := 0
	for i := range e.direct {
		if e.exists(i, key) {
			n++
		}
	}
	return n
}

// semCount is the permit count key of the semaphore name for e's Lockers,
// which a read/write lock of the name marks as its own.
func (e *env) semCount(name string) string {
	return fmt.Sprintf("\xffredlock:sem:%s{%s}:permits", e.prefix, name)
}

// rwIntents is the key of the read/write lock name's waiting writers'
// intents on e's masters; rwMark, its waiters' mark.
func (e *env) rwIntents(name string) string { return "\xffredlock:rw:" + e.key(name) }
func (e *env) rwMark(name string) string    { return "\xffredlock:rwmark:" + e.key(name) }

// exists reports whether key exists on master i.
func (e *env) exists(i int, key string) bool {
	e.t.Helper()
	c := e.direct[i]
	n, err := c.Do(context.Background(), c.B().Exists().Key(key).Build()).AsInt64()
	if err != nil {
		e.t.Fatalf("EXISTS on node %d: %v", i, err)
	}
	return n == 1
}

// A reader's and a writer's lease extend, end, and release as a lock's:
// in virtual time, where the TTLs, sleeps and expiry are exact.
func TestRWMutexLeaseIsALease(t *testing.T) {
	simTest(t, 3, testRWMutexLeaseIsALease)
}

func testRWMutexLeaseIsALease(t *testing.T, e *env) {
	ctx := context.Background()
	l := rwLocker(e, func(c *engine.Config) {
		c.TTL, c.MaxTTL, c.NodeTimeout = 300*time.Millisecond, 2*time.Second, 100*time.Millisecond
	})
	m := rwMutex(t, l, "lease")
	for _, writer := range []bool{false, true} {
		take := m.TryRLock
		if writer {
			take = m.TryLock
		}
		le, err := take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Extend(ctx, time.Second); err != nil {
			t.Fatalf("writer %v: extend: %v", writer, err)
		}
		time.Sleep(400 * time.Millisecond) // past the TTL it was taken with
		if le.Validity() <= 0 {
			t.Fatalf("writer %v: the extension did not hold", writer)
		}
		// The extension holds on the masters too.
		if _, err := m.TryLock(ctx); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("writer %v: a writer after the extension: %v", writer, err)
		}
		release(t, le)
		if !errors.Is(le.Err(), engine.ErrReleased) || !isClosed(le.Done()) {
			t.Fatalf("writer %v: after release: Err %v", writer, le.Err())
		}
		if err := le.Release(ctx); !errors.Is(err, engine.ErrNotHeld) {
			t.Fatalf("writer %v: second release: %v", writer, err)
		}
	}
	// An expired entry is never extended again, and its key goes.
	le, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(350 * time.Millisecond)
	if err := le.Extend(ctx, time.Second); err == nil {
		t.Fatal("an expired writer was extended")
	}
	if e.onAny("lease") {
		t.Error("a master still has the lock's key after its holder expired")
	}
	r, err := m.TryRLock(ctx)
	if err != nil {
		t.Fatalf("reader after the writer expired: %v", err)
	}
	release(t, r)
}

// A writer that waits keeps new readers out (TryRLock says why), and
// acquires once the reader it waited for releases, woken by that release.
func TestRWMutexWaitingWriterGoesFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	slow := func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = time.Minute, time.Minute }
	lr, lw := rwLocker(e, slow), rwLocker(e, slow)
	mr, mw := rwMutex(t, lr, "first"), rwMutex(t, lw, "first")
	r, err := mr.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		le  *engine.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		le, err := mw.Lock(wctx)
		got <- result{le, err}
	}()
	// Its intent is where its attempt was refused: on a quorum at least
	// (a master that the reader's attempt reached after the writer's
	// first may have admitted it).
	eventually(t, 30*time.Second, "the writer's intent is on a quorum", func() bool {
		return e.count(e.rwIntents("first")) > len(e.direct)/2
	})
	if _, err := mr.TryRLock(ctx); !errors.Is(err, engine.ErrNotAcquired) || !strings.Contains(err.Error(), "a writer waits for it") {
		t.Fatalf("a new reader while a writer waits: %v", err)
	}
	release(t, r)
	res := <-got
	if res.err != nil {
		t.Fatalf("writer: %v", res.err)
	}
	if w := res.le.Wait(); w.Cause != engine.WakeNotified {
		t.Fatalf("writer woken by %s, not the reader's release: %+v", w.Cause, w)
	}
	// A reader that waits is woken by the writer's release.
	rgot := make(chan result, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		le, err := mr.RLock(rctx)
		rgot <- result{le, err}
	}()
	// Its mark is where its attempt was refused: at least a quorum (the
	// writer may hold on a quorum only).
	eventually(t, 30*time.Second, "the reader's mark is on a quorum", func() bool {
		return e.count(e.rwMark("first")) > len(e.direct)/2
	})
	release(t, res.le)
	rres := <-rgot
	if rres.err != nil {
		t.Fatalf("reader: %v", rres.err)
	}
	if w := rres.le.Wait(); w.Cause != engine.WakeNotified {
		t.Fatalf("reader woken by %s, not the writer's release: %+v", w.Cause, w)
	}
	release(t, rres.le)
	eventually(t, 30*time.Second, "the lock's key and intents are gone from every master", func() bool {
		return !e.onAny(e.key("first")) && !e.onAny(e.rwIntents("first"))
	})
}

// A writer that gives up takes its intent out, and wakes the readers it
// kept out.
func TestRWMutexWriterThatGivesUpLetsReadersIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	ctx := context.Background()
	slow := func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = time.Minute, time.Minute }
	l1, l2 := rwLocker(e, slow), rwLocker(e, slow)
	m1, m2 := rwMutex(t, l1, "giveup"), rwMutex(t, l2, "giveup")
	r, err := m1.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() {
		_, err := m2.Lock(wctx)
		wdone <- err
	}()
	// Its intent is where its attempt was refused: on a quorum at least
	// (a master that the reader's attempt reached after the writer's
	// first may have admitted it).
	eventually(t, 30*time.Second, "the writer's intent is on a quorum", func() bool {
		return e.count(e.rwIntents("giveup")) > len(e.direct)/2
	})
	// The writer's attempts marked the lock too: take its mark off, so
	// that a mark on a quorum tells that the reader's attempt was refused.
	for i := range e.direct {
		e.del(i, e.rwMark("giveup"))
	}
	rdone := make(chan error, 1)
	var rle *engine.Lease
	go func() {
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		defer rcancel()
		var err error
		rle, err = m1.RLock(rctx)
		rdone <- err
	}()
	eventually(t, 30*time.Second, "the reader's mark is on a quorum", func() bool {
		return e.count(e.rwMark("giveup")) > len(e.direct)/2
	})
	cancel()
	if err := <-wdone; !errors.Is(err, context.Canceled) || !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("the writer that gave up: %v", err)
	}
	if err := <-rdone; err != nil {
		t.Fatalf("the reader kept out: %v", err)
	}
	if w := rle.Wait(); w.Cause != engine.WakeNotified {
		t.Fatalf("reader woken by %s, not the writer's leaving: %+v", w.Cause, w)
	}
	release(t, rle)
	release(t, r)
}

// One name is one kind of lock: a plain lock and a read/write lock of the
// same name refuse each other, each way, as do a semaphore and a
// read/write lock; each error names the resource and both uses.
//
// Each error is what the masters that answered first say, so each use is
// on every master before the other is asked for: an acquire returns at a
// quorum, and its write on the third master may come after the other
// use's attempt there, which that master grants. And each pair of uses
// has a name of its own: an attempt decided without one master's answer
// may still run there after the use that refused it is released (the
// engine undoes it once that answer arrives), so a later step on the
// same name could find it there, on one master, and be refused by it.
func TestRWMutexRefusesANameUsedOtherwise(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	ctx := context.Background()
	l := rwLocker(e, nil)
	plain := rwLocker(e, func(c *engine.Config) { c.Fencing = false })
	onEvery := func(what, key string) {
		t.Helper()
		eventually(t, 30*time.Second, what+" on every master", func() bool { return e.count(key) == len(e.direct) })
	}
	check := func(what string, err error, uses ...string) {
		t.Helper()
		if !errors.Is(err, engine.ErrWrongKind) || !errors.Is(err, engine.ErrWrongType) {
			t.Fatalf("%s: %v", what, err)
		}
		for _, u := range uses {
			if !strings.Contains(err.Error(), u) {
				t.Errorf("%s: the error does not name %q: %v", what, u, err)
			}
		}
		if strings.Count(err.Error(), "engine: ") != 1 || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: not one line starting engine: once: %v", what, err)
		}
	}
	for _, c := range []struct {
		lk          *engine.Locker
		first, then string // the names of the plain lock first, of the read/write lock first
	}{{l, "plain-fenced", "rw-fenced"}, {plain, "plain", "rw"}} {
		lk := c.lk
		// A plain lock held, then the read/write lock asked for.
		le, err := lk.TryLock(ctx, c.first)
		if err != nil {
			t.Fatal(err)
		}
		onEvery("the plain lock", e.key(c.first))
		m := rwMutex(t, l, c.first)
		name := strconv.Quote(c.first)
		_, err = m.TryRLock(ctx)
		check("read/write lock on a plain lock", err, name, "plain lock", "read/write lock")
		_, err = m.TryLock(ctx)
		check("writer on a plain lock", err, name, "plain lock", "read/write lock")
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = m.Lock(wctx)
		cancel()
		check("waiting writer on a plain lock", err, "plain lock")
		release(t, le)

		// The read/write lock held, then a plain lock asked for.
		r, err := rwMutex(t, l, c.then).TryRLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		onEvery("the reader", e.key(c.then))
		name = strconv.Quote(c.then)
		_, err = lk.TryLock(ctx, c.then)
		check("plain lock on a read/write lock", err, name, "plain lock", "read/write lock")
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = lk.Lock(lctx, c.then)
		cancel()
		check("Lock on a read/write lock", err, "read/write lock")
		release(t, r)
	}

	// A semaphore in use, then the read/write lock.
	s, err := l.Semaphore("pool", 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	onEvery("the semaphore's permit count", e.semCount("pool"))
	m := rwMutex(t, l, "pool")
	_, err = m.TryRLock(ctx)
	check("read/write lock on a semaphore", err, `"pool"`, "semaphore", "read/write lock")
	release(t, p)

	// The read/write lock in use, then a semaphore.
	m2 := rwMutex(t, l, "gate")
	r, err := m2.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	onEvery("the reader", e.key("gate"))
	onEvery("the read/write lock's mark of the permit count", e.semCount("gate"))
	s2, err := l.Semaphore("gate", 2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s2.TryAcquire(ctx)
	check("semaphore on a read/write lock", err, `"gate"`, "semaphore", "read/write lock")
	release(t, r)
}

// Many readers of one Locker hold at once, and two writers' turns come
// between them; no reader or writer overlaps a writer. In virtual time,
// where the readers' 5 ms holds overlap as written; on a loaded machine
// they need not.
func TestRWMutexConcurrentReadersAndWriters(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		if maxReaders := rwConcurrent(t, e, 10*time.Second); maxReaders < 2 {
			t.Errorf("at most %d reader at once: readers do not share", maxReaders)
		}
	})
}

// TestRWMutexConcurrentReadersAndWritersOnRealMasters runs the same on
// the pool's masters, for the goroutines' real races: no reader or writer
// overlaps a writer.
func TestRWMutexConcurrentReadersAndWritersOnRealMasters(t *testing.T) {
	t.Parallel()
	maxReaders := rwConcurrent(t, newEnv(t, 5), time.Minute)
	t.Logf("at most %d readers at once", maxReaders)
}

// rwConcurrent runs six readers' and two writers' goroutines of one
// Locker, ten holds each by a deadline of within, checks that no holder
// overlapped a writer, and returns the most readers that held at once.
func rwConcurrent(t *testing.T, e *env, within time.Duration) int {
	l := rwLocker(e, nil)
	m := rwMutex(t, l, "busy")
	var mu sync.Mutex
	readers, writers, maxReaders := 0, 0, 0
	var wg sync.WaitGroup
	fail := make(chan string, 100)
	for g := range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), within)
			defer cancel()
			for range 10 {
				writer := g < 2 // two writers of one Locker: one waits at its gate
				var le *engine.Lease
				var err error
				if writer {
					le, err = m.Lock(ctx)
				} else {
					le, err = m.RLock(ctx)
				}
				if err != nil {
					fail <- err.Error()
					return
				}
				mu.Lock()
				if writer {
					writers++
					if writers > 1 || readers > 0 {
						fail <- "a writer overlapped another holder"
					}
				} else {
					readers++
					maxReaders = max(maxReaders, readers)
					if writers > 0 {
						fail <- "a reader overlapped a writer"
					}
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond) // the hold, while the others try
				mu.Lock()
				if writer {
					writers--
				} else {
					readers--
				}
				mu.Unlock()
				if err := le.Release(context.Background()); err != nil {
					fail <- err.Error()
					return
				}
			}
		})
	}
	wg.Wait()
	close(fail)
	for f := range fail {
		t.Error(f)
	}
	return maxReaders
}

// Close ends the waits of readers and writers with ErrClosed, and takes
// the waiting writer's intent off the masters.
func TestRWMutexWaitsEndAtClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	ctx := context.Background()
	holder := rwMutex(t, rwLocker(e, nil), "closing")
	l := rwLocker(e, nil)
	m := rwMutex(t, l, "closing")
	r, err := holder.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, r)
	errs := make(chan error, 2)
	go func() {
		_, err := m.Lock(ctx)
		errs <- err
	}()
	// Its intent is where its attempt was refused: on a quorum at least
	// (a master that the reader's attempt reached after the writer's
	// first may have admitted it).
	eventually(t, 30*time.Second, "the writer's intent is on a quorum", func() bool {
		return e.count(e.rwIntents("closing")) > len(e.direct)/2
	})
	go func() {
		_, err := m.RLock(ctx)
		errs <- err
	}()
	// The reader waits too once it subscribed to the lock's releases,
	// beside the writer's subscription to the intents'.
	eventually(t, 30*time.Second, "the reader subscribed", func() bool { return l.Subscriptions() == 2 })
	l.Close()
	for range 2 {
		if err := <-errs; !errors.Is(err, engine.ErrClosed) {
			t.Fatalf("a wait at Close: %v", err)
		}
	}
	if e.onAny(e.rwIntents("closing")) {
		t.Error("a master keeps the intent of a writer whose Locker closed")
	}
}

// A writer whose Locker waited for the lock lately (its subscription
// lingers) registers its intent with its next attempt, as a first waiter
// does, not after a fallback: in virtual time, on a quorum within 100 ms
// (a few round trips, simredis's latency being at most 20 ms a way), where
// the fallback would take 5 s.
func TestRWMutexLingeringWaiterMarksAtOnce(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) { rwLingering(t, e, 5*time.Second, 100*time.Millisecond) })
}

// TestRWMutexLingeringWaiterMarksAtOnceOnRealMasters is the same on the
// pool's masters with a fallback of a minute: an intent that comes within
// half of it came before the fallback.
func TestRWMutexLingeringWaiterMarksAtOnceOnRealMasters(t *testing.T) {
	t.Parallel()
	rwLingering(t, newEnv(t, 3), time.Minute, 30*time.Second)
}

// rwLingering runs the scenario on e with the writer's fallback; its
// intent must be on a quorum within prompt of its Lock call.
func rwLingering(t *testing.T, e *env, fallback, prompt time.Duration) {
	ctx := context.Background()
	slow := func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = fallback, fallback }
	mr, mw := rwMutex(t, rwLocker(e, slow), "linger"), rwMutex(t, rwLocker(e, slow), "linger")
	for round := range 2 {
		r, err := mr.TryRLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, fallback-time.Second)
			defer cancel()
			le, err := mw.Lock(wctx)
			if err == nil {
				err = le.Release(ctx)
			}
			got <- err
		}()
		if !within(prompt, func() bool { return e.count(e.rwIntents("linger")) > len(e.direct)/2 }) {
			t.Fatalf("round %d: the writer's intent is not on a quorum within %s", round, prompt)
		}
		release(t, r)
		if err := <-got; err != nil {
			t.Fatalf("round %d: writer: %v", round, err)
		}
	}
}

// A watched holder (its Done in use) stays held while the lock's sorted
// set changes under it: another reader comes and goes, or the holder
// extends. The loss tracker reads a read/write holder's member, not the
// key's value as a plain lock's: a change to the set is no loss while
// the member is there. Its control reads the key as a plain lock's
// (mutation.RWTrackedAsPlain) and must see the holder end. Both wait for
// the tracker's reads (CLIENT TRACKING, which only real masters have),
// on the pool's.
func TestRWMutexWatchedLeaseIsNotLostToChanges(t *testing.T) {
	t.Parallel()
	if err := watchedRWLeaseLost(t, newEnv(t, 3), "watched", false); err != nil {
		t.Fatal(err)
	}
}

func TestRWMutexWatchedLeaseIsNotLostToChangesControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.RWTrackedAsPlain.Set(true)()
	err := watchedRWLeaseLost(t, newEnv(t, 3), "watched-control", true)
	if err == nil {
		t.Fatal("the holders stood with the tracker reading their key as a plain lock's: the check cannot fail")
	}
	t.Logf("caught: %v", err)
}

// judged waits until l's tracker has judged n more reads than from, or
// done closed.
func judged(t *testing.T, l *engine.Locker, from int64, n int, done <-chan struct{}) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%d tracker reads or the lease's end", n), func() bool {
		select {
		case <-done:
			return true
		default:
			return l.TrackerReads() >= from+int64(n)
		}
	})
}

// ended reports whether done is closed; with wait (a control, which
// expects the end), once it closes, or after 30 s.
func ended(done <-chan struct{}, wait bool) bool {
	if !wait {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	select {
	case <-done:
		return true
	case <-time.After(30 * time.Second):
		return false
	}
}

// watchedRWLeaseLost watches a reader, then a writer, of an rw lock while
// the set changes, and says whether either ended while it held. Each
// change makes every master's tracking connection read the key again: a
// loss shows once the tracker has judged those reads (with lost, which
// expects one, as soon as the lease ends).
func watchedRWLeaseLost(t *testing.T, e *env, name string, lost bool) error {
	ctx := context.Background()
	l := rwLocker(e, nil)
	m := rwMutex(t, l, name)
	from := l.TrackerReads()
	r, err := m.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := r.Done()
	// The tracker has judged the reader on every master, or ended it.
	judged(t, l, from, len(e.direct), done)
	from = l.TrackerReads()
	for range 3 {
		other, err := m.TryRLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		release(t, other)
	}
	if err := r.Extend(ctx, 2*time.Second); err != nil {
		return fmt.Errorf("the reader's Extend: %w", err)
	}
	judged(t, l, from, len(e.direct), done)
	if ended(done, lost) {
		return fmt.Errorf("the reader's lease ended while it held: %w", r.Err())
	}
	release(t, r)
	from = l.TrackerReads()
	w, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done = w.Done()
	judged(t, l, from, len(e.direct), done)
	from = l.TrackerReads()
	if err := w.Extend(ctx, 2*time.Second); err != nil {
		return fmt.Errorf("the writer's Extend: %w", err)
	}
	judged(t, l, from, len(e.direct), done)
	if ended(done, lost) {
		return fmt.Errorf("the writer's lease ended while it held: %w", w.Err())
	}
	release(t, w)
	return nil
}
