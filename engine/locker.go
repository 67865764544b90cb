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
	ttlStr string // TTL in ms, formatted once
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
		Quarantine:        cfg.Quarantine,
		MaxTTL:            cfg.MaxTTL,
		Tune:              cfg.Tune,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	l := &Locker{
		cfg:    cfg,
		pool:   pool,
		addrs:  cfg.Masters,
		ttlStr: itoa(cfg.TTL.Milliseconds()),
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

// Nodes reports each master's state: up, down, or quarantined (and until
// when), with its outcome counts.
func (l *Locker) Nodes() []multiplex.NodeStatus { return l.pool.Status() }

// Close releases the connections. Leases still held are left to expire.
func (l *Locker) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.pool.Close()
	return nil
}

// TryLock makes one attempt to acquire resource. On failure the attempt is
// undone on every master where it may have taken, and the error says why
// (see VotesError).
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
	}
	if n := l.pool.Len(); n <= len(le.voteBuf) {
		le.votes = le.voteBuf[:n]
	} else {
		le.votes = make([]multiplex.Vote, n)
	}
	cmd := multiplex.Command{Name: "SET", Key: le.key}
	classify := classifyAcquireGet
	if l.setGet {
		cmd.Args, cmd.NArgs = [multiplex.MaxArgs]string{le.value, "NX", "GET", "PX", l.ttlStr}, 5
	} else {
		cmd.Args, cmd.NArgs = [multiplex.MaxArgs]string{le.value, "NX", "PX", l.ttlStr}, 4
		classify = classifyAcquireSet
	}
	le.start = time.Now()
	t := l.pool.Fanout(ctx, cmd, classify, le, le.votes)

	le.mu.Lock()
	for i, v := range t.Votes {
		le.record(i, v)
	}
	if t.Reached() && t.Err == nil {
		le.validUntil = le.start.Add(l.cfg.TTL - l.drift)
		if time.Now().Before(le.validUntil) {
			le.mu.Unlock()
			return le, nil
		}
	}
	le.failed = true
	undo := le.toRelease()
	le.mu.Unlock()
	err := l.acquireError(resource, t)
	if undo != 0 {
		// Without waiting: the caller has its answer. Masters still to
		// answer are released by Late when they do.
		go l.pool.Fanout(context.Background(), le.releaseCommand(undo), classifyInt, nil, nil)
	}
	return nil, err
}

func (l *Locker) acquireError(resource string, t multiplex.Tally) error {
	t.Votes = append([]multiplex.Vote(nil), t.Votes...)
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

// Lock acquires resource, retrying after a random delay between
// RetryDelayMin and RetryDelayMax until it succeeds, ctx ends, or an error
// other than contention or outage occurs. The last attempt's error is
// returned with ctx's error.
func (l *Locker) Lock(ctx context.Context, resource string) (*Lease, error) {
	var timer *time.Timer
	var last error // the last attempt that was decided, not cut short
	for {
		le, err := l.TryLock(ctx, resource)
		if err == nil {
			return le, nil
		}
		if ctx.Err() != nil {
			if last == nil || errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNoQuorum) {
				last = err
			}
			return nil, errors.Join(last, ctx.Err())
		}
		last = err
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
			return nil, errors.Join(last, ctx.Err())
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
