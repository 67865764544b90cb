package engine

import (
	"fmt"
	"strings"
)

// The engine's keys on the masters. A lock is the key KeyPrefix +
// resource, holding the lease's value; everything else the engine keeps
// lives under internalPrefix, which no lock key may start with (checkKey),
// so that no resource name reaches it.

// internalPrefix starts every key the engine keeps besides the locks. A
// lock key (KeyPrefix + resource) may not start with it, so that no
// resource name reaches an internal key; 0xFF never occurs in UTF-8 text.
const internalPrefix = "\xffredlock:"

// fencePrefix names each resource's fencing counter, on every master. A
// counter expires MaxTTL after its master's clock passes its value or its
// lease's last extended TTL ends, whichever is later: about MaxTTL after
// the resource's last fenced lease (see fence.go), so that names fenced
// once do not stay on the masters forever.
// fencePrefixLua is the same in a Lua string literal.
const (
	fencePrefix    = internalPrefix + "fence:"
	fencePrefixLua = `\255redlock:fence:`
)

// queuePrefix names each resource's queue of waiters, on every master: a
// sorted set of waiter ids scored by ticket (the wall-clock µs at which
// the waiter's Lock began), ties broken by id, so that every master orders
// it the same way. A subscribed waiter joins it with each attempt; a
// marked release takes its own waiter out (a waiter's lock value is its id,
// idEnd, then the random part), pops the lowest and wakes only that
// waiter. The queue is only a hint of who goes next: SET NX on a quorum
// still decides who holds the lock, and a waiter that is not woken
// retries after its fallback delay. The queue expires two TTLs after a
// waiter last joined it, so that the entries of a waiter that died without
// leaving go. queuePrefixLua is the same in a Lua string literal.
const (
	queuePrefix    = internalPrefix + "queue:"
	queuePrefixLua = `\255redlock:queue:`
)

// semPrefix starts a semaphore's keys on every master (see Semaphore):
// slot i is the lock key semPrefix + KeyPrefix + "{" + name + "}:" + i,
// held by one permit, and its permit count is the same with "permits"
// for i. In the internal namespace, so that no resource name reaches
// them; the name in braces is their Redis Cluster hash tag, so that one
// script may touch them all (a "{" in KeyPrefix or name still puts every
// index after the tag). A release of a slot publishes, when a waiter
// marked it, on releasedPrefix + the keys' common part up to the index.
const semPrefix = internalPrefix + "sem:"

// A read/write lock (see RWMutex) holds its readers and writer in one
// sorted set at its lock key, KeyPrefix + name, so that a plain lock of
// the name meets a key of another type. Its waiting writers' intents are
// the sorted set rwPrefix + that key, and its waiters' mark the string
// rwMarkPrefix + that key; the Lua forms are the same in string literals.
const (
	rwPrefix        = internalPrefix + "rw:"
	rwPrefixLua     = `\255redlock:rw:`
	rwMarkPrefix    = internalPrefix + "rwmark:"
	rwMarkPrefixLua = `\255redlock:rwmark:`
)

// KeyPrefixes returns the prefixes of every key the engine keeps on a
// master for the resources whose names start with namePrefix, under
// keyPrefix (Config.KeyPrefix): their lock keys, their semaphores' slots
// and counts, and for each of those its fencing counter, waiter queue and
// read/write intents and mark, in the engine's internal namespace. Each
// of those keys expires on its own; a tool that clears its keys from
// shared masters at once (a benchmark's clean-up) removes every key that
// starts with one of them. On a Redis Cluster vote a key may carry a hash
// tag in front, and is not covered.
func KeyPrefixes(keyPrefix, namePrefix string) []string {
	var out []string
	for _, k := range []string{keyPrefix + namePrefix, semPrefix + keyPrefix + "{" + namePrefix} {
		out = append(out, k, fencePrefix+k, queuePrefix+k, rwPrefix+k, rwMarkPrefix+k)
	}
	return out
}

// releasedPrefix names the channel a release publishes on, so that waiters
// retry at once instead of polling.
const releasedPrefix = "redlock:released:"

// checkKey refuses a lock key (prefix + resource) in the engine's internal
// namespace. It builds the key only for the error: attempts call it on
// the hot path.
func checkKey(prefix, resource string) error {
	reserved := strings.HasPrefix(prefix, internalPrefix)
	if !reserved && strings.HasPrefix(internalPrefix, prefix) {
		reserved = strings.HasPrefix(resource, internalPrefix[len(prefix):])
	}
	if reserved {
		return fmt.Errorf("engine: resource key %q: %w", prefix+resource, ErrReservedResource)
	}
	return nil
}
