package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/internal/addrcheck"
	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redlock-bench/redlock/multiplex"
)

// A vote may be a Redis Cluster (Config.Clusters). Each command the
// engine sends for a resource is a script on its lock key (KEYS[1]) that
// derives the resource's other keys, and the channel its release
// publishes on, by putting a prefix before that key; a cluster runs a
// script only if every key it touches is in one slot. So with cluster
// votes a lock key without a hash tag of its own is given one: "{T}" in
// front, T a tag of the key's own slot (keyslot.SlotTag), so that every
// prefixed key keeps that slot, and a name with braces that make no tag
// ("a}b", "x{}y") is stored in the slot Redis gives it. A key with a tag
// keeps its name: the caller chose the slot. But "{T}a" is also how the
// key "a" is stored: a key spelled as that, "{T}" repeated n >= 1 times
// before a key r without a tag whose slot's tag is T, gets "{T}" once
// more in front, so that every name has a key of its own ("a" is kept at
// "{T}a", "{T}a" at "{T}{T}a", and so on), in its own slot. Masters given
// as such see the same keys as the cluster votes, whatever their kind.

// ErrCrossSlot: with cluster votes, a multi-resource lock's resources are
// in different hash slots. Refused rather than split per slot: the lock
// is all or nothing on each vote because one script takes every key at
// once, and a cluster runs a script on one shard only. Resources whose
// names share a hash tag ("{order:42}:items", "{order:42}:invoice") share
// a slot.
var ErrCrossSlot = errors.New("resources in different hash slots: with cluster votes, a multi-resource lock needs one slot (give the names a common {tag})")

// ErrWrongMode: New found a master that runs in cluster mode (give its
// cluster in Config.Clusters), or a cluster vote whose node does not.
var ErrWrongMode = multiplex.ErrWrongMode

// ErrSlotMigrating is a cluster vote's failure while the resource's hash
// slot moves between two of its shards: the cluster runs none of the
// engine's scripts on the slot until it is handed over (a resource's keys
// may be split between the two shards meanwhile), and the other votes
// decide. It appears among a VotesError's node errors.
var ErrSlotMigrating = multiplex.ErrSlotMigrating

// key is resource's lock key (see above).
func (l *Locker) key(resource string) string {
	k := l.cfg.KeyPrefix + resource
	if !l.clustered || faults.ClusterKeysUntagged.On() {
		return k
	}
	if !keyslot.HasTag(k) {
		return "{" + keyslot.SlotTag(keyslot.KeySlot(k)) + "}" + k
	}
	if tag, ok := l.spelledAsKey(k); ok {
		return tag + k
	}
	return k
}

// spelledAsKey reports whether k, a key with a hash tag, is spelled as
// the key of another name would be stored: "{T}" (its tag, returned)
// repeated before a key of this Locker's (KeyPrefix first) without a
// tag, whose slot's tag is T.
func (l *Locker) spelledAsKey(k string) (string, bool) {
	if k[0] != '{' {
		return "", false
	}
	tag := k[:strings.IndexByte(k, '}')+1] // k's tag is its first "{...}"
	r := k
	for strings.HasPrefix(r, tag) {
		r = r[len(tag):]
	}
	if keyslot.HasTag(r) || !strings.HasPrefix(r, l.cfg.KeyPrefix) {
		return "", false
	}
	return tag, keyslot.SlotTag(keyslot.KeySlot(r)) == tag[1:len(tag)-1]
}

// semBase is a semaphore's keys' common part (see semPrefix). Its
// "{name}" is their hash tag on plain masters. With cluster votes a tag
// of the lock key's slot goes first, so that every key of a name, the
// semaphore's and a read/write lock's (which checks the semaphore's
// permit count) included, shares one slot, whatever braces the name or
// KeyPrefix holds.
func (l *Locker) semBase(name string) string {
	base := semPrefix + l.cfg.KeyPrefix + "{" + name + "}:"
	if l.clustered {
		tag := keyslot.SlotTag(keyslot.KeySlot(l.key(name)))
		base = semPrefix + "{" + tag + "}" + l.cfg.KeyPrefix + "{" + name + "}:"
	}
	return base
}

// checkSlots refuses, with cluster votes, a set of keys in several slots.
func (l *Locker) checkSlots(op string, set *resourceSet) error {
	if !l.clustered {
		return nil
	}
	first := keyslot.KeySlot(set.keys[0])
	for i, k := range set.keys[1:] {
		if s := keyslot.KeySlot(k); s != first {
			return fmt.Errorf("engine: %s: %q (slot %d) and %q (slot %d): %w", op, set.names[0], first, set.names[i+1], s, ErrCrossSlot)
		}
	}
	return nil
}

