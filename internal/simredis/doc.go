// Package simredis is simulated Redis for tests in virtual time: masters,
// Redis Clusters and the network between them and the clients, every
// choice drawn from a seed. bench/sim's simulation runs the engine
// against them, and the engine's own tests can too (the engine imports
// nothing of it). docs/simulation.md says what they model.
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
//     slowness; and it logs every change of every key, the leaves of the
//     engine's waiter queues and its acquires of several resources, for
//     bench/sim's checkers;
//   - the network (net.go): in-memory connections, each way in order with
//     delays drawn per connection from the seed; connections broken with
//     commands in flight (delivered late, or never), one or all of a
//     master's or a client's, at once or right after their next write;
//     clients frozen (a GC pause) or stalled;
//   - the clusters (cluster.go, migration.go): shards of masters with
//     CLUSTER SLOTS and NODES, MOVED and CROSSSLOT, sharded pub/sub,
//     failovers to a replica whose copy lags, and slot migrations with
//     ASK, ASKING and TRYAGAIN.
//
// It runs only inside a testing/synctest bubble: NewNetwork, NewMaster,
// NewMasters and NewCluster must be called from synctest.Test, and the
// masters closed before it returns. It imports no real network: a goroutine
// blocked on a socket is not durably blocked, and would stop virtual
// time. A frozen client's goroutines still run (its timers fire on
// time); only its connections wait.
//
// # Why its own store, not miniredis
//
// bench/sim's first phase ran miniredis v2.40.0. It is replaced because
// the simulation needs what miniredis cannot give from outside: one
// interpreter per master for every script call (miniredis builds one per
// call, two thirds of the CPU time; its scripts' redis.call reaches its
// commands only through a connection context it keeps unexported);
// commands run one at a time in arrival order by one goroutine (miniredis
// serves each connection on goroutines of its own, so the scheduler
// ordered two clients' commands); absolute expiry deadlines, as Redis
// keeps them (miniredis counts TTLs down, so a clock jumping back does not
// lengthen keys' lives); and a log of every key change with its deadline,
// for the checkers. TestStoreMatchesRedis holds the store to a real
// redis-server, reply for reply, over the engine's commands and scripts.
//
// What it leaves out of Redis: other commands and types, maxmemory (OOM
// refusals), replication of a master given as such (a cluster's replica
// holds nothing until its failover), and the background expiry of keys
// nobody touches (no command can tell).
package simredis
