package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// Sentinel errors, one per category a caller branches on with errors.Is.
// Their text carries no prefix: the engine's errors wrap them in one that
// starts "engine: " and names the operation and resource once.
var (
	// ErrNotAcquired: the resource is held by someone else (contention),
	// in another process or by another goroutine of this Locker. Enough
	// masters answered; too many of them refused.
	ErrNotAcquired = errors.New("not acquired: held by another owner")
	// ErrNoQuorum: too many masters failed, timed out or were quarantined
	// for a quorum to be possible, whoever holds the resource (an outage,
	// not contention).
	ErrNoQuorum = errors.New("no quorum: too many masters failed")
	// ErrNotHeld: the lease is not (or no longer) held on a quorum: it was
	// released, or its keys expired or were taken over.
	ErrNotHeld = errors.New("lease not held")
	// ErrLeaseExpired: the lease's validity ran out before the operation.
	ErrLeaseExpired = errors.New("lease expired")
	// ErrWrongType: the resource's key exists with a non-string type, so it
	// cannot be a lock. Some other program uses the same key.
	ErrWrongType = errors.New("a key holds the wrong type: another program uses it")
	// ErrLockLost: an auto-extension missed the quorum, or the lease's keys
	// were found gone or another's on too many masters for a quorum (by an
	// extension, by RemoteValidity, or at once by the tracker that watches
	// a watched lease's keys), so the lock can no longer be trusted
	// although its validity had not run out.
	ErrLockLost = errors.New("lock lost")
	// ErrReleased: the lease was released.
	ErrReleased = errors.New("lease released")
	// ErrClosed: the Locker was closed.
	ErrClosed = errors.New("locker closed")
	// ErrEmptyResource: a resource name must not be empty.
	ErrEmptyResource = errors.New("empty resource name")
	// ErrNoResources: TryLockAll and LockAll need at least one resource.
	ErrNoResources = errors.New("no resources named")
	// ErrTooManyResources: TryLockAll and LockAll take at most
	// MaxResources resources, duplicates counted once.
	ErrTooManyResources = errors.New("too many resources")
	// ErrReservedResource: the resource's key (KeyPrefix + name) starts
	// with the engine's internal namespace ("\xffredlock:"), where the
	// fencing counters live.
	ErrReservedResource = errors.New("resource key in the engine's reserved namespace")
	// ErrPermitCount: a Semaphore was asked for with a permit count other
	// than the one its permits on the masters were taken with (the count
	// is kept on the masters while the semaphore is in use).
	ErrPermitCount = errors.New("semaphore in use with another permit count")
	// ErrWrongKind: the name is in use as another kind of lock: a plain
	// lock (Lock, TryLock) or a Semaphore where a read/write lock
	// (RWMutex) was asked for, or the other way round. The message names
	// both uses; the error also matches ErrWrongType.
	ErrWrongKind = errors.New("name in use as another kind of lock")
	// ErrInvalidOption: a LockOption (WithTTL, WithOwner) was out of
	// range; the message names it and why. Nothing was sent.
	ErrInvalidOption = errors.New("invalid lock option")
	// ErrUnreachable: New could not reach enough masters for a quorum;
	// the error names each address and its cause.
	ErrUnreachable = multiplex.ErrUnreachable
	// ErrNotIndependent: New found two addresses of one server, or a
	// replica, among the masters, and names them.
	ErrNotIndependent = multiplex.ErrNotIndependent
)

// ErrQuarantined is a master's vote while its yes cannot be counted (see
// QuarantinePolicy); a *NodeError's Err matches it with errors.Is.
var ErrQuarantined = multiplex.ErrQuarantined

// ErrClockSkew is a master's vote while its clock is too far from the
// others' for fencing tokens (see StateClockSkewed); a *NodeError's Err
// matches it with errors.Is.
var ErrClockSkew = multiplex.ErrClockSkew

// engineError is an error of the engine's: its own one-line message, and the
// errors it stands for, for errors.Is and errors.As.
type engineError struct {
	msg  string
	errs []error
}

func (e *engineError) Error() string { return e.msg }

func (e *engineError) Unwrap() []error { return e.errs }

// errorf makes an engineError: "engine: " and the formatted message, in which
// each error argument reads without its own "engine: " prefix and is
// wrapped. Use %v for the errors.
func errorf(format string, args ...any) error {
	var errs []error
	for i, a := range args {
		if err, ok := a.(error); ok {
			errs = append(errs, err)
			args[i] = trimPrefix(err)
		}
	}
	return &engineError{msg: "engine: " + fmt.Sprintf(format, args...), errs: errs}
}

