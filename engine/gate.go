package engine

import (
	"context"
	"sync"
)

// gate queues a Locker's own goroutines that Lock the same resource, in
// FIFO order: only the head competes on the masters, and a release hands
// the resource to the next goroutine in line without a round trip's worth
// of polling. Without it, N goroutines of one process would each hammer the
// masters for a lock only one of them can hold.
type gate struct {
	mu     sync.Mutex
	queues map[string]*gateQueue
}

type gateQueue struct {
	busy    bool // a goroutine is past the gate: competing or holding
	waiters []chan struct{}
}

func newGate() *gate { return &gate{queues: make(map[string]*gateQueue)} }

// enter returns when the caller is at the head of resource's queue, with
// whether it had to wait, or ctx's error.
func (g *gate) enter(ctx context.Context, resource string) (waited bool, err error) {
	g.mu.Lock()
	q := g.queues[resource]
	if q == nil {
		q = &gateQueue{}
		g.queues[resource] = q
	}
	if !q.busy {
		q.busy = true
		g.mu.Unlock()
		return false, nil
	}
	ch := make(chan struct{})
	q.waiters = append(q.waiters, ch)
	g.mu.Unlock()
	select {
	case <-ch:
		return true, nil
	case <-ctx.Done():
		g.mu.Lock()
		for i, w := range q.waiters {
			if w == ch {
				q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
				g.mu.Unlock()
				return true, ctx.Err()
			}
		}
		g.mu.Unlock()
		// Handed the head just as ctx ended: pass it on.
		g.leave(resource)
		return true, ctx.Err()
	}
}

// leave hands resource's head to the next waiter, or forgets the queue.
func (g *gate) leave(resource string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queues[resource]
	if q == nil {
		return
	}
	if len(q.waiters) == 0 {
		delete(g.queues, resource)
		return
	}
	next := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	close(next)
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
