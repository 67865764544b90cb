package redisproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// ClusterOptions shape a RedisCluster.
type ClusterOptions struct {
	// Shards is the number of primaries; the slots are split between
	// them in contiguous ranges, shard 0 first. Default: 3.
	Shards int
	// Replicas is the number of replicas per shard. Default: none.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a primary may be
	// unreachable before its replicas may fail it over. Default: 2s.
	NodeTimeout time.Duration
}

func (co *ClusterOptions) fill() error {
	if co.Shards == 0 {
		co.Shards = 3
	}
	if co.NodeTimeout <= 0 {
		co.NodeTimeout = 2 * time.Second
	}
	if co.Shards < 0 || co.Shards > Slots || co.Replicas < 0 {
		return fmt.Errorf("redisproc: a cluster needs 1-%d shards and >= 0 replicas, got %d and %d", Slots, co.Shards, co.Replicas)
	}
	return nil
}

// clusterArgs are a cluster node's settings. Full coverage is not
// required, so that the shards up keep serving their slots while one is
// down, as Redlock wants of a vote. A replica's first sync starts at
// once, not after the default 5s wait for more replicas.
func clusterArgs(busPort int, co *ClusterOptions) []string {
	return []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(busPort),
		"--cluster-node-timeout", strconv.FormatInt(co.NodeTimeout.Milliseconds(), 10),
		"--cluster-require-full-coverage", "no",
		"--repl-diskless-sync-delay", "0",
	}
}

// RedisCluster is one Redis Cluster of cluster-enabled redis-server
// processes: Shards primaries, the slots assigned between them, each with
// its replicas. Its nodes keep their ports and directories (nodes.conf,
// the node's identity, included) across restarts.
type RedisCluster struct {
	// Shards are in slot order: shard i starts with primary i.
	Shards []*Shard
	root   string
}

// Shard is one primary and its replicas as started. A failover changes
// which node is the primary; see RedisCluster.Primary.
type Shard struct {
	// First and Last are the shard's slots, inclusive.
	First, Last int
	// Nodes are the shard's nodes: the first started as its primary.
	Nodes []*Node
}

// StartRedisCluster launches a Redis Cluster on free loopback ports (two
// per node: clients and cluster bus), joins its nodes (CLUSTER MEET),
// assigns the slots (CLUSTER ADDSLOTSRANGE), attaches the replicas
// (CLUSTER REPLICATE), and waits until every node reports cluster_state:ok
// and the same view of the shards. On error every node already started
// is stopped. TLS is not supported.
func StartRedisCluster(ctx context.Context, co ClusterOptions, opts Options) (*RedisCluster, error) {
	if err := co.fill(); err != nil {
		return nil, err
	}
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if opts.TLS != nil {
		return nil, errors.New("redisproc: TLS is not supported for a RedisCluster")
	}
	if _, err := findBin(opts.Bin); err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "rediscluster-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	c := &RedisCluster{root: root}
	fail := func(err error) (*RedisCluster, error) {
		c.Stop()
		return nil, err
	}
	per := Slots / co.Shards
	for s := 0; s < co.Shards; s++ {
		sh := &Shard{First: s * per, Last: (s+1)*per - 1}
		if s == co.Shards-1 {
			sh.Last = Slots - 1
		}
		c.Shards = append(c.Shards, sh)
		for r := 0; r <= co.Replicas; r++ {
			dir := filepath.Join(root, fmt.Sprintf("%d-%d", s, r))
			if err := os.Mkdir(dir, 0o700); err != nil {
				return fail(fmt.Errorf("redisproc: %w", err))
			}
			node := &Node{opts: opts, Dir: dir, cluster: &co}
			// Shard nodes join the list before they start, so that Stop
			// finds a node whose start failed halfway.
			sh.Nodes = append(sh.Nodes, node)
			if err := node.startOnFreePort(ctx); err != nil {
				return fail(err)
			}
		}
	}
	if err := c.form(ctx); err != nil {
		return fail(err)
	}
	return c, nil
}

func findBin(bin string) (string, error) {
	if bin == "" {
		bin = "redis-server"
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", ErrNoServer
	}
	return p, nil
}

