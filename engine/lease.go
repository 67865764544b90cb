package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/multiplex"
)

// Lease is a held lock on one resource. Its validity is measured on the
// monotonic clock from the start of the attempt that acquired it.
type Lease struct {
	l        *Locker
	resource string
	key      string
	value    string
	ttl      time.Duration
	start    time.Time

	mu         sync.Mutex
	validUntil time.Time
	held       uint64 // masters that said yes, as a bit set
	failed     bool   // the attempt did not acquire: undo late yeses
	released   bool
}

// Resource is the name the lease was acquired for.
func (le *Lease) Resource() string { return le.resource }

// Value is the lease's unique value (128 random bits), stored on the
// masters as the key's value.
func (le *Lease) Value() string { return le.value }

// ValidUntil is when the lease stops being trustworthy: acquisition start +
// TTL − drift, moved forward by each successful Extend. It carries a
// monotonic clock reading.
func (le *Lease) ValidUntil() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.validUntil
}

// Validity is the time left before ValidUntil, or 0.
func (le *Lease) Validity() time.Duration {
	return max(time.Until(le.ValidUntil()), 0)
}

// Late handles a master's reply to the acquire that arrived after the
// attempt was decided. A yes to an attempt that failed, or to a lease
// already released, is deleted at once on that master.
func (le *Lease) Late(node int, v multiplex.Vote) {
	if v.Outcome != multiplex.OK {
		return
	}
	le.mu.Lock()
	undo := le.failed || le.released
	if !undo {
		le.held |= 1 << node
	}
	le.mu.Unlock()
	if undo {
		p := le.l.pool
		ctx, cancel := context.WithTimeout(context.Background(), p.NodeTimeout()*10)
		defer cancel()
		cmd := p.B().Evalsha().Sha1(releaseScript.SHA).Numkeys(1).Key(le.key).Arg(le.value).Build()
		p.Do(ctx, node, cmd)
	}
}

// Release deletes the lock on every master where it is still ours. It
// returns nil if a quorum deleted it; otherwise a *VotesError whose Kind is
// ErrLeaseExpired (validity had run out), ErrNotHeld (enough masters said
// the key was gone or another owner's) or ErrNoQuorum (too many masters
// failed to answer to tell).
func (le *Lease) Release(ctx context.Context) error {
	le.mu.Lock()
	if le.released {
		le.mu.Unlock()
		return fmt.Errorf("engine: release %q: %w: already released", le.resource, ErrNotHeld)
	}
	le.released = true
	validUntil := le.validUntil
	le.mu.Unlock()
	if le.l.closed.Load() {
		return ErrClosed
	}
	p := le.l.pool
	cmd := p.B().Evalsha().Sha1(releaseScript.SHA).Numkeys(1).Key(le.key).Arg(le.value).Build()
	t := p.Fanout(ctx, cmd, classifyInt, nil)
	if t.Reached() {
		return nil
	}
	return le.l.opError("release", le.resource, t, validUntil)
}

// Extend sets the lock's TTL to ttl on every master where it is still ours,
// and never re-creates a key that is gone. It counts only if a quorum agreed
// before the current validity ran out; then the validity becomes
// start-of-extend + ttl − drift. On failure the validity is unchanged.
func (le *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 || ttl%time.Millisecond != 0 {
		return fmt.Errorf("engine: extend %q: ttl must be > 0 and whole milliseconds, got %s", le.resource, ttl)
	}
	le.mu.Lock()
	released, validUntil := le.released, le.validUntil
	le.mu.Unlock()
	if released {
		return fmt.Errorf("engine: extend %q: %w: released", le.resource, ErrNotHeld)
	}
	start := time.Now()
	if !start.Before(validUntil) {
		return fmt.Errorf("engine: extend %q: %w", le.resource, ErrLeaseExpired)
	}
	if le.l.closed.Load() {
		return ErrClosed
	}
	p := le.l.pool
	cmd := p.B().Evalsha().Sha1(extendScript.SHA).Numkeys(1).Key(le.key).Arg(le.value).Arg(itoa(ttl.Milliseconds())).Build()
	t := p.Fanout(ctx, cmd, classifyInt, nil)
	if t.Reached() && t.Err == nil && time.Now().Before(validUntil) {
		le.mu.Lock()
		// A shorter ttl shortens the validity too: the masters now expire
		// the key sooner.
		le.validUntil = start.Add(ttl - drift(ttl, le.l.cfg.DriftFactor))
		le.ttl = ttl
		le.mu.Unlock()
		return nil
	}
	return le.l.opError("extend", le.resource, t, validUntil)
}

func (l *Locker) opError(op, resource string, t multiplex.Tally, validUntil time.Time) error {
	e := &VotesError{Op: op, Resource: resource, Tally: t, Addrs: l.addrs}
	switch {
	case t.Err != nil:
	case !time.Now().Before(validUntil):
		e.Kind = ErrLeaseExpired
	case t.Refused > len(t.Votes)-t.Quorum:
		// The refusals alone prove the lock is not ours on a quorum.
		e.Kind = ErrNotHeld
	default:
		// Too few answers to tell: the masters failed us.
		e.Kind = ErrNoQuorum
	}
	return e
}
