// Package engines is the one lock client of every redlock-bench driver
// (run, sweep, compare, chaos). A Spec, parsed once from the flags, names
// the engine (the redlock engine in one of its variants, a baseline:
// redsync over rueidis or go-redis, rueidislock, bsm/redislock, or the
// nolock control), the lock each operation takes (a mutex, a semaphore's
// permit, one lease on K resources, a read or a write of a read/write
// lock) and every setting of the engine a flag sets. Spec.EngineConfig is
// the only place the bench's drivers build an engine.Config, and Open the
// only place they connect a client; Client.Take is the one switch over
// the lock kinds.
//
// Adding a lock kind touches this package (Lock, Take, the
// implementations that have it), the oracle (bench/check) and the
// simulator (bench/sim); the drivers read an operation's shape from Lock
// (Size, Reads, Holders) and need no change.
//
// engines imports engine, the baselines and results (for the masters'
// state it reports); it must not import the drivers.
package engines
