package simredis

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"
)

// Slot migrations, as an operator (or redis-cli --cluster reshard) runs
// them: CLUSTER SETSLOT slot IMPORTING on the target and MIGRATING on the
// source, then the slot's keys moved one by one (MIGRATE ... REPLACE: a
// key appears on the target and leaves the source at once, the source
// blocked meanwhile), a gap of virtual time between two, until the source
// has none left; then CLUSTER SETSLOT slot NODE target on both. While it
// runs, the nodes route the slot's commands as routeLocked says; once it
// is handed over, the source answers MOVED and, as a Redis 7 node does
// for a slot it loses, ends its clients' sharded subscriptions of the
// slot's channels (a sunsubscribe push each), so that they subscribe again
// at the new owner.
//
// A key moving is no change of the vote's key space: it is not logged,
// but for a key the target already had with another value (which only a
// script run on the target during the migration makes), which REPLACE
// overwrites, logged on the target.

// Migrate moves slot to another shard, the pick'th after its owner's
// (modulo the others), as an operator does: a key every gap of virtual
// time, waiting while either end is killed or paused, then the hand-over;
// when ctx ends, it moves the rest at once. It returns a line for a
// history, which says what moved, and true; or why no migration began (one
// is under way, one shard, or a primary is down), and false.
func (c *Cluster) Migrate(ctx context.Context, slot, pick int, gap time.Duration) (report string, ok bool) {
	mg, why := c.beginMigration(slot, pick)
	if mg == nil {
		return fmt.Sprintf("no migration of slot %d (%s)", slot, why), false
	}
	moved := 0
	for {
		live := sleep(ctx, gap)
		if live && (mg.src.primary.stopped() || mg.dst.primary.stopped()) {
			continue
		}
		if !c.moveKey(mg) {
			break
		}
		moved++
	}
	ended := c.handOver(mg)
	return fmt.Sprintf("slot %d migrated from %s to %s, %d keys moved, %d sharded subscriptions ended", slot, mg.src.primary.Addr, mg.dst.primary.Addr, moved, ended), true
}

// migration is a slot moving from shard src to shard dst.
type migration struct {
	slot     int
	src, dst *shard
}

// HotSlots are the slots of the keys the cluster's primaries hold now, in
// order: the workload's resources' slots, for a migration that matters.
func (c *Cluster) HotSlots() []int {
	set := make(map[int]bool)
	for s := range c.Shards() {
		p := c.Primary(s)
		p.mu.Lock()
		for k := range p.st.keys {
			set[keyslot.KeySlot(k)] = true
		}
		p.mu.Unlock()
	}
	return slices.Sorted(maps.Keys(set))
}

// beginMigration marks slot as migrating to the pick'th other shard
// (IMPORTING on the target, MIGRATING on the source), or says why not.
func (c *Cluster) beginMigration(slot int, pick int) (*migration, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.mig != nil:
		return nil, fmt.Sprintf("slot %d is migrating", c.mig.slot)
	case len(c.shards) < 2:
		return nil, "one shard"
	}
	src := c.shardOfLocked(slot)
	i := slices.Index(c.shards, src)
	dst := c.shards[(i+1+pick%(len(c.shards)-1))%len(c.shards)]
	if c.down[src.primary] || c.down[dst.primary] {
		return nil, "a primary is down"
	}
	c.mig = &migration{slot: slot, src: src, dst: dst}
	c.migrating.Store(true)
	c.migrations++
	return c.mig, ""
}

// stopped reports whether the node can run no command now: killed or
// paused (a MIGRATE waits for both ends).
func (m *Master) stopped() bool {
	m.mu.Lock()
	down := m.down
	m.mu.Unlock()
	m.fmu.Lock()
	defer m.fmu.Unlock()
	return down || m.paused
}

// moveKey moves the first of the slot's keys left on the source to the
// target, as MIGRATE ... REPLACE does, and reports whether there was one
// (a key past its deadline is dropped, as Redis's lookup drops it).
func (c *Cluster) moveKey(mg *migration) bool {
	c.mu.Lock()
	from, to := mg.src.primary, mg.dst.primary
	c.mu.Unlock()
	// Source then target: only a migration holds two nodes' mutexes, one
	// at a time per cluster.
	from.mu.Lock()
	defer from.mu.Unlock()
	to.mu.Lock()
	defer to.mu.Unlock()
	from.st.now = from.nowLocked()
	var keys []string
	for k := range from.st.keys {
		if keyslot.KeySlot(k) == mg.slot {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return false
	}
	k := slices.Min(keys)
	e, live := from.st.keys[k], from.st.exists(k)
	delete(from.st.keys, k)
	if !live {
		// Past its deadline: Redis would drop it, not move it. The
		// drop is logged, as a command's finding it expired is: a
		// clock stepped back later does not bring it back. But where
		// the target has the key (set there under ASK, the source's
		// copy expired), the vote's key is the target's, which MIGRATE
		// leaves alone: the stale copy's drop is no change of the
		// vote's key space, and logged it would read as the target's
		// key gone.
		if to.st.keys[k] == nil {
			from.cause, from.client = "migrate", ""
			from.changedKey(k)
			from.cause = ""
		}
		return true
	}
	old := to.st.keys[k]
	to.st.keys[k] = e
	to.commands["MIGRATE"]++ // for bench/sim's Coverage
	if old != nil && !sameEntry(old, e) {
		to.cause, to.client = "migrate", ""
		to.changedKey(k)
		to.cause = ""
	}
	return true
}

// sameEntry reports whether two keys' values and deadlines are equal.
func sameEntry(a, b *entry) bool {
	if !a.expireAt.Equal(b.expireAt) || (a.z == nil) != (b.z == nil) {
		return false
	}
	if a.z != nil {
		return a.z.String() == b.z.String() && maps.Equal(a.z.byMember, b.z.byMember)
	}
	return a.str == b.str
}

// handOver ends mg: the slot is the target shard's (CLUSTER SETSLOT NODE
// on both), and the source ends its clients' sharded subscriptions of the
// slot's channels.
func (c *Cluster) handOver(mg *migration) (ended int) {
	c.mu.Lock()
	if c.moved == nil {
		c.moved = make(map[int]*shard)
	}
	c.moved[mg.slot] = mg.dst
	c.mig = nil
	c.migrating.Store(false)
	c.migrations++ // a copy taken before the hand-over is stale
	from := mg.src.primary
	c.mu.Unlock()
	from.mu.Lock()
	defer from.mu.Unlock()
	from.commands["SETSLOT"]++ // for bench/sim's Coverage
	for _, p := range from.pipes {
		for _, ch := range slices.Sorted(maps.Keys(p.ssubs)) {
			if keyslot.KeySlot(ch) != mg.slot {
				continue
			}
			delete(p.ssubs, ch)
			ended++
			p.server.Write(reply{kind: rPush, elems: []reply{bulkReply("sunsubscribe"), bulkReply(ch), intReply(int64(len(p.ssubs)))}}.appendRESP(nil, p.resp3))
		}
	}
	return ended
}
