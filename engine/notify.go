package engine

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// notifier delivers release notifications to Lock waiters. It keeps one
// dedicated pub/sub connection per master (opened on first use) and one
// subscription per resource that has waiters, whatever their number.
//
// Why PUBLISH from the release script rather than client-side-caching
// invalidations (as rueidislock does): a publish happens only on a real
// release, while an invalidation also fires for every SET by a competitor
// and for our own writes, waking waiters for nothing; pub/sub needs no
// tracking table on the masters and no client cache. An expiry publishes
// nothing, which the waiter's fallback retry covers. A release publishes
// only if a waiter marked the holder's value (see waitMark), so that the
// many releases nobody waits for cost the masters no PUBLISH.
type notifier struct {
	pool *multiplex.Pool
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	topics map[string]*topic
	conns  []*subConn
	closed bool
}

type topic struct {
	waiters map[*subscription]struct{}
	// ready closes when the masters have confirmed the subscription: a
	// waiter marks the holder only after that, or the release it asks for
	// could be published before anyone listens.
	ready chan struct{}
}

// subscription wakes one waiter. C has room for one signal, so a release
// between two waits is not lost, and the masters' messages for one release
// wake a waiter at most twice: once, and once more if they came while it
// was retrying. That second retry is needed: the first can reach a master
// whose delete is still on its way, and be refused there.
type subscription struct {
	n       *notifier
	channel string
	C       chan struct{}
}

type subConn struct {
	node   int
	c      rueidis.DedicatedClient
	cancel func()
}

func newNotifier(pool *multiplex.Pool) *notifier {
	n := &notifier{pool: pool, stop: make(chan struct{}), topics: make(map[string]*topic)}
	n.conns = make([]*subConn, pool.Len())
	return n
}

// subscribe registers a waiter for resource key's releases. The caller
// must close the subscription.
func (n *notifier) subscribe(ctx context.Context, key string) *subscription {
	s := &subscription{n: n, channel: releasedPrefix + key, C: make(chan struct{}, 1)}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return s
	}
	t := n.topics[s.channel]
	first := t == nil
	if first {
		t = &topic{waiters: make(map[*subscription]struct{}), ready: make(chan struct{})}
		n.topics[s.channel] = t
	}
	t.waiters[s] = struct{}{}
	n.mu.Unlock()
	if first {
		n.send(ctx, true, s.channel)
		close(t.ready)
	} else {
		select {
		case <-t.ready:
		case <-ctx.Done():
		}
	}
	return s
}

func (s *subscription) close() {
	if s == nil {
		return
	}
	n := s.n
	n.mu.Lock()
	t := n.topics[s.channel]
	last := false
	if t != nil {
		delete(t.waiters, s)
		if len(t.waiters) == 0 {
			delete(n.topics, s.channel)
			last = true
		}
	}
	closed := n.closed
	n.mu.Unlock()
	if last && !closed {
		ctx, cancel := context.WithTimeout(context.Background(), n.pool.NodeTimeout())
		n.send(ctx, false, s.channel)
		cancel()
	}
}

// send subscribes or unsubscribes on every master's pub/sub connection at
// once. A master without one is skipped: its releases are covered by the
// other masters' and by the fallback retry.
func (n *notifier) send(ctx context.Context, subscribe bool, channel string) {
	var wg sync.WaitGroup
	for i := range n.conns {
		sc := n.conn(i)
		if sc == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := sc.c.B()
			if subscribe {
				sc.c.Do(ctx, b.Subscribe().Channel(channel).Build())
			} else {
				sc.c.Do(ctx, b.Unsubscribe().Channel(channel).Build())
			}
		}()
	}
	wg.Wait()
}

// conn returns node i's pub/sub connection, opening it if needed.
func (n *notifier) conn(i int) *subConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	if sc := n.conns[i]; sc != nil {
		return sc
	}
	client := n.pool.Nodes()[i].Client()
	if client == nil {
		return nil
	}
	dc, cancel := client.Dedicate()
	sc := &subConn{node: i, c: dc, cancel: cancel}
	errs := dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: n.deliver})
	n.conns[i] = sc
	n.wg.Add(1)
	go n.watch(sc, errs)
	return sc
}

// watch forgets a pub/sub connection that broke, and resubscribes the
// current topics on a new one, so that a restarted master rejoins.
func (n *notifier) watch(sc *subConn, errs <-chan error) {
	defer n.wg.Done()
	select {
	case <-errs:
	case <-n.stop:
		sc.cancel()
		return
	}
	sc.cancel()
	n.mu.Lock()
	if n.conns[sc.node] == sc {
		n.conns[sc.node] = nil
	}
	n.mu.Unlock()
	for {
		select {
		case <-n.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		n.mu.Lock()
		channels := make([]string, 0, len(n.topics))
		for ch := range n.topics {
			channels = append(channels, ch)
		}
		n.mu.Unlock()
		if len(channels) == 0 {
			return // reopened on the next subscribe
		}
		if nc := n.conn(sc.node); nc != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := nc.c.Do(ctx, nc.c.B().Subscribe().Channel(channels...).Build()).Error()
			cancel()
			if err == nil {
				return
			}
		}
	}
}

func (n *notifier) deliver(m rueidis.PubSubMessage) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t := n.topics[m.Channel]; t != nil {
		for s := range t.waiters {
			select {
			case s.C <- struct{}{}:
			default:
			}
		}
	}
}

// subscriptions is the number of resources with waiters.
func (n *notifier) subscriptions() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.topics)
}

func (n *notifier) close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	close(n.stop)
	n.mu.Unlock()
	n.wg.Wait()
}
