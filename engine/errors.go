package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// Sentinel errors, one per category a caller branches on.
var (
	// ErrNotAcquired: the resource is held by someone else (contention).
	// Enough masters answered; too many of them refused.
	ErrNotAcquired = errors.New("engine: not acquired: held by another owner")
	// ErrNoQuorum: too many masters failed or timed out for a quorum to be
	// possible, whoever holds the resource (an outage, not contention).
	ErrNoQuorum = errors.New("engine: no quorum: too many masters failed")
	// ErrNotHeld: the lease is not (or no longer) held on a quorum: it was
	// released, or its keys expired or were taken over.
	ErrNotHeld = errors.New("engine: lease not held")
	// ErrLeaseExpired: the lease's validity ran out before the operation.
	ErrLeaseExpired = errors.New("engine: lease expired")
	// ErrWrongType: the resource's key exists with a non-string type, so it
	// cannot be a lock. Some other program uses the same key.
	ErrWrongType = errors.New("engine: resource key holds the wrong type")
	// ErrLockLost: an auto-extension missed the quorum, so the lock can no
	// longer be trusted although its validity had not run out.
	ErrLockLost = errors.New("engine: lock lost")
	// ErrReleased: the lease was released.
	ErrReleased = errors.New("engine: lease released")
	// ErrClosed: the Locker was closed.
	ErrClosed = errors.New("engine: locker closed")
	// ErrEmptyResource: a resource name must not be empty.
	ErrEmptyResource = errors.New("engine: empty resource name")
	// ErrReservedResource: the resource's key (KeyPrefix + name) starts
	// with the engine's internal namespace ("\xffredlock:"), where the
	// fencing counters live.
	ErrReservedResource = errors.New("engine: resource key in the engine's reserved namespace")
)

// NodeError is one master's cause in a failed operation.
type NodeError struct {
	Addr    string
	Outcome multiplex.Outcome
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
	Op       string // "acquire", "release" or "extend"
	Resource string
	// Kind is the category: ErrNotAcquired, ErrNoQuorum, ErrNotHeld or
	// ErrLeaseExpired. It is nil when only the context ended.
	Kind  error
	Tally multiplex.Tally
	Addrs []string
}

func (e *VotesError) Error() string {
	var b strings.Builder
	b.WriteString("engine: ")
	b.WriteString(e.Op)
	fmt.Fprintf(&b, " %q: ", e.Resource)
	switch {
	case e.Kind != nil:
		b.WriteString(strings.TrimPrefix(e.Kind.Error(), "engine: "))
	case e.Tally.Err != nil:
		b.WriteString(e.Tally.Err.Error())
	}
	if e.Kind != nil && e.Tally.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Tally.Err.Error())
	}
	t := &e.Tally
	fmt.Fprintf(&b, " (%d ok, %d refused, %d error, %d timeout, %d pending; quorum %d of %d)",
		t.OK, t.Refused, t.Failed, t.Timeout, t.Pending, t.Quorum, len(t.Votes))
	if e.wrongType() {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(ErrWrongType.Error(), "engine: "))
	}
	for i, v := range t.Votes {
		if v.Outcome == multiplex.Failed || v.Outcome == multiplex.Timeout {
			b.WriteString("; ")
			b.WriteString((&NodeError{Addr: e.addr(i), Outcome: v.Outcome, Err: v.Err}).Error())
		}
	}
	return b.String()
}

func (e *VotesError) addr(i int) string {
	if i < len(e.Addrs) {
		return e.Addrs[i]
	}
	return fmt.Sprintf("node %d", i)
}

func (e *VotesError) wrongType() bool {
	for _, v := range e.Tally.Votes {
		if isWrongType(v.Err) {
			return true
		}
	}
	return false
}

// Unwrap is built on demand, so that the contention path, which is hot under
// load, allocates nothing for it.
func (e *VotesError) Unwrap() []error {
	errs := make([]error, 0, len(e.Tally.Votes)+3)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Tally.Err != nil {
		errs = append(errs, e.Tally.Err)
	}
	if e.wrongType() {
		errs = append(errs, ErrWrongType)
	}
	for i, v := range e.Tally.Votes {
		if v.Outcome == multiplex.Failed || v.Outcome == multiplex.Timeout {
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
