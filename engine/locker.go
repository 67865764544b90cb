package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// The scripts compare the value before acting, so that a lease can only
// touch its own key; extend never re-creates a missing key.
var (
	releaseScript = multiplex.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)
	extendScript  = multiplex.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`)
)

// Locker acquires leases on resources across the masters. It is safe for
// concurrent use; one Locker per process is the intended use.
type Locker struct {
	cfg    Config
	pool   *multiplex.Pool
	addrs  []string
	ttlMS  int64
	drift  time.Duration
	setGet bool // masters support SET NX GET (Redis >= 7.0)
	closed atomic.Bool
}

// New validates cfg, connects to every master and loads the scripts. A
// minority of masters may be down; if a quorum cannot be reached it fails
// with an error naming every unreachable address and why.
func New(ctx context.Context, cfg Config) (*Locker, error) {
	cfg.Masters = append([]string(nil), cfg.Masters...)
	cfg.fill()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pool, err := multiplex.Dial(ctx, multiplex.Options{
		Addrs:             cfg.Masters,
		NodeTimeout:       cfg.NodeTimeout,
		DialTimeout:       cfg.DialTimeout,
		ConnTimeout:       cfg.ConnTimeout,
		MaxFlushDelay:     cfg.MaxFlushDelay,
		PipelineMultiplex: cfg.PipelineMultiplex,
		Scripts:           []*multiplex.Script{releaseScript, extendScript},
		Tune:              cfg.Tune,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	l := &Locker{
		cfg:    cfg,
		pool:   pool,
		addrs:  cfg.Masters,
		ttlMS:  cfg.TTL.Milliseconds(),
		drift:  drift(cfg.TTL, cfg.DriftFactor),
		setGet: true,
	}
	for _, n := range pool.Nodes() {
		if v := n.Info().Version; v != "" && !atLeast(v, 7, 0) {
			l.setGet = false
		}
	}
	return l, nil
}

// Config returns the effective configuration, defaults filled in.
func (l *Locker) Config() Config { return l.cfg }

// Quorum is the number of masters that must agree: N/2+1.
func (l *Locker) Quorum() int { return l.pool.Quorum() }

// Close releases the connections. Leases still held are left to expire.
func (l *Locker) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.pool.Close()
	return nil
}

// TryLock makes one attempt to acquire resource. On failure the attempt is
// undone on every master, and the error says why (see VotesError).
func (l *Locker) TryLock(ctx context.Context, resource string) (*Lease, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if resource == "" {
		return nil, ErrEmptyResource
	}
	le := &Lease{
		l:        l,
		resource: resource,
		key:      l.cfg.KeyPrefix + resource,
		value:    newValue(),
		ttl:      l.cfg.TTL,
	}
	b := l.pool.B()
	var cmd rueidis.Completed
	classify := classifyAcquireGet
	if l.setGet {
		cmd = b.Set().Key(le.key).Value(le.value).Nx().Get().PxMilliseconds(l.ttlMS).Build()
	} else {
		cmd = b.Set().Key(le.key).Value(le.value).Nx().PxMilliseconds(l.ttlMS).Build()
		classify = classifyAcquireSet
	}
	le.start = time.Now()
	t := l.pool.Fanout(ctx, cmd, classify, le)

	le.mu.Lock()
	if t.Reached() && t.Err == nil {
		le.validUntil = le.start.Add(l.cfg.TTL - l.drift)
		if time.Now().Before(le.validUntil) {
			for i, v := range t.Votes {
				if v.Outcome == multiplex.OK {
					le.held |= 1 << i
				}
			}
			le.mu.Unlock()
			return le, nil
		}
	}
	le.failed = true
	le.mu.Unlock()
	// Undo on every master, including those that timed out: their SET may
	// have succeeded with its reply lost or late.
	l.undo(le)
	return nil, l.acquireError(resource, t)
}

func (l *Locker) acquireError(resource string, t multiplex.Tally) error {
	e := &VotesError{Op: "acquire", Resource: resource, Tally: t, Addrs: l.addrs}
	switch {
	case t.Err != nil:
	case t.Failed+t.Timeout > len(t.Votes)-t.Quorum || t.Reached():
		// Reached but too slow counts here too: the masters were too slow
		// for the TTL, which is not contention.
		e.Kind = ErrNoQuorum
	default:
		e.Kind = ErrNotAcquired
	}
	return e
}

// undo releases a failed attempt without waiting: the caller already has
// its answer. Nodes whose reply is still pending are released again by
// Lease.Late when that reply arrives.
func (l *Locker) undo(le *Lease) {
	cmd := l.pool.B().Evalsha().Sha1(releaseScript.SHA).Numkeys(1).Key(le.key).Arg(le.value).Build()
	go l.pool.Fanout(context.Background(), cmd, classifyInt, nil)
}

// Lock acquires resource, retrying after a random delay between
// RetryDelayMin and RetryDelayMax until it succeeds, ctx ends, or an error
// other than contention or outage occurs. The last attempt's error is
// returned with ctx's error.
func (l *Locker) Lock(ctx context.Context, resource string) (*Lease, error) {
	var timer *time.Timer
	for {
		le, err := l.TryLock(ctx, resource)
		if err == nil {
			return le, nil
		}
		if ctx.Err() != nil {
			return nil, errors.Join(err, ctx.Err())
		}
		if errors.Is(err, ErrWrongType) || !(errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNoQuorum)) {
			return nil, err
		}
		d := l.cfg.RetryDelayMin
		if span := l.cfg.RetryDelayMax - l.cfg.RetryDelayMin; span > 0 {
			d += mrand.N(span)
		}
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-timer.C:
		}
	}
}

// newValue returns 128 random bits, base64url-encoded (22 bytes).
func newValue() string {
	var b [16]byte
	rand.Read(b[:]) // never fails on Linux (Go 1.24+ crashes instead)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func classifyAcquireGet(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	// SET NX GET answers nil when it set the key, and the holder's value
	// when the key was taken; a non-string key is a WRONGTYPE error.
	err := res.Error()
	switch {
	case err == nil:
		return multiplex.Refused, 0, nil
	case rueidis.IsRedisNil(err):
		return multiplex.OK, 0, nil
	}
	return multiplex.Failed, 0, err
}

func classifyAcquireSet(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	err := res.Error()
	switch {
	case err == nil:
		return multiplex.OK, 0, nil
	case rueidis.IsRedisNil(err):
		return multiplex.Refused, 0, nil
	}
	return multiplex.Failed, 0, err
}

func classifyInt(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	n, err := res.AsInt64()
	switch {
	case err != nil:
		return multiplex.Failed, 0, err
	case n > 0:
		return multiplex.OK, n, nil
	}
	return multiplex.Refused, n, nil
}

func checkAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return errors.New("want host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return errors.New("port must be 1-65535")
	}
	return nil
}

// atLeast compares a "major.minor.patch" version.
func atLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
