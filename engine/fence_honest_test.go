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

// A fence round that fails with masters failed, and refused only where
// our key is not (a master the acquire never reached, which answers
// that the key is not ours), lost its quorum to the failures: nobody
// else holds the resource, and the honest answer is ErrNoQuorum, not
// contention (guarantee 6). Master 2 loses the acquire with its
// connection and is asked again, empty, in the fence round; master 1
// loses the fence round with its connection. The control turns on
// fence-refusal-is-contention, which reports ErrNotAcquired.
func TestFenceRefusedWhereTheKeyNeverWasIsNoQuorum(t *testing.T) {
	ops := []struct {
		name string
		sha  string // the fence round's script
		do   func(ctx context.Context, l *engine.Locker, res string) (*engine.Lease, error)
	}{
		{"trylock", engine.FenceScriptSHA, func(ctx context.Context, l *engine.Locker, res string) (*engine.Lease, error) {
			return l.TryLock(ctx, res)
		}},
		{"trylockall", engine.FenceAllScriptSHA, func(ctx context.Context, l *engine.Locker, res string) (*engine.Lease, error) {
			return l.TryLockAll(ctx, res, res+"-b")
		}},
		{"tryacquire", engine.FenceScriptSHA, func(ctx context.Context, l *engine.Locker, res string) (*engine.Lease, error) {
			s, err := l.Semaphore(res, 2)
			if err != nil {
				return nil, err
			}
			return s.TryAcquire(ctx)
		}},
	}
	for _, contention := range []bool{false, true} {
		for _, op := range ops {
			t.Run(fmt.Sprintf("fence-refusal-is-contention=%v/%s", contention, op.name), func(t *testing.T) {
				defer mutation.FenceRefusalIsContention.Set(contention)()
				err := fenceWithAnEmptyMasterAndAFailure(t, op.name, op.sha, op.do)
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

// fenceWithAnEmptyMasterAndAFailure runs do on a fenced Locker whose
// acquire misses master 2 (its connection cut) and whose fence round
// misses master 1 (likewise), and returns its error.
func fenceWithAnEmptyMasterAndAFailure(t *testing.T, res, fenceSHA string,
	do func(ctx context.Context, l *engine.Locker, res string) (*engine.Lease, error)) error {
	e := newEnv(t, 3)
	addrs := e.cluster.Addrs()
	dp1 := newDropProxy(t, addrs[1])
	dp2 := newDropProxy(t, addrs[2])
	l := e.locker(func(c *engine.Config) {
		c.Masters = []string{addrs[0], dp1.addr(), dp2.addr()}
		c.Fencing = true
		c.NodeTimeout = time.Second // a loaded machine: no round cut short
	})
	fence := []byte(fenceSHA)
	dp1.needle.Store(&fence)
	first := []byte(res) // the first command with the key: the acquire
	dp2.needle.Store(&first)
	le, err := do(context.Background(), l, res)
	if !dp2.dropped.Load() || !dp1.dropped.Load() {
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
	return err
}
