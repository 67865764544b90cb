package engines

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	redsyncrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"

	"github.com/redlock-bench/redlock/engine"
)

// The redsync baselines: github.com/go-redsync/redsync/v4, the most used Go
// Redlock, driven by the same workers, recorder and oracle as our engine,
// so that "how much faster" is measured and not claimed.
//
//   - redsync-rueidis: redsync over rueidis (through rueidiscompat), the
//     client our engine uses, so the difference is the algorithm's
//     implementation, not the client.
//   - redsync-goredis: redsync over go-redis v9, the way most users run it.
//
// Each takes one client per master, as redsync wants a pool per master,
// with the client library's defaults (rueidis auto-pipelines; go-redis
// keeps a pool of 10 connections per GOMAXPROCS). redsync keeps its own
// defaults too, with two exceptions that make it comparable to our engine:
//
//   - the TTL (redsync's "expiry", 8s by default) is the run's --ttl, since
//     it is part of the workload;
//   - fail-fast (WithFailFast): return as soon as a quorum said yes, or
//     said taken, instead of waiting for every master, as our engine does.
//
// TryLock is redsync's TryLockContext, which is one attempt: exactly what
// LockContext does with WithTries(1). Lock is LockContext with redsync's
// own retry (32 tries, a random 50-250ms between them), bounded by the
// context; so in mode wait a redsync Lock may give up as contended after
// its 32 tries (about 5s) before --wait-timeout ends it.
//
// Everything else is redsync's: a Mutex per acquisition (it holds the
// value and validity), a goroutine per master per call, a per-attempt
// timeout of 5% of the TTL, and validity = TTL - elapsed - 1% of the TTL.
//
// What fail-fast costs redsync, and the runs show: a decided attempt
// returns while the goroutines of the slower masters may not have sent
// their SET yet. A failed attempt's release then reaches such a master
// first and finds nothing, and the SET that follows holds that master
// until the TTL. Under contention these orphans pile up on every master
// with different values, every later vote splits, and the resource stays
// locked out until they expire (a contended run acquires next to nothing
// after its first seconds). Our engine sends every SET before it returns,
// releases where the SET was answered, and deletes a yes that arrives late.

// redsyncTimeoutFactor is redsync's default timeout factor: each attempt,
// and here each release, gets this fraction of the TTL. Release has no
// timeout of its own in redsync; a bench must not hang on a dead master.
const redsyncTimeoutFactor = 0.05

// redsyncEngine adapts a *redsync.Redsync.
type redsyncEngine struct {
	name    string
	rs      *redsync.Redsync
	opts    []redsync.Option
	masters int
	quorum  int
	release time.Duration
	closers []func() error
}

// newRedsync builds one redsync client of the named flavour: one client
// library connection pool per master. It fails, naming the address, if a
// master does not answer a PING within ctx.
func newRedsync(ctx context.Context, spec Spec, masters []string) (*redsyncEngine, error) {
	name, conn := spec.Engine.Base, spec.Conn
	e := &redsyncEngine{
		name:    name.String(),
		masters: len(masters),
		quorum:  len(masters)/2 + 1,
		release: time.Duration(float64(spec.TTL) * redsyncTimeoutFactor),
		opts:    []redsync.Option{redsync.WithExpiry(spec.TTL), redsync.WithFailFast(true)},
	}
	pools := make([]redsyncredis.Pool, 0, len(masters))
	for _, addr := range masters {
		var pool redsyncredis.Pool
		switch name {
		case RedsyncRueidis:
			// A plain client with rueidis's defaults (auto-pipelining);
			// the client-side cache is off because nothing reads through it.
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true,
				Username: conn.Username, Password: conn.Password, TLSConfig: conn.TLS})
			if err != nil {
				e.Close()
				return nil, fmt.Errorf("%s: connect %s: %w", name, addr, err)
			}
			e.closers = append(e.closers, func() error { c.Close(); return nil })
			pool = redsyncrueidis.NewPool(rueidiscompat.NewAdapter(c))
		case RedsyncGoredis:
			c := goredis.NewClient(&goredis.Options{
				Addr:     addr,
				Username: conn.Username, Password: conn.Password, TLSConfig: conn.TLS,
				// Maintenance notifications are for Redis Enterprise and
				// Redis Cloud; on other servers the handshake only adds noise.
				MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			})
			e.closers = append(e.closers, c.Close)
			// go-redis dials lazily: ping so that a dead master fails here.
			if err := c.Ping(ctx).Err(); err != nil {
				e.Close()
				return nil, fmt.Errorf("%s: connect %s: %w", name, addr, err)
			}
			pool = redsyncgoredis.NewPool(c)
		default:
			e.Close()
			return nil, flagErr("engine", name, "unknown engine")
		}
		pools = append(pools, pool)
	}
	e.rs = redsync.New(pools...)
	return e, nil
}

func (e *redsyncEngine) TryLock(ctx context.Context, resource string) (Lease, error) {
	m := e.rs.NewMutex(resource, e.opts...)
	if err := m.TryLockContext(ctx); err != nil {
		return nil, e.acquireError(ctx, err)
	}
	return e.lease(m), nil
}

