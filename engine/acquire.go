package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// TryLock makes one attempt to acquire resource. On failure the attempt is
// undone on every master where it may have taken, and the error says why
// (see VotesError). TryLock does not queue at the in-process gate.
// Options (WithTTL, WithOwner) apply to this acquisition only.
func (l *Locker) TryLock(ctx context.Context, resource string, opts ...LockOption) (*Lease, error) {
	o, err := l.resolve("acquire", resource, opts)
	if err != nil {
		return nil, err
	}
	if l.cfg.Observer != nil {
		return l.tryLockObserved(ctx, resource, o)
	}
	le, err := l.try(ctx, resource, nil, o)
	if err != nil {
		return nil, err
	}
	le.arm()
	return le, nil
}

// try makes one attempt. tk is for a waiter subscribed to the resource's
// releases: where the key is taken, the attempt marks the holder's value,
// which makes the holder's release publish, and queues the waiter.
func (l *Locker) try(ctx context.Context, resource string, tk *ticket, o acquireOpts) (*Lease, error) {
	// Close waits for attempts under way (see remote), so that the undo of
	// one that succeeds after Close began reaches the masters.
	l.remote.Add(1)
	defer l.remote.Add(-1)
	if l.closed.Load() {
		return nil, fmt.Errorf("engine: acquire %q: %w", resource, ErrClosed)
	}
	if err := l.checkResource("acquire", resource); err != nil {
		return nil, err
	}
	le := l.newLease(resource, tk, o)
	cmd, classify := l.acquireCommand(le, tk)
	le.start = time.Now()
	t := l.pool.Fanout(ctx, cmd, classify, (*acquireReplies)(le), le.votes)
	err := le.decide(ctx, t)
	if err == nil {
		return le, nil
	}
	l.undo(le)
	return nil, l.nameOtherKind(ctx, resource, err)
}

// newLease is an attempt's lease, not yet held: a fresh value, which for a
// waiter in the queue starts with its id (see ticket), and which ends
// with the owner metadata, if any (see WithOwner).
func (l *Locker) newLease(resource string, tk *ticket, o acquireOpts) *Lease {
	le := &Lease{
		l:        l,
		resource: resource,
		key:      l.key(resource),
		value:    newValue(),
		ttlMS:    o.ttlMS,
	}
	switch {
	case tk != nil:
		le.value = tk.id + idEnd + le.value + o.suffix
	case o.suffix != "":
		le.value += o.suffix
	}
	le.initVotes(l.votes)
	return le
}

// acquireCommand is the attempt's command and how to read its replies:
// SET NX PX (with GET from Redis 7.0, so that a refusal names the holder),
// acquireMarkScript for a waiter in the queue, acquireFenceScript with
// fencing.
func (l *Locker) acquireCommand(le *Lease, tk *ticket) (multiplex.Command, multiplex.Classifier) {
	var cmd multiplex.Command
	classify := classifyAcquireGet
	switch {
	case l.cfg.Fencing:
		cmd, classify = acquireFenceCall(le.key, le.value, le.ttlArg(), tk), classifyFenced
	case tk != nil:
		cmd = scriptCall(acquireMarkScript, le.key, le.value, le.ttlArg(), tk.score, tk.id)
	case l.setGet:
		cmd = plainCall("SET", le.key, le.value, "NX", "GET", "PX", le.ttlArg())
	default:
		cmd, classify = plainCall("SET", le.key, le.value, "NX", "PX", le.ttlArg()), classifyAcquireSet
	}
	// A waiter's attempt goes to every master even once decided, so that
	// it is queued on all of them: masters whose queues differ would each
	// wake a different waiter.
	cmd.SkipIfFailed = tk == nil
	return cmd, classify
}

// decide records the attempt's votes and says whether the lease is held:
// a quorum, fenced if fencing is on, with validity left, and Close not
// begun. On an error the caller undoes the attempt.
func (le *Lease) decide(ctx context.Context, t multiplex.Tally) error {
	l := le.l
	ok := t.Reached() && t.Err == nil
	le.mu.Lock()
	for i, v := range t.Votes {
		le.record(i, v)
	}
	if ok {
		le.validUntil = le.start.Add(l.validityFor(le.ttlMS))
	}
	le.mu.Unlock()
	if !ok {
		return l.acquireError(le.resource, t)
	}
	if l.cfg.Fencing {
		if err := le.fence(ctx, t); err != nil {
			return err
		}
	}
	// The lease is not handed out yet: nothing else writes validUntil.
	// A quorum reached after the validity ran out (the attempt waited to
	// be sent behind MaxRounds of other rounds: the validity counts from
	// before that wait) is undone, not handed out expired with keys that
	// would keep the resource from everyone for up to a TTL
	// (TestAcquireOutlastingItsValidityIsUndone). With fencing, fence's
	// own check, which wants a round's span of validity left, comes first.
	if !time.Now().Before(le.validUntil) && !faults.AcquireIgnoresValidity.On() {
		return l.acquireError(le.resource, t)
	}
	if l.closed.Load() {
		// Close began during the attempt. The lease could not be released
		// (Release after Close deletes nothing), so it would keep the
		// resource, and a waiter's turn, for its TTL: undo it (a waiter's
		// quit then passes the turn on).
		return fmt.Errorf("engine: acquire %q: %w during the attempt, which was undone", le.resource, ErrClosed)
	}
	return nil
}

