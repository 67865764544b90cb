package multiplex

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redis/rueidis"
)

// Slot migrations. While a slot moves between two shards of a cluster
// (CLUSTER SETSLOT MIGRATING on the source, IMPORTING on the target, keys
// moved one by one with MIGRATE), a key is on one of them, but a
// resource's keys may be split: the lock on the target, its fencing
// counter or a semaphore's other slots still on the source. Redis routes
// a command by its declared keys only: the source runs it if it has them
// all, and sends it on (ASK) to the target if it has none, where it runs
// with ASKING; a script there reads the keys still on the source as
// absent. A semaphore's acquire, whose declared key is the slots' common
// part, would take a slot held on the source; a fenced acquire would read
// no counter and hand out a token below one already given.
//
// So a script sent to a cluster vote declares one more key, the slot's
// guard (GuardPrefix, a tag of the slot), which never exists, and its body
// drops it from KEYS first. With a key missing, a node in a slot's
// migration refuses a command of several keys (TRYAGAIN; the source sends
// it to the target first when it has none of them, which refuses it
// then): no script runs on a migrating slot, and the vote fails there
// until the slot is handed over. A plain command of one key (SET NX of a
// lock) keeps Redis's routing, which is exact for that key.

// GuardPrefix starts the slot guards' keys, which no command may touch:
// "{T}" after it, T a tag of the slot (SlotTag). Inside the engine's
// reserved namespace.
const GuardPrefix = "\xffredlock:guard:"

// guardPrologue drops the guard, the last of KEYS, before the body runs,
// in a local copy (a server may make KEYS read-only), on the body's first
// line, so that its errors name the same lines.
const guardPrologue = "local KEYS = {unpack(KEYS, 1, #KEYS - 1)} "

// ErrSlotMigrating is a cluster vote's failure while the resource's slot
// moves between shards: no script runs there until it is handed over.
var ErrSlotMigrating = errors.New("slot migrating between shards: the cluster runs no script on it until it is handed over")

// guarded is s's form for a cluster vote, whose last key is the guard,
// and which publishes on its shard (see sharded).
func (s *Script) guarded() *Script {
	if g := s.guard.Load(); g != nil {
		return g
	}
	s.guard.CompareAndSwap(nil, NewScript(guardPrologue+sharded(s.Body)))
	return s.guard.Load()
}

// Publishes. A cluster forwards a PUBLISH to every node over its bus,
// whichever slot the channel hashes to, so that each shard pays for every
// release that wakes a waiter; a SPUBLISH (Redis 7.0) reaches the nodes
// of the shard that owns the channel's slot only, where the waiters
// subscribe with SSUBSCRIBE. So a cluster vote's scripts call spub
// instead of PUBLISH: SPUBLISH, on a channel that must be in the script's
// slot (its keys' common part or its lock key after a prefix, which keeps
// the tag), or, where SPUBLISH is unknown (Redis 6), PUBLISH as before:
// the release goes on either way, and the waiters are left to their
// fallback retry.

// publishCall is how a script body publishes, the one form sharded
// rewrites.
const publishCall = `redis.call("PUBLISH", `

// spubLocal defines spub, on the prologue's line.
const spubLocal = `local function spub(c, m) local ok, n = pcall(redis.call, "SPUBLISH", c, m) if ok then return n end return redis.call("PUBLISH", c, m) end `

// sharded is body with its publishes made on the shard (see above),
// unchanged when it publishes nothing; its lines keep their numbers.
func sharded(body string) string {
	if !strings.Contains(body, publishCall) {
		return body
	}
	return spubLocal + strings.ReplaceAll(body, publishCall, "spub(")
}

var (
	guardsOnce sync.Once
	guards     []string
)

// guardKey is slot's guard.
func guardKey(slot int) string {
	guardsOnce.Do(func() {
		guards = make([]string, keyslot.Slots)
		for s := range guards {
			guards[s] = GuardPrefix + "{" + keyslot.SlotTag(s) + "}"
		}
	})
	return guards[slot]
}

// unguarded reports whether a cluster vote's scripts go without the
// guard (mutation.ClusterMigrationUnguarded).
func unguarded() bool { return faults.ClusterMigrationUnguarded.On() }

// buildCluster makes c's command for a cluster vote with builder b: a
// script in its guarded form, with its slot's guard as its last key.
func buildCluster(b rueidis.Builder, c *Command, eval bool) rueidis.Completed {
	if c.Script == nil || unguarded() {
		return buildWith(b, c, eval).SetSlot(c.Key)
	}
	s := c.Script.guarded()
	head, body := "EVALSHA", s.SHA
	if eval {
		head, body = "EVAL", s.Body
	}
	n := 2
	if c.Keys != nil {
		n += len(*c.Keys)
	}
	a := b.Arbitrary(head, body, strconv.Itoa(n), c.Key)
	if c.Keys != nil {
		a = a.Args(*c.Keys...)
	}
	return a.Args(guardKey(keyslot.KeySlot(c.Key))).Args(c.Args[:c.NArgs]...).Build().SetSlot(c.Key)
}

// migrating names a TRYAGAIN reply of a cluster vote's script: its slot
// is in a migration.
func migrating(err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok && re.IsTryAgain() {
		return fmt.Errorf("%w (%s)", ErrSlotMigrating, re.Error())
	}
	return err
}
