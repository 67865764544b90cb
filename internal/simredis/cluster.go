package simredis

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"
)

// A simulated Redis Cluster: one vote made of shards, each a primary (a
// Master) that owns a range of the 16384 slots, with an optional replica.
// Its nodes answer what rueidis's cluster client and the engine's cluster
// dial ask (CLUSTER SLOTS, CLUSTER NODES, INFO with redis_mode:cluster and
// role, HELLO's mode), refuse a command whose keys are in several slots
// (CROSSSLOT) and send one for a slot they do not own to its primary
// (MOVED), and publish on a shard with SPUBLISH and SSUBSCRIBE. A slot
// may migrate to another shard (migration.go): ASK, ASKING and TRYAGAIN
// while its keys move, MOVED to the new owner once it is handed over, and
// its sharded subscribers told SUNSUBSCRIBE by the old one. The nodes of a cluster share
// one clock model (the same offset and drift, and every clock fault is
// applied to all of them at once), so that the checkers read the vote's
// deadlines with one clock.
//
// A replica holds no data until a failover: then it takes a copy of its
// primary's store made some time before (the writes since are lost, as
// asynchronous replication loses them), the primary is killed, and the
// replica serves the shard's slots, with its own run_id; the old primary
// comes back later as a replica, with amnesia.
type Cluster struct {
	Vote   int
	shards []*shard
	// mu guards the topology and which nodes are down; it is taken
	// after a node's mutex, never before one.
	mu   sync.Mutex
	down map[*Master]bool
	// moved are the slots migrations handed to another shard than the
	// one whose range holds them; mig is the migration under way (one at
	// a time), and migrations counts their beginnings and hand-overs, so
	// that a failover whose copy was taken before one, or while one ran,
	// knows it is stale.
	moved      map[int]*shard
	mig        *migration
	migrations int
	// migrating is mig != nil, read without mu by every script call.
	migrating atomic.Bool
}

// setDown records whether m is killed, for the nodes' views.
func (c *Cluster) setDown(m *Master, down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down == nil {
		c.down = make(map[*Master]bool)
	}
	c.down[m] = down
}

// shard is one range of slots and the nodes that serve it.
type shard struct {
	lo, hi           int
	primary, replica *Master
}

// clusterRole is a node's place in its cluster.
type clusterRole struct {
	c  *Cluster
	id string // CLUSTER NODES's node id
}

// NewCluster starts cluster vote v of shards shards (each with a replica
// if replicas), its nodes at "vote<v>-node<i>:6379", with options o, on
// network n; its nodes' identities derive from seed. It returns the
// cluster and every node, each shard's primary then its replica. Call it
// inside the bubble; closing every node ends its goroutines.
func NewCluster(n *Network, seed uint64, v, shards int, replicas bool, o MasterOptions) (*Cluster, []*Master) {
	c := &Cluster{Vote: v}
	var nodes []*Master
	node := func() *Master {
		i := len(nodes)
		m := newMaster(n, seed, v, i+1, fmt.Sprintf("vote%d-node%d:6379", v, i), o, &clusterRole{c: c, id: nodeID(seed, v, i)})
		nodes = append(nodes, m)
		return m
	}
	for s := range shards {
		sh := &shard{lo: s * keyslot.Slots / shards, hi: (s+1)*keyslot.Slots/shards - 1}
		c.mu.Lock()
		c.shards = append(c.shards, sh)
		c.mu.Unlock()
		p := node()
		var r *Master
		if replicas {
			r = node()
		}
		c.mu.Lock()
		sh.primary, sh.replica = p, r
		c.mu.Unlock()
	}
	return c, nodes
}

// nodeID is a node's 40-hex-digit id, from the seed.
func nodeID(seed uint64, v, i int) string {
	r := rand.New(rand.NewPCG(seed, 1<<40|uint64(v)<<16|uint64(i)))
	var b [20]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return hex.EncodeToString(b[:])
}

// Shards is the number of shards.
func (c *Cluster) Shards() int { return len(c.shards) }

// Seeds are the addresses a client is given: every shard's first
// primary.
func (c *Cluster) Seeds() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.shards {
		out = append(out, s.primary.Addr)
	}
	return out
}

// Primary is shard s's primary now.
func (c *Cluster) Primary(s int) *Master {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shards[s].primary
}

// owner is the primary of slot, and whether m is it.
func (c *Cluster) owner(slot int, m *Master) (*Master, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.shardOfLocked(slot); s != nil {
		return s.primary, s.primary == m
	}
	return nil, false
}