// trimPrefix is err's message without the "engine: " it starts with, for
// an error embedded in another of the engine's.
func trimPrefix(err error) string { return strings.TrimPrefix(err.Error(), "engine: ") }

// Outcome is one master's answer in an operation.
type Outcome uint8

// The outcomes, numbered as multiplex numbers them, so that converting
// one is free.
const (
	// OutcomePending: no reply yet when the operation was decided.
	OutcomePending = Outcome(multiplex.Pending)
	// OutcomeOK: the master did what was asked.
	OutcomeOK = Outcome(multiplex.OK)
	// OutcomeRefused: the master answered but declined (the key is held by
	// someone else, or is no longer ours): contention, not failure.
	OutcomeRefused = Outcome(multiplex.Refused)
	// OutcomeFailed: an error reply or a connection error.
	OutcomeFailed = Outcome(multiplex.Failed)
	// OutcomeTimeout: no reply within the node timeout.
	OutcomeTimeout = Outcome(multiplex.Timeout)
)

func (o Outcome) String() string { return multiplex.Outcome(o).String() }

// Vote is one master's outcome.
type Vote struct {
	Outcome Outcome
	// Err is the cause for OutcomeFailed and OutcomeTimeout.
	Err error
	// value is the integer the reply carried: for a refused acquire, a
	// hash of the holder's value (see heldByOne).
	value int64
}

// NodeError is one master's cause in a failed operation.
type NodeError struct {
	Addr    string
	Outcome Outcome
	Err     error
}

func (e *NodeError) Error() string {
	if e.Err == nil {
		return e.Addr + ": " + e.Outcome.String()
	}
	return e.Addr + ": " + e.Outcome.String() + ": " + e.Err.Error()
}

func (e *NodeError) Unwrap() error { return e.Err }

// VotesError is a failed acquire, release or extend, with every master's
// outcome. errors.Is matches its category (Kind), the context's error if
// the context ended, and ErrWrongType when a master reported it;
// errors.As finds each *NodeError.
type VotesError struct {
	Op       string // "acquire", "release", "extend" or "fence"
	Resource string
	// Kind is the category: ErrNotAcquired, ErrNoQuorum, ErrWrongType,
	// ErrNotHeld or ErrLeaseExpired. It is nil when only the context
	// ended.
	Kind error
	// Votes has one entry per master, in the order of Addrs. Masters that
	// had not answered when the operation was decided are OutcomePending
	// or, if the node timeout ran out, OutcomeTimeout.
	Votes []Vote
	// The number of votes of each outcome, and the quorum needed.
	OK, Refused, Failed, Timeout, Pending int
	Quorum                                int
	// Err is the context's error when it ended before a decision, or the
	// pool's when it was closed.
	Err   error
	Addrs []string
	// Held names, for a refused TryLockAll or LockAll, a resource the
	// refusing masters found held: the first held, in Lease.Resources
	// order, on most of them. Empty otherwise.
	Held string
	key  string // the resource's key, for an acquire of one resource
}

// newVotesError copies t, whose votes are often the lease's reused buffer.
func newVotesError(op, resource string, kind error, t *multiplex.Tally, addrs []string) *VotesError {
	votes := make([]Vote, len(t.Votes))
	for i, v := range t.Votes {
		votes[i] = Vote{Outcome: Outcome(v.Outcome), Err: v.Err, value: v.Value}
	}
	return &VotesError{Op: op, Resource: resource, Kind: kind, Votes: votes,
		OK: t.OK, Refused: t.Refused, Failed: t.Failed, Timeout: t.Timeout, Pending: t.Pending,
		Quorum: t.Quorum, Err: t.Err, Addrs: addrs}
}

func (e *VotesError) Error() string {
	var b strings.Builder
	b.WriteString("engine: ")
	b.WriteString(e.Op)
	fmt.Fprintf(&b, " %q: ", e.Resource)
	switch {
	case e.Kind != nil:
		b.WriteString(e.Kind.Error())
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	}
	if e.Kind != nil && e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Held != "" {
		fmt.Fprintf(&b, " (%q is held)", e.Held)
	}
	fmt.Fprintf(&b, " (%d ok, %d refused, %d error, %d timeout, %d pending; quorum %d of %d)",
		e.OK, e.Refused, e.Failed, e.Timeout, e.Pending, e.Quorum, len(e.Votes))
	if e.wrongType() {
		if e.Kind != ErrWrongType {
			b.WriteString(": ")
			b.WriteString(ErrWrongType.Error())
		}
		b.WriteString(e.wrongKey())
	}
	var quarantined *quarantine.Error
	for i, v := range e.Votes {
		if v.Outcome != OutcomeFailed && v.Outcome != OutcomeTimeout {
			continue
		}
		b.WriteString("; ")
		var qe *quarantine.Error
		if errors.As(v.Err, &qe) {
			// The why, and what to do, once for all of them below.
			quarantined = qe
			b.WriteString(e.addr(i) + ": quarantined")
			continue
		}
		b.WriteString((&NodeError{Addr: e.addr(i), Outcome: v.Outcome, Err: v.Err}).Error())
	}
	if quarantined != nil {
		b.WriteString(quarantineAdvice(quarantined, e.QuarantinedUntil()))
	}
	return b.String()
}

