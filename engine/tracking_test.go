package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// The tests of the at-once loss notice (engine/tracking.go): a watched
// lease whose keys vanish on a quorum of the masters ends as soon as the
// tracker has read them, far sooner than its next extension, and a lease
// whose keys a quorum still holds never ends for what its holder, its
// waiters or a minority of outside writes do to them. CLIENT TRACKING is
// Redis's: these tests run on real masters, and wait for the tracker's
// reads (TrackerReads counts a read once the leases it found lost have
// ended; they count from a settled tracker, see awaitTracked) or for
// Done, not for durations. An acquire returns once a quorum answered: a
// test waits for every master's answer (awaitAnswered) before it changes
// the keys, or a late SET could land after its change and undo it.

const (
	// lossTTL: the leases here would learn of a loss from their next
	// extension only after lossTTL/3, 40 s, or at their expiry.
	lossTTL = 2 * time.Minute
	// lossBound is how long a test waits for the tracker's reads, or for
	// Done after the keys vanished on a quorum: they take milliseconds,
	// and a test fails on it only when they do not come at all before
	// the next extension would.
	lossBound = 30 * time.Second
)

// lossKind is a kind of lease, taken by take on a Locker of its own.
type lossKind struct {
	name string
	take func(t *testing.T, l *engine.Locker, resource string) *engine.Lease
	auto bool // the Locker auto-extends
	// lose takes the lease's key from master i; nil: DEL.
	lose func(e *env, i int, le *engine.Lease, key string)
}

var lossKinds = []lossKind{
	{name: "lock", take: func(t *testing.T, l *engine.Locker, r string) *engine.Lease {
		le, err := l.TryLock(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		return le
	}},
	{name: "auto-extended lock", auto: true, take: func(t *testing.T, l *engine.Locker, r string) *engine.Lease {
		le, err := l.TryLock(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		return le
	}},
	{name: "permit", take: func(t *testing.T, l *engine.Locker, r string) *engine.Lease {
		sem, err := l.Semaphore(r, 2)
		if err != nil {
			t.Fatal(err)
		}
		le, err := sem.TryAcquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return le
	}},
	{name: "multi", take: func(t *testing.T, l *engine.Locker, r string) *engine.Lease {
		le, err := l.TryLockAll(context.Background(), r+":a", r+":b", r+":c")
		if err != nil {
			t.Fatal(err)
		}
		return le
	}},
}

// rwLossKinds are a read/write lock's reader, whose member is taken out
// of the sorted set (another reader's stays), and its writer, whose key
// is deleted: the tracker reads each one's member with ZSCORE.
var rwLossKinds = []lossKind{
	{name: "read lease", take: func(t *testing.T, l *engine.Locker, r string) *engine.Lease {
		m, err := l.RWMutex(r)
		if err != nil {
			t.Fatal(err)
		}
		other, err := m.TryRLock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Release(context.Background()) })
		// Its late ZADD would be a change of the key the tracker reads.
		awaitAnswered(t, other)
		le, err := m.TryRLock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return le
	}, lose: func(e *env, i int, le *engine.Lease, key string) {
		c := e.direct[i]
		if err := c.Do(context.Background(), c.B().Zrem().Key(key).Member(engine.LeaseValue(le)).Build()).Error(); err != nil {
			e.t.Fatalf("ZREM on node %d: %v", i, err)
		}
	}},
	{name: "write lease", take: func(t *testing.T, l *engine.Locker, r string) *engine.Lease {
		m, err := l.RWMutex(r)
		if err != nil {
			t.Fatal(err)
		}
		le, err := m.TryLock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return le
	}},
}

// trackedKinds are the kinds the tracker watches: lossKinds and the
// read/write lock's.
var trackedKinds = append(lossKinds[:len(lossKinds):len(lossKinds)], rwLossKinds...)

// drop takes le's key from master i as k does.
func (k lossKind) drop(e *env, i int, le *engine.Lease, key string) {
	if k.lose != nil {
		k.lose(e, i, le, key)
		return
	}
	e.del(i, key)
}

