package multiplex

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// QuarantinePolicy says when a restarted master's votes are ignored. A
// master that restarts without persistence has forgotten every lock it
// held; if its yes counted at once, a second client could win a quorum for
// a resource that is still held. The reference's answer is to keep a
// restarted master out for one TTL ("delayed restart"); the Pool enforces
// it from the client side.
type QuarantinePolicy uint8

const (
	// QuarantineDefault selects QuarantineAlways.
	QuarantineDefault QuarantinePolicy = iota
	// QuarantineOff counts every vote. Unsafe with masters that run without
	// persistence; useful to show what goes wrong.
	QuarantineOff
	// QuarantineObserved ignores a master for MaxTTL after this Pool saw its
	// run_id change. Masters that were young when first seen are trusted.
	QuarantineObserved
	// QuarantineAlways also quarantines masters that are younger than
	// MaxTTL when first seen, since this process cannot know what they
	// forgot. A freshly started cluster is then unusable for one MaxTTL.
	QuarantineAlways
)

func (q QuarantinePolicy) String() string {
	switch q {
	case QuarantineOff:
		return "off"
	case QuarantineObserved:
		return "observed"
	case QuarantineAlways, QuarantineDefault:
		return "always"
	}
	return fmt.Sprintf("QuarantinePolicy(%d)", uint8(q))
}

// ParseQuarantinePolicy reads "off", "observed" or "always".
func ParseQuarantinePolicy(s string) (QuarantinePolicy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "off":
		return QuarantineOff, nil
	case "observed":
		return QuarantineObserved, nil
	case "always":
		return QuarantineAlways, nil
	}
	return 0, fmt.Errorf("quarantine policy %q: want off, observed or always", s)
}

// Errors reported as a node's vote while its yes cannot be counted.
var (
	// ErrQuarantined: the node restarted less than MaxTTL ago.
	ErrQuarantined = errors.New("multiplex: node quarantined after restart")
	// ErrUnverified: the node reconnected and its run_id is being checked.
	ErrUnverified = errors.New("multiplex: node reconnected, restart check pending")
)

// NodeState is a node's condition as the pool sees it.
type NodeState string

const (
	StateUp          NodeState = "up"
	StateDown        NodeState = "down"
	StateQuarantined NodeState = "quarantined"
)

// NodeStatus is a snapshot of one node, for operators and the bench.
type NodeStatus struct {
	Addr  string    `json:"addr"`
	State NodeState `json:"state"`
	// QuarantinedUntil is set while the node is quarantined.
	QuarantinedUntil time.Time `json:"quarantined_until,omitzero"`
	RunID            string    `json:"run_id,omitempty"`
	Version          string    `json:"version,omitempty"`
	// Restarts counts run_id changes this pool observed.
	Restarts int64  `json:"restarts"`
	Err      string `json:"error,omitempty"`
	OK       int64  `json:"ok"`
	Refused  int64  `json:"refused"`
	Failed   int64  `json:"failed"`
	TimedOut int64  `json:"timed_out"`
}

// Status returns every node's state, in node order.
func (p *Pool) Status() []NodeStatus {
	out := make([]NodeStatus, len(p.nodes))
	now := time.Now()
	for i, n := range p.nodes {
		info := n.Info()
		s := NodeStatus{Addr: n.Addr, State: StateUp, RunID: info.RunID, Version: info.Version, Restarts: n.restarts.Load()}
		s.OK, s.Refused, s.Failed, s.TimedOut = n.Counts()
		if err := n.Err(); err != nil {
			s.Err = err.Error()
		}
		switch until := p.quarantinedUntil(n); {
		case n.Client() == nil || n.down.Load():
			s.State = StateDown
		case until.After(now):
			s.State, s.QuarantinedUntil = StateQuarantined, until
		case !n.verified.Load():
			s.State = StateQuarantined
		}
		out[i] = s
	}
	return out
}

func (p *Pool) quarantinedUntil(n *Node) time.Time {
	q := n.quarantine.Load()
	if q == 0 {
		return time.Time{}
	}
	return p.epoch.Add(time.Duration(q))
}

// countable reports whether a yes from n may count toward a quorum now.
func (p *Pool) countable(n *Node) error {
	if p.policy == QuarantineOff {
		return nil
	}
	if !n.verified.Load() {
		return ErrUnverified
	}
	if q := n.quarantine.Load(); q != 0 && int64(time.Since(p.epoch)) < q {
		return ErrQuarantined
	}
	return nil
}

// quarantineFor keeps n out of the vote for d from now.
func (p *Pool) quarantineFor(n *Node, d time.Duration) {
	if d <= 0 || p.policy == QuarantineOff {
		return
	}
	until := int64(time.Since(p.epoch) + d)
	for {
		old := n.quarantine.Load()
		if old >= until || n.quarantine.CompareAndSwap(old, until) {
			return
		}
	}
}

// firstSeen applies the policy to a node's first connection.
func (p *Pool) firstSeen(n *Node, info ServerInfo) {
	if p.policy == QuarantineAlways && info.Uptime < p.maxTTL {
		p.quarantineFor(n, p.maxTTL-info.Uptime)
	}
}

// dialer wraps every connection a node's client opens. A connection after
// the first may be to a restarted server: until INFO says whether run_id
// changed, the node's yes does not count. The mark is set before the
// connection carries any command, so no vote slips through.
func (p *Pool) dialer(n *Node) func(ctx context.Context, addr string, d *net.Dialer, _ any) (net.Conn, error) {
	return func(ctx context.Context, addr string, d *net.Dialer, _ any) (net.Conn, error) {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			n.down.Store(true)
			return nil, err
		}
		if n.ready.Load() && p.policy != QuarantineOff {
			if n.verified.Swap(false) {
				p.wg.Add(1)
				go p.verify(n)
			}
		}
		return conn, nil
	}
}

// verify reads run_id on a node's new connection and quarantines the node
// if it changed.
func (p *Pool) verify(n *Node) {
	defer p.wg.Done()
	for attempt := 0; ; attempt++ {
		select {
		case <-p.stop:
			return
		default:
		}
		if c := n.Client(); c != nil {
			ctx, cancel := context.WithTimeout(context.Background(), p.timeout*10)
			txt, err := c.Do(ctx, c.B().Info().Section("server").Build()).ToString()
			cancel()
			if err == nil {
				info := ParseServerInfo(txt)
				n.mu.Lock()
				restarted := info.RunID != n.info.RunID
				n.info = info
				n.mu.Unlock()
				if restarted {
					n.restarts.Add(1)
					p.quarantineFor(n, p.maxTTL-info.Uptime)
				}
				n.verified.Store(true)
				return
			}
		}
		select {
		case <-p.stop:
			return
		case <-time.After(min(time.Duration(attempt+1)*20*time.Millisecond, time.Second)):
		}
	}
}
