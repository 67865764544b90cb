package simredis

import "strings"

// The engine's key names (engine/keys.go) that the masters' logs single
// out for the checkers: the waiter queues, whose leaves they record (see
// Leave), and the read/write locks' sorted sets, whose scores they record
// (see KeyRecord.Scores). bench/sim's checkers keep their own copies.
const (
	queuePrefix = "\xffredlock:queue:"
	// The holders' sorted set of a read/write lock is at the lock's key
	// and holds rwMember; the waiting writers' intents are at rwPrefix +
	// that key.
	rwPrefix = "\xffredlock:rw:"
	rwMember = "#rwlock"
)

// rwScored reports whether the key log records key's members' scores: a
// read/write lock's holders (scored by when each expires, a writer's
// negated, in µs of the master's clock) or intents (scored by when each
// expires).
func rwScored(key string, z *zset) bool {
	if strings.HasPrefix(key, rwPrefix) {
		return true
	}
	_, ok := z.byMember[rwMember]
	return ok
}
