package multiplex

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Outcome is one node's answer in a round.
type Outcome uint8

const (
	// Pending: no reply yet when the round was decided.
	Pending Outcome = iota
	// OK: the node did what was asked.
	OK
	// Refused: the node answered but declined (the key is held by someone
	// else, or is no longer ours). This is contention, not failure.
	Refused
	// Failed: an error reply or a connection error.
	Failed
	// Timeout: no reply within the node timeout.
	Timeout
)

func (o Outcome) String() string {
	switch o {
	case Pending:
		return "pending"
	case OK:
		return "ok"
	case Refused:
		return "refused"
	case Failed:
		return "error"
	case Timeout:
		return "timeout"
	}
	return "unknown"
}

// Vote is one node's outcome.
type Vote struct {
	Outcome Outcome
	// Err is the cause for Failed and Timeout.
	Err error
	// Value is an integer the Classifier extracted from the reply.
	Value int64
}

// Classifier turns a reply into an outcome. It must not keep res.
type Classifier func(res rueidis.RedisResult) (o Outcome, value int64, err error)

// LateHandler receives the replies that arrive after a round was decided,
// so that the caller can clean up after them (a late yes to a failed acquire
// must be released). It is called from the goroutine that read the reply and
// must not block for long.
type LateHandler interface {
	Late(node int, v Vote)
}

// MaxArgs is the most arguments a Command carries after its key.
const MaxArgs = 6

// Command is what a round sends. It is built afresh for every node from
// rueidis's command pool, so that a round allocates nothing for commands.
type Command struct {
	// Script, when set, makes the command EVALSHA Script.SHA 1 Key Args...;
	// a node that answers NOSCRIPT gets EVAL with the body instead.
	Script *Script
	// Name is the command when Script is nil, e.g. "SET".
	Name string
	Key  string
	// Args are the arguments after the key: Args[:NArgs]. A fixed array,
	// so that building a Command allocates nothing.
	Args  [MaxArgs]string
	NArgs int
	// Nodes is the set of nodes to send to, as a bit set; 0 means every
	// node. Nodes left out stay Pending in the Tally.
	Nodes uint64
	// SkipIfFailed drops the command for nodes that have not been sent it
	// by the time the round is decided without a quorum (their vote is
	// Failed with ErrNotSent). Right for acquires and extends, whose late
	// effect would only be undone; wrong for releases, which must reach
	// every node. A round that reached its quorum still goes to every node,
	// so that a lease is held on as many masters as possible.
	SkipIfFailed bool
	// WaitAll makes the round wait for every node addressed (up to the
	// node timeout) instead of returning at quorum or at impossibility. A release uses it, so
	// that when it returns, a new acquire of the same resource by this
	// process does not overtake the deletes still in flight.
	WaitAll bool
}

func (c *Command) sendsTo(i int) bool { return c.Nodes == 0 || c.Nodes&(1<<i) != 0 }

// Tally is a decided round.
type Tally struct {
	// Votes has one entry per node, in node order. Nodes that had not
	// answered when the round was decided are Pending or, if the node
	// timeout ran out, Timeout.
	Votes                                 []Vote
	OK, Refused, Failed, Timeout, Pending int
	Quorum                                int
	// Err is the context's error when ctx ended before a decision, or
	// ErrClosed.
	Err error
}

// Reached reports whether a quorum said OK.
func (t *Tally) Reached() bool { return t.OK >= t.Quorum }

// round is one command in flight to every node. It is shared by the caller
// (the gatherer) and the node workers, and recycled once the decision is
// made and every node has answered or given up.
type round struct {
	pool     *Pool
	cmd      Command
	classify Classifier
	late     LateHandler
	wake     chan struct{}
	timer    *time.Timer

	mu          sync.Mutex
	votes       []Vote
	ok          int
	outstanding int
	decided     bool
	skipRest    bool // decided without a quorum, and the command allows skipping
}

func newRound(n int) *round {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &round{votes: make([]Vote, n), wake: make(chan struct{}, 1), timer: t}
}

