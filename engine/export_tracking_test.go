package engine

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

// RWIntentsKey is the key of a read/write lock's waiting writers' intents,
// for the lock whose key is key.
func RWIntentsKey(key string) string { return rwPrefix + key }
