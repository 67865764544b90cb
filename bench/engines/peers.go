package engines

import (
	"fmt"
	"strings"
)

// Peers are the engines compared by default on l: ours first, so that
// every ratio is against ours. For a mutex, the redsync baselines; for a
// semaphore, this engine's variants alone (no baseline has a semaphore);
// for a read/write lock, ours and the same operations on our mutex (no
// baseline has a read/write lock); for a multi-resource lease, ours, ours
// as K mutexes in turn, and the redsync baselines (K redsync mutexes in
// turn). When the votes are Redis Clusters (clusters), a mutex is
// compared with ours on the first cluster alone and with rueidislock on
// that one in its own model (the other baselines cannot run on a
// cluster), and a multi-resource lease without the redsync baselines.
func Peers(l Lock, clusters bool) []Engine {
	var bases []Base
	switch {
	case l.Kind == LockSemaphore:
		bases = []Base{Redlock, RedlockPerCommand}
	case l.Kind == LockRW:
		bases = []Base{Redlock, RedlockMutex}
	case l.Kind == LockMulti && clusters:
		bases = []Base{Redlock, RedlockSequential}
	case l.Kind == LockMulti:
		bases = []Base{Redlock, RedlockSequential, RedsyncRueidis, RedsyncGoredis}
	case clusters:
		return []Engine{{Base: Redlock}, {Base: Redlock, Votes: 1}, {Base: Rueidislock}}
	default:
		bases = []Base{Redlock, RedsyncRueidis, RedsyncGoredis}
	}
	out := make([]Engine, len(bases))
	for i, b := range bases {
		out[i] = Engine{Base: b}
	}
	return out
}

// PeerNotes say how the engines take l where they differ, or why no peer
// runs.
func PeerNotes(l Lock, es []Engine) []string {
	switch l.Kind {
	case LockSemaphore:
		return []string{fmt.Sprintf("%s has no peer: none of the baselines (redsync, rueidislock, bsm/redislock) has a semaphore, "+
			"and we know of no Go semaphore over N independent masters, so only this engine's variants can run", l)}
	case LockRW:
		var notes []string
		for _, e := range es {
			if !l.Shared(e) {
				notes = append(notes, fmt.Sprintf("%s takes %s on redlock's mutex: the same operations on the same resources, every one exclusive, reads too", e, l))
			}
		}
		return append(notes, "none of the baselines (redsync, rueidislock, bsm/redislock) has a read/write lock, "+
			"and we know of no Go one over N independent masters: our mutex is the comparison")
	case LockMulti:
		var seq, own []string
		for _, e := range es {
			if e.Sequential() {
				seq = append(seq, e.String())
			} else {
				own = append(own, e.String())
			}
		}
		var notes []string
		if len(seq) > 0 {
			notes = append(notes, fmt.Sprintf("%s take %s as %d mutexes one after another, in name order (so that none deadlocks), released newest first",
				strings.Join(seq, ", "), l, l.K))
		}
		if len(own) > 0 {
			notes = append(notes, fmt.Sprintf("%s take %s as one lease (TryLockAll, LockAll)", strings.Join(own, ", "), l))
		}
		return notes
	}
	return nil
}

// ClusterNotes say, in a comparison whose votes are votes Redis Clusters,
// which clusters each engine used and how it spreads a lock over their
// shards.
func ClusterNotes(es []Engine, votes int) []string {
	var notes []string
	for _, e := range es {
		n := e.Votes
		switch {
		case e.Base == Rueidislock:
			notes = append(notes, fmt.Sprintf("%s runs on the first cluster alone, in its own model: one cluster client, a lock is %d of %d keys "+
				"(KeyMajority %d, its default), each key on the shard of its slot, so that a lock spans shards of one cluster; "+
				"it has no vote over independent clusters", e, rueidislockClusterMajority, 2*rueidislockClusterMajority-1, rueidislockClusterMajority))
		case !e.IsRedlock():
		case n == 1 || votes == 1:
			notes = append(notes, fmt.Sprintf("%s votes on the first cluster alone: a lock is one key, on the shard of its slot", e))
		case n > 0 && n < votes:
			notes = append(notes, fmt.Sprintf("%s votes on the first %d of the %d clusters: a quorum of %d, one key on the shard of its slot in each", e, n, votes, n/2+1))
		default:
			notes = append(notes, fmt.Sprintf("%s votes on all %d clusters: a quorum of %d, one key on the shard of its slot in each", e, votes, votes/2+1))
		}
	}
	return notes
}