// Fanout sends cmd to every node (or those in cmd.Nodes) at once and gathers
// the outcomes into votes, which must have one entry per node (nil
// allocates). It returns as soon as a quorum answered OK, as soon as a
// quorum can no longer answer OK, when the node timeout runs out, or when
// ctx ends. Replies after that are passed to late (which may be nil).
func (p *Pool) Fanout(ctx context.Context, cmd Command, classify Classifier, late LateHandler, votes []Vote) Tally {
	n := len(p.nodes)
	if len(votes) != n {
		votes = make([]Vote, n)
	}
	t := Tally{Votes: votes, Quorum: p.quorum}
	// Admission: past MaxRounds undecided rounds, callers queue here, so
	// that an overload shows as waiting before the round rather than as
	// node timeouts inside it.
	select {
	case p.admit <- struct{}{}:
	default:
		select {
		case p.admit <- struct{}{}:
		case <-ctx.Done():
			for i := range votes {
				votes[i] = Vote{}
			}
			t.Err, t.Pending = ctx.Err(), n
			return t
		}
	}
	defer func() { <-p.admit }()
	p.gate.RLock()
	if p.closed.Load() {
		p.gate.RUnlock()
		for i := range votes {
			votes[i] = Vote{Outcome: Failed, Err: ErrClosed}
		}
		t.Err, t.Failed = ErrClosed, n
		return t
	}
	r := p.rounds.Get().(*round)
	r.pool, r.cmd, r.classify, r.late = p, cmd, classify, late
	r.ok, r.decided, r.skipRest, r.outstanding = 0, false, false, 0
	for i := range r.votes {
		r.votes[i] = Vote{}
		if cmd.sendsTo(i) {
			r.outstanding++
		}
	}
	sent := r.outstanding
	p.inflight.Add(sent)
	for i := 0; i < n; i++ {
		if cmd.sendsTo(i) {
			p.submit(p.nodes[i], task{r, i})
		}
	}
	p.gate.RUnlock()

	timedOut := false
	// With fewer nodes than a quorum addressed, the answer is known now;
	// the replies still arrive and reach late.
	if sent >= p.quorum {
		r.timer.Reset(p.timeout)
		select {
		case <-r.wake:
		case <-r.timer.C:
			timedOut = true
		case <-ctx.Done():
			t.Err = ctx.Err()
		}
		r.timer.Stop()
	}

	r.mu.Lock()
	r.decided = true
	r.skipRest = cmd.SkipIfFailed && r.ok < p.quorum
	copy(votes, r.votes)
	free := r.outstanding == 0
	select { // a second node may have signalled before the decision
	case <-r.wake:
	default:
	}
	r.mu.Unlock()
	for i := range votes {
		v := &votes[i]
		if v.Outcome == Pending && timedOut && cmd.sendsTo(i) {
			v.Outcome, v.Err = Timeout, ErrTimeout
			p.nodes[i].timedOut.Add(1)
		}
		switch v.Outcome {
		case OK:
			t.OK++
		case Refused:
			t.Refused++
		case Failed:
			t.Failed++
		case Timeout:
			t.Timeout++
		case Pending:
			t.Pending++
		}
	}
	if free {
		r.recycle()
	}
	return t
}

// Post sends cmd to the nodes in cmd.Nodes (0: every node) and returns at
// once; the replies are read and dropped. It is for clean-up that nobody
// waits on, such as deleting a late yes, and never blocks its caller on a
// round trip: a late reply is handled on a node worker, which must not
// wait.
func (p *Pool) Post(cmd Command, classify Classifier) {
	p.gate.RLock()
	defer p.gate.RUnlock()
	if p.closed.Load() {
		return
	}
	r := p.rounds.Get().(*round)
	r.pool, r.cmd, r.classify, r.late = p, cmd, classify, nil
	r.ok, r.skipRest, r.outstanding = 0, false, 0
	for i := range r.votes {
		r.votes[i] = Vote{}
		if cmd.sendsTo(i) {
			r.outstanding++
		}
	}
	// Decided from the start: every reply takes the late path, and the
	// last one recycles the round.
	r.decided = true
	if r.outstanding == 0 {
		r.recycle()
		return
	}
	p.inflight.Add(r.outstanding)
	for i := range p.nodes {
		if cmd.sendsTo(i) {
			p.submit(p.nodes[i], task{r, i})
		}
	}
}

func (r *round) skippable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipRest
}

// finish classifies node i's reply and records it.
func (r *round) finish(i int, res rueidis.RedisResult) {
	var v Vote
	v.Outcome, v.Value, v.Err = r.classify(res)
	r.deliver(i, v, &res)
}

