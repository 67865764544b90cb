package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// notifier delivers release notifications to Lock waiters. It keeps one
// dedicated pub/sub connection per master (opened on first use, each by a
// goroutine of its own) and one subscription per resource that has
// waiters, whatever their number.
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
	// masters is how many of the votes are plain masters, which come
	// first, then clusters cluster votes; the rest are Sentinel votes,
	// whose clients reach one master as a plain master's do.
	masters, clusters int
	// wait bounds how long a resource's first waiter waits for one master
	// to confirm a new subscription (the node timeout): a slower master is
	// left to the others and to the fallback retry.
	wait time.Duration
	ctx  context.Context // ends at close
	stop context.CancelFunc
	wg   sync.WaitGroup

	// mu guards the fields below and the nodes' shared fields. Nothing
	// waits for the network while holding it.
	mu     sync.Mutex
	topics map[string]*topic
	nodes  []*subNode
	closed bool
	// linger is how long a topic outlives its last waiter (see
	// Config.Wait.NotifyLinger); lingering counts the topics doing so.
	linger    time.Duration
	lingering int
}

type topic struct {
	channel string
	waiters map[*subscription]struct{}
	// awaited has bit i set while master i has yet to confirm the
	// subscription or fail; ready closes when it is empty. A waiter marks
	// the holder only after that (or after deadline), or the release it
	// asks for could be published before anyone listens.
	awaited  uint64
	ready    chan struct{}
	deadline time.Time
	// idleSince is when the last waiter left a lingering topic; expire,
	// on timer idle, ends the topic once it has been idle for linger.
	lingering bool
	idleSince time.Time
	idle      *time.Timer
	// revived is the idle spell a waiter interrupted when it took the
	// topic out of lingering, while only subscriptions that never waited
	// have come and gone since (zero otherwise): the last of them to go
	// gives it back rather than starting a new one.
	revived time.Time
	// delivered counts the messages delivered on the topic (see
	// notifier.since).
	delivered uint64
}

// done records that master i confirmed the subscription or cannot.
func (t *topic) done(i int) {
	if t.awaited&(1<<i) != 0 {
		t.awaited &^= 1 << i
		if t.awaited == 0 {
			close(t.ready)
		}
	}
}

// subscription wakes one waiter, when a release names its id (see
// releaseScript: a release wakes the waiter first in the resource's queue,
// not every subscriber). C has room for one signal, so a release between
// two waits is not lost, and the masters' messages for one release wake a
// waiter at most twice: once, and once more if they came while it was
// retrying. That second retry is needed: the first can reach a master
// whose delete is still on its way, and be refused there.
type subscription struct {
	n  *notifier
	id string // the waiter's id in the resource's queue
	C  chan struct{}
	// turns counts the masters that gave this waiter the turn since it
	// last woke (see awaitTurns).
	turns atomic.Int32
	// passing marks a subscription that never waited (see pass).
	passing bool
	// group are the other subscriptions of a LockAll waiter, one per
	// resource, which share C (see subscribeAll); nil for Lock's. A
	// pointer, so that Lock's subscription stays small.
	group *[]*subscription
	// topic is the topic the subscription joined (nil: none, the
	// notifier closed), with its delivered count then.
	topic  *topic
	joined uint64
}

// pass marks s as one that never waited: a reader subscribed ahead of an
// attempt that was admitted. A topic that only such subscriptions took
// out of lingering goes on lingering from when it went idle (see
// topic.revived), so that readers that never wait do not keep a lock
// "waited for lately" forever.
func (s *subscription) pass() {
	if s != nil {
		s.passing = true
	}
}

// settleTurns bounds how long a woken waiter waits for more masters to
// give it the turn.
const settleTurns = 2 * time.Millisecond

// awaitTurns returns once quorum masters gave the waiter the turn since it
// last woke, or settleTurns after the first did, so that its attempt does
// not reach the masters whose release is still on its way, be refused
// there, and take another round trip; false if ctx ended. settle is the
// caller's timer, created on first use.
func (s *subscription) awaitTurns(ctx context.Context, quorum int, settle **time.Timer) bool {
	defer s.clearTurns()
	if s.mostTurns() >= quorum {
		return true
	}
	if *settle == nil {
		*settle = time.NewTimer(settleTurns)
	} else {
		(*settle).Reset(settleTurns)
	}
	for s.mostTurns() < quorum {
		select {
		case <-s.C:
		case <-(*settle).C:
			return true
		case <-ctx.Done():
			(*settle).Stop()
			return false
		}
	}
	(*settle).Stop()
	return true
}

