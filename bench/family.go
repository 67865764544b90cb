package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// The lock family in the bench: how each engine takes a semaphore's
// permit and a multi-resource lease (--lock). An engine is an Engine (the
// mutex) with, optionally, these capabilities; a multi-resource lease
// falls back to K mutexes one after another (sequential) for an engine
// without one of its own.

type (
	// semaphoreEngine is an engine with a semaphore: redlock, and the
	// nolock control.
	semaphoreEngine interface {
		// semaphores returns the semaphores named names, of permits
		// permits each, by resource index.
		semaphores(names []string, permits int) semaphores
	}
	// semaphores are a run's semaphores on one client, by resource index.
	semaphores interface {
		tryAcquire(ctx context.Context, res int) (Lease, error)
		acquire(ctx context.Context, res int) (Lease, error)
	}
	// multiEngine is an engine with a multi-resource lease: one lease on
	// every one of names, all or nothing. The worker names them in sorted
	// order.
	multiEngine interface {
		TryLockAll(ctx context.Context, names ...string) (Lease, error)
		LockAll(ctx context.Context, names ...string) (Lease, error)
	}
	// partedLease is a multi-resource lease made of one lease per
	// resource, in the order they were named; the oracle registers each
	// resource with its own part (its validity, its token).
	partedLease interface {
		Lease
		part(i int) Lease
	}
	// permitLease is a semaphore's permit that says its slot:
	// *engine.Lease.
	permitLease interface{ Permit() int }
)

// leasePart is the lease that holds the i-th resource of lease: its own
// part for a parted lease, else the lease itself.
func leasePart(lease Lease, i int) Lease {
	if p, ok := lease.(partedLease); ok {
		return p.part(i)
	}
	return lease
}

// clientLocks is how one client takes the run's lock.
type clientLocks struct {
	sems  semaphores
	multi multiEngine
}

// newClientLocks prepares client e for cfg.Lock on names.
func newClientLocks(e Engine, cfg Config, names []string) clientLocks {
	var cl clientLocks
	switch cfg.Lock.Kind {
	case LockSemaphore:
		// Validate allows semaphores only on engines that have them.
		cl.sems = e.(semaphoreEngine).semaphores(names, cfg.Lock.Permits)
	case LockMulti:
		if m, ok := e.(multiEngine); ok && !sequentialMulti(cfg.Engine) {
			cl.multi = m
		} else {
			cl.multi = sequential{e}
		}
	}
	return cl
}

// redlock's semaphores: a handle per resource, made on first use and
// shared by the client's workers, as the engine asks (a handle checks the
// permit count on the masters now and then, not at every attempt).
type redlockSemaphores struct {
	l       *engine.Locker
	names   []string
	permits int
	handles []atomic.Pointer[engine.Semaphore]
}

func (e *redlock) semaphores(names []string, permits int) semaphores {
	return &redlockSemaphores{l: e.l, names: names, permits: permits, handles: make([]atomic.Pointer[engine.Semaphore], len(names))}
}

func (s *redlockSemaphores) handle(res int) (*engine.Semaphore, error) {
	if h := s.handles[res].Load(); h != nil {
		return h, nil
	}
	h, err := s.l.Semaphore(s.names[res], s.permits)
	if err != nil {
		return nil, err
	}
	if !s.handles[res].CompareAndSwap(nil, h) {
		h = s.handles[res].Load()
	}
	return h, nil
}

func (s *redlockSemaphores) tryAcquire(ctx context.Context, res int) (Lease, error) {
	h, err := s.handle(res)
	if err != nil {
		return nil, err
	}
	le, err := h.TryAcquire(ctx)
	if err != nil {
		return nil, err
	}
	return le, nil
}

func (s *redlockSemaphores) acquire(ctx context.Context, res int) (Lease, error) {
	h, err := s.handle(res)
	if err != nil {
		return nil, err
	}
	le, err := h.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return le, nil
}

func (e *redlock) TryLockAll(ctx context.Context, names ...string) (Lease, error) {
	le, err := e.l.TryLockAll(ctx, names...)
	if err != nil {
		return nil, err
	}
	return le, nil
}

func (e *redlock) LockAll(ctx context.Context, names ...string) (Lease, error) {
	le, err := e.l.LockAll(ctx, names...)
	if err != nil {
		return nil, err
	}
	return le, nil
}

// sequential takes a multi-resource lease as K mutexes of its engine, one
// after another in the order named (sorted: so that two waiting for
// overlapping sets cannot deadlock), as a user without a multi-resource
// lock does. A failure releases what it took, newest first.
type sequential struct{ e Engine }

func (s sequential) TryLockAll(ctx context.Context, names ...string) (Lease, error) {
	return s.all(ctx, names, s.e.TryLock)
}

func (s sequential) LockAll(ctx context.Context, names ...string) (Lease, error) {
	return s.all(ctx, names, s.e.Lock)
}

func (s sequential) all(ctx context.Context, names []string, lock func(context.Context, string) (Lease, error)) (Lease, error) {
	parts := make([]Lease, 0, len(names))
	for _, n := range names {
		le, err := lock(ctx, n)
		if err != nil {
			// The undo must run even when the run is stopping: a part
			// left held would be contention for a TTL.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseGrace)
			(&partsLease{parts: parts}).Release(rctx)
			cancel()
			return nil, err
		}
		parts = append(parts, le)
	}
	return &partsLease{parts: parts}, nil
}

