package chaos

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/fault"
	"github.com/redlock-bench/redlock/bench/masters"
	"github.com/redlock-bench/redlock/internal/keyslot"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

// The chaos soak over cluster votes (Config.ClusterShards): each vote
// is a local Redis Cluster, each shard a primary with one replica. The
// faults on whole votes act on every node of the vote (every node's proxy,
// every node's process); the faults inside a cluster act on one shard or
// one slot. Either way a fault affects its vote, and in model at most a
// minority of votes is affected at any time: the plan spaces them so, and
// inject skips a fault whose other votes are still affected past their
// planned time.

// The faults inside a cluster.
const (
	// nemPrimaryKill kills a shard's primary and starts it again empty
	// after For (same port and node id); a kill longer than the cluster's
	// node timeout lets the replica take over on its own first.
	nemPrimaryKill = "cluster-kill"
	// nemPrimaryPause stops a shard's primary (SIGSTOP) for For; a pause
	// longer than the node timeout lets the replica take over, and the
	// old primary, resumed, is demoted.
	nemPrimaryPause = "cluster-pause"
	// nemFailover fails a shard over to its replica (CLUSTER FAILOVER);
	// done again on a shard, it fails back.
	nemFailover = "cluster-failover"
	// nemMigrate moves a hot resource's slot to another shard's primary
	// under load: the migration is opened, held For, its keys moved, and
	// the slot handed over.
	nemMigrate = "cluster-migrate"
)

// clusterNodeTimeout is the clusters' cluster-node-timeout: kills and pauses
// up to 4 TTLs of 1s outlast it now and then, so that replicas take over
// on their own as well as on command.
const clusterNodeTimeout = 2 * time.Second

// healTimeout bounds the wait for a cluster to be whole after a fault.
const healTimeout = 30 * time.Second

// validateClusters checks ClusterShards against the rest of the soak.
func (c *Config) validateClusters() error {
	switch {
	case c.ClusterShards == 0:
		return nil
	case c.ClusterShards < 0 || c.ClusterShards > masters.MaxClusterShards:
		return cfgErr("cluster-shards", c.ClusterShards, "must be in 0..%d (0: plain masters)", masters.MaxClusterShards)
	case len(c.Masters) > 0:
		return cfgErr("cluster-shards", c.ClusterShards, "applies to local votes only, not --masters")
	case c.Class != InModel:
		// The out-of-model faults act on the masters' keys by name.
		return cfgErr("cluster-shards", c.ClusterShards, "applies to --class %s only", InModel)
	case c.LocalMasters > 7:
		return cfgErr("local-masters", c.LocalMasters, "must be in 1..7 with --cluster-shards: every shard is two processes")
	}
	return nil
}

// startClusters starts n Redis Clusters of shards primaries with a
// replica each, all at once; on error it stops those it started. The
// caller stops them (masters.StopClusters) on every exit path.
func startClusters(ctx context.Context, n, shards int) ([]*redisproc.RedisCluster, error) {
	cs, err := masters.StartClusters(ctx, n, redisproc.ClusterOptions{Shards: shards, Replicas: 1, NodeTimeout: clusterNodeTimeout}, 90*time.Second)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return cs, nil
}

// votes is the number of votes.
func (ch *chaos) votes() int {
	if ch.clusters != nil {
		return len(ch.clusters)
	}
	return len(ch.masters) + len(ch.sentinels)
}

// clusterNodes are the clusters' nodes' addresses, per vote; nil without
// clusters.
func (ch *chaos) clusterNodes() [][]string {
	if ch.clusters == nil {
		return nil
	}
	out := make([][]string, len(ch.clusters))
	for i, c := range ch.clusters {
		for _, n := range c.Nodes() {
			out[i] = append(out[i], n.Addr())
		}
	}
	return out
}

// allAddrs is every server the soak votes on: the masters, every node
// of every cluster, or the plain masters and every Sentinel vote's data
// node.
func (ch *chaos) allAddrs() []string {
	switch {
	case ch.sentinels != nil:
		return ch.probeAddrs()
	case ch.clusters == nil:
		return ch.masters
	}
	return masters.Flatten(ch.clusterNodes())
}

