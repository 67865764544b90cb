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
	// Keys, when set, are a script's further keys, KEYS[2] on, for a
	// script that acts on several keys of one master at once (the
	// engine's multi-resource lock); such a call is coalesced only if
	// its script's Multi is CoalesceKeys's. A pointer, so that the
	// commands on one key, nearly all, stay small: a Command is copied
	// into every round.
	Keys *[]string
	// Args are the arguments after the key: Args[:NArgs]. A fixed array,
	// so that building a Command allocates nothing. NArgs is at most
	// MaxArgs; a byte, so that it shares a word with the flags below.
	Args  [MaxArgs]string
	NArgs uint8
	// SkipIfFailed drops the command for nodes that have not been sent it
	// by the time the round is decided without a quorum (their vote is
	// Failed with ErrNotSent). Right for acquires and extends, whose late
	// effect would only be undone; wrong for releases, which must reach
	// every node. A round that reached its quorum still goes to every node,
	// so that a lease is held on as many masters as possible, but for a
	// node so far behind that the command still waits for it past the
	// round's node timeout: its vote no longer counts, and a SET run then
	// would only leave a key to undo behind the same backlog (a slow
	// minority master gathered tens of thousands, left on it when the
	// client closed).
	SkipIfFailed bool
	// WaitAll makes the round wait for every node addressed (up to the
	// node timeout) instead of returning at quorum or at impossibility. A release uses it, so
	// that when it returns, a new acquire of the same resource by this
	// process does not overtake the deletes still in flight.
	WaitAll bool
	// MustSend sends the command even when ctx ends before the round is
	// admitted: the round then returns ctx's error at once and the command
	// goes out as Post would send it. A release uses it, because a lease
	// already marked released whose deletes never leave would block
	// everyone for a full TTL.
	MustSend bool
	// Agree, when nonzero, makes the quorum one of agreeing votes: an OK
	// vote counts toward it only together with the OK votes whose Value
	// has the same bits under this mask. The round is decided as soon as
	// a quorum of OK votes agree, or as soon as no group can reach a
	// quorum any more. Tally.OK still counts every OK vote; Tally.Agreed
	// finds the largest group. A semaphore's acquire uses it: each node
	// answers the slot it took, and a permit needs a quorum on one slot.
	// A uint32, in the padding before Nodes: Command is copied into every
	// task, and stays within its size.
	Agree uint32
	// Nodes is the set of nodes to send to, as a bit set; 0 means every
	// node. Nodes left out stay Pending in the Tally.
	Nodes uint64
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

// Agreed is the largest group of OK votes whose Values agree under mask
// (see Command.Agree): the group's Value&mask and its size, 0 when no
// vote is OK. Of groups of equal size, the first node's wins.
func (t *Tally) Agreed(mask int64) (value int64, n int) {
	for i, a := range t.Votes {
		if a.Outcome != OK {
			continue
		}
		k := agreeing(t.Votes[i:], a.Value, mask)
		if k > n {
			value, n = a.Value&mask, k
		}
	}
	return value, n
}

// agreeing counts the OK votes whose Value equals value under mask.
func agreeing(votes []Vote, value, mask int64) int {
	n := 0
	for _, v := range votes {
		if v.Outcome == OK && (v.Value^value)&mask == 0 {
			n++
		}
	}
	return n
}

// TimeOutPending ends a round that its caller stopped waiting for at a
// deadline of its own (ctx's), as the node timeout would have: the nodes
// still silent count as timed out, not as pending, and the context's
// error is cleared. Only for a round whose command went to every node.
func (t *Tally) TimeOutPending() {
	t.Err = nil
	for i := range t.Votes {
		if t.Votes[i].Outcome == Pending {
			t.Votes[i] = Vote{Outcome: Timeout, Err: ErrTimeout}
			t.Pending--
			t.Timeout++
		}
	}
}

// round is one command in flight to every node. It is shared by the caller
// (the gatherer) and the node workers, and recycled once the decision is
// made and every node has answered or given up.
type round struct {
	pool     *Pool
	cmd      Command
	classify Classifier
	late     LateHandler
	// wake is the admission slot's channel while the gatherer waits.
	wake chan struct{}

	mu    sync.Mutex
	votes []Vote
	// ok and outstanding count votes, one a node: int32 keeps a round in
	// its size class with deadline.
	ok, outstanding int32
	ready           bool // enough replies for a decision
	decided         bool
	skipRest        bool // decided without a quorum, and the command allows skipping
	// deadline is when the round's node timeout ran out, on the pool's
	// clock (Pool.now); 0 for a Post, which nobody waits on.
	deadline int64
}

func newRound(n int) *round { return &round{votes: make([]Vote, n)} }

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
	var slot int32
	select {
	case slot = <-p.free:
	default:
		select {
		case slot = <-p.free:
		case <-ctx.Done():
			for i := range votes {
				votes[i] = Vote{}
			}
			t.Err, t.Pending = ctx.Err(), n
			if cmd.MustSend {
				p.Post(cmd, classify, late)
			}
			return t
		}
	}
	defer func() { p.free <- slot }()
	sl := &p.slots[slot]
	p.gate.RLock()
	if p.closed.Load() || (p.closing.Load() && !cmd.MustSend) {
		p.gate.RUnlock()
		for i := range votes {
			votes[i] = Vote{Outcome: Failed, Err: ErrClosed}
		}
		t.Err, t.Failed = ErrClosed, n
		return t
	}
	r := p.rounds.Get().(*round)
	r.pool, r.cmd, r.classify, r.late, r.wake = p, cmd, classify, late, sl.wake
	r.ok, r.ready, r.decided, r.skipRest, r.outstanding = 0, false, false, false, 0
	r.deadline = p.now() + int64(p.timeout)
	for i := range r.votes {
		r.votes[i] = Vote{}
		if cmd.sendsTo(i) {
			r.outstanding++
		}
	}
	sent := int(r.outstanding)
	p.inflight.Add(int64(sent))
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
		timedOut, t.Err = p.await(ctx, r, sl)
	}

	r.mu.Lock()
	r.decided = true
	r.skipRest = cmd.SkipIfFailed && int(r.ok) < p.quorum
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

// await waits for r's decision: enough replies, the node timeout, or the
// end of ctx. The timeout is the watchdog's, not a timer per round (whose
// set-up and tear-down cost more than the rest of the wait), so it ends up
// to a quarter of the timeout late. Wake-ups may be stale, left in the
// slot's channel by an earlier round; each is checked.
func (p *Pool) await(ctx context.Context, r *round, sl *slot) (timedOut bool, err error) {
	deadline := p.now() + int64(p.timeout)
	sl.deadline.Store(deadline)
	if p.waiting.Add(1) == 1 {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	defer func() {
		sl.deadline.Store(0)
		p.waiting.Add(-1)
	}()
	for {
		select {
		case <-sl.wake:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		r.mu.Lock()
		ready := r.ready
		r.mu.Unlock()
		if ready {
			return false, nil
		}
		if p.now() >= deadline {
			return true, nil
		}
	}
}

// watchdogPeriod is how often the watchdog checks the rounds' deadlines.
func (p *Pool) watchdogPeriod() time.Duration {
	return min(max(p.timeout/4, time.Millisecond), 25*time.Millisecond)
}

// MaxRoundSpan is the longest a round can go on counting votes: the node
// timeout, plus up to one watchdog period before the timeout is noticed.
func (p *Pool) MaxRoundSpan() time.Duration { return p.timeout + p.watchdogPeriod() }

// watchdog ends the waits that reached their node timeout. It scans the
// admission slots a few times per timeout, and sleeps while no round waits.
func (p *Pool) watchdog() {
	defer p.wg.Done()
	period := p.watchdogPeriod()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		if p.waiting.Load() == 0 {
			tick.Stop()
			select {
			case <-p.kick:
			case <-p.stop:
				return
			}
			tick.Reset(period)
		}
		select {
		case <-tick.C:
		case <-p.stop:
			return
		}
		now := p.now()
		for i := range p.slots {
			if d := p.slots[i].deadline.Load(); d != 0 && now >= d {
				select {
				case p.slots[i].wake <- struct{}{}:
				default:
				}
			}
		}
	}
}

// Post sends cmd to the nodes in cmd.Nodes (0: every node) and returns at
// once; each reply goes to replies (which may be nil) as it arrives. It is
// for clean-up that nobody waits on, such as deleting a late yes, and never
// blocks its caller on a round trip: a late reply is handled on a node
// worker, which must not wait.
func (p *Pool) Post(cmd Command, classify Classifier, replies LateHandler) {
	p.gate.RLock()
	defer p.gate.RUnlock()
	if p.closed.Load() {
		return
	}
	r := p.rounds.Get().(*round)
	r.pool, r.cmd, r.classify, r.late = p, cmd, classify, replies
	r.ok, r.skipRest, r.outstanding, r.deadline = 0, false, 0, 0
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
	p.inflight.Add(int64(r.outstanding))
	for i := range p.nodes {
		if cmd.sendsTo(i) {
			p.submit(p.nodes[i], task{r, i})
		}
	}
}

// skippable reports why a command of r that allows skipping
// (SkipIfFailed) is not to be sent at now: the round failed, or it was
// decided and its node timeout has run out; nil when it is to be sent.
func (r *round) skippable(now int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.skipRest:
		return errSkipped
	case r.decided && r.deadline != 0 && now > r.deadline:
		return errStale
	}
	return nil
}

// finish classifies node i's reply and records it.
func (r *round) finish(i int, res rueidis.RedisResult) {
	var v Vote
	v.Outcome, v.Value, v.Err = r.classify(res)
	if v.Err != nil && r.pool.nodes[i].seeds != nil {
		v.Err = migrating(v.Err)
	}
	r.deliver(i, v, &res)
}

// deliver records node i's vote; res is nil when nothing was sent.
func (r *round) deliver(i int, v Vote, res *rueidis.RedisResult) {
	p := r.pool
	defer p.inflight.Add(-1)
	node := p.nodes[i]
	if v.Outcome == OK {
		if err := p.countable(node, r.cmd.Key); err != nil {
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
			if mask := int64(r.cmd.Agree); mask != 0 {
				// r.ok is the largest agreeing group: only v's grew.
				r.ok = max(r.ok, int32(agreeing(r.votes, v.Value, mask)))
			} else {
				r.ok++
			}
		}
		done := r.outstanding == 0
		if !r.cmd.WaitAll {
			done = done || int(r.ok) >= p.quorum || int(r.ok+r.outstanding) < p.quorum
		}
		if done && !r.ready {
			r.ready = true
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

// submit hands a task to the node's workers. rueidis's DoMulti blocks
// until the replies, so a task submitted while every worker waits on one
// stays queued for the next batch (see defaultNodeWorkers). Workers are
// started on demand and kept while busy, which costs no goroutine start
// (and no allocation) per command in steady state.
//
// A node that stops answering ties up its workers until ConnTimeout; past
// nodeQueue queued commands, its share of new rounds fails at once with
// errOverloaded instead of queueing without bound.
func (p *Pool) submit(n *node, t task) {
	n.qmu.Lock()
	if len(n.queue) >= nodeQueue {
		n.qmu.Unlock()
		t.r.deliver(t.i, Vote{Outcome: Failed, Err: errOverloaded}, nil)
		return
	}
	n.queue = append(n.queue, t)
	wake := n.parked > 0
	start := !wake && n.workers < p.nodeWorkers
	if start {
		n.workers++
	}
	n.qmu.Unlock()
	switch {
	case wake:
		select {
		case n.wakeup <- struct{}{}:
		default: // enough signals are pending already
		}
	case start:
		p.workers.Add(1)
		go p.worker(n)
	}
}

func (p *Pool) worker(n *node) {
	defer p.workers.Done()
	// The idle check is a ticker, not a timer reset per batch: resetting a
	// timer on every wait costs more than the wait's own hand-off.
	idle := time.NewTicker(workerIdle)
	defer idle.Stop()
	b := &batch{}
	busy := false
	for {
		n.qmu.Lock()
		if len(n.queue) > 0 {
			// Take the whole queue, and leave it our emptied slice.
			b.tasks, n.queue = n.queue, b.tasks[:0]
			n.qmu.Unlock()
			p.runBatch(n, b)
			b.release() // drop the rounds, which are pooled
			busy = true
			continue
		}
		n.parked++
		n.qmu.Unlock()
		exit := false
		select {
		case <-n.wakeup:
		case <-idle.C:
			exit = !busy
			busy = false
		case <-p.stop:
			// Close waits for the commands in flight; what is queued was
			// submitted before Close and is sent before the worker leaves
			// (the clients are closed after, and fail them fast).
			exit = true
		}
		n.qmu.Lock()
		n.parked--
		if exit && len(n.queue) == 0 {
			n.workers--
			n.qmu.Unlock()
			return
		}
		n.qmu.Unlock()
	}
}

// batch is a worker's reusable scratch space.
type batch struct {
	tasks []task
	sent  []task
	// The send plan (see plan): at[k] is the k-th command sent, a task
	// of sent or one of the first ngroups groups.
	at      []int32
	groups  []group
	ngroups int
	last    map[string]int32 // plan: each key's last place in at
}

// runBatch sends a worker's commands to its node. Under load a worker
// finds many commands queued and sends them with one DoMulti: one hand-off
// to rueidis's writer and one wake-up for all the replies, instead of one
// each per command, which is most of the client's CPU at high rates.
// Commands of the same script go out as one call over many keys (see
// Script.Coalesce), which spares the master a script call per key.
func (p *Pool) runBatch(n *node, b *batch) {
	b.sent = b.sent[:0]
	now := p.now()
	for _, t := range b.tasks {
		if t.r.cmd.SkipIfFailed {
			if err := t.r.skippable(now); err != nil {
				t.r.deliver(t.i, Vote{Outcome: Failed, Err: err}, nil)
				continue
			}
		}
		if n.seeds != nil && crossSlot(&t.r.cmd) {
			t.r.deliver(t.i, Vote{Outcome: Failed, Err: errCrossSlot}, nil)
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
	b.plan(p.coalesce, n.seeds != nil)
	// A fresh slice per batch: when a connection breaks, DoMulti returns
	// while rueidis's writer may still be reading the slice it was given.
	cmds := make([]rueidis.Completed, 0, len(b.at))
	for _, a := range b.at {
		if a >= 0 {
			cmds = append(cmds, p.buildFor(n, &b.sent[a].r.cmd, false))
		} else if g := &b.groups[-a-1]; len(g.tasks) == 1 {
			cmds = append(cmds, p.buildFor(n, &g.tasks[0].r.cmd, false))
		} else {
			cmds = append(cmds, p.buildMulti(n, g, false))
		}
	}
	// No deadline: replies are read off the pipeline whenever they come,
	// so a late yes is seen. A hung node is bounded by ConnTimeout.
	ctx := context.Background()
	res := c.DoMulti(ctx, cmds...)
	for k, a := range b.at {
		var t task
		if a >= 0 {
			t = b.sent[a]
		} else if g := &b.groups[-a-1]; len(g.tasks) == 1 {
			t = g.tasks[0]
		} else {
			p.finishMulti(ctx, n, c, g, res[k])
			continue
		}
		t.r.finish(t.i, p.reloadOnNoScript(ctx, n, c, &t.r.cmd, res[k]))
	}
}
