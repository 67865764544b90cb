package engines

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/redlock-bench/redlock/engine"
)

// The rueidislock baseline: github.com/redis/rueidis/rueidislock, the lock
// that ships with the client our engine uses, driven by the same workers,
// recorder and oracle as every engine.
//
// Its shape. A rueidislock Locker has one rueidis client for every key: a
// lock is KeyMajority of 2*KeyMajority-1 keys (prefix:0:name,
// prefix:1:name, ...), set one after the other through that client. Given
// several addresses, rueidis takes them for the seed nodes of a Redis
// Cluster, whose slots spread those keys over its shards; independent
// masters answer no CLUSTER command, and the client does not start
// (TestRueidislockNeedsOneMasterOrACluster). So it cannot vote over N
// independent masters: here it runs on one, the first, with KeyMajority 1
// as its README says for one Redis (one key; with the default 2, three
// keys on one master buy no safety). When the first vote is a Redis
// Cluster (compare on clusters), it runs on that cluster in its own model:
// one cluster client, the default KeyMajority of 2, each key on the shard
// of its slot.
//
// Everything else is rueidislock's default: client-side caching on (an
// invalidation wakes the waiters of a released lock and cancels a lock
// whose key was lost), one auto-pipelined connection (it sets
// PipelineMultiplex -1 itself), 20ms per key attempt (TryNextAfter), and a
// lock that extends its key every KeyValidity/2 while held. KeyValidity is
// the run's --ttl.
//
// A rueidislock lock is a context, held until its cancel is called or
// cancelled when its key cannot be kept. The adapter:
//
//   - takes the lock under a context detached from the caller's: a lock
//     lives only as long as the context it was taken with (and its key's
//     validity is cut to that context's deadline), while a bench's acquire
//     context ends when the acquire returns. The wait still ends with the
//     caller's context.
//   - gives a live validity (SelfExtending): while the lock's context
//     lives the holder may trust it, so ValidUntil stays a TTL ahead of
//     now; once cancelled, the validity ended when it was. The oracle reads
//     it whenever another holder begins and when the hold ends, so it
//     checks rueidislock's own promise: nobody gets the lock before this
//     holder's context is cancelled.
//   - releases with the lock's cancel, which deletes the key and waits for
//     it (rueidislock bounds that by the key's validity, and reports no
//     error); a lock whose context was cancelled before is lost.

// rueidislockTryNextAfter is rueidislock's default bound on one key
// attempt (TryNextAfter), set explicitly so that an error can name it. A
// node timeout (Spec.NodeTimeout, --node-timeout) replaces it: the bound
// on one attempt's wait for the master.
const rueidislockTryNextAfter = 20 * time.Millisecond

// rueidislockEngine adapts a rueidislock.Locker.
type rueidislockEngine struct {
	l   rueidislock.Locker
	ttl time.Duration
	// tryNextAfter is the Locker's TryNextAfter.
	tryNextAfter time.Duration
}

// tryNextAfter is spec's bound on one key attempt: its node timeout, or
// rueidislock's default.
func tryNextAfter(spec Spec) time.Duration {
	if spec.NodeTimeout > 0 {
		return spec.NodeTimeout
	}
	return rueidislockTryNextAfter
}

// newRueidislock builds one Locker on the one vote it runs on: a master,
// or a Redis Cluster (given by its seeds). It fails, naming
// the addresses, if they do not answer.
func newRueidislock(spec Spec, v Votes) (*rueidislockEngine, error) {
	masters := v.Masters
	cluster := len(masters) == 0 && len(v.Clusters) == 1
	if cluster {
		masters = v.Clusters[0]
	} else if len(masters) != 1 || len(v.Clusters) > 0 {
		return nil, fmt.Errorf("%s: runs on one master or one cluster, got %d masters and %d clusters", Rueidislock, len(masters), len(v.Clusters))
	}
	l, err := rueidislock.NewLocker(rueidislockOption(masters, cluster, spec))
	if err != nil {
		return nil, fmt.Errorf("%s: connect %s: %w", Rueidislock, strings.Join(masters, ","), err)
	}
	return &rueidislockEngine{l: l, ttl: spec.TTL, tryNextAfter: tryNextAfter(spec)}, nil
}

// rueidislockClusterMajority is KeyMajority on a Redis Cluster:
// rueidislock's default, its own model there. A lock is 2 of 3 keys
// (prefix:0:name, prefix:1:name, prefix:2:name), whose slots put them on
// shards of their own as the cluster's slots fall.
const rueidislockClusterMajority = 2

