package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// checkMessage fails unless msg reads as one of the engine's errors: one
// line, "engine: " once at the start, no other package's prefix.
func checkMessage(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "\n"):
		t.Errorf("%s: error spans lines: %q", what, msg)
	case !strings.HasPrefix(msg, "engine: "), strings.Count(msg, "engine: ") != 1:
		t.Errorf("%s: want one \"engine: \" prefix, at the start: %q", what, msg)
	case strings.Contains(msg, "multiplex: "):
		t.Errorf("%s: message carries multiplex's prefix: %q", what, msg)
	}
}

// Every error a caller meets on the common paths is one line with one
// prefix: a failed TryLock, a double release, an Extend of a released
// lease, a lost lock, a closed Locker, an unreachable quorum (and a Lock
// that gives up at its deadline, in virtual time:
// TestLockUntilTheDeadlineReadsAsOneLine).
func TestErrorMessagesReadAsOneLine(t *testing.T) {
	t.Parallel()
	e := ownEnv(t, 3)
	ctx := context.Background()
	l, other := e.locker(everyVoteAnswered), e.locker(everyVoteAnswered)

	held, err := l.TryLock(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.TryLock(ctx, "r")
	checkMessage(t, "TryLock held elsewhere", err)

	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	checkMessage(t, "second Release", held.Release(ctx))
	checkMessage(t, "Extend after Release", held.Extend(ctx, time.Second))

	lost, err := l.TryLock(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		e.del(i, "lost")
	}
	err = lost.Extend(ctx, time.Second)
	checkMessage(t, "Extend of a lock that is gone", err)
	checkMessage(t, "Err of a lock lost", lost.Err())
	if !errors.Is(lost.Err(), engine.ErrLockLost) || !errors.Is(lost.Err(), engine.ErrNotHeld) {
		t.Errorf("lost lease: want ErrLockLost wrapping ErrNotHeld, got %v", lost.Err())
	}

	_, err = l.TryLock(ctx, "")
	checkMessage(t, "empty resource", err)

	closed := e.locker(nil)
	closed.Close()
	_, err = closed.TryLock(ctx, "r")
	checkMessage(t, "TryLock after Close", err)

	e.kill(1)
	e.kill(2)
	cfg := engine.DefaultConfig(e.addrs...)
	cfg.Conn.DialTimeout = 500 * time.Millisecond
	_, err = engine.New(ctx, cfg)
	checkMessage(t, "New with a quorum down", err)
	if !errors.Is(err, engine.ErrUnreachable) {
		t.Errorf("New with a quorum down: want ErrUnreachable, got %v", err)
	}
}

// A Lock that gives up at its deadline, the resource held elsewhere,
// reads as one line too, and says both: not acquired, deadline exceeded.
// In virtual time, so that the deadline falls after an attempt was
// refused, never in the first one.
func TestLockUntilTheDeadlineReadsAsOneLine(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		ctx := context.Background()
		l := e.locker(func(c *engine.Config) { c.TTL = 2 * time.Second })
		other := e.locker(nil)
		held, err := l.TryLock(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(ctx)
		lctx, cancel := context.WithTimeout(ctx, 80*time.Millisecond)
		_, err = other.Lock(lctx, "r")
		cancel()
		checkMessage(t, "Lock until the deadline", err)
		if !errors.Is(err, engine.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lock until the deadline: want ErrNotAcquired and DeadlineExceeded, got %v", err)
		}
	})
}

// Masters that all refuse one password are one problem, named once, with
// every address.
func TestUnreachableMastersGroupedByCause(t *testing.T) {
	t.Parallel()
	c := ownEnv(t, 3).cluster
	for _, n := range c.Nodes {
		if _, err := n.Conn().Do(context.Background(), n.Addr(), 2*time.Second, "CONFIG", "SET", "requirepass", "right"); err != nil {
			t.Fatal(err)
		}
	}
	cfg := engine.DefaultConfig(c.Addrs()...)
	cfg.Conn.Password = "wrong"
	_, err := engine.New(context.Background(), cfg)
	checkMessage(t, "New with a wrong password", err)
	msg := err.Error()
	if n := strings.Count(msg, "WRONGPASS"); n != 1 {
		t.Errorf("the cause appears %d times, want once: %s", n, msg)
	}
	for _, a := range c.Addrs() {
		if !strings.Contains(msg, a) {
			t.Errorf("%s not named: %s", a, msg)
		}
	}
}

