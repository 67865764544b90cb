package engines

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/results"
)

// Lease is one acquisition: of a resource, a semaphore's permit, a read or
// a write, or several resources at once.
type Lease interface {
	// ValidUntil is when the holder must stop relying on the lock. It
	// carries a monotonic clock reading: the oracles compare it with
	// time.Now.
	ValidUntil() time.Time
	// Release gives the lock back.
	Release(ctx context.Context) error
}

// What a lease may tell beyond its validity. The drivers ask for what
// they record; baselines' leases tell nothing more.
type (
	// Detailed is a lease of the redlock engine (*engine.Lease), or a
	// multi-resource lease made of its leases: how it was obtained and
	// how it went.
	Detailed interface {
		Lease
		// Wait tells how Lock obtained the lease.
		Wait() engine.WaitInfo
		// Token is the fencing token; 0 without fencing.
		Token() int64
		// Extensions counts successful auto-extensions so far.
		Extensions() int
		// Err is non-nil once the lease can no longer be trusted.
		Err() error
	}
	// Watched is a lease that tells at once when it is lost: its Done
	// closes (*engine.Lease).
	Watched interface {
		Lease
		Done() <-chan struct{}
	}
	// Permitted is a semaphore's permit that says its slot
	// (*engine.Lease; -1 for another lock).
	Permitted interface{ Permit() int }
	// Valued is a lease that says the value it stored at its key
	// (*engine.Lease), so that a driver can look for the lease on a
	// master itself.
	Valued interface {
		Lease
		Value() string
	}
	// SelfExtending is a baseline's lease that extends itself while held,
	// whatever --extend says, so that its ValidUntil moves: an oracle
	// reads it again when the hold ends.
	SelfExtending interface {
		Lease
		SelfExtending()
	}
)

// Part is the lease that holds the i-th resource of a lease on several,
// in the order named: its own part when it is made of one lease per
// resource (K mutexes one after another), else the lease itself.
func Part(le Lease, i int) Lease {
	if p, ok := le.(partedLease); ok {
		return p.part(i)
	}
	return le
}

// partedLease is a multi-resource lease made of one lease per resource.
type partedLease interface {
	Lease
	part(i int) Lease
}

// Op is one operation: what a client takes, and how.
type Op struct {
	// Names are the resources: one, or the K of a multi-resource lease,
	// in the order it takes them (sorted, so that two waiting for
	// overlapping sets cannot deadlock).
	Names []string
	// Read takes a read/write lock for reading; the spec's engine may
	// take it exclusively (Lock.Shared).
	Read bool
	// Wait waits until the lock is taken or ctx ends; else one attempt.
	Wait bool
}

// Client is one lock client of a spec: its own connections to the
// masters, as a separate process would have, taking the spec's lock.
type Client struct {
	spec Spec
	m    mutexes
	// take is how the client takes the spec's lock (one of Take's
	// cases), sems, rw and multi what it takes it with.
	take  LockKind
	sems  semaphores
	rw    rwLocks
	multi multiLocker
}

// mutexes is what every implementation has: the mutex.
type mutexes interface {
	TryLock(ctx context.Context, resource string) (Lease, error)
	Lock(ctx context.Context, resource string) (Lease, error)
	Close() error
}

// The lock family in an implementation: a semaphore's permits, a
// read/write lock and a multi-resource lease, each optional. A
// multi-resource lease falls back to K mutexes one after another
// (sequential) for an implementation without one, and RedlockMutex takes
// a read/write lock's operations on its mutex.
type (
	semaphoreLocker interface {
		// semaphores returns the semaphores of permits permits each.
		semaphores(permits int) semaphores
	}
	semaphores interface {
		tryAcquire(ctx context.Context, name string) (Lease, error)
		acquire(ctx context.Context, name string) (Lease, error)
	}
	rwLocker interface{ rwLocks() rwLocks }
	// rwLocks take a resource's read/write lock, for reading if read.
	rwLocks interface {
		tryLock(ctx context.Context, name string, read bool) (Lease, error)
		lock(ctx context.Context, name string, read bool) (Lease, error)
	}
	// multiLocker takes one lease on every one of names, all or nothing.
	multiLocker interface {
		TryLockAll(ctx context.Context, names ...string) (Lease, error)
		LockAll(ctx context.Context, names ...string) (Lease, error)
	}
)

// Open makes a client of spec on votes v, within ctx. The caller closes
// it.
func Open(ctx context.Context, spec Spec, v Votes) (*Client, error) {
	m, err := open(ctx, spec, v)
	if err != nil {
		return nil, err
	}
	c := &Client{spec: spec, m: m, take: spec.Lock.Kind}
	// Spec.Validate allows a lock only on an implementation that has it,
	// rw:F on RedlockMutex as its mutex, and multi:K on any.
	switch l := spec.Lock; {
	case l.Kind == LockSemaphore:
		c.sems = m.(semaphoreLocker).semaphores(l.Permits)
	case l.Kind == LockRW && l.Shared(spec.Engine):
		c.rw = m.(rwLocker).rwLocks()
	case l.Kind == LockRW:
		c.take = LockMutex
	case l.Kind == LockMulti:
		if ml, ok := m.(multiLocker); ok && !spec.Engine.Sequential() {
			c.multi = ml
		} else {
			c.multi = sequential{m}
		}
	}
	return c, nil
}