// shardOfLocked is the shard that owns slot now. The caller holds c.mu.
func (c *Cluster) shardOfLocked(slot int) *shard {
	if s := c.moved[slot]; s != nil {
		return s
	}
	for _, s := range c.shards {
		if s.lo <= slot && slot <= s.hi {
			return s
		}
	}
	return nil
}

// slotRun is slots lo to hi, all owned by sh.
type slotRun struct {
	lo, hi int
	sh     *shard
}

// rangesLocked are the slots' owners, in runs in slot order: the shards'
// ranges, cut where a slot migrated away, and the slots migrated in. The
// caller holds c.mu.
func (c *Cluster) rangesLocked() []slotRun {
	var runs []slotRun
	moved := slices.Sorted(maps.Keys(c.moved))
	for _, s := range c.shards {
		lo := s.lo
		for _, m := range moved {
			if m >= s.lo && m <= s.hi {
				if m > lo {
					runs = append(runs, slotRun{lo, m - 1, s})
				}
				lo = m + 1
			}
		}
		if lo <= s.hi {
			runs = append(runs, slotRun{lo, s.hi, s})
		}
	}
	for _, m := range moved {
		runs = append(runs, slotRun{m, m, c.moved[m]})
	}
	slices.SortFunc(runs, func(a, b slotRun) int { return cmp.Compare(a.lo, b.lo) })
	var out []slotRun
	for _, r := range runs {
		if n := len(out); n > 0 && out[n-1].sh == r.sh && out[n-1].hi == r.lo-1 {
			out[n-1].hi = r.hi
			continue
		}
		out = append(out, r)
	}
	return out
}

// isPrimary reports whether m serves slots now.
func (c *Cluster) isPrimary(m *Master) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.shards {
		if s.primary == m {
			return true
		}
	}
	return false
}

// hostPort splits a node's address.
func hostPort(addr string) (string, int64) {
	h, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.ParseInt(p, 10, 64)
	return h, n
}

// slotsReply is CLUSTER SLOTS: each shard's range, its primary, then its
// replica (unless it is down).
func (c *Cluster) slotsReply() reply {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []reply
	for _, run := range c.rangesLocked() {
		s := run.sh
		h, p := hostPort(s.primary.Addr)
		e := []reply{intReply(int64(run.lo)), intReply(int64(run.hi)),
			arrayReply([]reply{bulkReply(h), intReply(p), bulkReply(s.primary.cl.id)})}
		if s.replica != nil && !c.down[s.replica] {
			h, p := hostPort(s.replica.Addr)
			e = append(e, arrayReply([]reply{bulkReply(h), intReply(p), bulkReply(s.replica.cl.id)}))
		}
		out = append(out, arrayReply(e))
	}
	return arrayReply(out)
}

// nodesReply is CLUSTER NODES as me sees it: on its own line, a slot in
// migration as "[slot->-target]" (the source's) or "[slot-<-source]" (the
// target's), as Redis shows them.
func (c *Cluster) nodesReply(me *Master) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	runs := c.rangesLocked()
	var b strings.Builder
	line := func(m *Master, flags, master, slots string) {
		if m == me {
			flags = "myself," + flags
		}
		if m != me && c.down[m] {
			flags += ",fail"
		}
		h, _ := hostPort(m.Addr)
		fmt.Fprintf(&b, "%s %s@16379,%s %s %s 0 0 1 connected%s\n", m.cl.id, m.Addr, h, flags, master, slots)
	}
	for _, s := range c.shards {
		var slots strings.Builder
		for _, r := range runs {
			if r.sh == s {
				fmt.Fprintf(&slots, " %d-%d", r.lo, r.hi)
			}
		}
		if mg := c.mig; mg != nil && s.primary == me {
			switch s {
			case mg.src:
				fmt.Fprintf(&slots, " [%d->-%s]", mg.slot, mg.dst.primary.cl.id)
			case mg.dst:
				fmt.Fprintf(&slots, " [%d-<-%s]", mg.slot, mg.src.primary.cl.id)
			}
		}
		line(s.primary, "master", "-", slots.String())
		if s.replica != nil {
			line(s.replica, "slave", s.primary.cl.id, "")
		}
	}
	return b.String()
}