// A key of another type on a quorum is not an outage: the masters
// answered. It matches ErrWrongType and not ErrNoQuorum, whether most or
// all of the masters hold it; on a minority, held elsewhere on the rest,
// it is contention.
func TestWrongTypeIsNotAnOutage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		wrong     []int // masters where the key is a list
		held      []int // masters where another owner holds it
		kind      error
		fencing   bool
		notKinded []error
	}{
		{"all masters", []int{0, 1, 2}, nil, engine.ErrWrongType, false, []error{engine.ErrNoQuorum, engine.ErrNotAcquired}},
		{"a quorum", []int{0, 1}, nil, engine.ErrWrongType, false, []error{engine.ErrNoQuorum, engine.ErrNotAcquired}},
		{"a quorum, fencing", []int{0, 1}, nil, engine.ErrWrongType, true, []error{engine.ErrNoQuorum, engine.ErrNotAcquired}},
		{"one master, held on the rest", []int{0}, []int{1, 2}, engine.ErrNotAcquired, false, []error{engine.ErrNoQuorum}},
		{"the fencing counter, a quorum", nil, nil, engine.ErrWrongType, true, []error{engine.ErrNoQuorum, engine.ErrNotAcquired}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 3)
			ctx := context.Background()
			for _, i := range tc.wrong {
				if err := e.direct[i].Do(ctx, e.direct[i].B().Lpush().Key(e.key("k")).Element("x").Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			for _, i := range tc.held {
				e.set(i, e.key("k"), "someone")
			}
			counter := tc.wrong == nil
			if counter {
				for i := range 2 {
					if err := e.direct[i].Do(ctx, e.direct[i].B().Lpush().Key(engine.FenceKey(e.key("k"))).Element("x").Build()).Error(); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Every vote answered: a vote timed out would be an outage.
			l := e.locker(func(c *engine.Config) { everyVoteAnswered(c); c.Fencing = tc.fencing })
			_, err := l.TryLock(ctx, "k")
			checkMessage(t, "TryLock", err)
			var ve *engine.VotesError
			if !errors.As(err, &ve) || ve.Kind != tc.kind {
				t.Fatalf("want Kind %v, got %v", tc.kind, err)
			}
			// Contention may be decided before the wrong-type master answers.
			if tc.kind == engine.ErrWrongType && !errors.Is(err, engine.ErrWrongType) {
				t.Errorf("want ErrWrongType among the causes: %v", err)
			}
			// The message names the key that is of the wrong type.
			wantKey := fmt.Sprintf("the resource's key %q", e.key("k"))
			if counter {
				wantKey = fmt.Sprintf("the fencing counter %q", engine.FenceKey(e.key("k")))
			}
			if tc.kind == engine.ErrWrongType && !strings.Contains(err.Error(), wantKey) {
				t.Errorf("message does not name %s: %v", wantKey, err)
			}
			for _, not := range tc.notKinded {
				if errors.Is(err, not) {
					t.Errorf("matches %v: %v", not, err)
				}
			}
		})
	}
}

// On masters started moments ago, the default policy keeps their votes
// out until they are MaxTTL old. The error says so: what it is, until
// when, and how to choose otherwise; and at that moment the lock is free,
// not before (virtual time: masters up for no time at all when New first
// reads them, each way oneWay).
func TestQuarantineOfFreshMastersIsExplained(t *testing.T) {
	const oneWay = 100 * time.Microsecond
	simTestWith(t, 3, simredis.MasterOptions{Latency: simredis.Latency{Min: oneWay}}, func(t *testing.T, e *env) {
		ctx := context.Background()
		cfg := e.config()
		cfg.Quarantine = engine.QuarantineAlways // the default
		cfg.TTL = 1500 * time.Millisecond
		newStart := time.Now()
		l, err := engine.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		newEnd := time.Now()
		_, err = l.TryLock(ctx, "fresh")
		checkMessage(t, "TryLock on fresh masters", err)
		if !errors.Is(err, engine.ErrNoQuorum) || !errors.Is(err, engine.ErrQuarantined) {
			t.Fatalf("want ErrNoQuorum and ErrQuarantined, got %v", err)
		}
		msg := err.Error()
		for _, want := range []string{"quarantined", "a quorum can vote again at", "MaxTTL", "QuarantineObserved"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message lacks %q: %s", want, msg)
			}
		}
		if strings.Count(msg, "first saw it") != 1 {
			t.Errorf("the explanation should come once: %s", msg)
		}
		var ve *engine.VotesError
		if !errors.As(err, &ve) {
			t.Fatalf("not a VotesError: %v", err)
		}
		// New first saw the masters up for 0 s: MaxTTL (the TTL) after that.
		until := ve.QuarantinedUntil()
		if until.Before(newStart.Add(cfg.TTL)) || until.After(newEnd.Add(cfg.TTL)) {
			t.Fatalf("QuarantinedUntil %v: want MaxTTL (%v) after New read the masters, between %v and %v",
				until, cfg.TTL, newStart.Add(cfg.TTL), newEnd.Add(cfg.TTL))
		}
		if !strings.Contains(msg, until.Format("15:04:05.000")) {
			t.Errorf("message does not give the time %s: %s", until.Format("15:04:05.000"), msg)
		}
		time.Sleep(time.Until(until) - time.Millisecond)
		if _, err := l.TryLock(ctx, "fresh"); !errors.Is(err, engine.ErrQuarantined) {
			t.Fatalf("a millisecond before QuarantinedUntil the quorum should still sit out: %v", err)
		}
		time.Sleep(time.Until(until))
		le, err := l.TryLock(ctx, "fresh")
		if err != nil {
			t.Fatalf("at QuarantinedUntil the quorum should vote: %v", err)
		}
		le.Release(ctx)
	})
}

