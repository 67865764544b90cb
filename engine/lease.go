package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// Lease is a held lock on one resource. Its validity is measured on the
// monotonic clock from the start of the attempt that acquired it.
type Lease struct {
	l        *Locker
	resource string
	key      string
	value    string
	start    time.Time
	// votes is scratch space for this lease's rounds, so that a cycle
	// allocates no tally; opMu keeps Release and Extend from sharing it.
	votes   []multiplex.Vote
	voteBuf [5]multiplex.Vote
	opMu    sync.Mutex

	mu         sync.Mutex
	validUntil time.Time
	// held: masters that said yes. unsure: masters whose reply was lost
	// to a connection error, where the SET may have run. answered: masters
	// whose reply to the acquire has arrived; the others are sent their
	// release only when it does, so that a delete never overtakes its SET.
	held, unsure, answered uint64
	failed                 bool // the attempt did not acquire
	released               bool
}

// Resource is the name the lease was acquired for.
func (le *Lease) Resource() string { return le.resource }

// Value is the lease's unique value (128 random bits), stored on the
// masters as the key's value.
func (le *Lease) Value() string { return le.value }

// ValidUntil is when the lease stops being trustworthy: acquisition start +
// TTL − drift, moved by each successful Extend. It carries a monotonic
// clock reading.
func (le *Lease) ValidUntil() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.validUntil
}

// Validity is the time left before ValidUntil, or 0.
func (le *Lease) Validity() time.Duration {
	return max(time.Until(le.ValidUntil()), 0)
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
		}
	}
	le.answered |= bit
	return (le.failed || le.released) && (le.held|le.unsure)&bit != 0
}

// mayHaveRun: an error that is not a reply from Redis (a dropped
// connection) leaves it unknown whether the command ran.
func mayHaveRun(err error) bool {
	if err == nil {
		return false
	}
	_, isReply := rueidis.IsRedisErr(err)
	return !isReply
}

// Late handles a master's reply to the acquire that arrived after the
// attempt was decided. If the lease has failed or been released by then,
// that master is sent its release now: the reply proves the SET ran first.
func (le *Lease) Late(node int, v multiplex.Vote) {
	le.mu.Lock()
	undo := le.record(node, v)
	le.mu.Unlock()
	if undo {
		le.l.pool.Do(context.Background(), node, le.releaseCommand(0))
	}
}

func (le *Lease) releaseCommand(nodes uint64) multiplex.Command {
	return multiplex.Command{Script: releaseScript, Key: le.key, Args: [multiplex.MaxArgs]string{le.value}, NArgs: 1, Nodes: nodes}
}

// toRelease returns the masters a release must go to now, and marks the
// lease released (or failed) so that masters still to answer are handled
// by Late. The caller holds le.mu.
func (le *Lease) toRelease() uint64 {
	return (le.held | le.unsure) & le.answered
}

// Release deletes the lock on every master where it is ours. It returns
// nil if a quorum deleted it; otherwise a *VotesError whose Kind is
// ErrLeaseExpired (validity had run out), ErrNotHeld (enough masters said
// the key was gone or another owner's) or ErrNoQuorum (too many masters
// failed to answer to tell).
func (le *Lease) Release(ctx context.Context) error {
	le.opMu.Lock()
	defer le.opMu.Unlock()
	le.mu.Lock()
	if le.released {
		le.mu.Unlock()
		return fmt.Errorf("engine: release %q: %w: already released", le.resource, ErrNotHeld)
	}
	le.released = true
	validUntil := le.validUntil
	nodes := le.toRelease()
	le.mu.Unlock()
	if le.l.closed.Load() {
		return ErrClosed
	}
	if nodes == 0 { // every master still to answer: Late releases them
		return le.l.opError("release", le.resource, multiplex.Tally{Votes: le.votes, Quorum: le.l.Quorum(), Pending: len(le.votes)}, validUntil)
	}
	t := le.l.pool.Fanout(ctx, le.releaseCommand(nodes), classifyInt, nil, le.votes)
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
	le.opMu.Lock()
	defer le.opMu.Unlock()
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
	cmd := multiplex.Command{Script: extendScript, Key: le.key, Args: [multiplex.MaxArgs]string{le.value, itoa(ttl.Milliseconds())}, NArgs: 2}
	t := le.l.pool.Fanout(ctx, cmd, classifyInt, nil, le.votes)
	if t.Reached() && t.Err == nil && time.Now().Before(validUntil) {
		le.mu.Lock()
		// A shorter ttl shortens the validity too: the masters now expire
		// the key sooner.
		le.validUntil = start.Add(ttl - drift(ttl, le.l.cfg.DriftFactor))
		le.mu.Unlock()
		return nil
	}
	return le.l.opError("extend", le.resource, t, validUntil)
}

func (l *Locker) opError(op, resource string, t multiplex.Tally, validUntil time.Time) error {
	t.Votes = append([]multiplex.Vote(nil), t.Votes...) // the lease reuses its buffer
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
