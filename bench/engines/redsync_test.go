package engines

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/redlock-bench/redlock/internal/redistest"
)

// baselines are the redsync flavours.
var baselines = []string{RedsyncRueidis.String(), RedsyncGoredis.String()}

// A lease's validity is on the monotonic clock, about TTL minus redsync's
// 1% drift, and releasing it frees the resource.
func TestRedsyncLease(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 3)
	ctx := context.Background()
	for _, name := range baselines {
		cfg := testSpec()
		cfg.TTL = 2 * time.Second
		e, err := openT(ctx, name, c.Addrs(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		l, err := e.TryLock(ctx, "lease:"+name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		until := l.ValidUntil()
		if !strings.Contains(until.String(), "m=") {
			t.Errorf("%s: ValidUntil %v carries no monotonic reading", name, until)
		}
		if d := until.Sub(start); d > cfg.TTL || d < cfg.TTL*9/10 {
			t.Errorf("%s: valid for %s of a %s TTL", name, d, cfg.TTL)
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("%s: release: %v", name, err)
		}
		l2, err := e.TryLock(ctx, "lease:"+name)
		if err != nil {
			t.Errorf("%s: TryLock after release: %v", name, err)
		} else {
			// Contended last: a refused fail-fast attempt can leave an
			// orphan SET on a slow master until the TTL (see redsync.go),
			// which would refuse the TryLock above.
			if _, err := e.TryLock(ctx, "lease:"+name); Classify(err) != Contended {
				t.Errorf("%s: second TryLock of a held resource: %v, classified %d", name, err, Classify(err))
			}
			l2.Release(ctx)
		}
		// A lease whose keys are gone is lost, not a failed release.
		l3, err := e.TryLock(ctx, "gone:"+name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, a := range c.Addrs() {
			redistest.Do(a, 10*time.Second, "DEL", "gone:"+name)
		}
		if err := l3.Release(ctx); err == nil || !Lost(err) {
			t.Errorf("%s: release of deleted keys: %v, lost %v", name, err, Lost(err))
		}
		if err := e.Close(); err != nil {
			t.Errorf("%s: close: %v", name, err)
		}
	}
}

// With a quorum of masters down, a failed attempt is an outage, not
// contention; with one down, locking still works.
func TestRedsyncOutageIsNoQuorum(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 5)
	ctx := context.Background()
	cfg := testSpec()
	cfg.TTL = 2 * time.Second // 100ms per attempt: enough on a loaded machine
	var es []mutexes
	for _, name := range baselines {
		e, err := openT(ctx, name, c.Addrs(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		es = append(es, e)
	}
	c.Nodes[0].Kill()
	for i, e := range es {
		l, err := e.TryLock(ctx, "one-down")
		if err != nil {
			t.Fatalf("%s with 1 of 5 down: %v", baselines[i], err)
		}
		l.Release(ctx)
	}
	c.Nodes[1].Kill()
	c.Nodes[2].Kill()
	for i, e := range es {
		_, err := e.TryLock(ctx, "three-down")
		if k := Classify(err); k != NoQuorum {
			t.Errorf("%s with 3 of 5 down: %v, classified %d, want no_quorum", baselines[i], err, k)
		}
	}
}

func TestNewRedsyncNamesADeadMaster(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	dead := redistest.DeadAddr(t)
	for _, name := range baselines {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := openT(ctx, name, []string{c.Addrs()[0], dead}, testSpec())
		cancel()
		if err == nil || !strings.Contains(err.Error(), dead) {
			t.Errorf("%s: want an error naming %s, got %v", name, dead, err)
		}
	}
}

// The classification of redsync's errors, as redsync builds them.
func TestRedsyncErrorClassification(t *testing.T) {
	e := &redsyncEngine{name: "redsync-x", masters: 5, quorum: 3}
	nodeErr := func(n int) error { return &redsync.RedisError{Node: n, Err: errors.New("i/o timeout")} }
	taken := func(n int) error { return &redsync.ErrNodeTaken{Node: n} }
	live := context.Background()
	for _, c := range []struct {
		name string
		err  error
		want Outcome
	}{
		{"taken on a quorum", &redsync.ErrTaken{Nodes: []int{0, 1, 2}}, Contended},
		{"split vote", errors.Join(taken(0), taken(3)), Contended},
		{"split vote, one failed", errors.Join(taken(0), nodeErr(1), taken(3)), Contended},
		{"two failed, two taken", errors.Join(nodeErr(0), nodeErr(1), taken(2), taken(3)), Contended},
		{"three failed", errors.Join(nodeErr(0), nodeErr(1), nodeErr(2)), NoQuorum},
		{"three failed, value type", errors.Join(redsync.RedisError{Node: 0}, nodeErr(1), nodeErr(2)), NoQuorum},
		{"quorum too late", redsync.ErrFailed, NoQuorum},
	} {
		err := e.acquireError(live, c.err)
		if got := Classify(err); got != c.want {
			t.Errorf("%s: classified %d, want %d (%v)", c.name, got, c.want, err)
		}
		if !strings.HasPrefix(err.Error(), "redsync-x: ") || !errors.Is(err, c.err) {
			t.Errorf("%s: %q does not wrap redsync's error", c.name, err)
		}
	}

	// redsync answers ErrFailed when the context ends between tries,
	// hiding why; the wait's deadline is what the bench counts.
	ctx, cancel := context.WithTimeout(live, time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	err := e.acquireError(ctx, redsync.ErrFailed)
	if Classify(err) != TimedOut || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ctx deadline: %v classified %d", err, Classify(err))
	}

	expired := redsync.ErrLockAlreadyExpired
	for _, c := range []struct {
		name string
		err  error
		lost bool
	}{
		{"gone on a quorum", errors.Join(errors.Join(errors.Join(nil, expired), expired), expired), true},
		{"taken over on a quorum", errors.Join(taken(0), taken(1), expired), true},
		{"masters failed", errors.Join(expired, nodeErr(1), nodeErr(2)), false},
	} {
		err := e.releaseError(live, c.err)
		if Lost(err) != c.lost {
			t.Errorf("release %s: lost = %v, want %v (%v)", c.name, !c.lost, c.lost, err)
		}
	}
}
