package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// The multi-resource lock: one lease on K resources, all or nothing.
//
// On each master one script takes all K keys with the lease's value if
// none of them is held, and otherwise takes none and names the first one
// held (acquireAllScript): a master's yes means it holds every key, its no
// that it holds none. A quorum of yeses is then a quorum for each of the
// K resources, so each one is excluded exactly as by a lease on it alone:
// any lease that holds it, on one resource or on several, has its key on a
// quorum, and two quorums share a master, whose key admits one value.
//
// An attempt waits for nothing while it holds anything: it takes all K
// keys in one step on each master or none, and a failed attempt is undone
// everywhere, as a lease on one resource is. With no hold-and-wait there
// is no cycle of waiters, so no deadlock, whatever order callers name the
// resources in (they are sorted only so that every master reports the
// same first held key).
//
// The lease is an ordinary *Lease whose scripts run over its K keys: the
// release, undo, extend, fence and queue scripts are each a single key's
// body run once per key in one call (allKeys), so that a key of a
// multi-resource lease is treated exactly as a lease on one resource
// treats its key, and a master agrees to a release or extension only if
// it holds all K. Validity, auto-extension, Done, the restart quarantine,
// late replies and errors are the lease's own.
//
// Each of these scripts coalesces (multiplex.Script.CoalesceKeys): the
// calls of one script queued for a master, by many leases, go as one
// script call in which each runs alone over its own keys, under pcall, in
// the order they were submitted; the pool keeps every command on one of
// their keys in its place around them. The master runs the call as one
// step, so each member sees what it would have seen alone right after the
// member before it, its all-or-nothing is the script's own (every check
// that can fail precedes the first write), and an error ends that member
// only, whose body touches no other member's keys.
//
// The keys are all on each master: on a cluster vote, they must share a
// hash slot (ErrCrossSlot).

// MaxResources is the most resources one TryLockAll or LockAll takes,
// duplicates counted once. Each master runs the script over all of them
// at once, serving nobody else meanwhile: 64 keys keep that under a few
// tens of microseconds.
const MaxResources = 64

// TryLockAll makes one attempt to acquire every one of resources under one
// lease, all or nothing: on each master the keys are taken together only
// if none of them is held. On failure nothing is held, the attempt is
// undone on every master where it may have taken, and a refusal
// (ErrNotAcquired) names in VotesError.Held a resource that was held. The
// order of the names does not matter and duplicates count once; at least
// one name (ErrNoResources), at most MaxResources (ErrTooManyResources).
//
// The lease releases, extends, auto-extends and ends (Done, Err) for all
// of them at once; its fencing token is larger than every earlier token
// of each resource. A lease on one of the resources from TryLock or Lock
// excludes it, and it excludes them: the keys are the same.
func (l *Locker) TryLockAll(ctx context.Context, resources ...string) (*Lease, error) {
	start := time.Now()
	set, err := l.resourceSet("acquire all", resources)
	var le *Lease
	if err == nil {
		le, err = l.tryAll(ctx, set, nil)
	}
	if err == nil {
		le.arm()
	}
	if l.cfg.Observer != nil {
		l.observeAcquire(ctx, OpTryLock, set.label, start, le, err, 1)
	}
	return le, err
}

// LockAll acquires every one of resources under one lease, as TryLockAll
// does, waiting as long as ctx allows. While resources are held it queues
// on each of them on the masters, as Lock does, and wakes when a release
// hands it the turn on one of them, or after the fallback delay; it then
// tries for all of them again, all or nothing. A turn it cannot use yet
// (another of its resources is still held) is passed on to the next
// waiter at once, so that it holds nothing while it waits. It does not
// queue at the in-process gate and is never handed a lease there.
//
// A waiter for several resources has no priority over those that take one
// of them at a time beyond its place in their queues: under steady
// contention on its resources it may wait long.
func (l *Locker) LockAll(ctx context.Context, resources ...string) (*Lease, error) {
	start := time.Now()
	var w WaitInfo
	set, err := l.resourceSet("lock all", resources)
	var le *Lease
	if err == nil {
		le, err = l.lockAll(ctx, set, start, &w)
	}
	if l.cfg.Observer != nil {
		l.observeAcquire(ctx, OpLock, set.label, start, le, err, w.Attempts)
	}
	return le, err
}

