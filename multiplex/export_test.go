package multiplex

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// Test hooks for the external tests (package multiplex_test).

// Tuned returns o with the knobs only tests turn (zero leaves a default).
func Tuned(o Options, reconnectInterval time.Duration, maxRounds, nodeWorkers int) Options {
	o.reconnectInterval, o.maxRounds, o.nodeWorkers = reconnectInterval, maxRounds, nodeWorkers
	return o
}

// Nodes returns the masters in the order they were given.
func (p *Pool) Nodes() []*node { return p.nodes }

// Do sends one command to one node and waits for its reply. ctx bounds
// only the wait: see rueidis.
func (p *Pool) Do(ctx context.Context, node int, cmd Command) rueidis.RedisResult {
	if p.closing.Load() {
		return rueidis.NewErrorResult(ErrClosed)
	}
	return p.send(ctx, p.nodes[node], &cmd)
}

// Queued is how many commands wait in node i's queue for a worker.
func (p *Pool) Queued(i int) int {
	n := p.nodes[i]
	n.qmu.Lock()
	defer n.qmu.Unlock()
	return len(n.queue)
}

// Len is the number of votes.
func (p *Pool) Len() int { return len(p.nodes) }

// Quorum is the votes' quorum, as Fanout counts it.
func (p *Pool) Quorum() int { return p.quorum }