// form joins the started nodes into one cluster and waits until it is
// whole. Each node is given a configuration epoch of its own first, as
// redis-cli --cluster create does: nodes that start at the same epoch
// settle it among themselves over the bus, and a replica attached
// meanwhile keeps its epoch. One left equal to its primary's and the
// highest would, taking over from that primary dead (CLUSTER FAILOVER
// TAKEOVER takes a new epoch only when its own is not the highest),
// claim the slots at the epoch the dead primary holds them at: the other
// nodes keep them with the dead primary, and never report
// cluster_state:ok.
func (c *RedisCluster) form(ctx context.Context) error {
	nodes := c.Nodes()
	for i, n := range nodes {
		if _, err := n.cmd1(ctx, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return err
		}
	}
	first := nodes[0]
	host := first.opts.Host
	for _, n := range nodes[1:] {
		if _, err := n.cmd1(ctx, "CLUSTER", "MEET", host, strconv.Itoa(first.Port), strconv.Itoa(first.BusPort)); err != nil {
			return err
		}
	}
	for _, sh := range c.Shards {
		if _, err := sh.Nodes[0].cmd1(ctx, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(sh.First), strconv.Itoa(sh.Last)); err != nil {
			return err
		}
	}
	// A replica can follow its primary only once it knows it.
	if err := c.await(ctx, "every node to know the others", func() error {
		for _, n := range nodes {
			txt, err := n.cmd1(ctx, "CLUSTER", "NODES")
			if err != nil {
				return err
			}
			if got := strings.Count(strings.TrimSpace(txt), "\n") + 1; got != len(nodes) {
				return fmt.Errorf("%s knows %d of %d nodes", n.Addr(), got, len(nodes))
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for _, sh := range c.Shards {
		id, err := sh.Nodes[0].ID(ctx)
		if err != nil {
			return err
		}
		for _, r := range sh.Nodes[1:] {
			if _, err := r.cmd1(ctx, "CLUSTER", "REPLICATE", id); err != nil {
				return err
			}
		}
	}
	return c.WaitHealthy(ctx)
}

// WaitHealthy waits until every running node reports cluster_state:ok,
// lists the same primaries for the same slots, and every replica's link
// to its primary is up. After a failover or a restart it says the
// cluster has settled.
func (c *RedisCluster) WaitHealthy(ctx context.Context) error {
	return c.await(ctx, "cluster_state:ok on every node", func() error {
		var view string
		for _, n := range c.Nodes() {
			if !n.Running() {
				continue
			}
			info, err := n.cmd1(ctx, "CLUSTER", "INFO")
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("%s: not cluster_state:ok (%s)", n.Addr(), clusterInfoFields(info))
			}
			slots, err := n.cmd1(ctx, "CLUSTER", "NODES")
			if err != nil {
				return err
			}
			v, k := primaries(slots)
			if k != len(c.Shards) {
				return fmt.Errorf("%s sees %d primaries, want %d", n.Addr(), k, len(c.Shards))
			}
			if view == "" {
				view = v
			} else if v != view {
				return fmt.Errorf("%s sees the primaries %s, another node %s", n.Addr(), v, view)
			}
			repl, err := n.cmd1(ctx, "INFO", "replication")
			if err != nil {
				return err
			}
			if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
				return fmt.Errorf("%s: replica link not up", n.Addr())
			}
		}
		return nil
	})
}

// clusterInfoFields is what of CLUSTER INFO tells why a node's state is
// not ok: the slots it sees served, failing or failed, the primaries
// serving slots, and the epochs.
func clusterInfoFields(info string) string {
	var out []string
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		for _, f := range []string{"cluster_state", "cluster_slots_ok", "cluster_slots_pfail", "cluster_slots_fail", "cluster_size", "cluster_current_epoch", "cluster_my_epoch"} {
			if strings.HasPrefix(line, f+":") {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, " ")
}

// primaries is the CLUSTER NODES text reduced to its primaries not known
// to have failed, with their slots, for comparing two nodes' views, and
// their count: a replica whose CLUSTER REPLICATE has not reached a node
// yet is a primary without slots there.
func primaries(nodes string) (string, int) {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		out = append(out, addr+" "+strings.Join(f[8:], " "))
	}
	slices.Sort(out)
	return strings.Join(out, "; "), len(out)
}

// await retries check every 50ms until it passes, ctx ends, or
// awaitCluster (or Options.StartTimeout, if longer) has passed.
func (c *RedisCluster) await(ctx context.Context, what string, check func() error) error {
	// A cluster converges (a failover agreed on, every node's view
	// alike) in its own time, which a loaded machine stretches far past
	// a server's start: ctx bounds the wait, and without a deadline a
	// minute does.
	deadline := time.Now().Add(max(c.Shards[0].Nodes[0].opts.StartTimeout, awaitCluster))
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redisproc: waiting for %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisproc: waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// awaitCluster bounds a wait for the cluster to converge when the
// context sets no earlier deadline.
const awaitCluster = time.Minute

// Nodes returns every node, shard by shard, each shard's first-started
// primary first.
func (c *RedisCluster) Nodes() []*Node {
	var out []*Node
	for _, sh := range c.Shards {
		out = append(out, sh.Nodes...)
	}
	return out
}

// Seeds returns the addresses of the shards' first-started primaries:
// what a client is given to find the cluster.
func (c *RedisCluster) Seeds() []string {
	out := make([]string, len(c.Shards))
	for i, sh := range c.Shards {
		out[i] = sh.Nodes[0].Addr()
	}
	return out
}

// Primary returns the node that serves shard s's slots now, as the node
// reports its own role (it changes with a failover), or nil if none of
// the shard's running nodes is a primary.
func (c *RedisCluster) Primary(ctx context.Context, s int) *Node {
	for _, n := range c.Shards[s].Nodes {
		if !n.Running() {
			continue
		}
		if repl, err := n.cmd1(ctx, "INFO", "replication"); err == nil && strings.Contains(repl, "role:master") {
			return n
		}
	}
	return nil
}

// Stop kills every node and removes the data directories. It is safe to
// call more than once.
func (c *RedisCluster) Stop() error {
	var errs []error
	for _, n := range c.Nodes() {
		if err := n.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.root != "" {
		if err := os.RemoveAll(c.root); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ID is the node's cluster node id (CLUSTER MYID).
func (n *Node) ID(ctx context.Context) (string, error) { return n.cmd1(ctx, "CLUSTER", "MYID") }

// cmd1 sends one command to the node over a fresh connection and returns
// its reply as text (a bulk or simple string, or an integer).
func (n *Node) cmd1(ctx context.Context, args ...string) (string, error) {
	const timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := n.Conn().NewClient(n.Addr(), timeout)
	if err != nil {
		return "", fmt.Errorf("redisproc: %s: %w", n.Addr(), err)
	}
	defer cl.Close()
	m, err := cl.Do(ctx, cl.B().Arbitrary(args...).Build()).ToMessage()
	if err != nil {
		return "", fmt.Errorf("redisproc: %s %s: %w", n.Addr(), strings.Join(args, " "), err)
	}
	if m.IsInt64() {
		i, _ := m.AsInt64()
		return strconv.FormatInt(i, 10), nil
	}
	s, err := m.ToString()
	if err != nil {
		return "", fmt.Errorf("redisproc: %s %s: %w", n.Addr(), strings.Join(args, " "), err)
	}
	return s, nil
}

// Failover makes replica the primary of its shard (CLUSTER FAILOVER, or
// with the primary down CLUSTER FAILOVER TAKEOVER, which needs no vote)
// and waits until it says so and the cluster is whole again. A
// replication that lagged loses the writes it had not yet received.
func (c *RedisCluster) Failover(ctx context.Context, replica *Node) error {
	args := []string{"CLUSTER", "FAILOVER"}
	for _, sh := range c.Shards {
		if slices.Contains(sh.Nodes, replica) {
			for _, n := range sh.Nodes {
				if n != replica && !n.Running() {
					args = append(args, "TAKEOVER")
					break
				}
			}
		}
	}
	if _, err := replica.cmd1(ctx, args...); err != nil {
		return err
	}
	if err := c.await(ctx, replica.Addr()+" to be a primary", func() error {
		repl, err := replica.cmd1(ctx, "INFO", "replication")
		if err != nil {
			return err
		}
		if !strings.Contains(repl, "role:master") {
			return errors.New("still a replica")
		}
		return nil
	}); err != nil {
		return err
	}
	return c.WaitHealthy(ctx)
}
