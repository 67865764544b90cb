package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Engine is a lock implementation under test. The real engine, the nolock
// control and later baselines (redsync, ...) all implement it, so that the
// same workers, recorder and oracle measure each of them.
//
// Errors are classified by classify: implementations return their own
// errors, and the classifier knows each engine's sentinels.
type Engine interface {
	// TryLock makes one attempt to acquire resource.
	TryLock(ctx context.Context, resource string) (Lease, error)
	// Lock retries until resource is acquired or ctx ends.
	Lock(ctx context.Context, resource string) (Lease, error)
	// Close releases the engine's connections.
	Close() error
}

// Lease is one acquisition of a resource.
type Lease interface {
	// ValidUntil is when the holder must stop relying on the lock. It must
	// carry a monotonic clock reading: the oracle compares it with
	// time.Now.
	ValidUntil() time.Time
	// Release gives the resource back.
	Release(ctx context.Context) error
}

// EnginePerCommand is the redlock engine with coalescing off: every
// release, extend and waiter's acquire is its own script call. Compared
// with "redlock" in one run, it shows what coalescing gains.
const EnginePerCommand = "redlock-percmd"

// EngineSequential is the redlock engine taking --lock multi:K as K
// mutexes one after another, in the order of their names, as a user
// without TryLockAll would: beside "redlock" it shows what one lease on K
// resources gains. It takes no other lock.
const EngineSequential = "redlock-sequential"

// EngineMutex is the redlock engine taking --lock rw:F on its mutex: every
// operation, read or write, exclusive. Beside "redlock" it shows what the
// read/write lock gains on the same operations; no baseline has a
// read/write lock to compare with. It takes no other lock.
const EngineMutex = "redlock-mutex"

// Engine names of the single-master baselines: rueidislock.go and
// bsmredislock.go.
const (
	engineRueidislock  = "rueidislock"
	engineBsmRedislock = "bsm-redislock"
)

// EngineNames lists the engines Run knows, for --engine. The redsync-*
// baselines are in redsync.go. A quorum engine also runs as NAME@N, on the
// first N masters only (see engineVoters).
func EngineNames() []string {
	return []string{"redlock", EnginePerCommand, EngineSequential, EngineMutex, "nolock", engineRedsyncRueidis, engineRedsyncGoredis,
		engineRueidislock, engineBsmRedislock}
}

// EngineNamesHelp is EngineNames for a person: the names, and NAME@N.
func EngineNamesHelp() string {
	return strings.Join(EngineNames(), ", ") + "; a quorum engine as NAME@N votes on the first N masters only, e.g. redlock@1"
}

// quorumEngine reports whether base votes over every master it is given,
// so that NAME@N can give it fewer: the single-master baselines use one
// whatever they are given, and nolock none.
func quorumEngine(base string) bool {
	switch base {
	case "redlock", EnginePerCommand, EngineSequential, EngineMutex, engineRedsyncRueidis, engineRedsyncGoredis:
		return true
	}
	return false
}

// errUnknownEngine is splitEngine's error for a name that is no engine's.
var errUnknownEngine = errors.New("unknown engine")

// splitEngine reads an engine name: its base engine, and N of NAME@N (0:
// every master). A single-master baseline has N 1 without the suffix. Its
// errors say what is wrong without repeating the name.
func splitEngine(name string) (base string, voters int, err error) {
	base, suffix, at := strings.Cut(name, "@")
	known := false
	for _, n := range EngineNames() {
		known = known || n == base
	}
	switch {
	case !known:
		return "", 0, fmt.Errorf("%w (known: %s)", errUnknownEngine, EngineNamesHelp())
	case base == engineRueidislock || base == engineBsmRedislock:
		if at {
			return "", 0, fmt.Errorf("%s runs on one master, the first, and takes no @N", base)
		}
		return base, 1, nil
	case !at:
		return base, 0, nil
	case !quorumEngine(base):
		return "", 0, fmt.Errorf("%s uses no masters and takes no @N", base)
	}
	n, err := strconv.Atoi(suffix)
	if err != nil || n < 1 || n > MaxMasters {
		return "", 0, fmt.Errorf("the N of %s@N must be a number of masters, 1 to %d", base, MaxMasters)
	}
	return base, n, nil
}

// baseEngine is name without its @N; "" for an unknown engine.
func baseEngine(name string) string {
	base, _, _ := splitEngine(name)
	return base
}

// engineVoters is how many masters engine name votes on, the first ones of
// the run's: 0 for all of them.
func engineVoters(name string) int {
	_, n, _ := splitEngine(name)
	return n
}

// IsRedlock reports whether name is the redlock engine, in any variant:
// its features (gate, notify, extend, fencing) apply.
func IsRedlock(name string) bool {
	base := baseEngine(name)
	return base == "redlock" || base == EnginePerCommand || base == EngineSequential || base == EngineMutex
}

// needsRedis reports whether the engine talks to Redis masters.
func needsRedis(name string) bool { return baseEngine(name) != "nolock" }

// selfExtending reports whether the engine's leases extend themselves
// while held, whatever --extend says: rueidislock's do.
func selfExtending(name string) bool { return baseEngine(name) == engineRueidislock }

// newEngine builds one client of the named engine on masters, the ones it
// votes on (Config.voters).
func newEngine(ctx context.Context, name string, masters []string, cfg Config) (Engine, error) {
	switch baseEngine(name) {
	case "nolock":
		return newNolock(cfg.TTL), nil
	case "redlock", EngineSequential, EngineMutex:
		return newRedlock(ctx, masters, cfg, false)
	case EnginePerCommand:
		return newRedlock(ctx, masters, cfg, true)
	case engineRedsyncRueidis, engineRedsyncGoredis:
		return newRedsync(ctx, baseEngine(name), masters, cfg)
	case engineRueidislock:
		return newRueidislock(masters, cfg)
	case engineBsmRedislock:
		return newBsmRedislock(ctx, masters, cfg)
	}
	return nil, &ConfigError{Flag: "engine", Value: name, Reason: "unknown engine"}
}

// nolock is the control engine: it grants every request at once, without
// Redis, with a lease valid for the TTL. Under contention two workers hold
// the same resource, so a run with it must report violations; if it does
// not, the oracle is broken.
type nolock struct {
	ttl    time.Duration
	closed atomic.Bool
	// table is what its multi-resource leases hold (family.go).
	table nolockTable
}

func newNolock(ttl time.Duration) *nolock { return &nolock{ttl: ttl} }

// errNolockClosed is returned after Close, as a real engine would.
var errNolockClosed = errors.New("nolock: closed")

type nolockLease struct{ until time.Time }

func (l *nolockLease) ValidUntil() time.Time         { return l.until }
func (l *nolockLease) Release(context.Context) error { return nil }

func (e *nolock) TryLock(ctx context.Context, _ string) (Lease, error) {
	if e.closed.Load() {
		return nil, errNolockClosed
	}
	return &nolockLease{until: time.Now().Add(e.ttl)}, nil
}

func (e *nolock) Lock(ctx context.Context, resource string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.TryLock(ctx, resource)
}

func (e *nolock) Close() error {
	e.closed.Store(true)
	return nil
}