func (e *redsyncEngine) Lock(ctx context.Context, resource string) (Lease, error) {
	m := e.rs.NewMutex(resource, e.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, e.acquireError(ctx, err)
	}
	return e.lease(m), nil
}

// lease re-anchors redsync's validity on this process's monotonic clock.
// Mutex.Until is documented as a point in time and today happens to carry
// a monotonic reading (redsync computes it with time.Now().Add); taking
// its distance from now and adding it to a fresh time.Now keeps the
// oracle's comparisons monotonic even if redsync ever returns a wall-clock
// time (Round(0), UTC, a deserialised value).
func (e *redsyncEngine) lease(m *redsync.Mutex) *redsyncLease {
	return &redsyncLease{e: e, m: m, until: time.Now().Add(time.Until(m.Until()))}
}

func (e *redsyncEngine) Close() error {
	var errs []error
	for _, c := range e.closers {
		errs = append(errs, c())
	}
	e.closers = nil
	return errors.Join(errs...)
}

// redsyncLease is one held redsync Mutex.
type redsyncLease struct {
	e     *redsyncEngine
	m     *redsync.Mutex
	until time.Time
}

func (l *redsyncLease) ValidUntil() time.Time { return l.until }

// Release unlocks on every master, bounded like one of redsync's attempts.
func (l *redsyncLease) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.e.release)
	defer cancel()
	ok, err := l.m.UnlockContext(ctx)
	if ok {
		return nil
	}
	if err == nil {
		err = errors.New("redsync: unlock did not reach a quorum")
	}
	return l.e.releaseError(ctx, err)
}

// baselineError is a baseline's own error, labelled with the category the
// bench counts it in. classify and leaseLost know the categories by the
// engine's sentinels (engine.ErrNotAcquired for contention,
// engine.ErrNoQuorum for an outage, engine.ErrNotHeld for a lost lease),
// so baselineError answers errors.Is for the one that applies: the workers,
// the classifier and the oracle then run the same code for every engine.
// The message and the unwrap chain stay the baseline's own, plus the
// context's error, which redsync hides behind ErrFailed.
type baselineError struct {
	engine   string
	category error // an engine sentinel, or nil when only ctx ended
	err      error // the baseline's error
	ctxErr   error // ctx.Err() when the context ended, else nil
}

func (e *baselineError) Error() string {
	if e.ctxErr != nil {
		return e.engine + ": " + e.err.Error() + " (" + e.ctxErr.Error() + ")"
	}
	return e.engine + ": " + e.err.Error()
}

func (e *baselineError) Is(target error) bool { return e.category != nil && target == e.category }

func (e *baselineError) Unwrap() []error {
	if e.ctxErr != nil {
		return []error{e.err, e.ctxErr}
	}
	return []error{e.err}
}

// nodeCounts counts the per-master outcomes in one of redsync's errors:
// masters that failed (RedisError: refused, timed out, closed), masters
// where the key was someone else's (ErrNodeTaken, or ErrTaken's list),
// and masters where the key was gone (ErrLockAlreadyExpired, on release).
func nodeCounts(err error) (failed, taken, gone int) {
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *redsync.RedisError, redsync.RedisError:
			failed++
		case *redsync.ErrNodeTaken, redsync.ErrNodeTaken:
			taken++
		case *redsync.ErrTaken:
			taken += len(e.Nodes)
		case redsync.ErrTaken:
			taken += len(e.Nodes)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		default:
			if err == redsync.ErrLockAlreadyExpired {
				gone++
			}
		}
	}
	walk(err)
	return failed, taken, gone
}

// acquireError labels a failed acquire the way our engine labels its own
// (engine.acquireKind): taken on a quorum is contention whatever failed;
// more failed masters than a quorum can spare is an outage; the rest is a
// split vote, which is contention. A bare ErrFailed, with no master
// failing or refusing, means a quorum said yes too late for the TTL: the
// masters were too slow, an outage as well.
func (e *redsyncEngine) acquireError(ctx context.Context, err error) error {
	be := &baselineError{engine: e.name, err: err, ctxErr: ctx.Err()}
	if be.ctxErr != nil {
		return be // cut short: the context's error says why
	}
	failed, taken, _ := nodeCounts(err)
	switch spare := e.masters - e.quorum; {
	case taken >= e.quorum:
		be.category = engine.ErrNotAcquired
	case failed > spare, failed == 0 && taken == 0:
		be.category = engine.ErrNoQuorum
	default:
		be.category = engine.ErrNotAcquired
	}
	return be
}

// releaseError labels a release that missed the quorum: when more masters
// than a quorum can spare had lost the key (expired, or someone else's)
// the lease was lost, like our engine's ErrNotHeld; otherwise the release
// failed.
func (e *redsyncEngine) releaseError(ctx context.Context, err error) error {
	be := &baselineError{engine: e.name, err: err}
	if _, taken, gone := nodeCounts(err); taken+gone > e.masters-e.quorum {
		be.category = engine.ErrNotHeld
	} else if cerr := ctx.Err(); cerr != nil {
		be.ctxErr = cerr
	}
	return be
}