// commandKeys are the keys a command names, for routing: nil for a
// command without keys.
func commandKeys(args []string) []string {
	a := args[1:]
	switch args[0] {
	case "PING", "INFO", "HELLO", "CLIENT", "SELECT", "AUTH", "QUIT", "CLUSTER", "SCRIPT", "TIME",
		"PUBLISH", "SUBSCRIBE", "UNSUBSCRIBE", "DBSIZE", "READONLY", "READWRITE", "ASKING", "COMMAND":
		return nil
	case "EVAL", "EVALSHA":
		if len(a) < 2 {
			return nil
		}
		n, err := strconv.Atoi(a[1])
		if err != nil || n < 0 || 2+n > len(a) {
			return nil
		}
		return a[2 : 2+n]
	case "DEL", "EXISTS", "MGET", "SSUBSCRIBE", "SUNSUBSCRIBE":
		return a
	}
	if len(a) == 0 {
		return nil
	}
	return a[:1]
}

// routeLocked answers, for a node of a cluster, a command it must not
// run, as Redis's getNodeByQuery does: CROSSSLOT for keys in several
// slots, MOVED for a slot it does not own (a replica sends every keyed
// command to its primary, as one without READONLY does). While the slot
// migrates, the source sends a command whose keys it has none of on to
// the target (ASK), and refuses one whose keys it has some of (TRYAGAIN);
// the target runs a command only after ASKING (else MOVED to the source),
// and refuses one of several keys it has not all of (TRYAGAIN). A sharded
// channel is no key there: the source serves SSUBSCRIBE until the slot is
// handed over. ok: run it.
func (m *Master) routeLocked(args []string, asking bool) (reply, bool) {
	keys := commandKeys(args)
	if len(keys) == 0 {
		return reply{}, true
	}
	slot := keyslot.KeySlot(keys[0])
	multi := false
	for _, k := range keys[1:] {
		if keyslot.KeySlot(k) != slot {
			return errorReply("CROSSSLOT Keys in request don't hash to the same slot"), false
		}
		multi = multi || k != keys[0]
	}
	c := m.cl.c
	c.mu.Lock()
	sh := c.shardOfLocked(slot)
	mg := c.mig
	c.mu.Unlock()
	if sh == nil {
		return reply{}, true
	}
	if mg == nil || mg.slot != slot || args[0] == "SSUBSCRIBE" || args[0] == "SUNSUBSCRIBE" {
		if sh.primary == m {
			return reply{}, true
		}
		return errorReply(fmt.Sprintf("MOVED %d %s", slot, sh.primary.Addr)), false
	}
	missing, existing := 0, 0
	for _, k := range keys {
		if m.st.exists(k) {
			existing++
		} else {
			missing++
		}
	}
	switch {
	case mg.dst.primary == m && asking:
		if multi && missing > 0 {
			return errTryAgain, false
		}
		return reply{}, true
	case sh.primary != m:
		return errorReply(fmt.Sprintf("MOVED %d %s", slot, sh.primary.Addr)), false
	case missing > 0 && existing > 0:
		return errTryAgain, false
	case missing > 0:
		return errorReply(fmt.Sprintf("ASK %d %s", slot, mg.dst.primary.Addr)), false
	}
	return reply{}, true
}

var errTryAgain = errorReply("TRYAGAIN Multiple keys request during rehashing of slot")

// nonLocalLocked reports whether a script's call, on a node that runs the
// script, names a key the node does not serve: in a slot migrating from
// it, a key it no longer has (unless the script came with ASKING, which
// Redis lends its calls). Redis fails such a call ("non local key").
func (m *Master) nonLocalLocked(args []string) bool {
	c := m.cl.c
	if m.asking || !c.migrating.Load() {
		return false
	}
	c.mu.Lock()
	mg := c.mig
	c.mu.Unlock()
	if mg == nil {
		return false
	}
	for _, k := range commandKeys(args) {
		if keyslot.KeySlot(k) == mg.slot && !m.st.exists(k) {
			return true
		}
	}
	return false
}

// clusterReply answers CLUSTER's subcommands that clients ask, on m.
func (c *Cluster) clusterReply(m *Master, a []string) reply {
	if len(a) == 0 {
		return errArgs("cluster")
	}
	switch strings.ToUpper(a[0]) {
	case "SLOTS":
		return c.slotsReply()
	case "NODES":
		return bulkReply(c.nodesReply(m))
	case "MYID":
		return bulkReply(m.cl.id)
	case "KEYSLOT":
		if len(a) != 2 {
			return errArgs("cluster|keyslot")
		}
		return intReply(int64(keyslot.KeySlot(a[1])))
	}
	return errorReply("ERR unknown subcommand '" + a[0] + "'")
}

// isDown reports whether the node is killed.
func (m *Master) isDown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.down
}

