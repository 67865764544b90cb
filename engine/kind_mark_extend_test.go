package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// One name, one kind, for leases held long: a read/write lock's reader or
// writer, auto-extended for 5 MaxTTL by a handle that makes no other
// attempt, must keep a Semaphore of the same name out (ErrWrongKind), and
// a semaphore's permit held so must keep a read/write lock of the name
// out. Each kind keeps its key beside the other's (the read/write lock's
// mark at the permit count key, the semaphore's count) 2 MaxTTL from its
// last check; an extension that did not keep it let it expire while the
// lease held, and the other kind was admitted beside it. Virtual time.
func TestRWLongHeldKeepsSemaphoreOut(t *testing.T) {
	for _, writer := range []bool{false, true} {
		for _, share := range []bool{true, false} {
			t.Run(fmt.Sprintf("writer=%v/share=%v", writer, share), func(t *testing.T) {
				simTest(t, 5, func(t *testing.T, e *env) {
					ctx := context.Background()
					cfg := func(c *engine.Config) {
						c.TTL, c.MaxTTL, c.AutoExtend = time.Second, 2*time.Second, true
						c.Wait.DisableGate = !share
					}
					m := rwMutex(t, e.locker(cfg), "long-rw")
					var le *engine.Lease
					var err error
					if writer {
						le, err = m.TryLock(ctx)
					} else {
						le, err = m.TryRLock(ctx)
					}
					if err != nil {
						t.Fatal(err)
					}
					defer le.Release(ctx)
					time.Sleep(10 * time.Second)
					if err := le.Err(); err != nil {
						t.Fatalf("set-up: the auto-extended lease ended: %v", err)
					}
					s, err := e.locker(cfg).Semaphore("long-rw", 2)
					if err != nil {
						t.Fatal(err)
					}
					p, err := s.TryAcquire(ctx)
					if err == nil {
						p.Release(ctx)
						t.Fatalf("a semaphore of the name was admitted beside a read/write lease held 5 MaxTTL (validity %s)", le.Validity())
					}
					if !errors.Is(err, engine.ErrWrongKind) {
						t.Fatalf("the semaphore: %v, want ErrWrongKind", err)
					}
				})
			})
		}
	}
}

func TestSemaphoreLongHeldKeepsRWOut(t *testing.T) {
	for _, writer := range []bool{false, true} {
		t.Run(fmt.Sprintf("writer=%v", writer), func(t *testing.T) {
			simTest(t, 5, func(t *testing.T, e *env) {
				ctx := context.Background()
				cfg := func(c *engine.Config) {
					c.TTL, c.MaxTTL, c.AutoExtend = time.Second, 2*time.Second, true
				}
				s, err := e.locker(cfg).Semaphore("long-sem", 2)
				if err != nil {
					t.Fatal(err)
				}
				p, err := s.TryAcquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Release(ctx)
				time.Sleep(10 * time.Second)
				if err := p.Err(); err != nil {
					t.Fatalf("set-up: the auto-extended permit ended: %v", err)
				}
				m := rwMutex(t, e.locker(cfg), "long-sem")
				var le *engine.Lease
				if writer {
					le, err = m.TryLock(ctx)
				} else {
					le, err = m.TryRLock(ctx)
				}
				if err == nil {
					le.Release(ctx)
					t.Fatalf("a read/write lock of the name was admitted beside a permit held 5 MaxTTL (validity %s)", p.Validity())
				}
				if !errors.Is(err, engine.ErrWrongKind) {
					t.Fatalf("the read/write lock: %v, want ErrWrongKind", err)
				}
			})
		})
	}
}