// mostTurns is the most masters that gave the waiter the turn on one of
// its resources since it last woke.
func (s *subscription) mostTurns() int {
	n := int(s.turns.Load())
	if s.group != nil {
		for _, g := range *s.group {
			n = max(n, int(g.turns.Load()))
		}
	}
	return n
}

func (s *subscription) clearTurns() {
	s.turns.Store(0)
	if s.group != nil {
		for _, g := range *s.group {
			g.turns.Store(0)
		}
	}
}

// Connection states of a subNode.
const (
	nodeIdle       = iota // no goroutine yet
	nodeConnecting        // first connection under way: new topics await it
	nodeUp
	nodeDown // failed; retried in the background, new topics do not await it
)

// subNode is one master's pub/sub connection. Only its own goroutine
// (run) opens it and sends SUBSCRIBE and UNSUBSCRIBE on it, one batch at a
// time, each batch computed from the topics as they are then: commands for
// one channel reach the master in the order the topics changed, and the
// master ends up subscribed to exactly the channels with waiters.
type subNode struct {
	i int
	// Under notifier.mu.
	state int
	dirty map[string]struct{} // channels whose topic changed since the last batch
	// kick wakes run when a topic changed; room for one.
	kick chan struct{}
	// lost are a cluster vote's subscriptions that its nodes ended, under
	// notifier.mu (see runShards).
	lost []shardLoss
}

// newNotifier subscribes for a Locker to its votes' releases: the first
// masters of them plain masters, the next clusters cluster votes, the rest
// Sentinel votes.
func newNotifier(pool *multiplex.Pool, votes, masters, clusters int, wait, linger time.Duration) *notifier {
	ctx, stop := context.WithCancel(context.Background())
	n := &notifier{pool: pool, masters: masters, clusters: clusters, wait: wait, ctx: ctx, stop: stop, topics: make(map[string]*topic), linger: linger}
	n.nodes = make([]*subNode, votes)
	for i := range n.nodes {
		n.nodes[i] = &subNode{i: i, dirty: make(map[string]struct{}), kick: make(chan struct{}, 1)}
	}
	return n
}

// subscribe registers waiter id for resource key's releases, and returns
// once the masters have confirmed the subscription, or ctx ended, or the
// masters still silent were given the node timeout. The caller must close
// the subscription.
func (n *notifier) subscribe(ctx context.Context, key, id string) *subscription {
	s, t := n.add(key, id, make(chan struct{}, 1))
	n.ready(ctx, t)
	return s
}

// add registers waiter id for resource key's releases, which signal c,
// and returns its topic (nil once the notifier is closed) for ready.
func (n *notifier) add(key, id string, c chan struct{}) (*subscription, *topic) {
	s := &subscription{n: n, id: id, C: c}
	channel := releasedPrefix + key
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return s, nil
	}
	t := n.topics[channel]
	if t == nil {
		t = &topic{channel: channel, waiters: make(map[*subscription]struct{}), ready: make(chan struct{}), deadline: time.Now().Add(n.wait)}
		n.topics[channel] = t
		for _, sn := range n.nodes {
			if sn.state == nodeIdle {
				sn.state = nodeConnecting
				n.wg.Add(1)
				go n.run(sn)
			}
			if sn.state != nodeDown {
				t.awaited |= 1 << sn.i
			}
			n.touch(sn, channel)
		}
		if t.awaited == 0 {
			close(t.ready)
		}
	}
	if t.lingering {
		t.lingering = false
		n.lingering--
		t.revived = t.idleSince
	}
	t.waiters[s] = struct{}{}
	s.topic, s.joined = t, t.delivered
	n.mu.Unlock()
	return s, t
}

