package bench

import (
	"context"
	"errors"
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

// EngineNames lists the engines Run knows, for --engine. The redsync-*
// baselines are in redsync.go.
func EngineNames() []string {
	return []string{"redlock", EnginePerCommand, "nolock", engineRedsyncRueidis, engineRedsyncGoredis}
}

// IsRedlock reports whether name is the redlock engine, in any variant:
// its features (gate, notify, extend, fencing) apply.
func IsRedlock(name string) bool { return name == "redlock" || name == EnginePerCommand }

func knownEngine(name string) bool {
	for _, n := range EngineNames() {
		if n == name {
			return true
		}
	}
	return false
}

// needsRedis reports whether the engine talks to Redis masters.
func needsRedis(name string) bool { return name != "nolock" }

// newEngine builds one client of the named engine.
func newEngine(ctx context.Context, name string, masters []string, cfg Config) (Engine, error) {
	switch name {
	case "nolock":
		return newNolock(cfg.TTL), nil
	case "redlock":
		return newRedlock(ctx, masters, cfg, false)
	case EnginePerCommand:
		return newRedlock(ctx, masters, cfg, true)
	case engineRedsyncRueidis, engineRedsyncGoredis:
		return newRedsync(ctx, name, masters, cfg)
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