// checkResource refuses names that cannot be locks, for op: the empty
// name, and names whose key falls in the engine's internal namespace.
func (l *Locker) checkResource(op, resource string) error {
	if resource == "" {
		return fmt.Errorf("engine: %s: %w", op, ErrEmptyResource)
	}
	return checkKey(l.cfg.KeyPrefix, resource)
}

func classifyAcquireGet(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	// SET NX GET answers nil when it set the key, and the holder's value
	// when the key was taken; a non-string key is a WRONGTYPE error. A
	// refusal carries a hash of the holder's value, so that a waiter can
	// tell one holder with a quorum from a split vote.
	v, err := res.ToString()
	switch {
	case err == nil:
		return multiplex.Refused, holderHash(v), nil
	case rueidis.IsRedisNil(err):
		return multiplex.OK, 0, nil
	}
	return multiplex.Failed, 0, err
}

// turnHash stands for every turn token in a refusal; holderHash never
// returns it (its results are odd).
const turnHash = 2

// holderHash is FNV-1a of a lock value without its wait mark, never 0 (0
// means unknown): one holder's value is marked on some masters only.
func holderHash(v string) int64 {
	if strings.HasPrefix(v, turnPrefix) {
		return turnHash
	}
	v = strings.TrimSuffix(v, waitMark)
	h := uint64(14695981039346656037)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 1099511628211
	}
	return int64(h | 1)
}

func classifyAcquireSet(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	err := res.Error()
	switch {
	case err == nil:
		return multiplex.OK, 0, nil
	case rueidis.IsRedisNil(err):
		return multiplex.Refused, 0, nil
	}
	return multiplex.Failed, 0, err
}

// classifyFenced reads acquireFenceScript's answer: the counter on OK, the
// holder's hash (as classifyAcquireGet) when refused.
func classifyFenced(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	m, err := res.ToMessage()
	if err != nil {
		return multiplex.Failed, 0, err
	}
	if m.IsInt64() {
		n, _ := m.ToInt64()
		return multiplex.OK, n, nil
	}
	v, err := m.ToString()
	if err != nil {
		return multiplex.Failed, 0, err
	}
	return multiplex.Refused, holderHash(v), nil
}

// acquireMarkScript is SET NX PX GET for a waiter already subscribed
// to the resource's releases, with its ticket and id (its
// value starts with the id), that also takes the waiter's turn: it
// sets the key where it is free or holds this waiter's turn token. It
// queues the waiter on every master it reaches, keeping the first
// ticket it queued with, so that the masters' queues agree even after
// a split vote. Where the key is taken (by a lock or another waiter's
// turn), it marks it, so that its release gives the turn on; where it
// sets the key, it sets it marked, so that its own release leaves the
// queue and gives the turn to the next. Its answer is SET NX GET's:
// nil when it set the key, the value it found (before marking) when
// taken.
var acquireMarkScript = multiplex.NewScript(`local value, ttl, ticket, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local v = redis.call("GET", KEYS[1])
local q = "` + queuePrefixLua + `" .. KEYS[1]
redis.call("ZADD", q, "NX", ticket, id)
redis.call("PEXPIRE", q, 2 * ttl)
local turn = "` + turnPrefix + `" .. id
if not v or v == turn or v == turn .. "` + waitMark + `" then
  redis.call("SET", KEYS[1], value .. "` + waitMark + `", "PX", ttl)
  return false
end
if string.sub(v, -1) ~= "` + waitMark + `" then
  redis.call("APPEND", KEYS[1], "` + waitMark + `")
end
return v`).Coalesce()

