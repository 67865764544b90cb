package bench

import (
	"context"
	"errors"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/results"
)

// redlock adapts *engine.Locker to Engine. *engine.Lease already has the
// Lease methods, so a lease passes through without a wrapper.
type redlock struct{ l *engine.Locker }

func newRedlock(ctx context.Context, masters []string, cfg Config, perCommand bool) (Engine, error) {
	ec := cfg.engineConfig(masters)
	ec.Conn.DisableCoalesce = perCommand
	// Each client is its own Locker: its own connections, gate and
	// subscriptions, as separate processes would have.
	l, err := engine.New(ctx, ec)
	if err != nil {
		return nil, err
	}
	return &redlock{l: l}, nil
}

func (e *redlock) TryLock(ctx context.Context, resource string) (Lease, error) {
	le, err := e.l.TryLock(ctx, resource)
	if err != nil {
		// A nil *engine.Lease in a Lease would not compare equal to nil.
		return nil, err
	}
	return le, nil
}

func (e *redlock) Lock(ctx context.Context, resource string) (Lease, error) {
	le, err := e.l.Lock(ctx, resource)
	if err != nil {
		return nil, err
	}
	return le, nil
}

func (e *redlock) Close() error { return e.l.Close() }

// Nodes is each master's state as this client sees it, in master order.
func (e *redlock) Nodes() []results.Node {
	st := e.l.Nodes()
	out := make([]results.Node, len(st))
	for i, n := range st {
		out[i] = results.Node{
			Addr: n.Addr, State: string(n.State), QuarantinedUntil: n.QuarantinedUntil,
			RunID: n.RunID, Version: n.Version, Restarts: n.Restarts, Error: n.Err,
			OK: n.OK, Refused: n.Refused, Failed: n.Failed, TimedOut: n.TimedOut,
		}
		if !n.QuarantinedUntil.IsZero() {
			out[i].QuarantinedUntil = n.QuarantinedUntil.UTC().Round(0)
		}
	}
	return out
}

// Subscriptions is the number of resources this client is subscribed to
// for release notifications right now.
func (e *redlock) Subscriptions() int { return e.l.Subscriptions() }

// Optional capabilities. The worker and the runner use them where an
// engine has them; baselines without them are measured all the same.
type (
	// detailedLease is a lease that tells how it was obtained and how it
	// went: *engine.Lease.
	detailedLease interface {
		Lease
		// Wait tells how Lock obtained the lease.
		Wait() engine.WaitInfo
		// Token is the fencing token; 0 without fencing.
		Token() int64
		// Extensions counts successful auto-extensions so far.
		Extensions() int
		// Err is non-nil once the lease can no longer be trusted.
		Err() error
	}
	// selfExtendingLease is a baseline's lease that extends itself while
	// held, whatever --extend says, so that its ValidUntil moves: the
	// oracle and the worker read it again when the hold ends.
	selfExtendingLease interface {
		Lease
		selfExtending()
	}
	// nodeReporter reports each master's state.
	nodeReporter interface{ Nodes() []results.Node }
	// subscriptionCounter reports the release subscriptions held.
	subscriptionCounter interface{ Subscriptions() int }
)

// ParseQuarantine maps "off", "observed" or "always" to the engine's
// restart-quarantine policy, for the scenario command, which must not
// import the engine itself.
func ParseQuarantine(s string) (engine.QuarantinePolicy, error) {
	q, err := engine.ParseQuarantinePolicy(s)
	if err != nil {
		return 0, errors.New("must be off, observed or always")
	}
	return q, nil
}

// classify sorts a failed acquire into a counter. Contention is checked
// first: it is by far the most common failure under load. waitCtx is the
// per-operation context of mode wait (nil in mode try); when it ran out,
// the wait timed out whatever the last attempt said.
func classify(err error, waitCtx context.Context) errKind {
	if waitCtx != nil && errors.Is(waitCtx.Err(), context.DeadlineExceeded) {
		return errTimeout
	}
	// The fast path reads the category without errors.Is, whose walk
	// builds VotesError's unwrap list: an allocation per refusal.
	if ve, ok := err.(*engine.VotesError); ok && ve.Kind != nil {
		switch ve.Kind {
		case engine.ErrNotAcquired:
			return kindContended
		case engine.ErrNoQuorum:
			return errNoQuorum
		}
	}
	switch {
	case errors.Is(err, engine.ErrNotAcquired):
		return kindContended
	case errors.Is(err, engine.ErrNoQuorum):
		return errNoQuorum
	case errors.Is(err, context.DeadlineExceeded):
		return errTimeout
	}
	return errOther
}

// leaseLost reports a release that found the lease gone: expired, or no
// longer held on a quorum.
func leaseLost(err error) bool {
	return errors.Is(err, engine.ErrLeaseExpired) || errors.Is(err, engine.ErrNotHeld)
}