// A nil *Lease, what a failed TryLock returns, answers like a lease that
// is not held instead of panicking.
func TestNilLeaseIsNotHeld(t *testing.T) {
	var le *engine.Lease
	if le.Validity() != 0 || !le.ValidUntil().IsZero() || le.Token() != 0 || le.Resource() != "" || le.Value() != "" ||
		le.Extensions() != 0 || le.Wait() != (engine.WaitInfo{}) {
		t.Fatal("a nil lease reports a hold")
	}
	select {
	case <-le.Done():
	default:
		t.Fatal("Done of a nil lease is not closed")
	}
	if !errors.Is(le.Err(), engine.ErrNotHeld) {
		t.Fatalf("Err: %v", le.Err())
	}
	if ctx := le.Context(); ctx.Err() == nil || !errors.Is(context.Cause(ctx), engine.ErrNotHeld) {
		t.Fatalf("Context: %v (cause %v)", ctx.Err(), context.Cause(ctx))
	}
	if err := le.Release(context.Background()); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("Release: %v", err)
	}
	if err := le.Extend(context.Background(), time.Second); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("Extend: %v", err)
	}
}

// A Lock that gives up while the resource is held is contention, wherever
// the holder lives: another goroutine of the same Locker (the in-process
// gate) or another Locker. Both match ErrNotAcquired and the context's
// error, and the observer counts both as contended.
//
// In virtual time, so that the deadline falls after an attempt was
// refused, never in the first one.
func TestContentionReadsTheSameWhereverTheHolderLives(t *testing.T) {
	for _, same := range []bool{true, false} {
		name := "other Locker"
		if same {
			name = "same Locker"
		}
		t.Run(name, func(t *testing.T) {
			simTest(t, 3, func(t *testing.T, e *env) {
				ctx := context.Background()
				var rec recorder
				l := e.locker(func(c *engine.Config) { c.Observer = rec.observer() })
				other := e.locker(func(c *engine.Config) { c.Observer = rec.observer() })
				// Lock, not TryLock: the holder takes the resource's turn at the gate.
				held, err := l.Lock(ctx, "r")
				if err != nil {
					t.Fatal(err)
				}
				defer held.Release(ctx)
				waiter := other
				if same {
					waiter = l
				}
				lctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
				_, err = waiter.Lock(lctx, "r")
				checkMessage(t, "Lock", err)
				if !errors.Is(err, engine.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("want ErrNotAcquired and DeadlineExceeded, got %v", err)
				}
				if r := rec.lastAcquire(t).Result; r != engine.ResultContended {
					t.Fatalf("observer counted %v, want contended", r)
				}
			})
		})
	}
}

