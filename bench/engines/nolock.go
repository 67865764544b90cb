package engines

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

// nolock is the control: it grants every request at once, without Redis,
// with a lease valid for the TTL. Under contention two workers hold the
// same resource, so a run with it must report violations; if it does not,
// the oracle is broken.
//
// Its semaphore, multi-resource lease and read/write lock are each wrong
// by exactly one, so that a run with them shows that the oracle catches
// the smallest breach of each rule: a semaphore of P admits P+1 holders,
// a multi-resource lease takes all its resources but the last (in the
// order named) exclusively, and that one not at all, and a read/write
// lock lets a writer in beside one reader (never beside two, nor beside a
// writer).
type nolock struct {
	ttl    time.Duration
	closed atomic.Bool
	// table is what its multi-resource leases hold.
	table nolockTable
}

func newNolock(ttl time.Duration) *nolock { return &nolock{ttl: ttl} }

// errNolockClosed is returned after Close, as a real engine would.
var errNolockClosed = errors.New("nolock: closed")

type nolockLease struct{ until time.Time }

func (l *nolockLease) ValidUntil() time.Time         { return l.until }
func (l *nolockLease) Release(context.Context) error { return nil }

func (e *nolock) TryLock(ctx context.Context, _ string) (Lease, error) {
	if e.closed.Load() {
		return nil, errNolockClosed
	}
	return &nolockLease{until: time.Now().Add(e.ttl)}, nil
}

func (e *nolock) Lock(ctx context.Context, resource string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.TryLock(ctx, resource)
}

func (e *nolock) Close() error {
	e.closed.Store(true)
	return nil
}

// errNolockFull is the control's refusal: ErrNotAcquired, so that it
// counts as contended.
var errNolockFull = fmt.Errorf("nolock: held: %w", engine.ErrNotAcquired)

// nolockPoll is how often the control's waits try again.
const nolockPoll = 50 * time.Microsecond

// nolockSemaphores count each semaphore's holders.
type nolockSemaphores struct {
	ttl    time.Duration
	admits int32 // permits + 1
	held   handles[*atomic.Int32]
}

func (e *nolock) semaphores(permits int) semaphores {
	s := &nolockSemaphores{ttl: e.ttl, admits: int32(permits) + 1}
	s.held.make = func(string) (*atomic.Int32, error) { return new(atomic.Int32), nil }
	return s
}

func (s *nolockSemaphores) tryAcquire(ctx context.Context, name string) (Lease, error) {
	n, _ := s.held.get(name)
	if n.Add(1) > s.admits {
		n.Add(-1)
		return nil, errNolockFull
	}
	return &nolockCounted{until: time.Now().Add(s.ttl), n: n, by: 1}, nil
}

func (s *nolockSemaphores) acquire(ctx context.Context, name string) (Lease, error) {
	return nolockWait(ctx, func() (Lease, error) { return s.tryAcquire(ctx, name) })
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
	state handles[*atomic.Int32]
}

// nolockWriter is a writer in nolockRW's state, above any count of readers.
const nolockWriter = 1 << 24

func (e *nolock) rwLocks() rwLocks {
	s := &nolockRW{ttl: e.ttl}
	s.state.make = func(string) (*atomic.Int32, error) { return new(atomic.Int32), nil }
	return s
}

// admits reports whether the control lets a reader (read) or a writer in
// when the lock's state is v. A reader waits for no reader; a writer, off
// by one, waits for a second reader only.
func (*nolockRW) admits(v int32, read bool) bool {
	if read {
		return v < nolockWriter
	}
	return v <= 1
}

func (s *nolockRW) tryLock(ctx context.Context, name string, read bool) (Lease, error) {
	st, _ := s.state.get(name)
	by := int32(nolockWriter)
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

func (s *nolockRW) lock(ctx context.Context, name string, read bool) (Lease, error) {
	return nolockWait(ctx, func() (Lease, error) { return s.tryLock(ctx, name, read) })
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
