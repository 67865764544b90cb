package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/redlock-bench/redlock/internal/redistest"
)

var baselines = []string{engineRedsyncRueidis, engineRedsyncGoredis}

// The baselines pass the same end-to-end check as our engine: the same
// workers and oracle, under heavy contention, with zero violations.
//
// The TTL is short because redsync with fail-fast leaks keys under
// contention: it releases a failed attempt as soon as the vote is decided,
// and a SET still on its way lands after the release and holds that
// master until the TTL. Enough of those split every later vote, so with
// a long TTL the measured window would see no acquisition at all, and a
// check without acquisitions proves nothing.
func TestBaselinesHoldMutualExclusion(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 5)
	for i, name := range baselines {
		for _, mode := range []Mode{ModeTry, ModeWait} {
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				cfg := shortConfig(name, c.Addrs())
				cfg.TTL = 500 * time.Millisecond
				cfg.Resources = 8
				cfg.Mode = mode
				cfg.Duration = time.Second
				if mode == ModeWait {
					cfg.Duration = 600 * time.Millisecond
					cfg.WaitTimeout = time.Second
				}
				// Each run its own keys: another run's leaked keys would
				// only add contention, but keep the runs independent.
				cfg.KeyPrefix = fmt.Sprintf("rs%d%s:", i, mode)
				s := run(t, cfg).Summary
				if s.Violations != 0 {
					t.Fatalf("%d violations: %+v", s.Violations, s.ViolationExamples)
				}
				// Without contention the check would prove nothing: in mode
				// try it shows as refusals, in mode wait as Locks that had
				// to retry (redsync waits at least 50ms between tries).
				if s.Acquired == 0 || (mode == ModeTry && s.Contended == 0) ||
					(mode == ModeWait && s.WaitLatencyUs.Max < 50_000) {
					t.Fatalf("want acquisitions under contention, got %d acquired, %d contended of %d attempts, wait max %d µs (errors %v %v)",
						s.Acquired, s.Contended, s.Attempts, s.WaitLatencyUs.Max, s.Errors, s.ErrorExamples)
				}
				// Every redsync failure falls in a category. Timeouts are
				// not checked: redsync gives each attempt 5% of the TTL
				// (25ms here), which a loaded 2-core machine under -race
				// misses now and then, and that is redsync doing its job.
				if s.Errors["other"] > 0 {
					t.Errorf("unclassified errors: %v: %v", s.Errors, s.ErrorExamples)
				}
				if e := s.ErrorTotal(); e > 0 {
					t.Logf("errors on healthy masters: %v of %d attempts", s.Errors, s.Attempts)
				}
			})
		}
	}
}

// A lease's validity is on the monotonic clock, about TTL minus redsync's
// 1% drift, and releasing it frees the resource.
func TestRedsyncLease(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 3)
	ctx := context.Background()
	for _, name := range baselines {
		cfg := DefaultConfig()
		cfg.TTL = 2 * time.Second
		e, err := newEngine(ctx, name, c.Addrs(), cfg)
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
			if _, err := e.TryLock(ctx, "lease:"+name); classify(err, nil) != kindContended {
				t.Errorf("%s: second TryLock of a held resource: %v, classified %d", name, err, classify(err, nil))
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
		if err := l3.Release(ctx); err == nil || !leaseLost(err) {
			t.Errorf("%s: release of deleted keys: %v, lost %v", name, err, leaseLost(err))
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
	cfg := DefaultConfig()
	cfg.TTL = 2 * time.Second // 100ms per attempt: enough on a loaded machine
	var engines []Engine
	for _, name := range baselines {
		e, err := newEngine(ctx, name, c.Addrs(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		engines = append(engines, e)
	}
	c.Nodes[0].Kill()
	for i, e := range engines {
		l, err := e.TryLock(ctx, "one-down")
		if err != nil {
			t.Fatalf("%s with 1 of 5 down: %v", baselines[i], err)
		}
		l.Release(ctx)
	}
	c.Nodes[1].Kill()
	c.Nodes[2].Kill()
	for i, e := range engines {
		_, err := e.TryLock(ctx, "three-down")
		if k := classify(err, nil); k != errNoQuorum {
			t.Errorf("%s with 3 of 5 down: %v, classified %d, want no_quorum", baselines[i], err, k)
		}
	}
}

func TestNewRedsyncNamesADeadMaster(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	dead := deadAddr(t)
	for _, name := range baselines {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := newEngine(ctx, name, []string{c.Addrs()[0], dead}, DefaultConfig())
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
		want errKind
	}{
		{"taken on a quorum", &redsync.ErrTaken{Nodes: []int{0, 1, 2}}, kindContended},
		{"split vote", errors.Join(taken(0), taken(3)), kindContended},
		{"split vote, one failed", errors.Join(taken(0), nodeErr(1), taken(3)), kindContended},
		{"two failed, two taken", errors.Join(nodeErr(0), nodeErr(1), taken(2), taken(3)), kindContended},
		{"three failed", errors.Join(nodeErr(0), nodeErr(1), nodeErr(2)), errNoQuorum},
		{"three failed, value type", errors.Join(redsync.RedisError{Node: 0}, nodeErr(1), nodeErr(2)), errNoQuorum},
		{"quorum too late", redsync.ErrFailed, errNoQuorum},
	} {
		err := e.acquireError(live, c.err)
		if got := classify(err, nil); got != c.want {
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
	if classify(err, ctx) != errTimeout || classify(err, nil) != errTimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ctx deadline: %v classified %d", err, classify(err, nil))
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
		if leaseLost(err) != c.lost {
			t.Errorf("release %s: lost = %v, want %v (%v)", c.name, !c.lost, c.lost, err)
		}
	}
}

// deadAddr is a loopback address where nothing listens: a port that was
// free a moment ago.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
