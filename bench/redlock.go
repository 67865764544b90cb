package bench

import (
	"context"
	"errors"

	"github.com/redlock-bench/redlock/engine"
)

// redlock adapts *engine.Locker to Engine. *engine.Lease already has the
// Lease methods, so a lease passes through without a wrapper.
type redlock struct{ l *engine.Locker }

func newRedlock(ctx context.Context, masters []string, cfg Config) (Engine, error) {
	ec := engine.DefaultConfig(masters...)
	ec.TTL = cfg.TTL
	switch cfg.Quarantine {
	case "off":
		ec.Quarantine = engine.QuarantineOff
	case "observed":
		ec.Quarantine = engine.QuarantineObserved
	case "always":
		ec.Quarantine = engine.QuarantineAlways
	}
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
