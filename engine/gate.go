package engine

import (
	"context"
	"sync"
)

// gate queues a Locker's own goroutines that Lock the same resource, in
// FIFO order: only the head competes on the masters. A release hands the
// resource to the next goroutine in line, either by passing the lease
// itself (no round trip; see Lease.Release) or by letting it compete.
// Without the gate, N goroutines of one process would each hammer the
// masters for a lock only one of them can hold.
type gate struct {
	mu     sync.Mutex
	queues map[string]*gateQueue
	closed chan struct{} // closed by Locker.Close: waiters leave
}

type gateQueue struct {
	waiters []chan *Lease // each has room for one: the hand-off never blocks
}

func newGate() *gate { return &gate{queues: make(map[string]*gateQueue), closed: make(chan struct{})} }

func (g *gate) close() { close(g.closed) }

// enter returns when the caller is at the head of resource's queue, with
// whether it had to wait and, if its predecessor passed its lease on, that
// lease; or ctx's error, or ErrClosed once the Locker is closed.
func (g *gate) enter(ctx context.Context, resource string) (waited bool, inherited *Lease, err error) {
	g.mu.Lock()
	q := g.queues[resource]
	if q == nil {
		g.queues[resource] = &gateQueue{}
		g.mu.Unlock()
		return false, nil, nil
	}
	ch := make(chan *Lease, 1)
	q.waiters = append(q.waiters, ch)
	g.mu.Unlock()
	var done error // why the caller leaves the queue
	select {
	case le := <-ch:
		return true, le, nil
	case <-g.closed:
		done = ErrClosed
	case <-ctx.Done():
		done = ctx.Err()
	}
	g.mu.Lock()
	for i, w := range q.waiters {
		if w == ch {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			g.mu.Unlock()
			return true, nil, done
		}
	}
	g.mu.Unlock()
	// Made head just as we left: pass the turn (and any lease) on. The
	// lease was handed on, and its Release returned, before we left: its
	// keys must go even if Close has begun (it waits for Lock callers).
	if le := <-ch; le != nil {
		le.release(context.Background(), true)
	} else {
		g.leave(resource)
	}
	return true, nil, done
}

// leave hands resource's turn to the next waiter, who will compete on the
// masters, or forgets the queue.
func (g *gate) leave(resource string) {
	g.pass(resource, nil)
}

// pass gives the next waiter the turn and the lease le (nil: compete).
// It reports false, doing nothing, when le is not nil and nobody waits.
func (g *gate) pass(resource string, le *Lease) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queues[resource]
	if q == nil || len(q.waiters) == 0 {
		if le != nil {
			return false
		}
		delete(g.queues, resource)
		return true
	}
	next := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	next <- le
	return true
}

// waiting is the number of goroutines queued behind the head.
func (g *gate) waiting(resource string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if q := g.queues[resource]; q != nil {
		return len(q.waiters)
	}
	return 0
}
