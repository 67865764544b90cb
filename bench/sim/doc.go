// Package sim is a deterministic simulation harness: the engine's real
// code (package engine, unmodified) against simulated Redis masters and a
// simulated network, in the virtual time of a testing/synctest bubble,
// every choice drawn from one seed, with checkers over the recorded
// history. It searches for schedules that break the engine; the tests
// against real masters confirm what it finds. docs/simulation.md says how
// to run it, what it models and what each checker states.
//
// It owns the workload, the nemesis, the history and the checkers; the
// simulated masters, clusters and network are internal/simredis's, which
// the engine's own tests use too. In this package:
//   - the nemesis (nemesis.go): a fault schedule drawn from the seed, in
//     one of five profiles, within the model (a minority of masters
//     faulted at a time, clocks that drift within the DriftFactor) unless
//     asked otherwise;
//   - the votes (vote.go): each a master or a cluster, the nemesis's
//     faults inside clusters (failovers, slot migrations), and a
//     cluster's logs merged over its nodes with the engine's slot tags
//     taken off the keys;
//   - the workload (sim.go): several Lockers with every feature on
//     (fencing, but for c0 in a third of the seeds; auto-extension with a
//     cap, the gate and hand-offs, release notifications and waiter
//     queues, coalescing, lingering, Config.Wait.Rand seeded) whose workers
//     Lock (with timeouts) or TryLock a few resources, one or several at
//     once (LockAll, TryLockAll), or take a semaphore's permits (Acquire,
//     TryAcquire), in shares the seed draws; hold, Extend (shorter, then
//     longer) and Release them, and write to a fenced store (fenced.go);
//     Lockers closed and replaced, waits cancelled, holders paused past
//     their TTL;
//   - the history (history.go) and the checkers (check.go): mutual
//     exclusion per resource and semaphore slot, permits per semaphore,
//     all or nothing for sets, and hand-offs; fencing order and the
//     fenced store; trust past the keys' expiry on a quorum; liveness
//     (waiters, turns, leftovers, Close); and honest errors.
//
// It runs only inside a synctest bubble, so only under go test: Run must
// be called from synctest.Test, and every goroutine it starts ends before
// it returns. It imports no real network: a goroutine blocked on a socket
// is not durably blocked, and would stop virtual time.
//
// # Determinism
//
// Every choice of the simulation derives from the seed: the masters'
// clocks and run_ids, each connection's delays (a stream per client,
// master and connection number), each worker's operations (a stream per
// worker), the Lockers' random delays (Config.Wait.Rand), the fault schedule;
// crypto/rand, which makes lease values and waiter ids, is seeded by the
// tests (cryptotest.SetGlobalRandom), and each seed runs at GOMAXPROCS=1.
// What is not: the order in which the Go scheduler runs goroutines ready
// at one virtual instant (select's random choice among ready cases
// included), which decides, among others, the order of commands on a
// shared connection, and so which delay each one draws; and map
// iteration order in the engine. So a seed does not always replay its
// history: TestDeterminism measures how often it does.
package sim