// lossLocker is a Locker on e's masters with the long TTL.
func (k lossKind) locker(e *env, mutate func(*engine.Config)) *engine.Locker {
	return e.locker(func(c *engine.Config) {
		c.TTL = lossTTL
		c.AutoExtend = k.auto
		// Every master answers the acquire, and the dials at New, however
		// loaded the machine.
		everyVoteAnswered(c)
		if mutate != nil {
			mutate(c)
		}
	})
}

// awaitAnswered waits until every master has answered le's acquire, so
// that no SET of it is still on its way to undo a change the test makes.
func awaitAnswered(t *testing.T, le *engine.Lease) {
	t.Helper()
	eventually(t, lossBound, "the acquire answered by every master", func() bool { return engine.AnsweredEverywhere(le) })
}

// awaitTracked waits until the tracker, watching le, has settled with
// every master holding its keys: it has read them on each, and asked
// each to push their next change.
func awaitTracked(t *testing.T, le *engine.Lease) {
	t.Helper()
	eventually(t, lossBound, "the tracker settled with the lease's keys on every master", func() bool {
		gone, settled := engine.TrackerGone(le)
		return settled && gone == 0
	})
}

// awaitReads waits until l's tracker has judged n more reads than from.
func awaitReads(t *testing.T, l *engine.Locker, from int64, n int) {
	t.Helper()
	eventually(t, lossBound, fmt.Sprintf("%d tracker reads", n), func() bool { return l.TrackerReads() >= from+int64(n) })
}

// readsEnded waits until l's tracker has judged n more reads than from,
// or done closed, and says whether done closed. A change of a watched key
// on a master is pushed to the tracker, which reads the key there once:
// once it has judged the reads of a change on a quorum, a lease they
// found lost has ended. The count holds when from was taken with the
// tracker settled (awaitTracked) and every acquire answered: no other
// read (a late answer's, a late SET's push) is left to stand in for the
// change's.
func readsEnded(t *testing.T, l *engine.Locker, from int64, n int, done <-chan struct{}) bool {
	t.Helper()
	eventually(t, lossBound, fmt.Sprintf("%d tracker reads or the lease's end", n), func() bool {
		return closed(done) || l.TrackerReads() >= from+int64(n)
	})
	return closed(done)
}

// noticed takes a lease of kind k, watches it, deletes one of its keys
// on a quorum of e's masters (the middle one, for a lease on several),
// and says whether Done had closed once the tracker judged the key's
// reads there, with Err as it should be.
func noticed(t *testing.T, e *env, k lossKind, resource string) error {
	l := k.locker(e, nil)
	le := k.take(t, l, resource)
	awaitAnswered(t, le)
	done := le.Done()
	keys := engine.LeaseKeys(le)
	// The first reads tell the tracker the keys are the lease's, and ask
	// the masters to push their next change.
	awaitTracked(t, le)
	key := keys[len(keys)/2]
	from := l.TrackerReads()
	for i := range l.Quorum() {
		k.drop(e, i, le, key)
	}
	if !readsEnded(t, l, from, l.Quorum(), done) {
		return fmt.Errorf("%s: Done open once the tracker read its key gone on a quorum (Err %v)", k.name, le.Err())
	}
	err := le.Err()
	if !errors.Is(err, engine.ErrLockLost) || !errors.Is(err, engine.ErrNotHeld) || le.Validity() != 0 || le.Context().Err() == nil {
		return fmt.Errorf("%s: after the loss: Err %v, Validity %s, Context %v", k.name, err, le.Validity(), le.Context().Err())
	}
	t.Logf("%s: %v", k.name, err)
	return nil
}

// TestLossNoticedAtOnce: a lock, an auto-extended lock, a semaphore permit,
// a lease on three resources, and a read/write lock's reader and writer
// have each ended once the tracker has read a key of theirs (a reader's
// member) gone on a quorum, where their next extension would come after
// 40 s and their expiry after 2 minutes.
func TestLossNoticedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	for _, k := range trackedKinds {
		if err := noticed(t, e, k, "noticed:"+k.name); err != nil {
			t.Error(err)
		}
	}
}