// quarantineAdvice says why masters are quarantined, until when, and how
// to choose otherwise, for an error's message. qe is one of them; until
// is when a quorum can vote again (zero when the quarantine alone did not
// sink the quorum).
func quarantineAdvice(qe *quarantine.Error, until time.Time) string {
	var b strings.Builder
	if !until.IsZero() {
		fmt.Fprintf(&b, "; a quorum can vote again at %s", until.Round(0).Format("15:04:05.000"))
	}
	if qe.Restarted {
		fmt.Fprintf(&b, "; a quarantined master restarted or failed over (its run_id changed) and may have forgotten the locks it granted, so its votes wait MaxTTL (%s)", qe.MaxTTL)
		return b.String()
	}
	if qe.Promoted {
		how := fmt.Sprintf("its sentinels saw it become master %s ago", qe.PromotedAgo.Round(100*time.Millisecond))
		if qe.PromotionUnknown {
			how = "no sentinel could tell when it became master, so it is taken as just promoted"
		}
		fmt.Fprintf(&b, "; a quarantined Sentinel vote's master may lack locks the master before it granted (%s), so its votes wait until MaxTTL (%s) after its promotion", how, qe.MaxTTL)
		return b.String()
	}
	fmt.Fprintf(&b, "; a quarantined master was up for less than MaxTTL (%s) when this Locker first saw it, and may have restarted and forgotten locks, so its votes wait until it is MaxTTL old (Config.Quarantine = QuarantineObserved trusts masters first seen young: right for masters just started that hold no locks)", qe.MaxTTL)
	return b.String()
}

// QuarantinedUntil is when enough of the masters whose votes were
// quarantined count again for the quorum to be possible, given the other
// masters' answers; zero when the quarantine did not decide the failure.
func (e *VotesError) QuarantinedUntil() time.Time {
	var until []time.Time
	for _, v := range e.Votes {
		var qe *quarantine.Error
		if v.Outcome == OutcomeFailed && errors.As(v.Err, &qe) {
			until = append(until, qe.Until)
		}
	}
	// The masters that may still say yes, besides the quarantined ones.
	possible := len(e.Votes) - e.Failed - e.Timeout
	need := e.Quorum - possible
	if need <= 0 || need > len(until) {
		return time.Time{}
	}
	slices.SortFunc(until, func(a, b time.Time) int { return a.Compare(b) })
	return until[need-1]
}

// quarantineAlone reports whether every master that failed or timed out
// was quarantined: then only the quarantine's end can bring the quorum.
func (e *VotesError) quarantineAlone() bool {
	for _, v := range e.Votes {
		var qe *quarantine.Error
		if (v.Outcome == OutcomeFailed || v.Outcome == OutcomeTimeout) && !errors.As(v.Err, &qe) {
			return false
		}
	}
	return true
}

func (e *VotesError) addr(i int) string {
	if i < len(e.Addrs) {
		return e.Addrs[i]
	}
	return fmt.Sprintf("node %d", i)
}

// wrongKey names the key of the wrong type, for the message: the
// resource's own, or its fencing counter.
func (e *VotesError) wrongKey() string {
	if e.key == "" {
		return "" // several keys: each master's error names its own
	}
	for _, v := range e.Votes {
		if isWrongType(v.Err) && strings.Contains(v.Err.Error(), "fencing counter") {
			return fmt.Sprintf(" (the fencing counter %q)", fencePrefix+e.key)
		}
	}
	return fmt.Sprintf(" (the resource's key %q)", e.key)
}

func (e *VotesError) wrongType() bool {
	for _, v := range e.Votes {
		if isWrongType(v.Err) {
			return true
		}
	}
	return false
}

// Is matches the error's category, the context's error and ErrWrongType
// without building Unwrap's list, so that a caller (or an Observer)
// classifying a refusal on the hot contention path allocates nothing.
func (e *VotesError) Is(target error) bool {
	return target != nil && (target == e.Kind || target == e.Err || (target == ErrWrongType && e.wrongType()))
}

