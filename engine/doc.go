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
// Errors can be told apart with errors.Is: ErrNotAcquired (contention),
// ErrNoQuorum (too many masters failed), ErrNotHeld, ErrLeaseExpired,
// ErrWrongType, ErrClosed; *VotesError carries the per-node outcomes and
// *NodeError each node's cause. Context errors are wrapped, never replaced.
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
// telemetry dependency. Config.Username, Password and TLS reach every
// connection to the masters.
//
// What is and is not guaranteed is set out in the repository README: the
// masters must be independent (no replica failover behind an address), and
// the lease's validity assumes bounded clock drift between this process and
// the masters.
//
// engine imports only multiplex, rueidis and the standard library; it never
// imports bench or results.
package engine
