package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// fenceCallers are the acquisitions that run a fence round, one per form
// of its script (Lock and LockAll share TryLock's and TryLockAll's
// attempt, hand-offs its round): each acquires res and, where set, hold
// puts another owner's value in place of res's key on master i.
var fenceCallers = []struct {
	name string
	sha  string // the fence round's script
	do   func(ctx context.Context, l *engine.Locker, res string) (*engine.Lease, error)
	hold func(e *env, i int, res string)
}{
	{"trylock", engine.FenceScriptSHA, func(ctx context.Context, l *engine.Locker, res string) (*engine.Lease, error) {
		return l.TryLock(ctx, res)
	}, func(e *env, i int, res string) { e.set(i, res, "another-owner") }},
	{"trylockall", engine.FenceAllScriptSHA, func(ctx context.Context, l *engine.Locker, res string) (*engine.Lease, error) {
		return l.TryLockAll(ctx, res, res+"-b")
	}, func(e *env, i int, res string) { e.set(i, res, "another-owner") }},
	{"tryacquire", engine.FenceScriptSHA, func(ctx context.Context, l *engine.Locker, res string) (*engine.Lease, error) {
		s, err := l.Semaphore(res, 2)
		if err != nil {
			return nil, err
		}
		return s.TryAcquire(ctx)
	}, nil},
	{"rw-trylock", engine.RWFenceScriptSHA, func(ctx context.Context, l *engine.Locker, res string) (*engine.Lease, error) {
		m, err := l.RWMutex(res)
		if err != nil {
			return nil, err
		}
		return m.TryLock(ctx)
	}, nil},
}

// A fence round that fails with masters failed, and refused only where
// our key is not (a master the acquire never reached, which answers
// that nothing is there), lost its quorum to the failures: nobody else
// holds the resource, and the honest answer is ErrNoQuorum, not
// contention (guarantee 6). Master 2 loses the acquire with its
// connection and is asked again, empty, in the fence round; master 1
// loses the fence round with its connection. The control turns on
// fence-refusal-is-contention, which reports ErrNotAcquired.
func TestFenceRefusedWhereTheKeyNeverWasIsNoQuorum(t *testing.T) {
	mutation.Require(t)
	for _, contention := range []bool{false, true} {
		for _, op := range fenceCallers {
			t.Run(fmt.Sprintf("fence-refusal-is-contention=%v/%s", contention, op.name), func(t *testing.T) {
				defer mutation.FenceRefusalIsContention.Set(contention)()
				err := fenceWithAFailure(t, op.name, op.sha, op.do, nil)
				want := engine.ErrNoQuorum
				if contention {
					want = engine.ErrNotAcquired
				}
				if !errors.Is(err, want) {
					t.Fatalf("%s: %v, want %v", op.name, err, want)
				}
			})
		}
	}
}

// Where the master that refuses the fence round holds another owner's
// value, the refusal is contention, failures or not: ErrNotAcquired.
func TestFenceRefusedByAnotherOwnersKeyIsContention(t *testing.T) {
	for _, op := range fenceCallers {
		if op.hold == nil {
			continue
		}
		t.Run(op.name, func(t *testing.T) {
			err := fenceWithAFailure(t, op.name, op.sha, op.do, op.hold)
			if !errors.Is(err, engine.ErrNotAcquired) {
				t.Fatalf("%s: %v, want %v", op.name, err, engine.ErrNotAcquired)
			}
		})
	}
}

// fenceWithAFailure runs do on a fenced Locker whose fence round misses
// master 1 (its connection cut) and whose acquire misses master 2: its
// connection cut too, or (hold set) another owner's value there. It
// returns do's error, from a fence round refused by master 2 alone. In
// virtual time, where the fence round reaches master 2 on a connection
// dialled again after the cut, as scheduled (on real masters a loaded
// machine could send it before the dial, a second failure).
func fenceWithAFailure(t *testing.T, res, fenceSHA string,
	do func(ctx context.Context, l *engine.Locker, res string) (*engine.Lease, error),
	hold func(e *env, i int, res string)) (err error) {
	simTest(t, 3, func(t *testing.T, e *env) {
		addrs := e.addrs
		dp1 := newDropProxy(e, addrs[1])
		dp2 := newDropProxy(e, addrs[2])
		l := e.locker(func(c *engine.Config) {
			c.Masters = []string{addrs[0], dp1.addr(), dp2.addr()}
			c.Fencing = true
		})
		fence := []byte(fenceSHA)
		dp1.needle.Store(&fence)
		if hold != nil {
			hold(e, 2, res)
			hold(e, 2, res+"-b")
		} else {
			first := []byte(res) // the first command with the key: the acquire
			dp2.needle.Store(&first)
		}
		var le *engine.Lease
		le, err = do(context.Background(), l, res)
		if dp2.dropped.Load() != (hold == nil) || !dp1.dropped.Load() {
			t.Fatalf("set-up: the acquire to master 2 cut: %v, the fence round to master 1 cut: %v (%v)", dp2.dropped.Load(), dp1.dropped.Load(), err)
		}
		if err == nil {
			le.Release(context.Background())
			t.Fatal("set-up: acquired with one master's fence round lost and another's key missing")
		}
		var ve *engine.VotesError
		if !errors.As(err, &ve) || ve.Op != "fence" || ve.Refused != 1 || ve.Failed != 1 {
			t.Fatalf("set-up: want a fence round with master 2 refusing and master 1 failed, got %v", err)
		}
	})
	return err
}
