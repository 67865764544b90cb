package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// The tests of a handle's checks on the masters (a Semaphore's permit
// count, an RWMutex's mark of its name's kind): an attempt skips the
// check only after a quorum of the masters answered one, not while one
// is on its way nor after one that no master answered. They run in
// virtual time: an attempt that no master answers ends at its node
// timeout exactly.

// checkLocker is a Locker on e's masters that reaches every one of them
// through a stall proxy, returned in the masters' order, with a node
// timeout of nodeTimeout and a TTL long enough that no attempt here runs
// out of validity.
func (e *env) checkLocker(nodeTimeout time.Duration) (*engine.Locker, []*stallProxy) {
	var sp []*stallProxy
	for _, a := range e.addrs {
		sp = append(sp, newStallProxy(e, a))
	}
	return e.locker(func(c *engine.Config) {
		c.Masters = nil
		for _, p := range sp {
			c.Masters = append(c.Masters, p.addr())
		}
		c.TTL, c.NodeTimeout = 5*time.Minute, nodeTimeout
		c.DisableTracking = true
	}), sp
}

func stallAll(sp []*stallProxy) {
	for _, p := range sp {
		p.stall.Store(true)
	}
}

func resumeAll(sp []*stallProxy) {
	for _, p := range sp {
		p.resume()
	}
}

// awaitHeld waits until every proxy holds n commands back, each of
// which names needle once.
func awaitHeld(t *testing.T, sp []*stallProxy, needle string, n int) {
	t.Helper()
	eventually(t, 5*time.Second, "the attempt held at every proxy", func() bool {
		for _, p := range sp {
			if p.heldCount([]byte(needle)) < n {
				return false
			}
		}
		return true
	})
}

type attempt struct {
	le  *engine.Lease
	err error
}

// goAttempt runs f on its own goroutine; its result comes on the channel,
// and touched closes when f first looks at its context (see touchedCtx).
func goAttempt(f func(context.Context, ...engine.LockOption) (*engine.Lease, error)) (result <-chan attempt, touched <-chan struct{}) {
	c := make(chan attempt, 1)
	ctx := &touchedCtx{Context: context.Background(), touched: make(chan struct{})}
	go func() {
		le, err := f(ctx)
		c <- attempt{le, err}
	}()
	return c, ctx.touched
}

// touchedCtx tells when an attempt first looks at its context: an
// attempt builds its command, and so decides whether it carries the
// check, before it hands the command to the masters' round, which is
// where it first reads its context. (Were that to change, an attempt
// that reads it earlier would decide later, after the wait below: the
// verdicts here would stand, and only the interleaving would be missed.)
type touchedCtx struct {
	context.Context
	once    sync.Once
	touched chan struct{}
}

func (c *touchedCtx) touch()                      { c.once.Do(func() { close(c.touched) }) }
func (c *touchedCtx) Done() <-chan struct{}       { c.touch(); return c.Context.Done() }
func (c *touchedCtx) Err() error                  { c.touch(); return c.Context.Err() }
func (c *touchedCtx) Deadline() (time.Time, bool) { c.touch(); return c.Context.Deadline() }
func (c *touchedCtx) Value(k any) any             { c.touch(); return c.Context.Value(k) }

// awaitTouched waits until the attempt has built its command: with one
// batch in flight per master, it waits behind the stalled one, unsent.
func awaitTouched(t *testing.T, touched <-chan struct{}) {
	t.Helper()
	select {
	case <-touched:
	case <-time.After(5 * time.Second):
		t.Fatal("the second attempt never reached the masters' round")
	}
}

// semaphoreOfTwoHeld has another Locker hold both permits of the
// semaphore name of 2 on every master: the masters keep its count at 2.
func semaphoreOfTwoHeld(t *testing.T, e *env, name string) {
	t.Helper()
	s, err := e.locker(nil).Semaphore(name, 2)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.TryAcquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// An acquire returns at quorum: its SET may still be on its way to
	// the last master.
	eventually(t, 5*time.Second, "both permits and the count on every master", func() bool {
		for i := range e.direct {
			if e.get(i, slotKey(name, 0)) == "" || e.get(i, slotKey(name, 1)) == "" || e.get(i, semCountKey(name)) != "2" {
				return false
			}
		}
		return true
	})
}

func semCountKey(name string) string { return "\xffredlock:sem:{" + name + "}:permits" }