// A key of another type on one master of three does not keep the lock
// from a quorum: Lock on a resource held on the other two must wait for
// the holder's release, as it would without that key, not give up at
// once because one vote was a WRONGTYPE. Only a wrong type that makes the
// quorum impossible (Kind ErrWrongType) is beyond another attempt.
func TestLockWaitsForAHolderPastAMinorityOfTheWrongType(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	ctx := context.Background()
	if err := e.direct[2].Do(ctx, e.direct[2].B().Lpush().Key(e.key("k")).Element("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// Every vote answered: a vote timed out beside the WRONGTYPE would
	// make the quorum impossible, which is another case.
	holderL, waiterL := e.locker(everyVoteAnswered), e.locker(everyVoteAnswered)
	held, err := holderL.TryLock(ctx, "k")
	if err != nil {
		t.Fatalf("set-up: masters 0 and 1 are free: %v", err)
	}
	type result struct {
		le  *engine.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		// A deadline only a Lock that never gets the lock meets.
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		le, err := waiterL.Lock(lctx, "k")
		got <- result{le, err}
	}()
	// The waiter's attempt was refused by the holder's keys: it queued on
	// masters 0 and 1 (or gave up, which the result tells).
	var r result
	queued := func() bool { return len(e.queueOf(0, "k")) == 1 && len(e.queueOf(1, "k")) == 1 }
	for done := false; !done; {
		select {
		case r = <-got:
			t.Fatalf("Lock returned while the resource was held: %v", r.err)
		case <-time.After(5 * time.Millisecond):
			done = queued()
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r = <-got; r.err != nil {
		t.Fatalf("Lock gave up on a resource released after its attempt: %v", r.err)
	}
	r.le.Release(ctx)
}

// A WRONGTYPE on a minority and a master that misses the node timeout do
// not end a Lock: together they make that attempt's quorum impossible,
// but the masters without the key grant it once the slow one answers
// again. Only keys of the wrong type that alone make the quorum
// impossible are beyond another attempt (ErrWrongType); the attempt here
// is ErrNoQuorum, and still matches ErrWrongType for the key it saw.
func TestWrongTypeOnAMinorityBesideATimeoutIsWaitedOut(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		ctx := context.Background()
		if err := e.direct[2].Do(ctx, e.direct[2].B().Zadd().Key(e.key("k")).ScoreMember().ScoreMember(1, "x").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		l := e.locker(func(c *engine.Config) { c.TTL = 10 * time.Second })
		e.sim[1].Partition(simredis.Hang)
		_, err := l.TryLock(ctx, "k")
		var ve *engine.VotesError
		if !errors.As(err, &ve) || ve.Kind != engine.ErrNoQuorum || !errors.Is(err, engine.ErrWrongType) {
			t.Fatalf("TryLock with a WRONGTYPE on master 2 and master 1 hung: %v, want Kind ErrNoQuorum, matching ErrWrongType", err)
		}
		// Lock waits it out: master 1 answers again a second later.
		time.AfterFunc(time.Second, func() { e.sim[1].Partition(simredis.Connected) })
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		le, err := l.Lock(lctx, "k")
		if err != nil {
			t.Fatalf("Lock gave up while master 1 was hung for a second: %v", err)
		}
		le.Release(ctx)
	})
}
