package engine

import (
	"context"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redis/rueidis"
)

// Sharded notifications, for a cluster vote. A cluster forwards a PUBLISH
// to every node, so its scripts publish with SPUBLISH (see multiplex's
// sharded), which reaches only the shard that owns the channel's slot:
// the resource's slot, as the channel is its lock key after a prefix. The
// waiters listen there with SSUBSCRIBE, on one dedicated connection per
// node subscribed to, each carrying the channels of the slots that node
// serves, one SSUBSCRIBE per slot (the cluster refuses a command over
// several slots).
//
// Which node owns a slot is learnt from the MOVED a node answers for a
// slot it does not serve (a first SSUBSCRIBE goes to any node); a node the
// client does not know yet is taught to it by a command of its own to the
// slot. The subscription of a slot ends when the slot leaves its node: a
// migration handed over, or a failover that demotes the node, where it
// sends SUNSUBSCRIBE for the slot's channels; a failover of a dead node,
// or the Locker's cutting the demoted one, where the connection breaks.
// Either way the channel is subscribed again, at the owner the next MOVED
// names, and the waiters meanwhile have their fallback retry, as for a
// master whose connection broke: they never wait on a subscription for
// longer than that.
type shards struct {
	n      *notifier
	sn     *subNode
	client rueidis.Client // the vote's, whose nodes the connections are to
	conns  map[string]*shardConn
	on     map[string]*shardConn // channel: the connection it is subscribed on
	owner  map[int]string        // slot: the address of the node that serves it, as learnt
	later  map[string]struct{}   // channels to subscribe again after a pause
	// redirects counts a slot's MOVEDs followed in a row: a cluster whose
	// nodes disagree sends it back and forth.
	redirects map[int]int
	// dropped are connections to close once n.mu is released: a close
	// waits for the connection's reader, which may wait for n.mu.
	dropped []*shardConn
}

// shardConn is a dedicated connection to one node of a cluster vote.
type shardConn struct {
	addr string
	dc   rueidis.DedicatedClient
	subs map[string]int // channel: its slot, subscribed on this connection
}

// shardLoss is a subscription a node ended on connection c: channel is
// empty when the whole connection broke.
type shardLoss struct {
	c       *shardConn
	channel string
}

// runShards keeps cluster vote sn's sharded subscriptions in step with the
// topics until close; it plays for a cluster what run and serve do for a
// master.
func (n *notifier) runShards(sn *subNode) {
	defer n.wg.Done()
	s := &shards{n: n, sn: sn, conns: make(map[string]*shardConn), on: make(map[string]*shardConn),
		owner: make(map[int]string), later: make(map[string]struct{}), redirects: make(map[int]int)}
	defer s.closeAll()
	n.mu.Lock()
	sn.state = nodeUp
	for ch := range n.topics {
		sn.dirty[ch] = struct{}{}
	}
	n.mu.Unlock()
	const minRetry, maxRetry = 100 * time.Millisecond, time.Second
	pause := minRetry
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	armed := false
	for {
		if c := n.pool.Client(sn.i); c != s.client {
			// The pool reconnected the vote: the old client's connections
			// go with it.
			s.closeAll()
			s.client = c
		}
		subs, unsubs := s.plan()
		if len(subs)+len(unsubs) == 0 {
			if len(s.later) > 0 && !armed {
				retry.Reset(pause)
				armed = true
			}
			select {
			case <-sn.kick:
				continue
			case <-retry.C:
				armed = false
				pause = min(2*pause, maxRetry)
				n.mu.Lock()
				for ch := range s.later {
					sn.dirty[ch] = struct{}{}
				}
				n.mu.Unlock()
				clear(s.later)
				continue
			case <-n.ctx.Done():
				return
			}
		}
		if s.send(subs, unsubs) {
			pause = minRetry
		}
	}
}

// shardSub is a slot's channels to subscribe to, with their topics to
// confirm.
type shardSub struct {
	slot     int
	channels []string
	topics   []*topic
}

