package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// rwEntryExpired is the check of TestRWLossNoticedWhenItsEntryExpires for
// a watched reader (writer false) or writer: its entry's expiry passes on
// a quorum of masters (its score moved into the past, as a master whose
// clock ran ahead sees it), while the key lives on. The lease is lost, as
// a plain lock whose key expired, and must have ended once the tracker
// has read the changed entry on that quorum: the error says if not.
// Another Locker's holder of the other kind is then admitted there.
func rwEntryExpired(t *testing.T, e *env, writer bool) error {
	t.Helper()
	l := e.locker(func(c *engine.Config) { c.TTL = lossTTL; everyVoteAnswered(c) })
	name := "rw-expired-reader"
	if writer {
		name = "rw-expired-writer"
	}
	m, err := l.RWMutex(name)
	if err != nil {
		t.Fatal(err)
	}
	take := m.TryRLock
	if writer {
		take = m.TryLock
	}
	le, err := take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(context.Background())
	awaitAnswered(t, le)
	done := le.Done()
	awaitTracked(t, le)
	from := l.TrackerReads()
	key, value := engine.LeaseKeys(le)[0], engine.LeaseValue(le)
	past := time.Now().Add(-time.Second).UnixMicro() // expired a second ago
	score := strconv.FormatInt(past, 10)
	if writer {
		score = "-" + score
	}
	for i := range l.Quorum() {
		c := e.direct[i]
		if err := c.Do(context.Background(), c.B().Arbitrary("ZADD").Keys(key).Args("XX", score, value).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	ended := readsEnded(t, l, from, l.Quorum(), done)
	other := e.locker(func(c *engine.Config) { c.TTL = lossTTL; patient(c) })
	om, err := other.RWMutex(name)
	if err != nil {
		t.Fatal(err)
	}
	overlap := om.TryLock
	if writer {
		overlap = om.TryRLock
	}
	ole, err := overlap(context.Background())
	if err != nil {
		t.Fatalf("set-up: the other kind refused where our entry expired: %v", err)
	}
	defer ole.Release(context.Background())
	if !ended {
		return fmt.Errorf("writer=%v: Done open once the tracker read its entry expired on a quorum, where another holder was then admitted (Err %v)",
			writer, le.Err())
	}
	return nil
}

// TestRWLossNoticedWhenItsEntryExpires: a watched reader and writer whose
// entries expire on a quorum of masters, where another holder is then
// admitted, end once the tracker has read them: it judges an entry by its
// score against the master's clock, not by its presence alone (an
// expired entry stays in the set until a writer's attempt or the key's
// end takes it out).
func TestRWLossNoticedWhenItsEntryExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	for _, writer := range []bool{false, true} {
		t.Run(map[bool]string{false: "reader", true: "writer"}[writer], func(t *testing.T) {
			if err := rwEntryExpired(t, e, writer); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRWLossNoticedWhenItsEntryExpiresControl turns the clock's judgement
// off (mutation.RWTrackedByPresence: a member in the set counts as held)
// and must see the writer's check fail: readers skip its expired entry,
// which stays in the set. The check waits for the tracker's reads, not
// for a duration: it cannot miss.
func TestRWLossNoticedWhenItsEntryExpiresControl(t *testing.T) {
	mutation.Require(t)
	e := newEnv(t, 5)
	defer mutation.RWTrackedByPresence.Set(true)()
	err := rwEntryExpired(t, e, true)
	if err == nil {
		t.Fatal("the writer's loss was noticed with the tracker trusting presence: the check cannot fail")
	}
	t.Logf("caught: %v", err)
}
