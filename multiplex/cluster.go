package multiplex

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// A vote may be a Redis Cluster (Options.Clusters): one rueidis cluster
// client, whose commands carry their key's slot, so that the shard that
// owns it answers (rueidis follows MOVED and ASK, which say the command
// did not run, and refreshes the topology). The quorum is over votes; a
// cluster's vote for a key is its shard's.
//
// Independence and restarts are judged per node: every connection the
// cluster client opens passes the dialer, which reads the node's INFO
// before anything else travels on it, as for a master. The client talks
// to primaries only: a connection to a replica is refused, so that a
// replica promoted by a failover is reached on a new connection, whose
// INFO shows the new primary. A node's run_id changed, a primary that was
// a replica or that the vote had not seen before, quarantine the vote.

// ErrWrongMode: a master runs in cluster mode, or a cluster vote's node
// does not. The first would answer MOVED for most keys; the second is not
// a cluster to route by slot. Dial fails with it, naming the address.
var ErrWrongMode = errors.New("server mode does not match the vote")

// member is what a cluster vote's dialer last saw of one node.
type member struct {
	runID   string
	primary bool
}

// modeError is ErrWrongMode with the address at fault.
type modeError struct{ detail string }

func (e *modeError) Error() string { return ErrWrongMode.Error() + ": " + e.detail }
func (e *modeError) Unwrap() error { return ErrWrongMode }

// clusterLabel names a cluster vote in messages and NodeStatus.Addr.
func clusterLabel(seeds []string) string { return "cluster(" + strings.Join(seeds, ",") + ")" }

// voteName names node n in a message about independence: its address
// for a master, the node's address within its cluster for a cluster vote.
func voteName(n *node, addr string) string {
	if n.seeds == nil {
		return fmt.Sprintf("master %s (vote %d)", n.Addr, n.Index)
	}
	return fmt.Sprintf("node %s of %s (vote %d)", addr, n.Addr, n.Index)
}

// sameServer finds run_id among the nodes of the votes other than n: the
// vote, and the node's address in it. The caller holds p.ids.
func (p *Pool) sameServer(n *node, runID string) (*node, string) {
	if runID == "" {
		return nil, ""
	}
	for _, o := range p.nodes {
		if o == n {
			continue
		}
		if o.seeds == nil {
			if o.Info().RunID == runID {
				return o, o.Addr
			}
			continue
		}
		if mutation.ClusterVotesShareNode.On() {
			continue
		}
		for addr, m := range o.members {
			if m.runID == runID {
				return o, addr
			}
		}
	}
	return nil, ""
}

// observeMember records what a new connection to addr, a node of cluster
// vote n, found, or refuses it: a replica (the client sends nothing a
// replica should answer; refused, a promoted replica is reached anew),
// a node not in cluster mode, or a node another vote has. Any sign that
// a primary may have lost writes quarantines the vote for MaxTTL: a
// run_id changed at addr (a restart), a primary that was a replica (a
// failover), or a primary first seen after the vote's first topology.
func (p *Pool) observeMember(n *node, addr string, info serverInfo) error {
	if info.Mode != "" && info.Mode != "cluster" {
		return &modeError{fmt.Sprintf("%s of %s runs %s, not in cluster mode: give it as a master", addr, n.Addr, info.Mode)}
	}
	p.ids.Lock()
	defer p.ids.Unlock()
	if o, oaddr := p.sameServer(n, info.RunID); o != nil {
		return &dependenceError{fmt.Sprintf("%s and %s report the same run_id %s: one server in two votes", voteName(n, addr), voteName(o, oaddr), info.RunID)}
	}
	primary := info.Role == "master"
	prev, known := n.members[addr]
	if n.members == nil {
		n.members = make(map[string]member)
	}
	n.members[addr] = member{runID: info.RunID, primary: primary}
	if !primary {
		return fmt.Errorf("%s of %s is a replica: a cluster vote talks to primaries only", addr, n.Addr)
	}
	switch {
	case known && prev.runID != info.RunID:
		n.restarts.Add(1)
		p.quarantineFor(n, p.maxTTL, QuarantineError{Restarted: true})
	case (known && !prev.primary || !known && n.established) && !mutation.ClusterFailoverTrusted.On():
		n.restarts.Add(1)
		p.quarantineFor(n, p.maxTTL, QuarantineError{Restarted: true})
	case !known:
		p.firstSeen(n, info)
	}
	return nil
}

