package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// Kind is what a name is used as on the masters.
type Kind string

// The kinds Inspect reports.
const (
	KindFree      Kind = "free"      // nothing holds the name on a quorum
	KindMutex     Kind = "mutex"     // a lock: Lock, TryLock, LockAll
	KindSemaphore Kind = "semaphore" // a Semaphore's permits
	KindRWMutex   Kind = "rwmutex"   // a RWMutex's readers or writer
)

// Inspection is what Locker.Inspect found for one name: what a quorum of
// the masters vouches for, and each master's own view. Durations are
// nanoseconds in JSON.
type Inspection struct {
	Resource string `json:"resource"`
	// Kind is the kind a quorum of the masters that answered keeps the
	// name as: a semaphore's permit count or a read/write lock's set
	// says so even with no holder; a lock is KindFree when no holder is
	// on a quorum (it may still be held on a minority, see Masters).
	Kind Kind `json:"kind"`
	// Holders are the leases a quorum holds: the lock's holder, each
	// held permit of a semaphore, each reader or the writer of a
	// read/write lock.
	Holders []Holder `json:"holders"`
	// Validity is the shortest of the holders' validities: how long a
	// quorum still vouches for the lock (for the first permit or reader
	// to run out, with several). Zero when free.
	Validity time.Duration `json:"validity_ns"`
	// Fence is the highest fencing token issued for the name (its
	// counters' highest value on the masters that answered); zero when
	// none was, or its counters expired (see Config.Fencing).
	Fence int64 `json:"fence,omitempty"`
	// Permits is a semaphore's permit count (0 for the other kinds).
	Permits int `json:"permits,omitempty"`
	// Waiters are the waiters queued on the masters, first first: a
	// lock's queue (see Lock), a read/write lock's waiting writers'
	// intents. A semaphore's waiters keep no queue and are not listed.
	Waiters []Waiter `json:"waiters"`
	// Quorum is the number of masters a holder needs.
	Quorum int `json:"quorum"`
	// Agree is true when every master that answered holds the same
	// holders; otherwise Masters says who holds what where.
	Agree bool `json:"agree"`
	// Masters is each master's view, in the order of Config.Masters then
	// Config.Clusters.
	Masters []MasterView `json:"masters"`
}

// Holder is one lease on the name that a quorum holds.
type Holder struct {
	// Value is the lease's value, as its Lease.Value returns it: with
	// Resume or Unlock, it names the lease.
	Value string `json:"value"`
	// Owner is the owner metadata the holder attached (WithOwner,
	// Config.Owner); empty if none.
	Owner string `json:"owner,omitempty"`
	// Token is the highest fencing counter on the masters that hold the
	// lease's key: its token when it was acquired with Config.Fencing
	// (a fenced lease raises its counters while its key is there, its
	// extensions keep them, and nobody else can raise them then), zero or
	// an earlier holder's when it was not.
	// Readers of a read/write lock take no token.
	Token int64 `json:"token,omitempty"`
	// Permit is a semaphore permit's slot, −1 for the other kinds.
	Permit int `json:"permit"`
	// Mode is "read" or "write" for a read/write lock's holder.
	Mode string `json:"mode,omitempty"`
	// Validity is how long a quorum still vouches for this lease: the
	// quorum's shortest remaining TTL, less the drift allowance for it,
	// counted from when Inspect asked.
	Validity time.Duration `json:"validity_ns"`
	// Masters is how many masters hold it.
	Masters int `json:"masters"`
}

// Waiter is a waiter queued on the masters.
type Waiter struct {
	// ID names the waiter (its Locker's id, ':', a sequence number).
	ID string `json:"id"`
	// Mode is "write" for a read/write lock's waiting writer.
	Mode string `json:"mode,omitempty"`
	// Age is how long ago it began to wait, by the clock of the master
	// that reported it against the waiter's.
	Age time.Duration `json:"age_ns"`
	// Masters is how many masters queue it.
	Masters int `json:"masters"`
}

