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
// permit, a multi-resource lease and a read/write lock (--lock). An engine
// is an Engine (the mutex) with, optionally, these capabilities; a
// multi-resource lease falls back to K mutexes one after another
// (sequential) for an engine without one of its own, and EngineMutex
// takes a read/write lock's operations on its mutex.

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
	// rwEngine is an engine with a read/write lock: redlock, and the
	// nolock control.
	rwEngine interface {
		// rwLocks returns the read/write locks named names, by resource
		// index.
		rwLocks(names []string) rwLocks
	}
	// rwLocks are a run's read/write locks on one client, by resource
	// index: read takes resource res for reading, else for writing.
	rwLocks interface {
		tryLock(ctx context.Context, res int, read bool) (Lease, error)
		lock(ctx context.Context, res int, read bool) (Lease, error)
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
	// rw is nil for EngineMutex, which takes rw:F on its mutex.
	rw rwLocks
}

// newClientLocks prepares client e for cfg.Lock on names.
func newClientLocks(e Engine, cfg Config, names []string) clientLocks {
	var cl clientLocks
	switch cfg.Lock.Kind {
	case LockSemaphore:
		// Validate allows semaphores only on engines that have them.
		cl.sems = e.(semaphoreEngine).semaphores(names, cfg.Lock.Permits)
	case LockRW:
		// Validate allows rw:F only on engines that have it, and on
		// EngineMutex.
		if !exclusiveRW(cfg.Engine) {
			cl.rw = e.(rwEngine).rwLocks(names)
		}
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

// redlock's read/write locks: a handle per resource, made on first use
// and shared by the client's workers, as the engine asks (a handle marks
// the name as a read/write lock's now and then, not at every attempt).
type redlockRW struct {
	l       *engine.Locker
	names   []string
	handles []atomic.Pointer[engine.RWMutex]
}

func (e *redlock) rwLocks(names []string) rwLocks {
	return &redlockRW{l: e.l, names: names, handles: make([]atomic.Pointer[engine.RWMutex], len(names))}
}

func (s *redlockRW) handle(res int) (*engine.RWMutex, error) {
	if h := s.handles[res].Load(); h != nil {
		return h, nil
	}
	h, err := s.l.RWMutex(s.names[res])
	if err != nil {
		return nil, err
	}
	if !s.handles[res].CompareAndSwap(nil, h) {
		h = s.handles[res].Load()
	}
	return h, nil
}

func (s *redlockRW) tryLock(ctx context.Context, res int, read bool) (Lease, error) {
	h, err := s.handle(res)
	if err != nil {
		return nil, err
	}
	var le *engine.Lease
	if read {
		le, err = h.TryRLock(ctx)
	} else {
		le, err = h.TryLock(ctx)
	}
	if err != nil {
		return nil, err
	}
	return le, nil
}

func (s *redlockRW) lock(ctx context.Context, res int, read bool) (Lease, error) {
	h, err := s.handle(res)
	if err != nil {
		return nil, err
	}
	var le *engine.Lease
	if read {
		le, err = h.RLock(ctx)
	} else {
		le, err = h.Lock(ctx)
	}
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

// The nolock control's semaphore, multi-resource lease and read/write
// lock are each wrong by exactly one, so that a run with them shows that
// the oracle catches the smallest breach of each rule: a semaphore of P
// admits P+1 holders, a multi-resource lease takes all its resources but
// the last (in the order named) exclusively, and that one not at all, and
// a read/write lock lets a writer in beside one reader (never beside two,
// nor beside a writer).

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
	return &nolockCounted{until: time.Now().Add(s.ttl), n: &s.held[res], by: 1}, nil
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

// nolockCounted is a permit of the control's semaphore, or a hold of its
// read/write lock: its release takes by off the count n.
type nolockCounted struct {
	until time.Time
	n     *atomic.Int32
	by    int32
	once  sync.Once
}

func (l *nolockCounted) ValidUntil() time.Time { return l.until }
func (l *nolockCounted) Release(context.Context) error {
	l.once.Do(func() { l.n.Add(-l.by) })
	return nil
}

// nolockRW is the control's read/write locks: per resource, the count of
// readers, plus nolockWriter while a writer holds.
type nolockRW struct {
	ttl   time.Duration
	state []atomic.Int32
}

// nolockWriter is a writer in nolockRW's state, above any count of readers.
const nolockWriter = 1 << 24

func (e *nolock) rwLocks(names []string) rwLocks {
	return &nolockRW{ttl: e.ttl, state: make([]atomic.Int32, len(names))}
}

// admits reports whether the control lets a reader (read) or a writer in
// when the lock's state is v. A reader waits for no reader; a writer, off
// by one, waits for a second reader only.
func (nolockRW) admits(v int32, read bool) bool {
	if read {
		return v < nolockWriter
	}
	return v <= 1
}

func (s *nolockRW) tryLock(ctx context.Context, res int, read bool) (Lease, error) {
	st, by := &s.state[res], int32(nolockWriter)
	if read {
		by = 1
	}
	for {
		v := st.Load()
		if !s.admits(v, read) {
			return nil, errNolockFull
		}
		if st.CompareAndSwap(v, v+by) {
			return &nolockCounted{until: time.Now().Add(s.ttl), n: st, by: by}, nil
		}
	}
}

func (s *nolockRW) lock(ctx context.Context, res int, read bool) (Lease, error) {
	return nolockWait(ctx, func() (Lease, error) { return s.tryLock(ctx, res, read) })
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
