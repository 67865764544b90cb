package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
)

// TestRemoteValidity asks the masters about a lock, a permit, a lease on
// three resources, a read lease (beside another reader) and a write
// lease, on a Locker that does not track (so that
// RemoteValidity, not the tracker, finds the loss): fresh, each answers
// about the TTL, never more than Validity; with a key gone from a
// minority of the masters, the rest still vouch for it; with the keys'
// TTL shortened on the rest, it answers the shorter time and the lease's
// validity follows; with a key gone from a quorum, it ends the lease with
// ErrLockLost, naming each master's answer.
func TestRemoteValidity(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	for _, k := range trackedKinds {
		if k.auto {
			continue
		}
		l := k.locker(e, func(c *engine.Config) { c.DisableTracking = true })
		le := k.take(t, l, "remote:"+k.name)
		// The acquire returned at a quorum: a SET still on its way would
		// land after the changes below and undo them.
		awaitAnswered(t, le)
		keys := engine.LeaseKeys(le)

		v, err := le.RemoteValidity(ctx)
		if err != nil || v <= lossTTL-2*time.Second || v > le.Validity()+time.Millisecond {
			t.Fatalf("%s, fresh: RemoteValidity %s, %v; Validity %s", k.name, v, err, le.Validity())
		}

		e.del(0, keys[0])
		e.set(1, keys[len(keys)-1], "stranger")
		if v, err := le.RemoteValidity(ctx); err != nil || v <= lossTTL-2*time.Second {
			t.Fatalf("%s, a minority changed: RemoteValidity %s, %v", k.name, v, err)
		}

		for i := 2; i < 5; i++ {
			c := e.direct[i]
			if err := c.Do(ctx, c.B().Pexpire().Key(keys[len(keys)/2]).Milliseconds(5000).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		v, err = le.RemoteValidity(ctx)
		if err != nil || v > 5*time.Second || v < 4*time.Second {
			t.Fatalf("%s, TTL shortened to 5s on the quorum left: RemoteValidity %s, %v", k.name, v, err)
		}
		if d := le.Validity(); d > 5*time.Second || le.Err() != nil {
			t.Fatalf("%s: Validity %s, Err %v after the masters vouched for 5s at most", k.name, d, le.Err())
		}

		e.del(2, keys[0])
		v, err = le.RemoteValidity(ctx)
		var ve *engine.VotesError
		if v != 0 || !errors.Is(err, engine.ErrLockLost) || !errors.Is(err, engine.ErrNotHeld) || !errors.As(err, &ve) {
			t.Fatalf("%s, lost on a quorum: RemoteValidity %s, %v", k.name, v, err)
		}
		if ve.Refused != 3 || ve.OK != 2 {
			t.Fatalf("%s: %d refused, %d ok; want 3 and 2: %v", k.name, ve.Refused, ve.OK, err)
		}
		select {
		case <-le.Done():
		default:
			t.Fatalf("%s: Done open after RemoteValidity found the lease lost", k.name)
		}
		if !errors.Is(le.Err(), engine.ErrLockLost) || le.Validity() != 0 {
			t.Fatalf("%s: Err %v, Validity %s after RemoteValidity found the lease lost", k.name, le.Err(), le.Validity())
		}
		t.Logf("%s: %v", k.name, err)
		if _, err := le.RemoteValidity(ctx); !errors.Is(err, engine.ErrLockLost) {
			t.Fatalf("%s: RemoteValidity of the lost lease: %v", k.name, err)
		}
	}
}

// TestRemoteValidityOfEndedLeases: a released lease, a nil one and one
// whose Locker closed answer without asking the masters; a lease the
// tracker found lost answers ErrLockLost.
func TestRemoteValidityOfEndedLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	l := e.locker(patient)
	le, err := l.TryLock(ctx, "ended")
	if err != nil {
		t.Fatal(err)
	}
	le.Release(ctx)
	if _, err := le.RemoteValidity(ctx); !errors.Is(err, engine.ErrReleased) {
		t.Fatalf("released: %v", err)
	}
	var nilLease *engine.Lease
	if _, err := nilLease.RemoteValidity(ctx); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("nil lease: %v", err)
	}

	le, err = l.TryLock(ctx, "tracked")
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returned at quorum: a SET still on its way would land after
	// the DEL below, and the keys would not have left a quorum.
	eventually(t, 30*time.Second, "the key on every master", func() bool {
		for i := range 5 {
			if e.get(i, e.key("tracked")) != le.Value() {
				return false
			}
		}
		return true
	})
	done := le.Done()
	for i := range 3 {
		e.del(i, e.key("tracked"))
	}
	select {
	case <-done:
	case <-time.After(lossBound):
		t.Fatalf("Done open %s after the keys left a quorum", lossBound)
	}
	if _, err := le.RemoteValidity(ctx); !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("lost: %v", err)
	}

	c := e.locker(patient)
	le, err = c.TryLock(ctx, "closed")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := le.RemoteValidity(ctx); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// TestRemoteValidityKeepsReadWriteLeases: a read lease (beside another