// Resources are the names the lease holds, sorted, without duplicates: one
// for a lease from TryLock or Lock. They, not the label Resource, tell
// apart leases on sets whose names hold ',', '{' or '}'.
func (le *Lease) Resources() []string {
	switch {
	case le == nil:
		return nil
	case le.all == nil:
		return []string{le.resource}
	}
	return slices.Clone(le.all.names)
}

// resourceSet is the resources of one TryLockAll or LockAll: sorted and
// without duplicates, their keys in the same order, and the lease's label.
// rest is keys[1:], the scripts' Command.Keys.
type resourceSet struct {
	names, keys, rest []string
	label             string
}

// resourceSet checks names for op and makes their set; its label is set
// even when they are refused, for the Observer.
func (l *Locker) resourceSet(op string, names []string) (*resourceSet, error) {
	set := &resourceSet{names: slices.Compact(slices.Sorted(slices.Values(names)))}
	var b strings.Builder
	n := 2
	for _, r := range set.names {
		n += len(r) + 1
	}
	b.Grow(n)
	b.WriteByte('{')
	for i, r := range set.names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r)
	}
	b.WriteByte('}')
	set.label = b.String()
	switch {
	case len(set.names) == 0:
		return set, fmt.Errorf("engine: %s: %w", op, ErrNoResources)
	case len(set.names) > MaxResources:
		return set, fmt.Errorf("engine: %s: %d resources: %w, at most MaxResources (%d)", op, len(set.names), ErrTooManyResources, MaxResources)
	}
	set.keys = make([]string, len(set.names))
	for i, r := range set.names {
		if err := l.checkResource(op, r); err != nil {
			return set, err
		}
		set.keys[i] = l.key(r)
	}
	set.rest = set.keys[1:]
	return set, l.checkSlots(op, set)
}

// tryAll makes one attempt on set, as try does on one resource; tk is a
// waiter's place in the resources' queues.
func (l *Locker) tryAll(ctx context.Context, set *resourceSet, tk *ticket) (*Lease, error) {
	l.remote.Add(1)
	defer l.remote.Add(-1)
	if l.closed.Load() {
		return nil, fmt.Errorf("engine: acquire %q: %w", set.label, ErrClosed)
	}
	le := &Lease{l: l, resource: set.label, all: set, value: newValue()}
	if tk != nil {
		le.value = tk.id + idEnd + le.value
	}
	le.initVotes(l.votes)
	cmd := l.acquireAllCommand(le, tk)
	le.start = time.Now()
	t := l.pool.Fanout(ctx, cmd, classifyAll, (*acquireReplies)(le), le.votes)
	err := le.decide(ctx, t)
	if err == nil {
		return le, nil
	}
	l.undo(le)
	return nil, le.namesHeld(err)
}

// acquireAllCommand is the attempt's acquireAllScript call; tk is a
// waiter's place in the queues, or nil.
func (l *Locker) acquireAllCommand(le *Lease, tk *ticket) multiplex.Command {
	script := acquireAllScript
	switch {
	case faults.AcquireAllPartial.On():
		script = acquireAllScriptPartial
	case faults.FencingWithoutClockFloor.On():
		script = acquireAllScriptNoFloor
	}
	fence := "0"
	if l.cfg.Fencing {
		fence = "1"
	}
	var cmd multiplex.Command
	if tk == nil {
		cmd = keysCall(script, le.all, le.value, l.ttlStr, fence, "0")
	} else {
		waiter := "1"
		if faults.LockAllHogsTurns.On() {
			waiter = "2" // keeps its places where nothing holds it up
		}
		cmd = keysCall(script, le.all, le.value, l.ttlStr, fence, waiter, tk.score, tk.id)
	}
	// A waiter's attempt reaches every master, as Lock's does, so that
	// the masters' queues agree.
	cmd.SkipIfFailed = tk == nil
	return cmd
}

