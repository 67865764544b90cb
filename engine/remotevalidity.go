package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// RemoteValidity asks every master at once whether the lease's keys
// still hold its value, for a caller about to do something it cannot
// undo: Validity is what this process believes, RemoteValidity what a
// quorum of the masters vouches for now. It returns the validity left on
// a quorum: each master that holds every key of the lease answers the
// shortest time its keys have to live (PTTL; for a read/write lock's
// reader or writer, its entry at the key), and of the best quorum of
// those answers the shortest, less the drift allowance
// (Config.DriftFactor, as for an acquisition), counts from the moment the
// question was sent. The answer is never more than Validity, and where
// the masters vouch for less, the lease's validity is shortened to it
// (someone shortened its keys' TTL, or a master's clock ran fast):
// RemoteValidity never lengthens a lease; Extend does.
//
// When too many masters say a key is gone or another's for a quorum to
// hold the lease, the lease ends with ErrLockLost (Done closes) and the
// error matches ErrLockLost and ErrNotHeld, with each master's answer in
// its *VotesError. A lease already ended answers its Err; one whose
// validity ran out, ErrLeaseExpired. When too few masters answer to
// tell (ErrNoQuorum, or ctx ended), the lease is left as it was.
//
// It waits for every master, within the node timeout and the lease's
// validity, and runs between the lease's Extend and Release calls, not
// alongside them, so that it reads no TTL an extension under way is
// about to change.
func (le *Lease) RemoteValidity(ctx context.Context) (time.Duration, error) {
	if le == nil {
		return 0, fmt.Errorf("engine: remote validity of a nil *Lease: %w", ErrNotHeld)
	}
	if le.joined() {
		return le.remoteValidityJoined(ctx)
	}
	le.opMu.Lock()
	defer le.opMu.Unlock()
	start := time.Now()
	validUntil, err := le.remoteValidityAsked(start)
	if err != nil {
		return 0, err
	}
	if le.l.closed.Load() {
		return 0, fmt.Errorf("engine: remote validity %q: %w", le.resource, ErrClosed)
	}
	cmd := scriptCall(validityScript, le.key, le.value)
	switch {
	case le.rw && !faults.RWRemoteValidityAsPlain.On():
		// A read/write lock's key is a sorted set, its holders' entries.
		cmd = scriptCall(rwValidityScript, le.key, le.value)
	case le.all != nil:
		cmd = keysCall(validityScript, le.all, le.value)
	}
	cmd.WaitAll = true
	rctx, cancel := context.WithDeadline(ctx, validUntil)
	defer cancel()
	t := le.l.pool.Fanout(rctx, cmd, classifyPTTL, nil, le.votes)
	if rctx.Err() != nil && ctx.Err() == nil && errors.Is(t.Err, context.DeadlineExceeded) {
		t.TimeOutPending() // only the wait was cut, by the validity
	}
	if !t.Reached() || t.Err != nil {
		err := le.l.leaseError("remote validity", le.resource, t, validUntil)
		if errors.Is(err, ErrNotHeld) {
			err = errorf("%v: %v", ErrLockLost, err)
			le.end(err, true)
		}
		return 0, err
	}
	until, bounded := quorumUntil(start, t.Votes, t.Quorum, le.l.cfg.DriftFactor)
	le.mu.Lock()
	if le.endErr == nil && bounded && until.Before(le.validUntil) {
		le.setValidUntil(until)
	}
	le.mu.Unlock()
	if v := le.Validity(); v > 0 {
		return v, nil
	}
	if err := le.Err(); err != nil {
		return 0, errorf("remote validity %q: %v", le.resource, err)
	}
	return 0, fmt.Errorf("engine: remote validity %q: %w", le.resource, ErrLeaseExpired)
}

// quorumUntil is when the keys may expire on a quorum of the masters that
// answered: the quorum-th longest PTTL (the best quorum's shortest) from
// start, the question's sending, less drift for it; not bounded when a
// quorum's keys have no TTL.
func quorumUntil(start time.Time, votes []multiplex.Vote, quorum int, factor float64) (until time.Time, bounded bool) {
	var buf [MaxMasters]int64
	ttls := buf[:0]
	for _, v := range votes {
		if v.Outcome == multiplex.OK {
			ttls = append(ttls, v.Value)
		}
	}
	slices.Sort(ttls)
	ms := ttls[len(ttls)-quorum]
	if ms == math.MaxInt64 {
		return time.Time{}, false
	}
	d := time.Duration(ms) * time.Millisecond
	return start.Add(d - drift(d, factor)), true
}

// classifyPTTL reads validityScript's (or rwValidityScript's) answer: OK with the time to live
// in ms (MaxInt64 for keys without one), refused when a key is not ours.
func classifyPTTL(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	n, err := res.AsInt64()
	switch {
	case err != nil:
		return multiplex.Failed, 0, err
	case n > 0:
		return multiplex.OK, n, nil
	case n == -1:
		return multiplex.OK, math.MaxInt64, nil
	}
	return multiplex.Refused, n, nil
}

// validityScript answers the shortest PTTL of its keys where every one of
// them holds the value, marked by a waiter or not (-1 when none has a
// TTL), and -2 where one does not (gone, another's, or not a string). It
// writes nothing. Not loaded at connect: it is sent as EVAL the first
// time a master does not know it.
var validityScript = multiplex.NewScript(`local value = ARGV[1]
local low = -1
for i = 1, #KEYS do
  local v = redis.pcall("GET", KEYS[i])
  if v ~= value and v ~= value .. "` + waitMark + `" then
    return -2
  end
  local t = redis.call("PTTL", KEYS[i])
  if t >= 0 and (low < 0 or t < low) then
    low = t
  end
end
return low`)

// rwValidityScript is validityScript for a read/write lock's lease: it
// answers how long the lease's entry (ARGV[1], its value) has to live
// where it is live in the sorted set at KEYS[1] (a reader's expiry ahead
// of the master's clock, a writer's behind minus it, see rwAcquireBody),
// in ms, or the key's PTTL if that is shorter; -2 where the entry is gone
// or expired, or the key is not a sorted set. Other holders' entries may
// keep the key alive past ours: the entry's own expiry is what counts.
// It writes nothing.
var rwValidityScript = multiplex.NewScript(`local value = ARGV[1]
local k = KEYS[1]
local s = redis.pcall("ZSCORE", k, value)
if type(s) ~= "string" then
  return -2
end
` + rwNowLua + `s = tonumber(s)
local left
if s > now then
  left = s - now
elseif s < -now then
  left = -s - now
else
  return -2
end
left = math.floor(left / 1000)
local t = redis.call("PTTL", k)
if t >= 0 and t < left then
  left = t
end
if left <= 0 then
  return -2
end
return left`)

// remoteValidityAsked is the lease's validity when RemoteValidity is
// asked at start, or why there is none to ask the masters about: ended,
// released or expired.
func (le *Lease) remoteValidityAsked(start time.Time) (time.Time, error) {
	le.mu.Lock()
	released, validUntil, ended := le.released, le.validUntil, le.endErr
	le.mu.Unlock()
	switch {
	case ended != nil:
		return validUntil, errorf("remote validity %q: %v", le.resource, ended)
	case released:
		return validUntil, fmt.Errorf("engine: remote validity %q: %w", le.resource, ErrReleased)
	case !start.Before(validUntil):
		le.Err() // ends the lease now, as any look at it does
		return validUntil, fmt.Errorf("engine: remote validity %q: %w", le.resource, ErrLeaseExpired)
	}
	return validUntil, nil
}