// partsLease is sequential's lease: one lease per resource.
type partsLease struct{ parts []Lease }

func (l *partsLease) part(i int) Lease { return l.parts[i] }

// ValidUntil is the earliest of the parts': the lease is whole until then.
func (l *partsLease) ValidUntil() time.Time {
	var u time.Time
	for i, p := range l.parts {
		if v := p.ValidUntil(); i == 0 || v.Before(u) {
			u = v
		}
	}
	return u
}

// Release releases the parts newest first, one after another, as a user
// unwinding nested locks does.
func (l *partsLease) Release(ctx context.Context) error {
	var errs []error
	for i := len(l.parts) - 1; i >= 0; i-- {
		if err := l.parts[i].Release(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// The detailedLease methods sum or join what the parts that have them
// say; parts of a baseline say nothing.

func (l *partsLease) Wait() engine.WaitInfo {
	var w engine.WaitInfo
	for _, p := range l.parts {
		if dl, ok := p.(detailedLease); ok {
			pw := dl.Wait()
			w.Attempts += pw.Attempts
			w.Notified += pw.Notified
			w.Fallbacks += pw.Fallbacks
			w.Backoffs += pw.Backoffs
			w.Gated = w.Gated || pw.Gated
			w.Cause = pw.Cause
			w.Waited += pw.Waited
		}
	}
	return w
}

// Token is 0: each part has its own, which the oracle checks per resource.
func (l *partsLease) Token() int64 { return 0 }

func (l *partsLease) Extensions() int {
	n := 0
	for _, p := range l.parts {
		if dl, ok := p.(detailedLease); ok {
			n += dl.Extensions()
		}
	}
	return n
}

func (l *partsLease) Err() error {
	for _, p := range l.parts {
		if dl, ok := p.(detailedLease); ok && dl.Err() != nil {
			return dl.Err()
		}
	}
	return nil
}

// The nolock control's semaphore and multi-resource lease are each wrong
// by exactly one, so that a run with them shows that the oracle catches
// the smallest breach of each rule: a semaphore of P admits P+1 holders,
// and a multi-resource lease takes all its resources but the last (in the
// order named) exclusively, and that one not at all.

// errNolockFull is the control's refusal: ErrNotAcquired, so that it
// counts as contended.
var errNolockFull = fmt.Errorf("nolock: held: %w", engine.ErrNotAcquired)

// nolockPoll is how often the control's waits try again.
const nolockPoll = 50 * time.Microsecond

type nolockSemaphores struct {
	ttl    time.Duration
	admits int32 // permits + 1
	held   []atomic.Int32
}

func (e *nolock) semaphores(names []string, permits int) semaphores {
	return &nolockSemaphores{ttl: e.ttl, admits: int32(permits) + 1, held: make([]atomic.Int32, len(names))}
}

func (s *nolockSemaphores) tryAcquire(ctx context.Context, res int) (Lease, error) {
	if s.held[res].Add(1) > s.admits {
		s.held[res].Add(-1)
		return nil, errNolockFull
	}
	return &nolockCounted{until: time.Now().Add(s.ttl), n: &s.held[res]}, nil
}

func (s *nolockSemaphores) acquire(ctx context.Context, res int) (Lease, error) {
	return nolockWait(ctx, func() (Lease, error) { return s.tryAcquire(ctx, res) })
}

// nolockWait tries until try succeeds or ctx ends.
func nolockWait(ctx context.Context, try func() (Lease, error)) (Lease, error) {
	for {
		le, err := try()
		if !errors.Is(err, engine.ErrNotAcquired) {
			return le, err
		}
		t := time.NewTimer(nolockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// nolockCounted is a permit of the control's semaphore.
type nolockCounted struct {
	until time.Time
	n     *atomic.Int32
	once  sync.Once
}

func (l *nolockCounted) ValidUntil() time.Time { return l.until }
func (l *nolockCounted) Release(context.Context) error {
	l.once.Do(func() { l.n.Add(-1) })
	return nil
}

// nolockTable is the control's record of the resources its
// multi-resource leases hold.
type nolockTable struct {
	mu   sync.Mutex
	held map[string]bool
}

func (e *nolock) TryLockAll(ctx context.Context, names ...string) (Lease, error) {
	if e.closed.Load() {
		return nil, errNolockClosed
	}
	t := &e.table
	taken := names[:max(len(names)-1, 0)] // all but the last
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held == nil {
		t.held = map[string]bool{}
	}
	for _, n := range taken {
		if t.held[n] {
			return nil, errNolockFull
		}
	}
	for _, n := range taken {
		t.held[n] = true
	}
	return &nolockMulti{until: time.Now().Add(e.ttl), t: t, names: slices.Clone(taken)}, nil
}

func (e *nolock) LockAll(ctx context.Context, names ...string) (Lease, error) {
	return nolockWait(ctx, func() (Lease, error) { return e.TryLockAll(ctx, names...) })
}

// nolockMulti is the control's multi-resource lease.
type nolockMulti struct {
	until time.Time
	t     *nolockTable
	names []string
	once  sync.Once
}

func (l *nolockMulti) ValidUntil() time.Time { return l.until }
func (l *nolockMulti) Release(context.Context) error {
	l.once.Do(func() {
		l.t.mu.Lock()
		for _, n := range l.names {
			delete(l.t.held, n)
		}
		l.t.mu.Unlock()
	})
	return nil
}