// rueidislockOption is the Locker's configuration on masters: one master,
// or a cluster's seeds.
func rueidislockOption(masters []string, cluster bool, spec Spec) rueidislock.LockerOption {
	majority := int32(1)
	if cluster {
		majority = rueidislockClusterMajority
	}
	return rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: masters,
			Username: spec.Conn.Username, Password: spec.Conn.Password, TLSConfig: spec.Conn.TLS},
		KeyPrefix:    rueidislockPrefix(spec.KeyPrefix),
		KeyValidity:  spec.TTL,
		TryNextAfter: tryNextAfter(spec),
		KeyMajority:  majority,
		// NoLoopTracking stays off, though the README suggests it: with it
		// the client hears no invalidation of its own DEL, and after a key
		// attempt that timed out (its SET landed late, then its clean-up
		// deleted it) the waiters of that key sleep until their context
		// ends (TestRueidislockWaitersWakeAfterATimedOutAttempt).
	}
}

// rueidislockPrefix is the KeyPrefix that puts rueidislock's keys,
// "<KeyPrefix>:0:<name>", under the run's prefix, where the clean-up of a
// run on --masters finds them. An empty run prefix keeps rueidislock's own.
func rueidislockPrefix(runPrefix string) string {
	if p := strings.TrimSuffix(runPrefix, ":"); p != "" {
		return p
	}
	return runPrefix
}

func (e *rueidislockEngine) TryLock(ctx context.Context, resource string) (Lease, error) {
	return e.take(ctx, resource, e.l.TryWithContext)
}

// Lock is rueidislock's WithContext: it tries, then waits for an
// invalidation of the key (a release, an expiry) before it tries again.
func (e *rueidislockEngine) Lock(ctx context.Context, resource string) (Lease, error) {
	return e.take(ctx, resource, e.l.WithContext)
}

// take acquires through try under a context detached from ctx, which
// still ends the acquire while it lasts.
func (e *rueidislockEngine) take(ctx context.Context, resource string,
	try func(context.Context, string) (context.Context, context.CancelFunc, error)) (Lease, error) {
	parent, detach := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, detach)
	lockCtx, cancel, err := try(parent, resource)
	if !stop() && err == nil {
		// ctx ended as the lock was taken: the lock went with it.
		cancel()
		err = ctx.Err()
	}
	if err != nil {
		detach()
		return nil, e.acquireError(ctx, err)
	}
	l := &rueidislockLease{e: e, ctx: lockCtx, cancel: cancel, detach: detach}
	context.AfterFunc(lockCtx, l.end)
	return l, nil
}

func (e *rueidislockEngine) Close() error {
	e.l.Close()
	return nil
}

// acquireError labels a failed acquire: the key held by another is
// contention; the master failing to answer, in time (TryNextAfter) or at
// all, is an outage of the one master, as our engine labels a vote its
// masters did not answer. A closed Locker is neither.
func (e *rueidislockEngine) acquireError(ctx context.Context, err error) error {
	be := &baselineError{engine: Rueidislock.String(), err: err, ctxErr: ctx.Err()}
	switch {
	case be.ctxErr != nil:
		// cut short: the context's error says why
	case errors.Is(err, rueidislock.ErrNotLocked):
		be.category = engine.ErrNotAcquired
	case errors.Is(err, rueidislock.ErrLockerClosed):
	case errors.Is(err, context.DeadlineExceeded):
		be.category = engine.ErrNoQuorum
		be.err = fmt.Errorf("no answer within a key attempt's %s (TryNextAfter): %w", e.tryNextAfter, err)
	default:
		be.category = engine.ErrNoQuorum
	}
	return be
}

// rueidislockLease is one held rueidislock lock.
type rueidislockLease struct {
	e      *rueidislockEngine
	ctx    context.Context
	cancel context.CancelFunc // rueidislock's: cancel, delete the key, wait
	detach context.CancelFunc
	// ended is when the lock's context was seen cancelled: released, or
	// lost (its key deleted, expired or unreachable).
	ended atomic.Pointer[time.Time]
}

func (*rueidislockLease) SelfExtending() {}

// end records when the lock's context ended; the first caller wins.
func (l *rueidislockLease) end() {
	now := time.Now()
	l.ended.CompareAndSwap(nil, &now)
}

// ValidUntil is a TTL ahead while the lock's context lives, and when it
// was cancelled once it is.
func (l *rueidislockLease) ValidUntil() time.Time {
	if l.ctx.Err() != nil {
		l.end()
		return *l.ended.Load()
	}
	return time.Now().Add(l.e.ttl)
}

// Release cancels the lock, which deletes its key. A lock whose context
// was cancelled before is lost.
func (l *rueidislockLease) Release(context.Context) error {
	lost := l.ctx.Err() != nil
	l.cancel()
	l.detach()
	if lost {
		return &baselineError{engine: Rueidislock.String(), category: engine.ErrNotHeld,
			err: errors.New("the lock's context was cancelled before its release: its key was lost")}
	}
	return nil
}