// setVotes fills voteProxies and proxied, and the affected marks.
func (ch *chaos) setVotes() {
	ch.proxied = ch.allAddrs()
	ch.affected = make([]bool, ch.votes())
	ch.voteProxies = make([][]int, ch.votes())
	if ch.clusters == nil {
		for i := range ch.masters {
			ch.voteProxies[i] = []int{i}
		}
		i := len(ch.masters)
		for j, nodes := range ch.sentinelNodes() {
			for range nodes {
				ch.voteProxies[len(ch.masters)+j] = append(ch.voteProxies[len(ch.masters)+j], i)
				i++
			}
		}
		return
	}
	i := 0
	for v, c := range ch.clusters {
		for range c.Nodes() {
			ch.voteProxies[v] = append(ch.voteProxies[v], i)
			i++
		}
	}
}

// clusterVotes are a client's votes on the clusters, and the dialer that
// sends every connection to a node, wherever the cluster's topology names
// it, through that node's proxy in px.
func (ch *chaos) clusterVotes(px *fault.Proxies) (engines.Votes, func(context.Context, string) (net.Conn, error)) {
	via := make(map[string]string, len(ch.proxied))
	for i, a := range px.Addrs() {
		via[ch.proxied[i]] = a
	}
	var v engines.Votes
	for _, c := range ch.clusters {
		v.Clusters = append(v.Clusters, c.Seeds())
	}
	return v, func(ctx context.Context, addr string) (net.Conn, error) {
		if p, ok := via[addr]; ok {
			addr = p
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// occupy marks the votes of s affected for as long as it acts; false when
// that would take an in-model soak out of model (the vote is still
// affected, or a minority of the others already is), and s is then
// skipped. Out of model every fault goes in: that is the class's point.
func (ch *chaos) occupy(s nemStep) bool {
	if s.Kind == nemClientPause || len(ch.affected) == 0 || ch.cfg.Class == OutOfModel {
		return true
	}
	ch.faultMu.Lock()
	defer ch.faultMu.Unlock()
	n := 0
	for v, a := range ch.affected {
		if a && !containsInt(s.Nodes, v) {
			n++
		}
	}
	for _, v := range s.Nodes {
		if ch.affected[v] {
			n = len(ch.affected)
		}
	}
	if n+len(s.Nodes) > (len(ch.affected)-1)/2 {
		ch.skipped[s.Kind]++
		return false
	}
	for _, v := range s.Nodes {
		ch.affected[v] = true
	}
	return true
}

// release ends what occupy marked.
func (ch *chaos) release(s nemStep) {
	if s.Kind == nemClientPause || len(ch.affected) == 0 {
		return
	}
	ch.faultMu.Lock()
	defer ch.faultMu.Unlock()
	for _, v := range s.Nodes {
		ch.affected[v] = false
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// injectCluster applies a fault of a cluster vote, lifts it at At+For, and
// waits until the cluster is whole again. A cancelled ctx lifts the fault
// at once; the heal runs to its end, so that no node is left down or
// stopped (Stop kills every node at the end in any case).
func (ch *chaos) injectCluster(ctx context.Context, s nemStep) (string, error) {
	c := ch.clusters[s.Nodes[0]]
	bg := context.WithoutCancel(ctx)
	lift := func() { waitUntilCtx(ctx, ch.start.Add(s.At+s.For)) }
	healOnce := func() error {
		hctx, cancel := context.WithTimeout(bg, healTimeout)
		defer cancel()
		var err error
		for _, n := range c.Nodes() {
			if n.Paused() {
				if e := n.Resume(); e != nil && err == nil {
					err = e
				}
			}
			if !n.Running() {
				if e := n.Restart(hctx); e != nil && err == nil {
					err = e
				}
			}
		}
		// No migration is open on the vote while it heals (occupy): an
		// IMPORTING mark without keys on a node that does not serve the
		// slot is stale, as after a whole cluster's restart.
		cleared, e := c.ClearStaleImports(hctx)
		if e != nil && err == nil {
			err = e
		}
		if len(cleared) > 0 {
			ch.staleImports.Add(int64(len(cleared)))
			ch.event(Event{AtMs: ch.since(time.Now()), Kind: "heal",
				Detail: fmt.Sprintf("vote %d: stale IMPORTING mark of slot(s) %v cleared", s.Nodes[0], cleared)})
		}
		if e := c.WaitHealthy(hctx); e != nil && err == nil {
			err = e
		}
		return err
	}
	// A cluster that will not heal stays affected (its vote occupied)
	// until it does or the soak ends, so that no fault on another vote
	// joins it out of model; the first error is reported.
	heal := func(err error) error {
		for {
			e := healOnce()
			if e == nil {
				return err
			}
			if err == nil {
				err = e
			}
			if ctx.Err() != nil {
				return err
			}
			sleep(ctx, time.Second)
		}
	}
	switch s.Kind {
	case nemRestart:
		var err error
		for _, n := range c.Nodes() {
			if e := n.Kill(); e != nil && err == nil {
				err = e
			}
		}
		lift()
		return "", heal(err)
	case nemPause:
		var err error
		for _, n := range c.Nodes() {
			if e := n.Pause(); e != nil && err == nil {
				err = e
			}
		}
		lift()
		return "", heal(err)
	case nemPrimaryKill, nemPrimaryPause:
		p := c.Primary(bg, s.Shard)
		if p == nil {
			return "", heal(fmt.Errorf("shard %d has no primary", s.Shard))
		}
		var err error
		if s.Kind == nemPrimaryKill {
			err = p.Kill()
		} else {
			err = p.Pause()
		}
		lift()
		err = heal(err)
		detail := p.Addr()
		if now := c.Primary(bg, s.Shard); now != nil && now != p {
			detail += ", replica " + now.Addr() + " took over"
		}
		return detail, err
	case nemFailover:
		p := c.Primary(bg, s.Shard)
		var replica *redisproc.Node
		for _, n := range c.Shards[s.Shard].Nodes {
			if n != p {
				replica = n
			}
		}
		if p == nil || replica == nil {
			return "", heal(fmt.Errorf("shard %d has no primary or no replica", s.Shard))
		}
		fctx, cancel := context.WithTimeout(bg, healTimeout)
		defer cancel()
		err := c.Failover(fctx, replica)
		return p.Addr() + " -> " + replica.Addr(), heal(err)
	case nemMigrate:
		return ch.migrate(ctx, c, s, lift, heal)
	}
	return "", fmt.Errorf("unknown cluster fault %s", s.Kind)
}

// migrate moves resource s.Res's slot from the primary that serves it to
// the primary of another shard, s.Shard places along, under load: the
// migration stays open For before the keys move.
func (ch *chaos) migrate(ctx context.Context, c *redisproc.RedisCluster, s nemStep, lift func(), heal func(error) error) (string, error) {
	bg := context.WithoutCancel(ctx)
	mctx, cancel := context.WithTimeout(bg, healTimeout)
	defer cancel()
	// A lock key without a hash tag of its own, as the soak's are, lives
	// on a cluster vote in the slot of the key itself (the engine puts a
	// tag of that slot in front: docs/library.md, "Cluster masters"); how the
	// engine spells it is the engine's. The key itself, in that slot,
	// finds the primary that serves it.
	key := ch.keys[s.Res]
	slot := keyslot.KeySlot(key)
	from, fromShard := ch.slotPrimary(mctx, c, key)
	if from == nil {
		return "", heal(fmt.Errorf("no primary serves slot %d", slot))
	}
	toShard := (fromShard + 1 + s.Shard%(len(c.Shards)-1)) % len(c.Shards)
	to := c.Primary(mctx, toShard)
	if to == nil {
		return "", heal(fmt.Errorf("shard %d has no primary", toShard))
	}
	detail := fmt.Sprintf("slot %d (%s) %s -> %s", slot, ch.names[s.Res], from.Addr(), to.Addr())
	if err := c.BeginMigration(mctx, slot, from, to); err != nil {
		return detail, heal(err)
	}
	lift()
	moved, err := c.MigrateKeys(mctx, slot, from, to)
	if err == nil {
		err = c.FinishMigration(mctx, slot, from, to)
	}
	return fmt.Sprintf("%s, %d keys", detail, moved), heal(err)
}

// slotPrimary is the primary that serves key's slot, and its shard: the
// one that answers for the key rather than redirecting (MOVED).
func (ch *chaos) slotPrimary(ctx context.Context, c *redisproc.RedisCluster, key string) (*redisproc.Node, int) {
	for s := range c.Shards {
		p := c.Primary(ctx, s)
		if p == nil {
			continue
		}
		if _, err := redisproc.Do(ctx, p.Addr(), time.Second, "EXISTS", key); err == nil {
			return p, s
		} else if !strings.Contains(err.Error(), "MOVED") {
			continue
		}
	}
	return nil, -1
}
