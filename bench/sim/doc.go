// Package sim is a deterministic simulation harness: the engine's real
// code (package engine, unmodified) against simulated Redis masters and a
// simulated network, in the virtual time of a testing/synctest bubble,
// every choice drawn from one seed, with checkers over the recorded
// history. It searches for schedules that break the engine; the tests
// against real masters confirm what it finds.
//
// It owns:
//   - the network (net.go): in-memory connections, each way in order with
//     delays drawn per connection from the seed, and faults: partitions
//     that hang or refuse, connections broken with commands in flight
//     (delivered late, or never), slowness;
//   - the masters (master.go): miniredis servers, each with its own
//     run_id, uptime, clock (offset, drift rate, jumps) and faults:
//     restart with amnesia, pause (SIGSTOP-like);
//   - the workload (sim.go): several Lockers with every feature on
//     (fencing, auto-extension with a cap, the gate and hand-offs, release
//     notifications and waiter queues, coalescing, lingering) whose
//     workers Lock (with timeouts), TryLock, hold, Extend and Release a
//     few resources;
//   - the history (history.go) and the checkers (check.go).
//
// It runs only inside a synctest bubble, so only under go test: Run must
// be called from synctest.Test, and every goroutine it starts ends before
// it returns. It imports no real network: a goroutine blocked on a socket
// is not durably blocked, and would stop virtual time.
//
// # What miniredis lacks, and how it is covered
//
// miniredis v2.40.0 runs the engine's Lua scripts (gopher-lua: redis.call
// and pcall, error_reply, status replies from TYPE, string.match and
// string.sub), SET NX GET PX, ZADD NX, ZPOPMIN, ZRANGE, PEXPIRE, APPEND,
// PUBLISH from scripts, SCRIPT LOAD, EVALSHA and NOSCRIPT, HELLO 3 with
// RESP3 push messages for SUBSCRIBE, and serves connections handed to it
// (ServeConn). What it lacks:
//   - INFO has no server or replication section (no redis_version,
//     run_id, uptime_in_seconds, server_time_usec or role, which the
//     engine's restart check and clock check read): Master answers INFO
//     itself, from a pre-command hook.
//   - Its clock is time.Now(), the same for every server: Master sets
//     each server's time (SetTime, with ClockTTL) to its own clock
//     whenever it reads commands off a connection, which is the instant
//     they run, since virtual time stands still while anything in the
//     bubble can run. TIME, key expiry and server_time_usec follow it.
//   - TTLs count down rather than being absolute expiry times, so a clock
//     jump backward does not lengthen keys' lives as it does on Redis.
//   - Keys expire only when touched (lazily); Redis also expires them in
//     the background. Nothing the engine does can tell.
//   - No restart: a restart is a new miniredis at the same address, its
//     connections broken, with a new run_id drawn from the seed.
//   - No maxmemory (OOM refusals) and no replication: not simulated yet.
//   - Each script call builds a new Lua interpreter: two thirds of the
//     simulation's CPU time.
//
// # The engine's sync.Mutex and virtual time
//
// Virtual time advances only once every goroutine of the bubble is durably
// blocked, and a goroutine waiting for a sync.Mutex is not. The engine
// holds Lease.opMu (a sync.Mutex) across an Extend's round trip: a Release
// or Extend called while an auto-extension of the same lease is on the
// network waits for the mutex, virtual time stops, the round trip never
// ends, and the bubble stalls for good. The workers therefore call
// Release and Extend only in windows where no auto-extension runs (see
// autoextend.go), which Config.UnguardedLeaseOps turns off once the
// engine's lock is one a bubble can wait on. The tests report a stalled
// seed, with the goroutines that are not durably blocked, after
// -sim.stall of wall time.
//
// # Determinism
//
// Every choice of the simulation derives from the seed: the masters'
// clocks and run_ids, each connection's delays (a stream per client,
// master and connection number), each worker's operations (a stream per
// worker); crypto/rand, which makes lease values and waiter ids, is seeded
// by the tests (cryptotest.SetGlobalRandom). What is not: the engine's
// retry and fallback delays (math/rand/v2's global functions, which
// cannot be seeded), the order in which the Go scheduler runs goroutines
// ready at one virtual instant (which decides, among others, the order of
// commands on a shared connection, and so which delay each one draws, and
// the order in which crypto/rand's stream is consumed), and map iteration
// order. So a seed does not replay its history exactly: TestDeterminism
// measures how often it does and how long two runs agree.
package sim