// deliver records node i's vote; res is nil when nothing was sent.
func (r *round) deliver(i int, v Vote, res *rueidis.RedisResult) {
	p := r.pool
	defer p.inflight.Done()
	node := p.nodes[i]
	if v.Outcome == OK {
		if err := p.countable(node); err != nil {
			// The command ran, but a restarted node's yes proves nothing.
			v.Outcome, v.Err = Failed, err
		}
	}
	if res != nil {
		if down := res.NonRedisError() != nil; node.down.Load() != down {
			node.down.Store(down)
		}
	}
	switch v.Outcome {
	case OK:
		node.ok.Add(1)
	case Refused:
		node.refused.Add(1)
	default:
		node.failed.Add(1)
	}

	r.mu.Lock()
	r.votes[i] = v
	r.outstanding--
	late := r.decided
	lh := r.late
	if !late {
		if v.Outcome == OK {
			r.ok++
		}
		done := r.outstanding == 0
		if !r.cmd.WaitAll {
			done = done || r.ok >= p.quorum || r.ok+r.outstanding < p.quorum
		}
		if done {
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
	free := r.decided && r.outstanding == 0
	r.mu.Unlock()
	if late && lh != nil {
		lh.Late(i, v)
	}
	if free {
		r.recycle()
	}
}

func (r *round) recycle() {
	p := r.pool
	r.pool, r.classify, r.late, r.cmd = nil, nil, nil, Command{}
	p.rounds.Put(r)
}

// task is one node's share of a round.
type task struct {
	r *round
	i int
}

// workerIdle is how long a node worker waits for work before it exits.
const workerIdle = 2 * time.Second

// submit hands a task to one of the node's workers. rueidis's Do blocks
// until the reply, so a node needs as many workers as it has commands in
// flight; they are started on demand and kept while busy, which costs no
// goroutine start (and no allocation) per command in steady state.
//
// A node that stops answering ties up its workers until ConnTimeout; past
// NodeWorkers workers and a full queue, its share of new rounds fails
// at once with ErrOverloaded instead of blocking every caller.
func (p *Pool) submit(n *Node, t task) {
	if n.idle.Load() <= 0 && n.workers.Load() < p.nodeWorkers {
		n.workers.Add(1)
		p.workers.Add(1)
		go p.worker(n)
	}
	select {
	case n.tasks <- t:
	default:
		t.r.deliver(t.i, Vote{Outcome: Failed, Err: ErrOverloaded}, nil)
	}
}

func (p *Pool) worker(n *Node) {
	defer p.workers.Done()
	defer n.workers.Add(-1)
	// The idle check is a ticker, not a timer reset per task: resetting a
	// timer on every command costs more than the command's own dispatch.
	idle := time.NewTicker(workerIdle)
	defer idle.Stop()
	b := &batch{}
	busy := false
	for {
		n.idle.Add(1)
		select {
		case t := <-n.tasks:
			n.idle.Add(-1)
			b.tasks = append(b.tasks[:0], t)
			b.fill(n.tasks)
			p.runBatch(n, b)
			busy = true
		case <-idle.C:
			n.idle.Add(-1)
			if !busy {
				return
			}
			busy = false
		case <-p.stop:
			n.idle.Add(-1)
			for { // finish what was queued before Close; clients are closed
				select {
				case t := <-n.tasks:
					b.tasks = append(b.tasks[:0], t)
					p.runBatch(n, b)
				default:
					return
				}
			}
		}
	}
}

// maxBatch bounds how many queued commands one worker sends at once.
const maxBatch = 64

// batch is a worker's reusable scratch space.
type batch struct {
	tasks []task
	sent  []task
}

// fill takes whatever else is already queued, without waiting.
func (b *batch) fill(tasks chan task) {
	for len(b.tasks) < maxBatch {
		select {
		case t := <-tasks:
			b.tasks = append(b.tasks, t)
		default:
			return
		}
	}
}

// runBatch sends a worker's commands to its node. Under load a worker
// finds many commands queued and sends them with one DoMulti: one hand-off
// to rueidis's writer and one wake-up for all the replies, instead of one
// each per command, which is most of the client's CPU at high rates.
func (p *Pool) runBatch(n *Node, b *batch) {
	b.sent = b.sent[:0]
	for _, t := range b.tasks {
		if t.r.cmd.SkipIfFailed && t.r.skippable() {
			t.r.deliver(t.i, Vote{Outcome: Failed, Err: ErrNotSent}, nil)
			continue
		}
		b.sent = append(b.sent, t)
	}
	switch {
	case len(b.sent) == 0:
		return
	case len(b.sent) == 1:
		t := b.sent[0]
		t.r.finish(t.i, p.send(context.Background(), n, &t.r.cmd))
		return
	}
	c := n.Client()
	if c == nil {
		for _, t := range b.sent {
			t.r.finish(t.i, p.send(context.Background(), n, &t.r.cmd))
		}
		return
	}
	// A fresh slice per batch: when a connection breaks, DoMulti returns
	// while rueidis's writer may still be reading the slice it was given.
	cmds := make([]rueidis.Completed, 0, len(b.sent))
	for _, t := range b.sent {
		cmds = append(cmds, p.build(&t.r.cmd, false))
	}
	// No deadline: replies are read off the pipeline whenever they come,
	// so a late yes is seen. A hung node is bounded by ConnTimeout.
	res := c.DoMulti(context.Background(), cmds...)
	for k, t := range b.sent {
		t.r.finish(t.i, p.reloadOnNoScript(context.Background(), c, &t.r.cmd, res[k]))
	}
}