// TestLossNoticedAtOnceControl turns the notice off
// (mutation.LossNoticedLate: the tracker reads the keys but never ends a
// lease) and must see TestLossNoticedAtOnce's check fail for every kind.
// The check waits for the tracker's reads, not for a duration: it cannot
// miss.
func TestLossNoticedAtOnceControl(t *testing.T) {
	mutation.Require(t)
	e := newEnv(t, 5)
	defer mutation.LossNoticedLate.Set(true)()
	for _, k := range trackedKinds {
		t.Run(k.name, func(t *testing.T) {
			err := noticed(t, e, k, "control:"+k.name)
			if err == nil {
				t.Fatal("the loss was noticed with the tracker's notice off: the check cannot fail")
			}
			t.Logf("caught: %v", err)
		})
	}
}

// TestLossNoticedForEachChange: the key deleted, overwritten, flushed
// with the rest of the masters' keys, or expired after another client
// shortened its TTL, on a quorum: each ends a watched lease, long before
// its expiry (it has no extension). On masters of its own: FLUSHALL.
func TestLossNoticedForEachChange(t *testing.T) {
	e := ownEnv(t, 5)
	l := lossKinds[0].locker(e, nil)
	changes := []struct {
		name   string
		change func(i int, key string)
	}{
		{"del", func(i int, key string) { e.del(i, key) }},
		{"set", func(i int, key string) { e.set(i, key, "stranger") }},
		{"flushall", func(i int, key string) {
			if err := e.direct[i].Do(context.Background(), e.direct[i].B().Flushall().Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}},
		{"expire", func(i int, key string) {
			c := e.direct[i]
			if err := c.Do(context.Background(), c.B().Pexpire().Key(key).Milliseconds(200).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range changes {
		le, err := l.TryLock(context.Background(), "change:"+c.name)
		if err != nil {
			t.Fatal(err)
		}
		awaitAnswered(t, le)
		done := le.Done()
		awaitTracked(t, le)
		for i := range l.Quorum() {
			c.change(i, "change:"+c.name)
		}
		select {
		case <-done:
			if !errors.Is(le.Err(), engine.ErrLockLost) {
				t.Errorf("%s: Err %v, want ErrLockLost", c.name, le.Err())
			}
		case <-time.After(lossBound):
			t.Errorf("%s: Done did not close within %s (Err %v)", c.name, lossBound, le.Err())
		}
	}
}

// TestLossOnAMinorityIsNoLoss: for each kind, a key of the lease deleted
// on one master and one overwritten on another: three masters of five, a
// quorum, still hold every key, so the lease stands once the tracker has
// read the keys again; a delete on a third master then ends it.
func TestLossOnAMinorityIsNoLoss(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	for _, k := range trackedKinds {
		l := k.locker(e, nil)
		le := k.take(t, l, "minority:"+k.name)
		awaitAnswered(t, le)
		done := le.Done()
		keys := engine.LeaseKeys(le)
		awaitTracked(t, le)
		// One key gone on master 0, another overwritten on master 1: two
		// masters no longer hold every key, three still do.
		from := l.TrackerReads()
		k.drop(e, 0, le, keys[0])
		e.set(1, keys[len(keys)-1], "stranger")
		awaitReads(t, l, from, 2)
		select {
		case <-done:
			t.Fatalf("%s: ended with a quorum still holding it: %v", k.name, le.Err())
		default:
		}
		if err := le.Err(); err != nil || le.Validity() <= 0 {
			t.Fatalf("%s: Err %v, Validity %s with a quorum still holding it", k.name, err, le.Validity())
		}
		from = l.TrackerReads()
		k.drop(e, 2, le, keys[0])
		if !readsEnded(t, l, from, 1, done) {
			t.Fatalf("%s: the third master's delete, read by the tracker, did not end it (Err %v)", k.name, le.Err())
		}
	}
}

// TestUnwatchedLeasesCostTheMastersNothing: a lease whose Done, Context
// and auto-extension nobody uses is not watched; one whose Done is, is
// watched until it ends.
func TestUnwatchedLeasesCostTheMastersNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	l := e.locker(patient)
	ctx := context.Background()
	le, err := l.TryLock(ctx, "unwatched")
	if err != nil {
		t.Fatal(err)
	}
	le.Err()
	le.Validity()
	if n := l.TrackedKeys(); n != 0 {
		t.Fatalf("%d keys watched for a lease nobody watches", n)
	}
	le.Release(ctx)
	le, err = l.TryLock(ctx, "watched")
	if err != nil {
		t.Fatal(err)
	}
	le.Done()
	if n := l.TrackedKeys(); n != 1 {
		t.Fatalf("%d keys watched for a lease whose Done is used, want 1", n)
	}
	le.Release(ctx)
	if n := l.TrackedKeys(); n != 0 {
		t.Fatalf("%d keys still watched after the Release", n)
	}
	off := e.locker(func(c *engine.Config) { c.DisableTracking = true; patient(c) })
	le, err = off.TryLock(ctx, "off")
	if err != nil {
		t.Fatal(err)
	}
	le.Done()
	if n := off.TrackedKeys(); n != 0 {
		t.Fatalf("%d keys watched with DisableTracking", n)
	}
}

// TestLossNoticedAcrossABrokenConnection: every connection to the masters
// is killed (the tracker's included), and the key deleted from a quorum
// before the tracker has a new one: the pushes are lost with the
// connection, and the new connection's first reads find the loss. On
// masters of its own: CLIENT KILL.
func TestLossNoticedAcrossABrokenConnection(t *testing.T) {
	e := ownEnv(t, 5)
	l := e.locker(func(c *engine.Config) { c.TTL = lossTTL; everyVoteAnswered(c) })
	le, err := l.TryLock(context.Background(), "broken")
	if err != nil {
		t.Fatal(err)
	}
	awaitAnswered(t, le)
	done := le.Done()
	awaitTracked(t, le)
	for i, c := range e.direct {
		if err := c.Do(context.Background(), c.B().ClientKill().TypeNormal().SkipmeYes().Build()).Error(); err != nil {
			t.Fatalf("CLIENT KILL on master %d: %v", i, err)
		}
	}
	for i := range l.Quorum() {
		e.del(i, "broken")
	}
	select {
	case <-done:
		if !errors.Is(le.Err(), engine.ErrLockLost) {
			t.Fatalf("Err %v, want ErrLockLost", le.Err())
		}
	case <-time.After(lossBound):
		t.Fatalf("Done did not close within %s (Err %v)", lossBound, le.Err())
	}
}

// TestObserverSeesTrackedLoss: a loss the tracker finds is one Lost event,
// ErrLockLost and ResultNotHeld, as one an extension finds.
func TestObserverSeesTrackedLoss(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	var r recorder
	l := e.locker(func(c *engine.Config) {
		c.Observer = r.observer()
		c.TTL = lossTTL
		everyVoteAnswered(c)
	})
	le, err := l.TryLock(context.Background(), "observed")
	if err != nil {
		t.Fatal(err)
	}
	awaitAnswered(t, le)
	done := le.Done()
	awaitTracked(t, le)
	for i := range l.Quorum() {
		e.del(i, e.key("observed"))
	}
	select {
	case <-done:
	case <-time.After(lossBound):
		t.Fatalf("Done did not close within %s (Err %v)", lossBound, le.Err())
	}
	eventually(t, lossBound, "the Lost event", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.lost) > 0
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lost) != 1 || !errors.Is(r.lost[0].Err, engine.ErrLockLost) || r.lost[0].Result != engine.ResultNotHeld || r.lost[0].Resource != "observed" {
		t.Fatalf("lost events: %+v", r.lost)
	}
}