// open connects the implementation of spec's engine.
func open(ctx context.Context, spec Spec, v Votes) (mutexes, error) {
	switch spec.Engine.Base {
	case Nolock:
		return newNolock(spec.TTL), nil
	case Redlock, RedlockPerCommand, RedlockSequential, RedlockMutex:
		return newRedlock(ctx, spec, v)
	case RedsyncRueidis, RedsyncGoredis:
		return newRedsync(ctx, spec, v.Masters)
	case Rueidislock:
		return newRueidislock(spec, v)
	case BsmRedislock:
		return newBsmRedislock(ctx, spec, v.Masters)
	}
	return nil, flagErr("engine", spec.Engine, "unknown engine")
}

// Take takes op's lock: the one place that tells the lock kinds apart.
func (c *Client) Take(ctx context.Context, op Op) (Lease, error) {
	switch c.take {
	case LockSemaphore:
		if op.Wait {
			return c.sems.acquire(ctx, op.Names[0])
		}
		return c.sems.tryAcquire(ctx, op.Names[0])
	case LockRW:
		if op.Wait {
			return c.rw.lock(ctx, op.Names[0], op.Read)
		}
		return c.rw.tryLock(ctx, op.Names[0], op.Read)
	case LockMulti:
		if op.Wait {
			return c.multi.LockAll(ctx, op.Names...)
		}
		return c.multi.TryLockAll(ctx, op.Names...)
	}
	if op.Wait {
		return c.m.Lock(ctx, op.Names[0])
	}
	return c.m.TryLock(ctx, op.Names[0])
}

// Close closes the client's connections.
func (c *Client) Close() error { return c.m.Close() }

// Nodes is each master's state as this client sees it, in vote order;
// nil for an implementation that does not report them.
func (c *Client) Nodes() []results.Node {
	if r, ok := c.m.(*redlock); ok {
		return r.nodes()
	}
	return nil
}

// SentinelMasters is, per vote in vote order, the address of the master
// a Sentinel vote's sentinels named when this client last connected to
// it, which changes with a failover; "" for the other votes. nil for an
// implementation that does not report it.
func (c *Client) SentinelMasters() []string {
	r, ok := c.m.(*redlock)
	if !ok {
		return nil
	}
	st := r.l.Nodes()
	out := make([]string, len(st))
	for i, n := range st {
		out[i] = n.Master
	}
	return out
}

// Subscriptions is the number of resources this client is subscribed to
// for release notifications right now; 0 for an implementation without
// them.
func (c *Client) Subscriptions() int {
	if r, ok := c.m.(*redlock); ok {
		return r.l.Subscriptions()
	}
	return 0
}

// NodeTimeout is how long an attempt waits for the masters' answers, as
// the implementation set it (Spec.NodeTimeout, or its default); 0 for one
// without such a bound of its own (a baseline bounds its attempts by its
// own share of the TTL).
func (c *Client) NodeTimeout() time.Duration {
	switch m := c.m.(type) {
	case *redlock:
		return m.l.Config().NodeTimeout
	case *rueidislockEngine:
		return m.tryNextAfter
	}
	return 0
}

// Outcome is what a failed acquire says.
type Outcome uint8

// The outcomes of a failed acquire.
const (
	// Contended: another holder has the lock.
	Contended Outcome = iota
	// NoQuorum: too few masters answered yes or no to decide.
	NoQuorum
	// TimedOut: the context's deadline passed.
	TimedOut
	// Failed: anything else.
	Failed
)

// Classify sorts a failed acquire of any implementation: each maps its
// errors to the engine's sentinels. Contention is checked first: it is by
// far the most common failure under load.
func Classify(err error) Outcome {
	// The fast path reads the category without errors.Is, whose walk
	// builds VotesError's unwrap list: an allocation per refusal.
	if ve, ok := err.(*engine.VotesError); ok && ve.Kind != nil {
		switch ve.Kind {
		case engine.ErrNotAcquired:
			return Contended
		case engine.ErrNoQuorum:
			return NoQuorum
		}
	}
	switch {
	case errors.Is(err, engine.ErrNotAcquired):
		return Contended
	case errors.Is(err, engine.ErrNoQuorum):
		return NoQuorum
	case errors.Is(err, context.DeadlineExceeded):
		return TimedOut
	}
	return Failed
}

// Lost reports a release that found the lease gone: expired, or no longer
// held on a quorum.
func Lost(err error) bool {
	return errors.Is(err, engine.ErrLeaseExpired) || errors.Is(err, engine.ErrNotHeld)
}

// handles are a client's handles of one kind, by name: made on first use
// and shared by the client's workers, as the engine asks (a handle checks
// a semaphore's permit count, or marks a read/write lock's name, now and
// then rather than at every attempt).
type handles[H any] struct {
	m    sync.Map // name -> H
	make func(name string) (H, error)
}

func (h *handles[H]) get(name string) (H, error) {
	if v, ok := h.m.Load(name); ok {
		return v.(H), nil
	}
	v, err := h.make(name)
	if err != nil {
		return v, err
	}
	got, _ := h.m.LoadOrStore(name, v)
	return got.(H), nil
}