// MasterView is what one master holds for the name.
type MasterView struct {
	Addr string `json:"addr"`
	// Err is why the master did not answer; its other fields are then
	// empty.
	Err  string `json:"error,omitempty"`
	Kind Kind   `json:"kind"`
	// Holders are the leases this master holds, with their TTL there.
	Holders []MasterHolder `json:"holders,omitempty"`
	// Turn is the waiter a release handed the name to, while its turn
	// token stands in for the lock (see Lock).
	Turn string `json:"turn,omitempty"`
	// Fence is the name's fencing counter here.
	Fence int64 `json:"fence,omitempty"`
	// Waiters are the waiters queued here, first first.
	Waiters []string `json:"waiters,omitempty"`
}

// MasterHolder is a lease on one master.
type MasterHolder struct {
	Value  string        `json:"value"`
	Permit int           `json:"permit"`
	Mode   string        `json:"mode,omitempty"`
	TTL    time.Duration `json:"ttl_ns"`
	// Marked: a waiter asked this lease's release to wake it.
	Marked bool `json:"marked,omitempty"`
}

// inspectScript reads, without writing, what a master holds for a name:
// KEYS are the lock key, its fencing counter, its queue, its writers'
// intents and a semaphore's permit count; ARGV[1] is the semaphore's
// slot key base. It answers the master's clock (µs), the lock key's type,
// its holders (value, PTTL ms, permit or mode) flattened, its fencing
// counters (one per slot for a semaphore) and its waiters with their
// tickets (µs), each part a flat array of strings. The clock goes back
// as TIME's digits: Lua 5.1's tostring writes a number with 14
// significant digits, which a clock in µs (16) does not fit.
var inspectScript = rueidis.NewLuaScript(`local key, fence, queue, intents, permits = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local base = ARGV[1]
local tm = redis.call("TIME")
local clock = tm[1] .. string.sub("00000" .. tm[2], -6)
local now = tonumber(clock)
local t = redis.call("TYPE", key).ok
local holders, fences, waiters = {}, {}, {}
local function counter(k)
  local c = redis.pcall("GET", k)
  if type(c) == "string" then return c end
  return "0"
end
local kind, npermits = "free", 0
if t == "string" then
  kind = "mutex"
  local v = redis.call("GET", key)
  local p = redis.call("PTTL", key)
  table.insert(holders, v)
  table.insert(holders, tostring(p))
  table.insert(holders, "")
  table.insert(fences, counter(fence))
  local q = redis.call("ZRANGE", queue, 0, -1, "WITHSCORES")
  for i = 1, #q do table.insert(waiters, q[i]) end
elseif t == "zset" then
  kind = "rwmutex"
  local ttl = redis.call("PTTL", key)
  local m = redis.call("ZRANGE", key, 0, -1, "WITHSCORES")
  for i = 1, #m, 2 do
    local s = tonumber(m[i + 1])
    if s > now then
      table.insert(holders, m[i])
      table.insert(holders, tostring(math.floor((s - now) / 1000)))
      table.insert(holders, "read")
    elseif s < -now then
      table.insert(holders, m[i])
      table.insert(holders, tostring(math.floor((-s - now) / 1000)))
      table.insert(holders, "write")
    end
  end
  table.insert(fences, counter(fence))
  if redis.call("TYPE", intents).ok == "zset" then
    local q = redis.call("ZRANGE", intents, 0, -1, "WITHSCORES")
    for i = 1, #q do table.insert(waiters, q[i]) end
  end
else
  local n = redis.pcall("GET", permits)
  n = type(n) == "string" and tonumber(n)
  if n then
    kind, npermits = "semaphore", n
    for i = 0, n - 1 do
      local k = base .. i
      local v = redis.pcall("GET", k)
      if type(v) == "string" then
        table.insert(holders, v)
        table.insert(holders, tostring(redis.call("PTTL", k)))
        table.insert(holders, tostring(i))
        table.insert(fences, counter("` + fencePrefixLua + `" .. k))
      end
    end
  end
end
return {clock, kind, holders, fences, waiters, tostring(npermits)}`)

// masterRead is one master's answer to inspectScript.
type masterRead struct {
	err     error
	now     int64 // the master's clock, µs
	kind    Kind
	holders []MasterHolder
	fences  []int64 // per holder for a semaphore, else one
	turn    string
	waiters []string
	tickets []int64
	permits int
}