// acquireFenceScript is SET NX PX that also reads the resource's
// fencing counter, so that fencing costs one extra round trip, not two.
// It answers max(counter, this master's clock in µs) when it set the
// key (see fence.go), and the holder's value (a string) when taken, so
// that a waiter tells a hold from a split vote. waiter "1" is a
// waiter with its ticket and id, which queues and marks as
// acquireMarkScript does (the TYPE check comes first). Every check that can fail comes before the
// SET: Redis does not undo a script's writes when it fails half-way.
var acquireFenceScript = multiplex.NewScript(acquireFenceBody(true)).Coalesce()

// acquireFenceScriptNoFloor answers the counter alone, without the
// master's clock as a floor (mutation.FencingWithoutClockFloor).
var acquireFenceScriptNoFloor = multiplex.NewScript(acquireFenceBody(false)).Coalesce()

// acquireFenceBody is acquireFenceScript's Lua; floor: answer at least
// the master's clock in µs.
func acquireFenceBody(floor bool) string {
	answer := "  return c\n"
	if floor {
		answer = `  local now = redis.call("TIME")
  local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
  if floor > c then
    return floor
  end
  return c
`
	}
	return `local value, ttl, waiter, ticket, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local c = redis.pcall("GET", "` + fencePrefixLua + `" .. KEYS[1])
if type(c) == "table" then
  return redis.error_reply("WRONGTYPE redlock: the fencing counter holds the wrong type")
end
c = tonumber(c or "0")
if not c then
  return redis.error_reply("ERR redlock: the fencing counter is not an integer")
end
local t = redis.call("TYPE", KEYS[1]).ok
if t ~= "none" and t ~= "string" then
  return redis.error_reply("WRONGTYPE Operation against a key holding the wrong kind of value")
end
local m, nx = "", "NX"
if waiter == "1" then
  local q = "` + queuePrefixLua + `" .. KEYS[1]
  redis.call("ZADD", q, "NX", ticket, id)
  redis.call("PEXPIRE", q, 2 * ttl)
  m = "` + waitMark + `"
  if t == "string" then
    local turn = "` + turnPrefix + `" .. id
    local v = redis.call("GET", KEYS[1])
    if v == turn or v == turn .. "` + waitMark + `" then
      nx = "XX"
    end
  end
end
if redis.call("SET", KEYS[1], value .. m, nx, "PX", ttl) then
` + answer + `end
local v = redis.call("GET", KEYS[1])
if waiter == "1" and string.sub(v, -1) ~= "` + waitMark + `" then
  redis.call("APPEND", KEYS[1], "` + waitMark + `")
end
return v`
}

// acquireFenceCall is acquireFenceScript's call on key for value and ttl
// (ms); tk is a waiter's place in the queue, or nil.
func acquireFenceCall(key, value, ttl string, tk *ticket) multiplex.Command {
	script := acquireFenceScript
	if faults.FencingWithoutClockFloor.On() {
		script = acquireFenceScriptNoFloor
	}
	if tk == nil {
		return scriptCall(script, key, value, ttl, "0")
	}
	return scriptCall(script, key, value, ttl, "1", tk.score, tk.id)
}

// record notes the acquire's outcome on one master; it returns whether
// that master must be sent a release now because the lease is already
// failed or released. The caller holds le.mu.
func (le *Lease) record(node int, v multiplex.Vote) (undo bool) {
	bit := uint64(1) << node
	switch v.Outcome {
	case multiplex.Pending, multiplex.Timeout:
		return false
	case multiplex.OK:
		le.held |= bit
	case multiplex.Failed:
		if mayHaveRun(v.Err) {
			le.unsure |= bit
			if _, reply := rueidis.IsRedisErr(v.Err); !reply {
				le.broken |= bit
			}
		}
	}
	le.answered |= bit
	return (le.failed || le.released) && (le.held|le.unsure)&bit != 0
}

// acquireReplies is the Lease seen as the acquire's multiplex.LateHandler,
// so that the handler is not part of the Lease's API. A conversion of the
// pointer, it costs nothing.
type acquireReplies Lease

func (r *acquireReplies) Late(node int, v multiplex.Vote) { (*Lease)(r).late(node, v) }

// late handles a master's reply to the acquire that arrived after the
// attempt was decided. If the lease has failed or been released by then,
// that master is sent its release now: the reply proves the SET ran first.
func (le *Lease) late(node int, v multiplex.Vote) {
	le.mu.Lock()
	if next := le.successor; next != nil {
		le.mu.Unlock()
		next.late(node, v) // the keys now belong to the successor
		return
	}
	undo := le.record(node, v)
	le.trackAnswerLocked(node)
	le.mu.Unlock()
	if undo {
		le.l.undoNodes(le, 1<<node)
	}
}