// since is s's topic and its delivered count now: a subscription s2
// with s2.topic == t and s2.joined <= count was among the topic's
// waiters before every message delivered after this call (each delivery
// counts), so it gets every release published after it that s would.
func (n *notifier) since(s *subscription) (t *topic, count uint64) {
	if s.topic == nil {
		return nil, 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return s.topic, s.topic.delivered
}

// ready returns once the masters have confirmed topic t's subscription
// (nil: none), or ctx ended, or the masters still silent were given the
// node timeout.
func (n *notifier) ready(ctx context.Context, t *topic) {
	if t == nil {
		return
	}
	select {
	case <-t.ready:
		return // the hot path: already subscribed
	default:
	}
	timer := time.NewTimer(time.Until(t.deadline))
	defer timer.Stop()
	select {
	case <-t.ready:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// touch marks channel for node sn's next batch, and wakes sn's goroutine.
// The caller holds n.mu. Without a connection there is no batch to mark
// for: a new connection starts from all the topics.
func (n *notifier) touch(sn *subNode, channel string) {
	if sn.state == nodeUp {
		sn.dirty[channel] = struct{}{}
	}
	select {
	case sn.kick <- struct{}{}:
	default:
	}
}

// close unregisters the waiter; the last one's leaving unsubscribes, in
// the background.
func (s *subscription) close() {
	if s == nil {
		return
	}
	if s.group != nil {
		for _, g := range *s.group {
			g.close()
		}
	}
	if s.topic == nil {
		return // the notifier was closed when it subscribed
	}
	n := s.n
	n.mu.Lock()
	defer n.mu.Unlock()
	channel := s.topic.channel
	t := n.topics[channel]
	if t == nil {
		return
	}
	delete(t.waiters, s)
	if !s.passing {
		t.revived = time.Time{}
	}
	if len(t.waiters) > 0 {
		return
	}
	if n.closed {
		delete(n.topics, channel)
		return
	}
	if n.linger > 0 && n.lingering < MaxLingering {
		idle := time.Now()
		if !t.revived.IsZero() {
			idle, t.revived = t.revived, time.Time{}
		}
		t.lingering, t.idleSince = true, idle
		n.lingering++
		d := max(n.linger-time.Since(idle), 0)
		if t.idle == nil {
			t.idle = time.AfterFunc(d, func() { n.expire(channel, t) })
		} else {
			t.idle.Reset(d)
		}
		return
	}
	n.drop(channel)
}

// expire ends topic t on channel once it has lingered without a waiter for
// n.linger. A timer that fires for an earlier idle spell (a waiter came
// and went since) finds the topic idle for less, and leaves it to the
// timer's next run.
func (n *notifier) expire(channel string, t *topic) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.topics[channel] != t || !t.lingering {
		return
	}
	if d := n.linger - time.Since(t.idleSince); d > 0 {
		t.idle.Reset(d)
		return
	}
	t.lingering = false
	n.lingering--
	n.drop(channel)
}

// drop ends the topic on channel: the masters are unsubscribed in the
// background. The caller holds n.mu.
func (n *notifier) drop(channel string) {
	delete(n.topics, channel)
	for _, sn := range n.nodes {
		n.touch(sn, channel)
	}
}

// listening reports whether this Locker is subscribed to key's releases
// (for waiters, or lingering after them): a resource waited for lately,
// whose next waiter queues at its first attempt.
func (n *notifier) listening(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.topics[releasedPrefix+key] != nil
}

// run owns node sn's pub/sub connection until close: it opens it, keeps
// the master's subscriptions in step with the topics, and when the
// connection cannot be opened or breaks, retries in the background. A
// master without a connection is skipped: its releases are covered by the
// other masters' and by the fallback retry.
func (n *notifier) run(sn *subNode) {
	if sn.i >= n.masters && sn.i < n.masters+n.clusters { // a cluster vote
		n.runShards(sn)
		return
	}
	defer n.wg.Done()
	const minRetry, maxRetry = 100 * time.Millisecond, time.Second
	retry := minRetry
	for {
		if dc, errs := n.open(sn); dc != nil {
			if n.serve(sn, dc, errs) {
				retry = minRetry // it worked for a while
			}
			dc.Close()
		}
		n.mu.Lock()
		sn.state = nodeDown
		for _, t := range n.topics {
			t.done(sn.i) // nobody waits for this master any more
		}
		n.mu.Unlock()
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(2*retry, maxRetry)
		// Without waiters there is nothing to listen for: reopen when a
		// waiter comes (its subscribe kicks after this check).
		select {
		case <-sn.kick:
		default:
		}
		n.mu.Lock()
		idle := len(n.topics) == 0
		n.mu.Unlock()
		if idle {
			select {
			case <-n.ctx.Done():
				return
			case <-sn.kick:
			}
		}
	}
}

// open opens node sn's pub/sub connection, or returns nil.
func (n *notifier) open(sn *subNode) (rueidis.DedicatedClient, <-chan error) {
	client := n.pool.Client(sn.i)
	if client == nil {
		return nil, nil // not connected; the pool reconnects it
	}
	return n.dedicate(client, rueidis.PubSubHooks{OnMessage: n.deliver})
}

// dedicate opens a dedicated connection of client's with hooks, or returns
// nil. The dial runs inside Dedicate, without a context, and lasts up to
// the dial timeout when the server accepts connections but does not
// answer (a stopped process); so it runs on a goroutine of its own that
// close does not wait for, and that closes what it opened if the notifier
// closed meanwhile.
func (n *notifier) dedicate(client rueidis.Client, hooks rueidis.PubSubHooks) (rueidis.DedicatedClient, <-chan error) {
	type opened struct {
		dc   rueidis.DedicatedClient
		errs <-chan error
	}
	ch := make(chan opened, 1)
	go func() {
		dc, _ := client.Dedicate()
		ch <- opened{dc, dc.SetPubSubHooks(hooks)}
	}()
	select {
	case o := <-ch:
		select {
		case <-o.errs: // the dial failed: a dead connection reports at once
			o.dc.Close()
			return nil, nil
		default:
			return o.dc, o.errs
		}
	case <-n.ctx.Done():
		go func() { (<-ch).dc.Close() }()
		return nil, nil
	}
}

// serve keeps the master's subscriptions on dc in step with the topics
// until dc breaks or the notifier closes. It reports whether a batch
// succeeded.
func (n *notifier) serve(sn *subNode, dc rueidis.DedicatedClient, errs <-chan error) (worked bool) {
	subscribed := make(map[string]bool) // on this connection, as confirmed
	n.mu.Lock()
	sn.state = nodeUp
	clear(sn.dirty)
	for ch := range n.topics {
		sn.dirty[ch] = struct{}{} // a new connection starts with none
	}
	n.mu.Unlock()
	timeout := max(n.wait, time.Second)
	for {
		var subs, unsubs []string
		var confirms []*topic
		n.mu.Lock()
		for ch := range sn.dirty {
			t := n.topics[ch]
			switch {
			case t != nil && subscribed[ch]:
				t.done(sn.i)
			case t != nil:
				subs, confirms = append(subs, ch), append(confirms, t)
			case subscribed[ch]:
				unsubs = append(unsubs, ch)
			}
		}
		clear(sn.dirty)
		n.mu.Unlock()
		if len(subs)+len(unsubs) == 0 {
			select {
			case <-sn.kick:
				continue
			case <-errs:
				return worked
			case <-n.ctx.Done():
				return worked
			}
		}
		// One channel appears at most once in a batch, so the order of
		// the two commands does not matter; the next batch goes after
		// this one's replies.
		var cmds rueidis.Commands
		if len(subs) > 0 {
			cmds = append(cmds, dc.B().Subscribe().Channel(subs...).Build())
		}
		if len(unsubs) > 0 {
			cmds = append(cmds, dc.B().Unsubscribe().Channel(unsubs...).Build())
		}
		ctx, cancel := context.WithTimeout(n.ctx, timeout)
		res := dc.DoMulti(ctx, cmds...)
		cancel()
		for _, r := range res {
			if r.Error() != nil {
				// Unanswered commands stay queued on dc: it cannot be
				// trusted to be in step any more.
				return worked
			}
		}
		worked = true
		for _, ch := range subs {
			subscribed[ch] = true
		}
		for _, ch := range unsubs {
			delete(subscribed, ch)
		}
		n.mu.Lock()
		for _, t := range confirms {
			t.done(sn.i)
		}
		n.mu.Unlock()
	}
}

func (n *notifier) deliver(m rueidis.PubSubMessage) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t := n.topics[m.Channel]; t != nil {
		t.delivered++
		for s := range t.waiters {
			if s.id != m.Message {
				continue // the release named another waiter
			}
			s.turns.Add(1)
			select {
			case s.C <- struct{}{}:
			default:
			}
		}
	}
}

// subscriptions is the number of resources subscribed to: with waiters,
// or lingering.
func (n *notifier) subscriptions() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.topics)
}

// close stops the notifier's goroutines and waits for them.
func (n *notifier) close() {
	n.shut()
	n.wg.Wait()
}

// shut stops the notifier's goroutines without waiting for them: they
// close their pub/sub connections, which wait for a hung master's reply
// until the pool cuts them (Locker.Close).
func (n *notifier) shut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	n.stop()
	for ch, t := range n.topics {
		if t.idle != nil {
			t.idle.Stop()
		}
		if len(t.waiters) == 0 {
			delete(n.topics, ch) // lingering: nothing is subscribed any more
		}
	}
}