// plan takes the losses the nodes reported and the topics' changes, and
// returns what to subscribe to, by slot, and what to unsubscribe from, by
// connection and slot.
func (s *shards) plan() (subs map[int]*shardSub, unsubs map[*shardConn]map[int][]string) {
	n, sn := s.n, s.sn
	defer s.closeDropped()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range sn.lost {
		s.lose(l)
	}
	sn.lost = sn.lost[:0]
	for ch := range sn.dirty {
		t, c := n.topics[ch], s.on[ch]
		switch {
		case t != nil && c != nil:
			t.done(sn.i)
		case t != nil && s.client == nil:
			t.done(sn.i) // not connected: the pool reconnects it
			s.later[ch] = struct{}{}
		case t != nil:
			slot := keyslot.KeySlot(ch)
			if subs == nil {
				subs = make(map[int]*shardSub)
			}
			g := subs[slot]
			if g == nil {
				g = &shardSub{slot: slot}
				subs[slot] = g
			}
			g.channels, g.topics = append(g.channels, ch), append(g.topics, t)
		case c != nil:
			if unsubs == nil {
				unsubs = make(map[*shardConn]map[int][]string)
			}
			if unsubs[c] == nil {
				unsubs[c] = make(map[int][]string)
			}
			slot := c.subs[ch]
			unsubs[c][slot] = append(unsubs[c][slot], ch)
		}
		delete(s.later, ch)
	}
	clear(sn.dirty)
	return subs, unsubs
}

// lose forgets a subscription a node ended, or all of a connection that
// broke, and marks their channels for subscribing again. The caller holds
// n.mu.
func (s *shards) lose(l shardLoss) {
	if l.c == nil || s.conns[l.c.addr] != l.c {
		return // a connection closed here already
	}
	if l.channel == "" {
		s.drop(l.c)
		return
	}
	if s.on[l.channel] != l.c {
		return // our own SUNSUBSCRIBE's reply, or one already redone
	}
	slot := l.c.subs[l.channel]
	delete(l.c.subs, l.channel)
	delete(s.on, l.channel)
	if s.owner[slot] == l.c.addr {
		delete(s.owner, slot) // the slot moved: the next MOVED names its owner
	}
	s.sn.dirty[l.channel] = struct{}{}
}

// drop closes connection c, forgets what it carried and the slots its node
// was taken to serve, and marks c's channels for subscribing again. The
// caller holds n.mu.
func (s *shards) drop(c *shardConn) {
	delete(s.conns, c.addr)
	s.dropped = append(s.dropped, c)
	for ch := range c.subs {
		delete(s.on, ch)
		s.sn.dirty[ch] = struct{}{}
	}
	for slot, addr := range s.owner {
		if addr == c.addr {
			delete(s.owner, slot)
		}
	}
}

// closeAll closes every connection: their channels are marked for the
// next ones.
func (s *shards) closeAll() {
	defer s.closeDropped()
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	for _, c := range s.conns {
		s.drop(c)
	}
	clear(s.owner)
}

// closeDropped closes the connections dropped, without n.mu.
func (s *shards) closeDropped() {
	for _, c := range s.dropped {
		c.dc.Close()
	}
	s.dropped = s.dropped[:0]
}

// conn returns the connection to the node at addr, opening it, or nil.
func (s *shards) conn(addr string) *shardConn {
	if c := s.conns[addr]; c != nil {
		return c
	}
	nc := s.client.Nodes()[addr]
	if nc == nil {
		return nil // not (yet) known to the client: a later try
	}
	c := &shardConn{addr: addr, subs: make(map[string]int)}
	dc, errs := s.n.dedicate(nc, rueidis.PubSubHooks{
		OnMessage: s.n.deliver,
		OnSubscription: func(m rueidis.PubSubSubscription) {
			if m.Kind == "sunsubscribe" {
				s.report(shardLoss{c, m.Channel})
			}
		},
	})
	if dc == nil {
		return nil
	}
	c.dc = dc
	s.conns[addr] = c
	go func() {
		<-errs
		s.report(shardLoss{c: c})
	}()
	return c
}

// teach makes the client learn who serves channel's slot, which it
// learns from a command of its own to the slot: one answered MOVED
// connects it to the node named there. EXISTS of the channel's name reads
// nothing of the engine's.
func (s *shards) teach(channel string) {
	ctx, cancel := context.WithTimeout(s.n.ctx, s.n.wait)
	defer cancel()
	s.client.Do(ctx, s.client.B().Exists().Key(channel).Build())
}

// report hands a loss to the goroutine.
func (s *shards) report(l shardLoss) {
	if faults.ClusterNotifyStaleShard.On() {
		return
	}
	s.n.mu.Lock()
	s.sn.lost = append(s.sn.lost, l)
	s.n.mu.Unlock()
	select {
	case s.sn.kick <- struct{}{}:
	default:
	}
}