// namesHeld fills in, on a refused attempt's error, the resource the
// refusing masters found held (see heldValue); the error names no single
// key of the wrong type: each master's error names its own.
func (le *Lease) namesHeld(err error) error {
	var ve *VotesError
	if !errors.As(err, &ve) || ve.Op != "acquire" {
		return err
	}
	ve.key = ""
	names := le.all.names
	counts := make([]int, len(names)+1)
	best := 0
	for _, v := range ve.Votes {
		if i := int(v.value >> heldShift); v.Outcome == OutcomeRefused && v.value != turnHash && i >= 1 && i <= len(names) {
			counts[i]++
			if counts[i] > counts[best] {
				best = i
			}
		}
	}
	if best > 0 {
		ve.Held = names[best-1]
	}
	return err
}

// lockAll is LockAll's wait on the masters, as lockRemote is Lock's:
// attempts until one acquires or ctx ends, asleep between them until a
// release notification, a fallback or a back-off wakes it.
func (l *Locker) lockAll(ctx context.Context, set *resourceSet, start time.Time, info *WaitInfo) (le *Lease, err error) {
	l.remote.Add(1)
	defer l.remote.Add(-1)
	w := &waiter{sleeper: sleeper{ctx: ctx, info: info}, l: l, resource: set.label, start: start, all: set}
	defer func() { w.leave(err) }()
	if l.notify != nil && slices.ContainsFunc(set.keys, l.notify.listening) {
		w.join() // waited for lately: likely held
	}
	for {
		info.Attempts++
		le, err := l.tryAll(ctx, set, w.tk)
		if err == nil {
			w.acquired(le)
			info.Waited = time.Since(start)
			le.wait = *info
			le.arm()
			return le, nil
		}
		if stop := w.noRetry(err); stop != nil {
			return nil, stop
		}
		d, cause, now := w.nextWait(err)
		if now {
			continue
		}
		if err := w.sleep(d, cause); err != nil {
			return nil, err
		}
	}
}

// queueAll gives a LockAll waiter that began at start its ticket, one
// place in each of its resources' queues, and subscribes it to their
// releases, each of which wakes it.
func (l *Locker) queueAll(ctx context.Context, set *resourceSet, start time.Time) (*ticket, *subscription) {
	tk := &ticket{score: itoa(start.UnixMicro()), id: l.id + ":" + strconv.FormatUint(l.seq.Add(1), 36), all: set}
	l.tmu.Lock()
	if l.tickets != nil {
		l.tickets[tk] = set.label
	}
	l.tmu.Unlock()
	return tk, l.notify.subscribeAll(ctx, set.keys, tk.id)
}

// subscribeAll subscribes waiter id to the releases of each of keys, all
// of which wake it (one channel), and returns once the masters confirmed
// them all or were given the node timeout (see subscribe). Closing the
// first closes them all.
func (n *notifier) subscribeAll(ctx context.Context, keys []string, id string) *subscription {
	c := make(chan struct{}, 1)
	subs := make([]*subscription, len(keys))
	topics := make([]*topic, len(keys))
	for i, k := range keys {
		subs[i], topics[i] = n.add(k, id, c)
	}
	for _, t := range topics {
		n.ready(ctx, t)
	}
	rest := subs[1:]
	subs[0].group = &rest
	return subs[0]
}

// leaveQueues is leaveQueue for a LockAll waiter's place (tk.all).
func (l *Locker) leaveQueues(tk *ticket, nodes uint64, acquired bool) {
	script := zremScript
	if acquired && !faults.LateReleaseWakesNext.On() {
		script = leaveScript
	}
	cmd := keysCall(allKeysForm[script], tk.all, tk.id)
	cmd.Nodes = nodes
	l.post(cmd)
}