// reader) and a write lease, asked about on every master, stay held and
// valid: Err nil, Done open, their entries still on every master, the
// other kind still refused, their release finding them live. With their
// entry's expiry moved to 5 s on a quorum (the key itself lives on: the
// other reader's entry keeps it), RemoteValidity answers that and the
// lease's validity follows; with the entry taken out of a quorum (the
// other reader staying), the lease is lost.
func TestRemoteValidityKeepsReadWriteLeases(t *testing.T) {
	e := newEnv(t, 5)
	ctx := context.Background()
	l := e.locker(func(c *engine.Config) { c.TTL = lossTTL; c.DisableTracking = true; patient(c) })
	other := e.locker(patient)
	// The other reader is another Locker's: readers of one Locker share
	// one entry (see rwshare_test.go), and this test wants two.
	third := e.locker(patient)
	for _, writer := range []bool{false, true} {
		name, kind := "rv-read", "read lease"
		if writer {
			name, kind = "rv-write", "write lease"
		}
		m, err := l.RWMutex(name)
		if err != nil {
			t.Fatal(err)
		}
		om, err := other.RWMutex(name)
		if err != nil {
			t.Fatal(err)
		}
		tm, err := third.RWMutex(name)
		if err != nil {
			t.Fatal(err)
		}
		var le, beside *engine.Lease
		if writer {
			le, err = m.TryLock(ctx)
		} else {
			if beside, err = tm.TryRLock(ctx); err != nil {
				t.Fatal(err)
			}
			le, err = m.TryRLock(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		key, value := engine.LeaseKeys(le)[0], engine.LeaseValue(le)
		// The acquire returned at quorum: the entry may still be on its
		// way to the last masters.
		eventually(t, 30*time.Second, "the entry on every master", func() bool {
			return e.entries(key, value) == 5
		})

		for range 2 {
			v, err := le.RemoteValidity(ctx)
			if err != nil || v <= lossTTL-2*time.Second || v > le.Validity()+time.Millisecond {
				t.Fatalf("%s: RemoteValidity %s, %v; Validity %s", kind, v, err, le.Validity())
			}
		}
		select {
		case <-le.Done():
			t.Fatalf("%s: Done closed after RemoteValidity vouched for it", kind)
		default:
		}
		if le.Err() != nil || le.Validity() <= lossTTL-2*time.Second {
			t.Fatalf("%s: Err %v, Validity %s after RemoteValidity vouched for it", kind, le.Err(), le.Validity())
		}
		if n := e.entries(key, value); n != 5 {
			t.Fatalf("%s: its entry on %d of 5 masters after RemoteValidity", kind, n)
		}
		var rivalErr error
		if writer {
			_, rivalErr = om.TryRLock(ctx)
		} else {
			_, rivalErr = om.TryLock(ctx)
		}
		if !errors.Is(rivalErr, engine.ErrNotAcquired) {
			t.Fatalf("%s held: the other kind's attempt: %v; want ErrNotAcquired", kind, rivalErr)
		}

		// The entry's own expiry, not the key's, bounds the answer.
		score := time.Now().Add(5 * time.Second).UnixMicro()
		if writer {
			score = -score
		}
		for i := 2; i < 5; i++ {
			c := e.direct[i]
			if err := c.Do(ctx, c.B().Zadd().Key(key).Xx().ScoreMember().ScoreMember(float64(score), value).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		v, err := le.RemoteValidity(ctx)
		if err != nil || v > 5*time.Second || v < 4*time.Second {
			t.Fatalf("%s, entry's expiry moved to 5s on a quorum: RemoteValidity %s, %v", kind, v, err)
		}
		if d := le.Validity(); d > 5*time.Second || le.Err() != nil {
			t.Fatalf("%s: Validity %s, Err %v after the masters vouched for 5s at most", kind, d, le.Err())
		}

		if writer {
			if err := le.Release(ctx); err != nil {
				t.Fatalf("%s: Release after RemoteValidity: %v", kind, err)
			}
			if n := e.entries(key, value); n != 0 {
				t.Fatalf("%s: released, its entry is left on %d masters", kind, n)
			}
			continue
		}
		for i := range 3 {
			rwLossKinds[0].drop(e, i, le, key)
		}
		v, err = le.RemoteValidity(ctx)
		if v != 0 || !errors.Is(err, engine.ErrLockLost) {
			t.Fatalf("%s, its entry gone from a quorum, the other reader's left: RemoteValidity %s, %v", kind, v, err)
		}
		if err := beside.Release(ctx); err != nil {
			t.Fatalf("the other reader's Release: %v", err)
		}
	}
}

// entries is how many masters hold value in the sorted set at key.
func (e *env) entries(key, value string) int {
	e.t.Helper()
	n := 0
	for i, c := range e.direct {
		_, err := c.Do(context.Background(), c.B().Zscore().Key(key).Member(value).Build()).AsFloat64()
		switch {
		case err == nil:
			n++
		case !rueidis.IsRedisNil(err):
			e.t.Fatalf("ZSCORE on node %d: %v", i, err)
		}
	}
	return n
}