// enumerate reads the cluster's nodes (CLUSTER NODES) through c, the
// vote's new client, and the INFO of each that the client has not yet
// reached, replicas included, so that a node that serves another vote is
// found at start whatever its role. Afterwards a primary new to the vote
// is a topology change (see observeMember).
func (p *Pool) enumerate(ctx context.Context, n *node, c rueidis.Client, o Options) error {
	txt, err := c.Do(ctx, c.B().ClusterNodes().Build()).ToString()
	if err != nil {
		return fmt.Errorf("CLUSTER NODES: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(txt), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.Contains(f[2], "fail") || strings.Contains(f[2], "noaddr") || strings.Contains(f[2], "handshake") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		if h, _, err := net.SplitHostPort(addr); err != nil || h == "" {
			continue
		}
		p.ids.Lock()
		_, known := n.members[addr]
		p.ids.Unlock()
		if known {
			continue
		}
		info, err := p.probe(ctx, addr, o)
		if err != nil {
			return fmt.Errorf("%s of %s: %w", addr, n.Addr, err)
		}
		if err := p.observeMember(n, addr, info); err != nil && (errors.Is(err, ErrNotIndependent) || errors.Is(err, ErrWrongMode)) {
			return err
		}
	}
	p.ids.Lock()
	n.established = true
	p.ids.Unlock()
	return nil
}

// probe reads INFO on a connection of its own to addr, as the dialer
// does, and closes it.
func (p *Pool) probe(ctx context.Context, addr string, o Options) (serverInfo, error) {
	d := &net.Dialer{Timeout: o.DialTimeout}
	conn, err := dial(ctx, addr, d, o.TLS, o.DialContext)
	if err != nil {
		return serverInfo{}, err
	}
	defer conn.Close()
	deadline := time.Now().Add(o.DialTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	return rawInfo(conn, deadline, o.Username, o.Password)
}

// ClusterAddrError is a cluster vote's address that cannot be used: not
// host:port with a port in 1-65535, or given twice (within the cluster,
// or also as a master or in another cluster), or a cluster with none.
type ClusterAddrError struct {
	Cluster, Seed int // Clusters[Cluster][Seed]; Seed is -1 for an empty cluster
	Addr          string
	// Dup names the address's other listing when it is given twice:
	// "Addrs[2]", "Clusters[0][1]".
	Dup string
	// Reason is what is wrong, without the address.
	Reason string
}

func (e *ClusterAddrError) Error() string {
	switch {
	case e.Seed < 0:
		return fmt.Sprintf("Clusters[%d] has no addresses", e.Cluster)
	case e.Dup != "":
		return fmt.Sprintf("address %q given twice (%s and Clusters[%d][%d]): votes must be distinct", e.Addr, e.Dup, e.Cluster, e.Seed)
	}
	return fmt.Sprintf("address %q (Clusters[%d][%d]): %s", e.Addr, e.Cluster, e.Seed, e.Reason)
}

// ValidateVotes checks masters and cluster votes as Dial does: at least
// one vote, the masters as ValidateAddrs wants, each cluster with
// addresses, none of them bad or given twice anywhere (a cluster's bad
// address is a *ClusterAddrError).
func ValidateVotes(addrs []string, clusters [][]string) error {
	if len(clusters) == 0 || len(addrs) > 0 {
		if err := ValidateAddrs(addrs); err != nil {
			return err
		}
	}
	seen := make(map[string]string)
	for i, a := range addrs {
		seen[a] = fmt.Sprintf("Addrs[%d]", i)
	}
	for c, seeds := range clusters {
		if len(seeds) == 0 {
			return &ClusterAddrError{Cluster: c, Seed: -1}
		}
		for s, a := range seeds {
			if why := addrProblem(a); why != "" {
				return &ClusterAddrError{Cluster: c, Seed: s, Addr: a, Reason: why}
			}
			if where, dup := seen[a]; dup {
				return &ClusterAddrError{Cluster: c, Seed: s, Addr: a, Dup: where, Reason: "given twice"}
			}
			seen[a] = fmt.Sprintf("Clusters[%d][%d]", c, s)
		}
	}
	return nil
}

// errCrossSlot is the vote of a cluster for a command whose keys are in
// different slots: no shard can run it, so it is not sent.
var errCrossSlot = errors.New("keys in different hash slots: a cluster vote runs one command on one shard")

// crossSlot reports whether cmd's keys are in more than one slot.
func crossSlot(cmd *Command) bool {
	if cmd.Keys == nil {
		return false
	}
	s := KeySlot(cmd.Key)
	for _, k := range *cmd.Keys {
		if KeySlot(k) != s {
			return true
		}
	}
	return false
}