// quitQueuesCall is postQuit's command for a LockAll waiter's place.
func (l *Locker) quitQueuesCall(tk *ticket) multiplex.Command {
	script := quitScript
	if faults.QuitKeepsTurn.On() {
		script = zremScript
	}
	return keysCall(allKeysForm[script], tk.all, tk.id)
}

// call is script's call on the lease's key with args, or for a lease on
// several resources its all-keys form's on its keys (see allKeys), or
// for a read/write lock's its sorted-set form's (see rwForm).
func (le *Lease) call(script *multiplex.Script, args ...string) multiplex.Command {
	if le.rw {
		return scriptCall(rwForm(script), le.key, args...)
	}
	if le.all == nil {
		return scriptCall(script, le.key, args...)
	}
	return keysCall(allKeysForm[script], le.all, args...)
}

// keysCall is a call of script on set's keys with args.
func keysCall(script *multiplex.Script, set *resourceSet, args ...string) multiplex.Command {
	c := scriptCall(script, set.keys[0], args...)
	c.Keys = &set.rest
	return c
}

// heldShift places the index of the key found held above the holder's
// hash in a refusal's value (see heldValue).
const heldShift = 48

// heldValue is a refused attempt's vote value: the index of the first key
// held (from 1, in Resources order) above the low bits of the holder's
// hash (see holderHash), so that a waiter tells one holder from a split
// vote as for one resource, and the error can name the resource; turnHash
// for a turn token.
func heldValue(i int64, v string) int64 {
	h := holderHash(v)
	if h == turnHash {
		return turnHash
	}
	return i<<heldShift | h&(1<<heldShift-1) | 1
}

// classifyAll reads acquireAllScript's answer: nil (or, fenced, the
// counter) when it took the keys, the first held key's index and holder
// when refused.
func classifyAll(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	m, err := res.ToMessage()
	switch {
	case rueidis.IsRedisNil(err):
		return multiplex.OK, 0, nil
	case err != nil:
		return multiplex.Failed, 0, err
	case m.IsInt64():
		n, _ := m.ToInt64()
		return multiplex.OK, n, nil
	}
	a, err := m.ToArray()
	if err == nil && len(a) != 2 {
		err = fmt.Errorf("redlock: a refusal of %d elements", len(a))
	}
	if err != nil {
		return multiplex.Failed, 0, err
	}
	i, err := a[0].AsInt64()
	if err != nil {
		return multiplex.Failed, 0, err
	}
	v, err := a[1].ToString()
	if err != nil {
		return multiplex.Failed, 0, err
	}
	return multiplex.Refused, heldValue(i, v), nil
}

// acquireAllScript takes all its keys with the value, for ttl ms, if none
// of them is held, and otherwise takes none: the guard of the
// multi-resource lock. Every check that can fail (a key or a fencing
// counter of the wrong type) comes before the first write, so that an
// error reply means nothing was written. Its answer is nil when it took
// the keys, with fence "1" max(the highest of their counters, this
// master's clock in µs) (see fence.go), and when refused {i, v}: the
// index of the first key held and its value (before marking).
//
// waiter "1" is a LockAll waiter with its ticket and id, which does on
// each key what acquireMarkScript does for Lock's: it queues on each, may
// take a key that holds its own turn token, sets the keys marked, and
// marks every key held so that its release publishes. When refused, it
// passes on at once each turn it was given (quitLua): it holds nothing
// while it waits. Refused by a lock on one key, it also leaves the queues
// of its keys that are free or hold another waiter's turn token on this
// master: there it would be given turns it cannot use and pass them
// back, and, re-joining at its first ticket at every attempt, stay ahead
// of a waiter that could take the key; several such waiters pass a
// released key's turns among themselves, at a different one on each
// master, and nobody collects a quorum of them. It joins again at its
// next attempt, with the same ticket. waiter "2" keeps those places
// (mutation.LockAllHogsTurns).
var acquireAllScript = multiplex.NewScript(acquireAllBody(true, false)).CoalesceKeys()