// wantPermitCount fails unless err is the permit count's refusal.
func wantPermitCount(t *testing.T, what string, a attempt) {
	t.Helper()
	if a.err == nil {
		t.Fatalf("%s: granted permit %d of 3 while the masters keep 2 permits, both held", what, a.le.Permit())
	}
	if !errors.Is(a.err, engine.ErrPermitCount) {
		t.Fatalf("%s: %v; want ErrPermitCount", what, a.err)
	}
}

// A second TryAcquire on a handle of 3 permits, made while the first,
// which checks the count, is on its way to every master, must check it
// too: the masters keep 2 with both permits held, and a third permit
// would make three holders of a semaphore of two.
func TestSemaphoreAttemptsCheckWhileTheCheckIsOnItsWay(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		const name = "check-on-its-way"
		semaphoreOfTwoHeld(t, e, name)
		l, sp := e.checkLocker(time.Minute)
		three, err := l.Semaphore(name, 3)
		if err != nil {
			t.Fatal(err)
		}
		stallAll(sp)
		first, _ := goAttempt(three.TryAcquire)
		awaitHeld(t, sp, "{"+name+"}:", 1)
		second, touched := goAttempt(three.TryAcquire)
		awaitTouched(t, touched)
		resumeAll(sp)
		wantPermitCount(t, "the first attempt", <-first)
		wantPermitCount(t, "the second attempt, sent while the first was on its way", <-second)
	})
}

// After a first attempt that no master answered (ErrNoQuorum), the next
// one checks the count: the first's check never came back.
func TestSemaphoreAttemptChecksAfterACheckNoMasterAnswered(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		const name = "check-unanswered"
		semaphoreOfTwoHeld(t, e, name)
		l, sp := e.checkLocker(100 * time.Millisecond)
		three, err := l.Semaphore(name, 3)
		if err != nil {
			t.Fatal(err)
		}
		stallAll(sp)
		if _, err := three.TryAcquire(context.Background()); !errors.Is(err, engine.ErrNoQuorum) {
			t.Fatalf("the first attempt, every master stalled: %v; want ErrNoQuorum", err)
		}
		resumeAll(sp)
		le, err := three.TryAcquire(context.Background())
		wantPermitCount(t, "the attempt after one that no master answered", attempt{le, err})
	})
}

// rwOnASemaphore has another Locker use name as a semaphore, on every
// master.
func rwOnASemaphore(t *testing.T, e *env, name string) {
	t.Helper()
	s, err := e.locker(nil).Semaphore(name, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the count on every master", func() bool {
		for i := range e.direct {
			if e.get(i, semCountKey(name)) != "2" {
				return false
			}
		}
		return true
	})
}

// wantWrongKind fails unless err is the refusal of a name a semaphore
// uses.
func wantWrongKind(t *testing.T, what string, a attempt) {
	t.Helper()
	if a.err == nil {
		t.Fatalf("%s: granted the write lock of a name a semaphore uses", what)
	}
	if !errors.Is(a.err, engine.ErrWrongKind) {
		t.Fatalf("%s: %v; want ErrWrongKind", what, a.err)
	}
}

// The same for an RWMutex's mark of its name's kind: a second TryLock,
// made while the first, which checks that no semaphore uses the name, is
// on its way, must check too.
func TestRWMutexAttemptsCheckWhileTheCheckIsOnItsWay(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		const name = "rw-check-on-its-way"
		rwOnASemaphore(t, e, name)
		l, sp := e.checkLocker(time.Minute)
		m, err := l.RWMutex(name)
		if err != nil {
			t.Fatal(err)
		}
		stallAll(sp)
		first, _ := goAttempt(m.TryLock)
		awaitHeld(t, sp, "{"+name+"}:permits", 1)
		second, touched := goAttempt(m.TryLock)
		awaitTouched(t, touched)
		resumeAll(sp)
		wantWrongKind(t, "the first attempt", <-first)
		wantWrongKind(t, "the second attempt, sent while the first was on its way", <-second)
	})
}

// After a first attempt that no master answered, the next one checks.
func TestRWMutexAttemptChecksAfterACheckNoMasterAnswered(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		const name = "rw-check-unanswered"
		rwOnASemaphore(t, e, name)
		l, sp := e.checkLocker(100 * time.Millisecond)
		m, err := l.RWMutex(name)
		if err != nil {
			t.Fatal(err)
		}
		stallAll(sp)
		if _, err := m.TryLock(context.Background()); !errors.Is(err, engine.ErrNoQuorum) {
			t.Fatalf("the first attempt, every master stalled: %v; want ErrNoQuorum", err)
		}
		resumeAll(sp)
		le, err := m.TryLock(context.Background())
		wantWrongKind(t, "the attempt after one that no master answered", attempt{le, err})
	})
}