// guess is the connection to send a slot's first SSUBSCRIBE on: one
// already open, or else the first that opens of the nodes the client
// knows, at random; its MOVED names the owner. The client knows the
// replicas too once the cluster lists them, and the dialer refuses their
// connections (a node may also be down): a guess that stopped at the
// first would leave the slot unsubscribed until the retry, a pause in
// which a release wakes nobody.
func (s *shards) guess() *shardConn {
	for _, c := range s.conns {
		return c
	}
	nodes := s.client.Nodes()
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		addrs = append(addrs, addr)
	}
	return s.firstConn(addrs)
}

// firstConn returns the connection to the first node of addrs that opens
// one, or nil.
func (s *shards) firstConn(addrs []string) *shardConn {
	for _, addr := range addrs {
		if c := s.conn(addr); c != nil || faults.ClusterGuessOnce.On() {
			return c
		}
	}
	return nil
}

// send makes one round of subscriptions, each connection's commands in
// one batch, the connections at once. It reports whether any succeeded.
func (s *shards) send(subs map[int]*shardSub, unsubs map[*shardConn]map[int][]string) (worked bool) {
	n, sn := s.n, s.sn
	type batch struct {
		c     *shardConn
		cmds  rueidis.Commands
		subs  []*shardSub // the SSUBSCRIBEs, first in cmds
		unsub [][]string  // the SUNSUBSCRIBEs' channels, after them
		res   []rueidis.RedisResult
	}
	batches := make(map[*shardConn]*batch)
	of := func(c *shardConn) *batch {
		if b := batches[c]; b != nil {
			return b
		}
		b := &batch{c: c}
		batches[c] = b
		return b
	}
	var failed []*shardSub
	for slot, g := range subs {
		var c *shardConn
		if addr := s.owner[slot]; addr == "" {
			c = s.guess()
		} else if c = s.conn(addr); c == nil {
			// A MOVED named a node the client does not know yet.
			s.teach(g.channels[0])
			c = s.conn(addr)
		}
		if c == nil {
			failed = append(failed, g)
			continue
		}
		b := of(c)
		b.subs = append(b.subs, g)
		b.cmds = append(b.cmds, c.dc.B().Ssubscribe().Channel(g.channels...).Build())
	}
	for c, bySlot := range unsubs {
		b := of(c)
		for _, chs := range bySlot {
			b.unsub = append(b.unsub, chs)
			b.cmds = append(b.cmds, c.dc.B().Sunsubscribe().Channel(chs...).Build())
		}
	}
	timeout := max(n.wait, time.Second)
	var wg sync.WaitGroup
	for _, b := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(n.ctx, timeout)
			b.res = b.c.dc.DoMulti(ctx, b.cmds...)
			cancel()
		}()
	}
	wg.Wait()

	defer s.closeDropped()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, g := range failed {
		delete(s.owner, g.slot)
		s.fail(g)
	}
	for _, b := range batches {
		broken := false
		for i, g := range b.subs {
			err := b.res[i].Error()
			if err == nil {
				worked = true
				for j, ch := range g.channels {
					b.c.subs[ch] = g.slot
					s.on[ch] = b.c
					g.topics[j].done(sn.i)
				}
				s.owner[g.slot] = b.c.addr
				delete(s.redirects, g.slot)
				continue
			}
			if addr, ok := movedTo(err); ok && addr != b.c.addr && s.redirects[g.slot] < 3 {
				// Asked the wrong node: at once to the one it names.
				s.owner[g.slot] = addr
				s.redirects[g.slot]++
				for _, ch := range g.channels {
					sn.dirty[ch] = struct{}{}
				}
				continue
			}
			if _, isRedis := rueidis.IsRedisErr(err); !isRedis {
				broken = true
			}
			delete(s.owner, g.slot)
			delete(s.redirects, g.slot)
			s.fail(g)
		}
		for i, chs := range b.unsub {
			if b.res[len(b.subs)+i].Error() != nil {
				broken = true
				continue
			}
			for _, ch := range chs {
				delete(b.c.subs, ch)
				delete(s.on, ch)
			}
		}
		if broken && s.conns[b.c.addr] == b.c {
			// Unanswered commands stay queued on it: it cannot be trusted
			// to be in step any more.
			s.drop(b.c)
		}
	}
	return worked
}

// fail gives up g's subscription for now: its waiters are not kept
// waiting, and it is tried again after a pause. The caller holds n.mu.
func (s *shards) fail(g *shardSub) {
	for j, ch := range g.channels {
		g.topics[j].done(s.sn.i)
		s.later[ch] = struct{}{}
	}
}

// movedTo is the address a MOVED reply names.
func movedTo(err error) (string, bool) {
	if re, ok := rueidis.IsRedisErr(err); ok {
		return re.IsMoved()
	}
	return "", false
}