// acquireAllScriptNoFloor answers the counters alone, without the
// master's clock (mutation.FencingWithoutClockFloor).
var acquireAllScriptNoFloor = multiplex.NewScript(acquireAllBody(false, false)).CoalesceKeys()

// acquireAllScriptPartial sets the free keys and answers yes although
// another is held (mutation.AcquireAllPartial).
var acquireAllScriptPartial = multiplex.NewScript(acquireAllBody(true, true)).CoalesceKeys()

// acquireAllBody is acquireAllScript's Lua; floor: answer at least the
// master's clock in µs; partial: the mutation that takes what is free.
func acquireAllBody(floor, partial bool) string {
	answer := "    return top\n"
	if floor {
		answer = `    local now = redis.call("TIME")
    local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
    if floor > top then
      return floor
    end
    return top
`
	}
	guard := "held == 0"
	fast := ""
	if partial {
		guard = "true"
	} else {
		fast = fastAllLua
	}
	return `local value, ttl, fence, waiter, ticket, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
` + fast + `local function name(k)
  return (string.gsub(k, "%c", "?"))
end
local turn, m = "` + turnPrefix + `" .. tostring(id), ""
if waiter ~= "0" then
  m = "` + waitMark + `"
end
local vals, free, top, held = {}, {}, 0, 0
for i = 1, #KEYS do
  if fence == "1" then
    local c = redis.pcall("GET", "` + fencePrefixLua + `" .. KEYS[i])
    if type(c) == "table" then
      return redis.error_reply("WRONGTYPE redlock: the fencing counter of " .. name(KEYS[i]) .. " holds the wrong type")
    end
    c = tonumber(c or "0")
    if not c then
      return redis.error_reply("ERR redlock: the fencing counter of " .. name(KEYS[i]) .. " is not an integer")
    end
    if c > top then
      top = c
    end
  end
  local v = redis.pcall("GET", KEYS[i])
  if type(v) == "table" then
    return redis.error_reply("WRONGTYPE redlock: the key " .. name(KEYS[i]) .. " holds the wrong kind of value")
  end
  vals[i] = v
  free[i] = not v or (waiter ~= "0" and (v == turn or v == turn .. "` + waitMark + `"))
  if not free[i] and held == 0 then
    held = i
  end
end
if waiter ~= "0" then
  for i = 1, #KEYS do
    local q = "` + queuePrefixLua + `" .. KEYS[i]
    redis.call("ZADD", q, "NX", ticket, id)
    redis.call("PEXPIRE", q, 2 * ttl)
  end
end
if ` + guard + ` then
  for i = 1, #KEYS do
    if free[i] then
      redis.call("SET", KEYS[i], value .. m, "PX", ttl)
    end
  end
  if fence == "1" then
` + answer + `  end
  return false
end
if waiter ~= "0" then
  local function quit(KEYS, v)
    local q = "` + queuePrefixLua + `" .. KEYS[1]
` + quitLua + `  end
  local locked = false
  for i = 1, #KEYS do
    local v = vals[i]
    if waiter == "1" and v and string.sub(v, 1, 1) ~= "` + turnPrefix + `" then
      locked = true
    end
  end
  for i = 1, #KEYS do
    local v = vals[i]
    if v == turn or v == turn .. "` + waitMark + `" then
      quit({KEYS[i]}, v)
    else
      if locked and (not v or string.sub(v, 1, 1) == "` + turnPrefix + `") then
        redis.call("ZREM", "` + queuePrefixLua + `" .. KEYS[i], id)
      end
      if v and string.sub(v, -1) ~= "` + waitMark + `" then
        redis.call("APPEND", KEYS[i], "` + waitMark + `")
      end
    end
  end
end
return {held, vals[held]}`
}

