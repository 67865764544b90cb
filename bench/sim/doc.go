// Package sim is a deterministic simulation harness: the engine's real
// code (package engine, unmodified) against simulated Redis masters and a
// simulated network, in the virtual time of a testing/synctest bubble,
// every choice drawn from one seed, with checkers over the recorded
// history. It searches for schedules that break the engine; the tests
// against real masters confirm what it finds. docs/simulation.md says how
// to run it, what it models and what each checker states.
//
// It owns:
//   - the masters (master.go, store.go, lua.go, resp.go): a store with
//     Redis's semantics for the commands the engine sends (strings,
//     sorted sets, expiry at absolute deadlines on the master's own
//     clock, scripts on one gopher-lua interpreter per master, pub/sub,
//     INFO with run_id, uptime and server_time_usec), served in RESP2 or
//     RESP3 by one goroutine per master in the order commands arrive; each
//     master has its own clock (offset, drift, jumps) and faults: restart
//     with amnesia, pause (SIGSTOP-like), partitions that hang or refuse,
//     slowness; and it logs every change of every key, for the checkers;
//   - the network (net.go): in-memory connections, each way in order with
//     delays drawn per connection from the seed; connections broken with
//     commands in flight (delivered late, or never), one or all of a
//     master's or a client's, at once or right after their next write;
//     clients frozen (a GC pause) or stalled;
//   - the nemesis (nemesis.go): a fault schedule drawn from the seed, in
//     one of five profiles, within the model (a minority of masters
//     faulted at a time, clocks that drift within the DriftFactor) unless
//     asked otherwise;
//   - the workload (sim.go): several Lockers with every feature on
//     (fencing, but for c0 in a third of the seeds; auto-extension with a
//     cap, the gate and hand-offs, release notifications and waiter
//     queues, coalescing, lingering, Config.Rand seeded) whose workers
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
// # Why its own store, not miniredis
//
// Phase 1 ran miniredis v2.40.0. It is replaced because the simulation
// needs what miniredis cannot give from outside: one interpreter per
// master for every script call (miniredis builds one per call, two thirds
// of the CPU time; its scripts' redis.call reaches its commands only
// through a connection context it keeps unexported); commands run one at
// a time in arrival order by one goroutine (miniredis serves each
// connection on goroutines of its own, so the scheduler ordered two
// clients' commands); absolute expiry deadlines, as Redis keeps them
// (miniredis counts TTLs down, so a clock jumping back does not lengthen
// keys' lives); and a log of every key change with its deadline, for
// checker 3. TestStoreMatchesRedis holds the store to a real
// redis-server, reply for reply, over the engine's commands and scripts.
// What it leaves out: other commands and types, maxmemory (OOM
// refusals), replication, and the background expiry of keys nobody
// touches (no command can tell).
//
// # Determinism
//
// Every choice of the simulation derives from the seed: the masters'
// clocks and run_ids, each connection's delays (a stream per client,
// master and connection number), each worker's operations (a stream per
// worker), the Lockers' random delays (Config.Rand), the fault schedule;
// crypto/rand, which makes lease values and waiter ids, is seeded by the
// tests (cryptotest.SetGlobalRandom), and each seed runs at GOMAXPROCS=1.
// What is not: the order in which the Go scheduler runs goroutines ready
// at one virtual instant (select's random choice among ready cases
// included), which decides, among others, the order of commands on a
// shared connection, and so which delay each one draws; and map
// iteration order in the engine. So a seed does not always replay its
// history: TestDeterminism measures how often it does.
package sim