// waiterID is a queued waiter's id and, for a waiting writer, when it
// began to wait (µs of its clock; else 0): a writer's intent is scored by
// its expiry, and carries its life and its start in front of its id (see
// rwWaiter), "life/start/id".
func waiterID(id string) (string, int64) {
	life, rest, ok := strings.Cut(id, "/")
	if !ok || !digits(life) {
		return id, 0
	}
	start, rest, ok := strings.Cut(rest, "/")
	if !ok || !digits(start) {
		return id, 0
	}
	us, _ := strconv.ParseInt(start, 10, 64)
	return rest, us
}

func digits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// Inspect reports what the masters hold for name, whatever its kind: its
// holders and the validity a quorum vouches for, the highest fencing
// token issued, the waiters queued and each master's view. It only
// reads: it never takes, extends, releases or wakes anything, and costs
// each master one script call that reads the name's few keys (a
// semaphore's slots, one per permit). It asks every master at once and
// waits for each up to the node timeout; masters that do not answer are
// reported with their error. It fails only when fewer than a quorum
// answer (ErrNoQuorum), or for a name that cannot be a lock.
func (l *Locker) Inspect(ctx context.Context, name string) (*Inspection, error) {
	if err := l.checkResource("inspect", name); err != nil {
		return nil, err
	}
	if l.closed.Load() {
		return nil, fmt.Errorf("engine: inspect %q: %w", name, ErrClosed)
	}
	key := l.key(name)
	base := l.semBase(name)
	keys := []string{key, fencePrefix + key, queuePrefix + key, rwPrefix + key, base + "permits"}
	start := time.Now()
	reads := make([]masterRead, l.votes)
	var wg sync.WaitGroup
	for i := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reads[i] = l.readMaster(ctx, i, keys, base)
		}()
	}
	wg.Wait()
	return l.summarize(name, start, reads)
}

// readMaster runs inspectScript on master i, within the node timeout.
func (l *Locker) readMaster(ctx context.Context, i int, keys []string, base string) masterRead {
	c := l.pool.Client(i)
	if c == nil {
		return masterRead{err: errors.New("not connected")}
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.NodeTimeout)
	defer cancel()
	res, err := inspectScript.Exec(ctx, c, keys, []string{base}).ToArray()
	if err != nil {
		return masterRead{err: err}
	}
	if len(res) < 6 {
		return masterRead{err: fmt.Errorf("inspect: %d parts in the answer", len(res))}
	}
	var r masterRead
	if r.now, err = res[0].AsInt64(); err != nil {
		// Without its clock no waiter's age can be told.
		return masterRead{err: fmt.Errorf("inspect: the master's clock: %w", err)}
	}
	k, _ := res[1].ToString()
	r.kind = Kind(k)
	hs, _ := res[2].AsStrSlice()
	for j := 0; j+2 < len(hs); j += 3 {
		h := MasterHolder{Value: hs[j], Permit: -1}
		ms, _ := strconv.ParseInt(hs[j+1], 10, 64)
		h.TTL = time.Duration(ms) * time.Millisecond
		switch r.kind {
		case KindSemaphore:
			h.Permit, _ = strconv.Atoi(hs[j+2])
		case KindRWMutex:
			h.Mode = hs[j+2]
		}
		if r.kind != KindRWMutex && strings.HasSuffix(h.Value, waitMark) {
			h.Value, h.Marked = strings.TrimSuffix(h.Value, waitMark), true
		}
		if r.kind == KindMutex && strings.HasPrefix(h.Value, turnPrefix) {
			r.turn = h.Value[len(turnPrefix):]
			r.kind = KindFree
			continue
		}
		r.holders = append(r.holders, h)
	}
	fs, _ := res[3].AsStrSlice()
	for _, f := range fs {
		n, _ := strconv.ParseInt(f, 10, 64)
		r.fences = append(r.fences, n)
	}
	ws, _ := res[4].AsStrSlice()
	for j := 0; j+1 < len(ws); j += 2 {
		t, _ := strconv.ParseFloat(ws[j+1], 64)
		id, began := waiterID(ws[j])
		if began == 0 {
			began = int64(t)
		}
		r.waiters = append(r.waiters, id)
		r.tickets = append(r.tickets, began)
	}
	p, _ := res[5].ToString()
	r.permits, _ = strconv.Atoi(p)
	return r
}

