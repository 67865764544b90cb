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
	// Latency is from the start of the round to the reply.
	Latency time.Duration
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

// Tally is a decided round.
type Tally struct {
	// Votes has one entry per node, in node order. Nodes that had not
	// answered when the round was decided are Pending or, if the node
	// timeout ran out, Timeout.
	Votes                                 []Vote
	OK, Refused, Failed, Timeout, Pending int
	Quorum                                int
	// Elapsed is from the start of the round to its decision.
	Elapsed time.Duration
	// Err is the context's error when ctx ended before a decision.
	Err error
}

// Reached reports whether a quorum said OK.
func (t *Tally) Reached() bool { return t.OK >= t.Quorum }

// round is one command in flight to every node. It is shared by the caller
// (the gatherer) and one goroutine per node, and recycled once the decision
// is made and every node has answered or given up.
type round struct {
	pool     *Pool
	cmd      rueidis.Completed
	classify Classifier
	late     LateHandler
	start    time.Time
	wake     chan struct{}
	timer    *time.Timer

	mu          sync.Mutex
	votes       []Vote
	ok          int
	outstanding int
	decided     bool
}

func newRound(n int) *round {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &round{votes: make([]Vote, n), wake: make(chan struct{}, 1), timer: t}
}

// Fanout sends cmd to every node at once and gathers the outcomes. It
// returns as soon as a quorum answered OK, as soon as a quorum can no longer
// answer OK, when the node timeout runs out, or when ctx ends. Replies after
// that are passed to late (which may be nil).
//
// cmd is sent to every node, so it is pinned and must not be reused.
func (p *Pool) Fanout(ctx context.Context, cmd rueidis.Completed, classify Classifier, late LateHandler) Tally {
	n := len(p.nodes)
	p.gate.RLock()
	if p.closed.Load() {
		p.gate.RUnlock()
		t := Tally{Votes: make([]Vote, n), Quorum: p.quorum, Err: ErrClosed, Failed: n}
		for i := range t.Votes {
			t.Votes[i] = Vote{Outcome: Failed, Err: ErrClosed}
		}
		return t
	}
	r := p.rounds.Get().(*round)
	r.pool, r.cmd, r.classify, r.late = p, cmd.Pin(), classify, late
	r.ok, r.decided, r.outstanding = 0, false, n
	for i := range r.votes {
		r.votes[i] = Vote{}
	}
	r.start = time.Now()
	p.wg.Add(n)
	p.gate.RUnlock()
	for i := 0; i < n; i++ {
		go r.send(i)
	}

	r.timer.Reset(p.timeout)
	timedOut := false
	var ctxErr error
	select {
	case <-r.wake:
	case <-r.timer.C:
		timedOut = true
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	r.timer.Stop()

	t := Tally{Votes: make([]Vote, n), Quorum: p.quorum, Err: ctxErr}
	r.mu.Lock()
	r.decided = true
	t.Elapsed = time.Since(r.start)
	copy(t.Votes, r.votes)
	free := r.outstanding == 0
	select { // a second node may have signalled before the decision
	case <-r.wake:
	default:
	}
	r.mu.Unlock()
	for i := range t.Votes {
		v := &t.Votes[i]
		if v.Outcome == Pending && timedOut {
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

func (r *round) send(i int) {
	p := r.pool
	defer p.wg.Done()
	node := p.nodes[i]
	// No deadline: the reply is read off the pipeline whenever it comes, so
	// a late yes is seen. A hung node is bounded by ConnTimeout.
	res := p.do(context.Background(), node, r.cmd)
	var v Vote
	v.Outcome, v.Value, v.Err = r.classify(res)
	v.Latency = time.Since(r.start)
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
		if r.ok >= p.quorum || r.ok+r.outstanding < p.quorum {
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
	r.pool, r.classify, r.late, r.cmd = nil, nil, nil, rueidis.Completed{}
	p.rounds.Put(r)
}