// validateClusters checks Config.Clusters with the masters, as New does.
func (c *Config) validateClusters() error {
	if len(c.Clusters) == 0 {
		return nil
	}
	err := addrcheck.Votes(c.Masters, c.Clusters)
	var ce *addrcheck.ClusterAddrError
	switch {
	case err == nil || !errors.As(err, &ce):
		return err
	case ce.Seed < 0:
		return fmt.Errorf("engine: Config.Clusters[%d] has no addresses: give one or more of the cluster's nodes", ce.Cluster)
	case ce.Dup != "":
		return fmt.Errorf("engine: Config.Clusters[%d][%d] %q duplicates Config.%s: votes must be distinct",
			ce.Cluster, ce.Seed, ce.Addr, strings.Replace(ce.Dup, "Addrs", "Masters", 1))
	}
	return fmt.Errorf("engine: Config.Clusters[%d][%d] %q: %s", ce.Cluster, ce.Seed, ce.Addr, ce.Reason)
}

func cloneClusters(c [][]string) [][]string {
	if c == nil {
		return nil
	}
	out := make([][]string, len(c))
	for i, seeds := range c {
		out[i] = append([]string(nil), seeds...)
	}
	return out
}

// voteNames are the votes' names for messages: each master's address, each
// cluster's label.
func voteNames(pool *multiplex.Pool) []string {
	status := pool.Status()
	out := make([]string, 0, len(status))
	for _, s := range status {
		out = append(out, s.Addr)
	}
	return out
}

// A script that a cluster vote refused because the resource's slot was
// migrating (ErrSlotMigrating) did not run there; nor did one that the
// vote's client routed to a replica, whose connection the vote refuses
// (multiplex.ErrReplica): right after a failover, until the client has
// refreshed its slot map, the shard's old primary. A caller that waits
// (an acquire, an extend) counts the vote as failed, and the other votes
// decide. A quit, a leave or a release is sent without waiting for it:
// lost there, it would leave a gone waiter queued on that vote, given a
// turn at each release that nobody uses while the next waiter sleeps
// until its fallback, or a released lock in place until it expires. So
// such a script is sent again to that vote a little later, until the
// slot is handed over or the client routes it to the new primary:
// resend is its multiplex.LateHandler.
type resend struct {
	l   *Locker
	cmd multiplex.Command
	// until bounds the retries: past it, any queue the entry was in has
	// expired unless other waiters kept it, and a lock has expired.
	until time.Time
}

// post sends cmd, a fire-and-forget script (see resend), to cmd.Nodes.
func (l *Locker) post(cmd multiplex.Command) {
	l.pool.Post(cmd, classifyInt, l.resender(cmd).handler())
}

// resender is cmd's resend handler; nil without cluster votes.
func (l *Locker) resender(cmd multiplex.Command) *resend {
	if !l.clustered || faults.ClusterMigrationNoResend.On() {
		return nil
	}
	return &resend{l: l, cmd: cmd, until: time.Now().Add(2 * l.cfg.MaxTTL)}
}

// handler is r as a round's LateHandler: none for a nil r.
func (r *resend) handler() multiplex.LateHandler {
	if r == nil {
		return nil
	}
	return r
}

// decided acts on the votes a round decided before it returned (its
// handler gets the later ones): a nil r does nothing.
func (r *resend) decided(votes []multiplex.Vote) {
	if r == nil {
		return
	}
	for i, v := range votes {
		r.Late(i, v)
	}
}

// Late sends the script again to a vote that did not run it for now
// (see resend).
func (r *resend) Late(node int, v multiplex.Vote) {
	if !refusedForNow(v.Err) || r.l.closed.Load() || time.Now().After(r.until) {
		return
	}
	time.AfterFunc(r.l.jitter(r.l.cfg.Wait.RetryDelayMin, r.l.cfg.Wait.RetryDelayMax)+r.l.cfg.NodeTimeout, func() {
		cmd := r.cmd
		cmd.Nodes = uint64(1) << node
		r.l.pool.Post(cmd, classifyInt, r)
	})
}

// refusedForNow: a cluster vote did not run the script, for a reason
// that passes (see resend).
func refusedForNow(err error) bool {
	return errors.Is(err, ErrSlotMigrating) || errors.Is(err, multiplex.ErrReplica) && !faults.ClusterReplicaNoResend.On()
}
