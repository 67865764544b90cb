package engines

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/redlock-bench/redlock/engine"
)

// The bsm/redislock baseline: github.com/bsm/redislock, the single-Redis
// lock most Go services reach for when they do not need Redlock, over
// go-redis v9. It runs on one master, the first: one key per lock, set
// with SET NX PX by a script, released by a compare-and-delete script.
// Beside it, redlock@1 runs our engine on the same master, so that the
// table shows what the quorum costs and what one master does.
//
// Everything is bsm/redislock's and go-redis's default (a pool of 10
// connections per GOMAXPROCS), except:
//
//   - the TTL is the run's --ttl;
//   - Lock retries with ExponentialBackoff(16ms, 256ms): redislock's
//     default is not to retry at all, and 16ms is the least its
//     documentation recommends; 256ms bounds a wait's steps as redsync's
//     (50-250ms) are bounded. The wait ends with the caller's context.
//
// The validity is the TTL from when Obtain was called: the key's own TTL
// starts later, when the master sets it, so the holder may trust it until
// then at least. redislock allows for no clock drift; neither does this.
// Release is bounded like a redsync release (5% of the TTL), since neither
// library bounds it.

// bsmBackoffMin and bsmBackoffMax bound Lock's retry steps.
const (
	bsmBackoffMin = 16 * time.Millisecond
	bsmBackoffMax = 256 * time.Millisecond
)

// bsmRedislockEngine adapts a redislock.Client.
type bsmRedislockEngine struct {
	rc      *goredis.Client
	c       *redislock.Client
	ttl     time.Duration
	release time.Duration
}

// newBsmRedislock builds one client on the one master it runs on. It
// fails, naming the address, if the master does not answer a PING within
// ctx.
func newBsmRedislock(ctx context.Context, spec Spec, masters []string) (*bsmRedislockEngine, error) {
	if len(masters) != 1 {
		return nil, fmt.Errorf("%s: runs on one master, got %d", BsmRedislock, len(masters))
	}
	rc := goredis.NewClient(&goredis.Options{
		Addr:     masters[0],
		Username: spec.Conn.Username, Password: spec.Conn.Password, TLSConfig: spec.Conn.TLS,
		// As for redsync-goredis: the handshake is for Redis Enterprise.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	// go-redis dials lazily: ping so that a dead master fails here.
	if err := rc.Ping(ctx).Err(); err != nil {
		rc.Close()
		return nil, fmt.Errorf("%s: connect %s: %w", BsmRedislock, masters[0], err)
	}
	return &bsmRedislockEngine{rc: rc, c: redislock.New(rc), ttl: spec.TTL,
		release: time.Duration(float64(spec.TTL) * redsyncTimeoutFactor)}, nil
}

func (e *bsmRedislockEngine) TryLock(ctx context.Context, resource string) (Lease, error) {
	return e.obtain(ctx, resource, nil)
}

func (e *bsmRedislockEngine) Lock(ctx context.Context, resource string) (Lease, error) {
	// A strategy counts its steps: one per wait.
	return e.obtain(ctx, resource, &redislock.Options{RetryStrategy: redislock.ExponentialBackoff(bsmBackoffMin, bsmBackoffMax)})
}

func (e *bsmRedislockEngine) obtain(ctx context.Context, resource string, opt *redislock.Options) (Lease, error) {
	start := time.Now()
	lk, err := e.c.Obtain(ctx, resource, e.ttl, opt)
	if err != nil {
		return nil, e.acquireError(ctx, err)
	}
	return &bsmRedislockLease{e: e, lk: lk, until: start.Add(e.ttl)}, nil
}

func (e *bsmRedislockEngine) Close() error { return e.rc.Close() }

// acquireError labels a failed acquire: ErrNotObtained is the key held by
// another, contention; any other error is the one master failing to
// answer, an outage, as our engine labels a vote its masters did not
// answer.
func (e *bsmRedislockEngine) acquireError(ctx context.Context, err error) error {
	be := &baselineError{engine: BsmRedislock.String(), err: err, ctxErr: ctx.Err()}
	switch {
	case be.ctxErr != nil:
		// cut short: the context's error says why
	case errors.Is(err, redislock.ErrNotObtained):
		be.category = engine.ErrNotAcquired
	default:
		be.category = engine.ErrNoQuorum
	}
	return be
}

// bsmRedislockLease is one held redislock.Lock.
type bsmRedislockLease struct {
	e     *bsmRedislockEngine
	lk    *redislock.Lock
	until time.Time
}

func (l *bsmRedislockLease) ValidUntil() time.Time { return l.until }

// Release deletes the key if it is still this lock's. ErrLockNotHeld, the
// key gone or another's, is a lost lease.
func (l *bsmRedislockLease) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.e.release)
	defer cancel()
	err := l.lk.Release(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redislock.ErrLockNotHeld):
		return &baselineError{engine: BsmRedislock.String(), category: engine.ErrNotHeld, err: err}
	}
	return &baselineError{engine: BsmRedislock.String(), err: err, ctxErr: ctx.Err()}
}