// fastAllLua is acquireAllScript's way for a TryLockAll without fencing,
// the common attempt: a SET NX PX of each key, the lock's own acquire,
// instead of a GET of every key and then a SET of each (a master runs
// half the calls). If a key is taken, it deletes the keys it set, which
// nobody saw (the script runs alone), and goes on as the script would
// have from the start: its checks and its answer are the same.
const fastAllLua = `if waiter == "0" and fence ~= "1" then
  local n = 0
  for i = 1, #KEYS do
    if not redis.call("SET", KEYS[i], value, "NX", "PX", ttl) then
      break
    end
    n = i
  end
  if n == #KEYS then
    return false
  end
  for i = 1, n do
    redis.call("DEL", KEYS[i])
  end
end
`

// zremScript takes waiter ARGV[1] out of the key's queue, and does no more:
// the leave of a lease whose Locker closes (see Close).
var zremScript = multiplex.NewScript(`return redis.call("ZREM", "` + queuePrefixLua + `" .. KEYS[1], ARGV[1])`)

// allKeysForm is each script a lease on several resources runs, by the
// script a lease on one runs (see allKeys).
var allKeysForm = func() map[*multiplex.Script]*multiplex.Script {
	m := make(map[*multiplex.Script]*multiplex.Script)
	for _, s := range []*multiplex.Script{releaseScript, releaseScriptGhost, undoScript, extendScript, fenceScript, leaveScript, quitScript, zremScript} {
		m[s] = allKeys(s, "")
	}
	m[releaseScript] = allKeys(releaseScript, releaseMineLua)
	return m
}()

// releaseMineLua is the release's way where every key holds the lease's
// value, unmarked, the common release: there releaseScript's body would
// GET each key and DEL it, answering 1 for each, so one MGET and one DEL
// do the same (a master runs two calls, not 2K). A key marked, gone,
// another's or of another type (MGET answers nil for it) sends every key
// the whole way.
const releaseMineLua = `local vals = redis.call("MGET", unpack(KEYS))
local mine = true
for i = 1, #KEYS do
  if vals[i] ~= ARGV[1] then
    mine = false
    break
  end
end
if mine then
  redis.call("DEL", unpack(KEYS))
  return 1
end
`

// multiScripts are the multi-resource lock's scripts that every master
// loads at connect (the mutations' are sent as EVAL when used).
var multiScripts = []*multiplex.Script{acquireAllScript, allKeysForm[releaseScript], allKeysForm[undoScript],
	allKeysForm[extendScript], allKeysForm[fenceScript], allKeysForm[leaveScript], allKeysForm[quitScript], allKeysForm[zremScript]}

// allKeys runs s's body, which acts on KEYS[1] with ARGV, once for each
// key of one call with the call's ARGV, in the keys' order, so that a
// lease on several resources treats each of its keys exactly as a lease on
// one treats its key. Each key runs under pcall, and the others still run
// when one fails. Its answer is the first error if a key failed, else the
// keys' common answer, or 0 when they differ: a master agrees to a
// release, extension or fencing raise only when it did so for all the
// keys (their answer is then 1, 1 and the token). The form coalesces
// (CoalesceKeys), as the single-key script does. A prologue, if any,
// runs first over all the keys, and may answer for them all.
func allKeys(s *multiplex.Script, prologue string) *multiplex.Script {
	return multiplex.NewScript("local function one(KEYS, ARGV) " + s.Body + `
end
` + prologue + `local out, same, failed = nil, true, nil
for i = 1, #KEYS do
  local ok, r = pcall(one, {KEYS[i]}, ARGV)
  if not ok then
    if type(r) == "table" and r.err then
    elseif string.find(tostring(r), "^%u+ ") then
      r = {err = r}
    else
      r = {err = "ERR " .. tostring(r)}
    end
    failed = failed or r
  else
    if r == nil then
      r = false
    end
    if out == nil then
      out = r
    elseif out ~= r then
      same = false
    end
  end
end
if failed then
  return failed
end
if not same then
  return 0
end
return out`).CoalesceKeys()
}
