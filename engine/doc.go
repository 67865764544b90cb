// Package engine is a Redlock distributed lock over N independent Redis
// masters, built for latency-sensitive callers.
//
// A Locker acquires a resource by sending SET key value NX PX ttl to every
// master at once (through package multiplex) and holds it iff a quorum of
// N/2+1 said yes while the elapsed time, measured on the monotonic clock,
// stayed below the TTL. The Lease it returns is valid for
// TTL − elapsed − drift, where drift = TTL×DriftFactor + 2 ms. A failed
// attempt is released on every master, including the ones that timed out,
// and a yes that arrives after the attempt was decided is released as soon
// as it arrives.
//
// TryLockAll and LockAll take several resources under one lease, all or
// nothing: on each master one script sets every key if none is held and
// none otherwise, so a quorum of yeses is a quorum for each resource, and
// an attempt never holds some while it waits for others, so there is no
// deadlock whatever order callers name them in (multi.go).
//
// Errors can be told apart with errors.Is: ErrNotAcquired (contention),
// ErrNoQuorum (too many masters failed), ErrNotHeld, ErrLeaseExpired,
// ErrLockLost, ErrReleased, ErrWrongType, ErrWrongKind, ErrClosed,
// ErrPermitCount (and, for names, ErrEmptyResource, ErrReservedResource,
// ErrNoResources, ErrTooManyResources); *VotesError carries the per-node outcomes and
// *NodeError each node's cause. Context errors are wrapped, never
// replaced. Every error is one line that starts "engine: " once.
//
// Waiters of one Locker queue at an in-process gate; waiters of different
// Lockers (processes) queue by ticket on the masters, and a release gives
// the turn to the first of them only. The queue orders wake-ups; SET NX on
// a quorum alone decides who holds the lock.
//
// Config.Observer receives an event per acquire, release, extension, wait,
// hand-off, lost lease and node state change; the module
// github.com/redlock-bench/redlock/engine/otelredlock turns them into
// OpenTelemetry metrics and spans, so that engine itself needs no
// telemetry dependency. Config.Conn.Username, Password and TLS reach every
// connection to the masters.
//
// The files follow the paths a reader looks for: locker.go (New, Close),
// acquire.go (TryLock, one attempt), wait.go (Lock's wait between
// attempts), gate.go (the in-process queue), queue.go (the masters'
// waiter queue), notify.go (release notifications), lease.go (a lease's
// validity and its lost-lock signal), tracking.go (a lost lease noticed
// at once, through the masters' client-side-caching invalidations),
// remotevalidity.go (RemoteValidity: the masters asked whether a lease
// still holds), release.go (Release, hand-off, and
// the undo of failed attempts), extend.go (Extend, auto-extension),
// multi.go (TryLockAll, LockAll: a lease on several resources),
// fence.go (fencing tokens), semaphore.go (Semaphore: P permits held as
// P slot locks, each on a quorum), rwmutex.go (RWMutex: readers and a
// writer in one sorted set per master, writers first), keys.go (the
// engine's keys on the masters), errors.go, config.go, observer.go. Each Lua script sits
// beside the code that sends it, and names its arguments in its first
// line.
//
// What is and is not guaranteed is set out in the repository's
// docs/guarantees.md: the masters must be independent (no replica
// failover behind an address), and the lease's validity assumes bounded
// clock drift between this process and the masters.
//
// engine imports only multiplex, rueidis and the standard library (and,
// in test builds with the redlock_faults tag, internal/mutation: switches
// that undo one fix each); it never imports bench or results.
package engine
