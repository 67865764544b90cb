package engines

import (
	"context"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/results"
)

// redlock adapts *engine.Locker. *engine.Lease has every method of
// Lease, Detailed, Watched and Permitted, so that a lease passes through
// without a wrapper.
type redlock struct{ l *engine.Locker }

// newRedlock is one Locker of spec on v: its own connections, gate and
// subscriptions, as a separate process would have.
func newRedlock(ctx context.Context, spec Spec, v Votes) (*redlock, error) {
	ec, err := spec.EngineConfig(v)
	if err != nil {
		return nil, err
	}
	l, err := engine.New(ctx, ec)
	if err != nil {
		return nil, err
	}
	return &redlock{l: l}, nil
}

// lease hands le on; a nil *engine.Lease in a Lease would not compare
// equal to nil.
func lease(le *engine.Lease, err error) (Lease, error) {
	if err != nil {
		return nil, err
	}
	return le, nil
}

func (e *redlock) TryLock(ctx context.Context, resource string) (Lease, error) {
	return lease(e.l.TryLock(ctx, resource))
}

func (e *redlock) Lock(ctx context.Context, resource string) (Lease, error) {
	return lease(e.l.Lock(ctx, resource))
}

func (e *redlock) TryLockAll(ctx context.Context, names ...string) (Lease, error) {
	return lease(e.l.TryLockAll(ctx, names...))
}

func (e *redlock) LockAll(ctx context.Context, names ...string) (Lease, error) {
	return lease(e.l.LockAll(ctx, names...))
}

func (e *redlock) Close() error { return e.l.Close() }

// nodes is each master's state as this client sees it, in vote order.
func (e *redlock) nodes() []results.Node {
	st := e.l.Nodes()
	out := make([]results.Node, len(st))
	for i, n := range st {
		out[i] = results.Node{
			Addr: n.Addr, State: string(n.State), QuarantinedUntil: n.QuarantinedUntil,
			RunID: n.RunID, Version: n.Version, Restarts: n.Restarts, Error: n.Err,
			OK: n.OK, Refused: n.Refused, Failed: n.Failed, TimedOut: n.TimedOut,
		}
		if !n.QuarantinedUntil.IsZero() {
			out[i].QuarantinedUntil = n.QuarantinedUntil.UTC().Round(0)
		}
	}
	return out
}

// redlock's semaphores and read/write locks: a handle per resource.

func (e *redlock) semaphores(permits int) semaphores {
	s := &redlockSemaphores{}
	s.h.make = func(name string) (*engine.Semaphore, error) { return e.l.Semaphore(name, permits) }
	return s
}

type redlockSemaphores struct{ h handles[*engine.Semaphore] }

func (s *redlockSemaphores) tryAcquire(ctx context.Context, name string) (Lease, error) {
	h, err := s.h.get(name)
	if err != nil {
		return nil, err
	}
	return lease(h.TryAcquire(ctx))
}

func (s *redlockSemaphores) acquire(ctx context.Context, name string) (Lease, error) {
	h, err := s.h.get(name)
	if err != nil {
		return nil, err
	}
	return lease(h.Acquire(ctx))
}

func (e *redlock) rwLocks() rwLocks {
	s := &redlockRW{}
	s.h.make = e.l.RWMutex
	return s
}

type redlockRW struct{ h handles[*engine.RWMutex] }

func (s *redlockRW) tryLock(ctx context.Context, name string, read bool) (Lease, error) {
	h, err := s.h.get(name)
	switch {
	case err != nil:
		return nil, err
	case read:
		return lease(h.TryRLock(ctx))
	}
	return lease(h.TryLock(ctx))
}

func (s *redlockRW) lock(ctx context.Context, name string, read bool) (Lease, error) {
	h, err := s.h.get(name)
	switch {
	case err != nil:
		return nil, err
	case read:
		return lease(h.RLock(ctx))
	}
	return lease(h.Lock(ctx))
}