// Unwrap is built on demand, so that the contention path, which is hot under
// load, allocates nothing for it.
func (e *VotesError) Unwrap() []error {
	errs := make([]error, 0, len(e.Votes)+3)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.wrongType() {
		errs = append(errs, ErrWrongType)
	}
	for i, v := range e.Votes {
		if v.Outcome == OutcomeFailed || v.Outcome == OutcomeTimeout {
			errs = append(errs, &NodeError{Addr: e.addr(i), Outcome: v.Outcome, Err: v.Err})
		}
	}
	return errs
}

func isWrongType(err error) bool {
	if err == nil {
		return false
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		return strings.Contains(re.Error(), "WRONGTYPE")
	}
	return false
}

func (l *Locker) acquireError(resource string, t multiplex.Tally) error {
	e := newVotesError("acquire", resource, acquireKind(&t), &t, l.addrs)
	e.key = l.key(resource)
	return e
}

// QuarantineError is a vote's error while its master is in the restart
// quarantine: it answered yes, but its yes cannot count until Until.
// errors.Is matches ErrQuarantined.
type QuarantineError = quarantine.Error

// acquireKind tells contention from outage for a failed attempt:
// ErrNoQuorum only when failures alone made the quorum impossible, so
// that a resource held elsewhere reads as contention even with a minority
// of masters down; ErrWrongType when masters that answered that the key
// is no lock are alone enough to make it impossible, which is neither,
// and which no later attempt cures (Lock gives up). Such answers from a
// minority, beside masters that failed or timed out, are an outage that
// the others' answers may end: ErrNoQuorum (the error still matches
// ErrWrongType).
func acquireKind(t *multiplex.Tally) error {
	spare := len(t.Votes) - t.Quorum
	switch {
	case t.Err != nil:
		return nil
	case t.Reached():
		// Reached but too slow: the masters were too slow for the TTL,
		// which is not contention.
		return ErrNoQuorum
	case len(t.Votes) == 0:
		return ErrNoQuorum
	case t.Failed+t.Timeout > spare:
		wrong := 0
		for _, v := range t.Votes {
			if v.Outcome == multiplex.Failed && isWrongType(v.Err) {
				wrong++
			}
		}
		if wrong > spare {
			return ErrWrongType
		}
		return ErrNoQuorum
	}
	return ErrNotAcquired // refused by enough masters, or a split vote
}

// leaseError is a failed release or extend, classified: ErrLeaseExpired once
// the validity ran out, ErrNotHeld when the refusals prove the lock is not
// ours, ErrNoQuorum when too few masters answered to tell.
func (l *Locker) leaseError(op, resource string, t multiplex.Tally, validUntil time.Time) error {
	var kind error
	switch {
	case t.Err != nil:
	case !time.Now().Before(validUntil):
		kind = ErrLeaseExpired
	case t.Refused > len(t.Votes)-t.Quorum, t.Refused > 0 && t.Failed+t.Timeout == 0:
		// The refusals alone prove the lock is not ours on a quorum, or
		// every master asked answered and some said it is not ours.
		kind = ErrNotHeld
	default:
		// Too few answers to tell: the masters failed us.
		kind = ErrNoQuorum
	}
	return newVotesError(op, resource, kind, &t, l.addrs)
}

// heldByOne reports whether one owner holds the resource on a quorum of
// the refusing masters: then a release will come and is worth waiting
// for. Otherwise the vote was split between attempts that each undo
// theirs, and nobody will publish anything. A turn token (see turnPrefix)
// counts with any owner: it stands where a release just gave the resource
// to a queued waiter, whose lock will take its place.
func (e *VotesError) heldByOne() bool {
	if e.Refused < e.Quorum {
		return false
	}
	turns := e.turns()
	if turns >= e.Quorum {
		return true
	}
	for i, a := range e.Votes {
		if a.Outcome != OutcomeRefused || a.value == turnHash {
			continue
		}
		same := turns
		for _, b := range e.Votes[i:] {
			if b.Outcome == OutcomeRefused && b.value == a.value {
				same++
			}
		}
		if same >= e.Quorum {
			return true
		}
	}
	return false
}

// turns is the number of masters that refused with a turn token.
func (e *VotesError) turns() int {
	n := 0
	for _, a := range e.Votes {
		if a.Outcome == OutcomeRefused && a.value == turnHash {
			n++
		}
	}
	return n
}

// onlyTurns reports whether turn tokens alone refused a quorum: the
// resource is being handed to queued waiters, and if none of them takes
// it, the tokens expire and nobody publishes anything.
func (e *VotesError) onlyTurns() bool { return e.turns() >= e.Quorum }