// Failover fails shard s over to its replica, whose copy of the
// primary's keys lags by lag: the copy is taken now, and after lag (or
// when ctx ends) the primary, old, is killed and the replica promoted
// with the copy (the writes made meanwhile are lost, as asynchronous
// replication loses them). old comes back as a replica, with amnesia,
// when started again. Failover reports false, doing nothing, when old no
// longer serves the shard by then, the replica is missing or down, or a
// slot migration was under way at the copy or began or ended since.
func (c *Cluster) Failover(ctx context.Context, s int, lag time.Duration) (old *Master, ok bool) {
	old = c.Primary(s)
	snap := old.snapshot()
	c.mu.Lock()
	migrations := c.migrations
	c.mu.Unlock()
	sleep(ctx, lag)
	return old, c.failover(s, snap, old, migrations)
}

// failover promotes shard s's replica with snapshot, a copy of old's
// store taken earlier (the writes since are lost), in place of old, which
// it kills, unless old no longer serves the shard, the replica is
// missing or down, or a slot migration began or ended since the copy
// (given as the count of migrations' beginnings and hand-overs then).
func (c *Cluster) failover(s int, snapshot map[string]*entry, old *Master, migrations int) bool {
	c.mu.Lock()
	sh := c.shards[s]
	p, r := sh.primary, sh.replica
	// A slot that migrated since the copy was taken would come back with
	// it (a replica replicates the MIGRATE's deletes): no failover then.
	// Nor after one that was under way at the copy: its keys moved since
	// would be back too, on a node that no longer owns their slot.
	busy := c.mig != nil || c.migrations != migrations
	c.mu.Unlock()
	if r == nil || p != old || r.isDown() || busy {
		return false
	}
	p.Kill()
	c.mu.Lock()
	sh.primary, sh.replica = r, p
	c.mu.Unlock()
	r.promote(snapshot, p)
	return true
}

// Switchover fails shard s over to its replica as CLUSTER FAILOVER does
// with the primary up: the replica, caught up (a manual failover waits
// until it is), takes a copy of the primary's keys and serves the
// shard's slots, and the old primary, alive, is its replica: its
// clients' connections stay open, a keyed command there is answered
// MOVED, and its sharded subscribers stay subscribed (Redis 7.0 sends
// them nothing). Switching over again brings the old primary back, with
// a copy of the other's keys. It reports false, doing nothing, when the
// shard has no replica, either node is down, or a slot migration is
// under way.
func (c *Cluster) Switchover(s int) bool {
	old := c.Primary(s)
	snap := old.snapshot()
	c.mu.Lock()
	sh := c.shards[s]
	r := sh.replica
	if r == nil || sh.primary != old || c.down[old] || c.down[r] || c.mig != nil {
		c.mu.Unlock()
		return false
	}
	sh.primary, sh.replica = r, old
	c.mu.Unlock()
	r.promote(snap, old)
	return true
}

// sleep sleeps d unless ctx ends first; it reports whether it slept.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// snapshot is a copy of the master's keys, as a replica would have them.
func (m *Master) snapshot() map[string]*entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]*entry, len(m.st.keys))
	for k, e := range m.st.keys {
		c := *e
		if e.z != nil {
			c.z = e.z.clone()
		}
		out[k] = &c
	}
	return out
}

// promote makes the replica m serve its shard with keys, in place of old
// (killed): its log shows old's keys wiped, then keys' copies.
func (m *Master) promote(keys map[string]*entry, old *Master) {
	old.mu.Lock()
	oldKeys := slices.Collect(maps.Keys(old.st.keys))
	old.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	st := newStore()
	st.changed = m.changedKey
	st.publish = m.publishLocked
	st.spublish = m.spublishLocked
	st.onCommand = m.countLocked
	st.nonLocal = m.nonLocalLocked
	st.keys, st.cluster = keys, true
	m.st = st
	m.commands["FAILOVER"]++ // for bench/sim's Coverage
	// The old primary's keys are wiped as a restart wipes them (the
	// engine quarantines a promoted replica's slots as a restarted
	// primary's), then the copy's are there.
	at := time.Since(m.start)
	for _, k := range slices.Sorted(slices.Values(oldKeys)) {
		m.log = append(m.log, KeyRecord{At: at, Master: m.Index, Key: k, Gone: true, Cause: "restart"})
	}
	m.cause, m.client = "failover", ""
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		m.changedKey(k)
	}
	m.cause = ""
}

// crossSlot reports whether a script's call touches a key of another slot
// than the script's declared keys, which a cluster node refuses.
func (s *store) crossSlot(args []string) bool {
	if !s.cluster || s.scriptSlot < 0 {
		return false
	}
	for _, k := range commandKeys(args) {
		if keyslot.KeySlot(k) != s.scriptSlot {
			return true
		}
	}
	return false
}
