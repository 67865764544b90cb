package engine

import "math/bits"

// TrackedKeys is the number of keys the Locker's tracker watches.
func (l *Locker) TrackedKeys() int {
	if l.track == nil {
		return 0
	}
	l.track.mu.Lock()
	defer l.track.mu.Unlock()
	return len(l.track.keys)
}

// TrackerReads is the number of key reads the tracker has judged.
func (l *Locker) TrackerReads() int64 {
	if l.track == nil {
		return 0
	}
	return l.track.reads.Load()
}

// LeaseKeys are the lease's keys on the masters.
func LeaseKeys(le *Lease) []string {
	if le.all != nil {
		return le.all.keys
	}
	return []string{le.key}
}

// LeaseValue is the lease's value: a read/write holder's member at its
// key.
func LeaseValue(le *Lease) string { return le.value }

// AnsweredEverywhere reports whether every vote has answered le's
// acquire: its SET has run on every master, so that nothing a test
// writes there after can be overtaken by it.
func AnsweredEverywhere(le *Lease) bool {
	le = remote(le)
	le.mu.Lock()
	defer le.mu.Unlock()
	return bits.OnesCount64(le.answered) == le.l.votes
}

// TrackerGone is how many masters the tracker's last reads of le's keys
// found one of them gone or another's on, and whether the tracker has
// settled: every master's tracking connection up (or refused), no key
// left to read there and no read under way. A read judged counts in gone
// before its batch ends the leases it found lost; once settled, every
// batch has ended them.
func TrackerGone(le *Lease) (gone int, settled bool) {
	le = remote(le)
	le.mu.Lock()
	tr := le.trk
	le.mu.Unlock()
	if tr == nil {
		return 0, false
	}
	t := le.l.track
	t.mu.Lock()
	defer t.mu.Unlock()
	settled = true
	for _, tn := range t.nodes {
		if tn.state != trackOff && (tn.state != trackUp || tn.busy || len(tn.dirty) > 0) {
			settled = false
		}
	}
	return bits.OnesCount64(tr.gone), settled
}

// remote is the lease that holds le's keys on the masters: le, or the
// base of the share a reader's lease joined.
func remote(le *Lease) *Lease {
	if le.share != nil {
		return le.share.base
	}
	return le
}

// RWIntentsKey is the key of a read/write lock's waiting writers' intents,
// for the lock whose key is key.
func RWIntentsKey(key string) string { return rwPrefix + key }
