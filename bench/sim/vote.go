package sim

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redlock-bench/redlock/internal/simredis"
	"github.com/redlock-bench/redlock/multiplex"
)

// untag is a cluster vote's key as the checkers name it: without the
// slot's tag that the engine puts in front of a key (see engine's key).
func untag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	if tag := key[i+1 : i+1+j]; tag == keyslot.SlotTag(keyslot.KeySlot(key)) {
		return key[:i] + key[i+2+j:]
	}
	return key
}

// vote is one vote of a run: a master, or a cluster's nodes.
type vote struct {
	nodes []*simredis.Master // a master's one; a cluster's every node
	cl    *simredis.Cluster
}

// each applies f to every node of the vote: a fault of the whole vote (a
// cluster's network, or its clock, which its nodes share).
func (v *vote) each(f func(*simredis.Master)) {
	for _, m := range v.nodes {
		f(m)
	}
}

// at is the node a fault of one node hits: the master, or the primary
// of a cluster's shard drawn from sel (a fault's Conn).
func (v *vote) at(sel int) *simredis.Master {
	if v.cl == nil {
		return v.nodes[0]
	}
	return v.cl.Primary(sel % v.cl.Shards())
}

// failover reports whether a restart drawn with sel (a fault's Conn) is,
// on a cluster with replicas, a failover: on every other shard index.
func (v *vote) failover(sel int) bool {
	return v.cl != nil && len(v.nodes) > v.cl.Shards() && (sel/v.cl.Shards())%2 == 1
}

// failoverFor runs a failover fault: a copy of the shard's primary's
// store is taken now, the writes of the next lag (f.Late, up to half a
// TTL, or For/2 when it is lost) are made on the primary alone, then the primary is
// killed and the replica promoted with the copy; the old primary comes
// back, with amnesia, as a replica after For (or when the run ends).
func (v *vote) failoverFor(ctx context.Context, f Fault, h *History) {
	s := f.Conn % v.cl.Shards()
	lag := f.Late
	if lag < 0 {
		lag = f.For / 2
	}
	old, ok := v.cl.Failover(ctx, s, lag)
	if !ok {
		h.note(fmt.Sprintf("vote%d shard %d: no failover (no replica up, or a slot migration)", v.cl.Vote, s))
		return
	}
	h.note(fmt.Sprintf("vote%d shard %d: %s promoted with a copy %s old, %s killed", v.cl.Vote, s, v.cl.Primary(s).Addr, lag, old.Addr))
	sleep(ctx, f.For-lag)
	old.Start()
}

// eachNode applies f to every node of every vote.
func eachNode(votes []*vote, f func(*simredis.Master)) {
	for _, v := range votes {
		v.each(f)
	}
}

// logs are the vote's key log, leaves and set attempts, for the checkers:
// a cluster's nodes' merged in time order; with cluster votes (tagged),
// every vote's keys untagged, as the engine gives them the tags.
func (v *vote) logs(tagged bool) ([]simredis.KeyRecord, []simredis.Leave, []simredis.AllAttempt) {
	if !tagged {
		m := v.nodes[0]
		return m.KeyLog(), m.Leaves(), m.AllAttempts()
	}
	var logs []simredis.KeyRecord
	var leaves []simredis.Leave
	var alls []simredis.AllAttempt
	for _, m := range v.nodes {
		for _, r := range m.KeyLog() {
			r.Key = untag(r.Key)
			logs = append(logs, r)
		}
		for _, l := range m.Leaves() {
			if strings.HasPrefix(l.Resource, multiplex.GuardPrefix) {
				continue
			}
			l.Resource = untag(l.Resource)
			leaves = append(leaves, l)
		}
		for _, a := range m.AllAttempts() {
			keys := a.Keys
			a.Keys = nil
			for _, k := range keys {
				if !strings.HasPrefix(k, multiplex.GuardPrefix) {
					a.Keys = append(a.Keys, untag(k))
				}
			}
			alls = append(alls, a)
		}
	}
	slices.SortStableFunc(logs, func(a, b simredis.KeyRecord) int { return cmp.Compare(a.At, b.At) })
	slices.SortStableFunc(leaves, func(a, b simredis.Leave) int { return cmp.Compare(a.At, b.At) })
	slices.SortStableFunc(alls, func(a, b simredis.AllAttempt) int { return cmp.Compare(a.At, b.At) })
	return logs, leaves, alls
}

func cloneClusters(c [][]string) [][]string {
	out := make([][]string, len(c))
	for i, s := range c {
		out[i] = slices.Clone(s)
	}
	return out
}

// migrate runs a migration fault on the cluster: each of slots (drawn
// by the caller) in turn moves to another shard (f.Conn picks which), a
// key every gap (f.For/8), waiting while either end is killed or paused;
// when ctx ends it finishes at once.
func (v *vote) migrate(ctx context.Context, f Fault, slots []int, h *History) {
	for _, slot := range slots {
		report, _ := v.cl.Migrate(ctx, slot, f.Conn, max(f.For/8, time.Millisecond))
		h.note(fmt.Sprintf("vote%d: %s", v.cl.Vote, report))
	}
}

// migrationSlots are the slots a migration fault moves: one of the hot
// slots of the clusters (the same for every cluster, so that faults
// drawn together move one resource's slot on several votes) by the
// fault's draw, or every one of them (f.Every); the draw's own slot if no
// key is anywhere.
func migrationSlots(votes []*vote, f Fault) []int {
	set := make(map[int]bool)
	for _, v := range votes {
		if v.cl != nil {
			for _, s := range v.cl.HotSlots() {
				set[s] = true
			}
		}
	}
	if len(set) == 0 {
		return []int{int(f.Pick % keyslot.Slots)}
	}
	hot := slices.Sorted(maps.Keys(set))
	if f.Every {
		return hot
	}
	return hot[f.Pick%uint64(len(hot)):][:1]
}