// holderID tells leases apart across masters.
type holderID struct {
	value  string
	permit int
	mode   string
}

// summarize merges the masters' reads into what a quorum vouches for.
func (l *Locker) summarize(name string, start time.Time, reads []masterRead) (*Inspection, error) {
	in := &Inspection{Resource: name, Kind: KindFree, Quorum: l.quorum, Agree: true,
		Holders: []Holder{}, Waiters: []Waiter{}, Masters: make([]MasterView, len(reads))}
	answered := 0
	kinds := map[Kind]int{}
	type seen struct {
		ttls  []int64 // ms, per master that holds it
		token int64
	}
	held := map[holderID]*seen{}
	var order []holderID
	type queued struct {
		ticket  int64
		age     int64
		masters int
	}
	waiters := map[string]*queued{}
	var first []string // the first answering master's holders, for Agree
	for i, r := range reads {
		mv := MasterView{Addr: l.addrs[i]}
		if r.err != nil {
			mv.Err = r.err.Error()
			in.Masters[i] = mv
			continue
		}
		answered++
		kinds[r.kind]++
		mv.Kind, mv.Holders, mv.Turn, mv.Waiters = r.kind, r.holders, r.turn, r.waiters
		var ids []string
		for j, h := range r.holders {
			id := holderID{h.Value, h.Permit, h.Mode}
			s := held[id]
			if s == nil {
				s = &seen{}
				held[id] = s
				order = append(order, id)
			}
			s.ttls = append(s.ttls, h.TTL.Milliseconds())
			if f := fenceOf(r, j); f > s.token && h.Mode != "read" {
				s.token = f
			}
			ids = append(ids, fmt.Sprint(id))
		}
		for _, f := range r.fences {
			mv.Fence = max(mv.Fence, f)
		}
		in.Fence = max(in.Fence, mv.Fence)
		if r.permits > 0 {
			in.Permits = r.permits
		}
		slices.Sort(ids)
		if answered == 1 {
			first = ids
		} else if !slices.Equal(first, ids) {
			in.Agree = false
		}
		for j, w := range r.waiters {
			q := waiters[w]
			if q == nil {
				q = &queued{ticket: r.tickets[j]}
				waiters[w] = q
			}
			q.masters++
			q.age = max(q.age, r.now-r.tickets[j])
		}
		in.Masters[i] = mv
	}
	if answered < l.quorum {
		return in, fmt.Errorf("engine: inspect %q: %w: %d of %d masters answered, %d needed", name, ErrNoQuorum, answered, len(reads), l.quorum)
	}
	for k, n := range kinds {
		if k != KindFree && n >= l.quorum {
			in.Kind = k
		}
	}
	for _, id := range order {
		s := held[id]
		if len(s.ttls) < l.quorum {
			continue
		}
		slices.Sort(s.ttls)
		ms := s.ttls[len(s.ttls)-l.quorum]
		v := time.Duration(0)
		if ms > 0 {
			d := time.Duration(ms) * time.Millisecond
			v = max(time.Until(start.Add(d-drift(d, l.cfg.DriftFactor))), 0)
		} else if ms == -1 {
			v = -1 // no TTL: never expires
		}
		value, owner := splitValue(id.value)
		in.Holders = append(in.Holders, Holder{Value: value, Owner: owner, Token: s.token,
			Permit: id.permit, Mode: id.mode, Validity: v, Masters: len(s.ttls)})
	}
	slices.SortFunc(in.Holders, func(a, b Holder) int {
		if c := a.Permit - b.Permit; c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	for i, h := range in.Holders {
		if i == 0 || h.Validity < in.Validity {
			in.Validity = h.Validity
		}
	}
	switch {
	case in.Kind == KindFree && len(in.Holders) > 0:
		in.Kind = KindMutex // held on a quorum whose kinds split (a turn token)
	case in.Kind == KindMutex && len(in.Holders) == 0:
		in.Kind = KindFree // keys on a quorum, but no one holder's
	}
	for id, q := range waiters {
		w := Waiter{ID: id, Age: time.Duration(q.age) * time.Microsecond, Masters: q.masters}
		if in.Kind == KindRWMutex {
			w.Mode = "write"
		}
		in.Waiters = append(in.Waiters, w)
		_ = q.ticket
	}
	slices.SortFunc(in.Waiters, func(a, b Waiter) int {
		ta, tb := waiters[a.ID].ticket, waiters[b.ID].ticket
		if ta != tb {
			if ta < tb {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return in, nil
}

// fenceOf is the fencing counter that goes with read r's j-th holder:
// its slot's for a semaphore, the name's otherwise.
func fenceOf(r masterRead, j int) int64 {
	switch {
	case r.kind == KindSemaphore && j < len(r.fences):
		return r.fences[j]
	case r.kind != KindSemaphore && len(r.fences) > 0:
		return r.fences[0]
	}
	return 0
}

// Resume takes over the lease on resource whose value is value (its
// Lease.Value), acquired by another process or an earlier run of this
// one, so that this process can Extend or Release it; token is the
// lease's fencing token, which Token then returns (0 if unknown). The
// lease may be a lock, a semaphore's permit (Permit then names its slot)
// or a read/write lock's reader or writer: Resume first reads, as
// Inspect does, where the value is held, then asks the masters, as
// RemoteValidity does, how long its keys live: its validity is the
// quorum's shortest remaining TTL less the drift allowance. It fails with
// ErrNotHeld when no quorum holds value, ErrLeaseExpired when the quorum
// vouches for no validity, ErrNoQuorum when too few masters answer.
//
// The resumed lease is not auto-extended and was not acquired here: Wait
// is zero, and Done, Err and Context watch it as any lease. Its TTL for
// auto-extension is unknown; pass one to Extend.
//
// When it is safe: Resume does not stop the original holder, who may
// still believe it holds the lock. Take a lease over only when its holder
// has stopped using it (it crashed, or handed the value on and stopped),
// or when the resource it guards checks fencing tokens, which keep a
// stale holder's writes out whoever holds the value. Two processes that
// both Extend and Release one lease see each other's effects: a Release
// by one ends the lock for both. Readers of one Locker share an entry
// (see RWMutex), and a reader's value is that entry's: a Release
// of it resumed elsewhere ends the read lock of every reader sharing it.
// Hand on a reader from a Locker with Config.Wait.DisableGate set, where
// each reader has its own entry.
func (l *Locker) Resume(ctx context.Context, resource, value string, token int64) (*Lease, error) {
	if err := l.checkResource("resume", resource); err != nil {
		return nil, err
	}
	if value == "" || strings.HasSuffix(value, waitMark) {
		return nil, fmt.Errorf("engine: resume %q: %w: %q is not a lease value", resource, ErrNotHeld, value)
	}
	if l.closed.Load() {
		return nil, fmt.Errorf("engine: resume %q: %w", resource, ErrClosed)
	}
	le, err := l.locate(ctx, "resume", resource, value)
	if err != nil {
		return nil, err
	}
	le.token = token
	cmd := scriptCall(validityScript, le.key, le.value)
	if le.rw {
		cmd = scriptCall(rwValidityScript, le.key, le.value)
	}
	cmd.WaitAll = true
	le.start = time.Now()
	t := l.pool.Fanout(ctx, cmd, classifyPTTL, nil, le.votes)
	if !t.Reached() || t.Err != nil {
		return nil, l.leaseError("resume", resource, t, le.start.Add(l.validity()))
	}
	until, bounded := quorumUntil(le.start, t.Votes, t.Quorum, l.cfg.DriftFactor)
	if !bounded {
		until = le.start.Add(l.validity()) // keys without a TTL: trust a TTL's worth
	}
	le.mu.Lock()
	for i, v := range t.Votes {
		bit := uint64(1) << i
		if v.Outcome == multiplex.OK {
			le.held |= bit
		}
		if v.Outcome == multiplex.OK || v.Outcome == multiplex.Refused {
			le.answered |= bit
		}
	}
	le.validUntil = until
	le.mu.Unlock()
	if !time.Now().Before(until) {
		return nil, fmt.Errorf("engine: resume %q: %w: a quorum vouches for no validity", resource, ErrLeaseExpired)
	}
	return le, nil
}

// Unlocked is what Unlock did on each master.
type Unlocked struct {
	Resource string `json:"resource"`
	Value    string `json:"value"`
	// Released is the number of masters where the value held and was
	// deleted (or, where a waiter had marked it, replaced by that
	// waiter's turn, which wakes it as a release does).
	Released int `json:"released"`
	// Masters are the masters' outcomes, in the order of Config.Masters
	// then Config.Clusters: OK where it was released, refused where value
	// did not hold.
	Masters []MasterOutcome `json:"masters"`
}

// MasterOutcome is one master's outcome in an operation.
type MasterOutcome struct {
	Addr    string  `json:"addr"`
	Outcome Outcome `json:"outcome"`
	Err     string  `json:"error,omitempty"`
}

// Unlock releases the lease on resource whose value is value (a lock,
// a semaphore's permit, a read/write lock's reader or writer), as its
// holder's Release would, on every master where that value still holds,
// whether or not a quorum does: it deletes nothing that is not value's,
// and wakes the waiters, as a release does (a lock's first queued
// waiter; a semaphore's or read/write lock's waiters). It is how an
// operator clears a stuck lock (the CLI's `redlock unlock`): first make
// sure its holder stopped (see Resume). A reader's value may be held by
// every reader of the lock in one Locker (they share one entry, see
// RWMutex): unlocking it lets a writer in beside all of them, so stop
// them all first. It first reads, as Inspect does, where the value is
// held, then releases it there. It reports each master's outcome; the
// error is nil when a quorum released it, and otherwise matches
// ErrNotHeld (the value held on fewer masters, which were still
// cleared) or ErrNoQuorum.
func (l *Locker) Unlock(ctx context.Context, resource, value string) (*Unlocked, error) {
	if err := l.checkResource("unlock", resource); err != nil {
		return nil, err
	}
	if value == "" || strings.HasSuffix(value, waitMark) {
		return nil, fmt.Errorf("engine: unlock %q: %w: %q is not a lease value", resource, ErrNotHeld, value)
	}
	if l.closed.Load() {
		return nil, fmt.Errorf("engine: unlock %q: %w", resource, ErrClosed)
	}
	le, err := l.locate(ctx, "unlock", resource, value)
	if err != nil && !errors.Is(err, ErrNotHeld) {
		return nil, err
	}
	if err != nil { // held nowhere: the lock's release still reports each master
		le = &Lease{l: l, resource: resource, key: l.key(resource), value: value}
		le.initVotes(l.votes)
	}
	script := releaseScript
	if le.permit != 0 {
		script = semReleaseScript
	}
	cmd := le.releaseCommand(uint64(1)<<l.votes-1, script)
	cmd.MustSend = true
	t := l.pool.Fanout(ctx, cmd, classifyInt, nil, le.votes)
	u := &Unlocked{Resource: resource, Value: value, Masters: make([]MasterOutcome, len(t.Votes))}
	for i, v := range t.Votes {
		u.Masters[i] = MasterOutcome{Addr: l.addrs[i], Outcome: Outcome(v.Outcome)}
		if v.Err != nil {
			u.Masters[i].Err = v.Err.Error()
		}
		if v.Outcome == multiplex.OK {
			u.Released++
		}
	}
	if t.Reached() && t.Err == nil {
		return u, nil
	}
	return u, l.leaseError("unlock", resource, t, time.Now().Add(time.Hour))
}

// locate reads where value is held for name, as Inspect does, and
// returns a lease not yet held for it: its key and kind (a semaphore's
// slot, a read/write lock's entry). ErrNotHeld when no master that
// answered holds it.
func (l *Locker) locate(ctx context.Context, op, name, value string) (*Lease, error) {
	in, err := l.Inspect(ctx, name)
	if err != nil {
		return nil, errorf("%s %q: %v", op, name, err)
	}
	le := &Lease{l: l, resource: name, key: l.key(name), value: value}
	le.initVotes(l.votes)
	for _, m := range in.Masters {
		for _, h := range m.Holders {
			if h.Value != value {
				continue
			}
			switch m.Kind {
			case KindSemaphore:
				le.key, le.permit = l.semBase(name)+itoa(int64(h.Permit)), h.Permit+1
			case KindRWMutex:
				le.rw = true
			}
			return le, nil
		}
	}
	return le, fmt.Errorf("engine: %s %q: %w: no master holds %q", op, name, ErrNotHeld, value)
}

// MarshalText is the outcome's name, as String.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }
