package bench

import (
	"github.com/redlock-bench/redlock/bench/fault"
	"github.com/redlock-bench/redlock/engine"
)

// Limits of every size a flag sets, checked by the Validate methods before
// anything starts (no master, no directory), so that a typo such as
// --workers 100000000 is refused with the limit named instead of running
// the process out of memory after the masters started.
//
// The memory limits come from the resident set size of whole runs on the
// machines this project runs on (2 CPUs, 24 GB), measured with
//
//	/usr/bin/time -f %M redlock-bench run --workers N --duration 3s
//
// and the same with --clients N (1000 workers) and with --resources N
// (--engine nolock, 8 workers): each step's growth divided by the step.
// Each limit keeps its part of a run near a gigabyte.
const (
	// MaxWorkers bounds --workers. A worker costs about 12 KiB (RSS 248 MB
	// at 10,000 workers, 609 MB at 50,000, 1.17 GB at 100,000): its
	// goroutine's stack, its record buffer, its counters. A million took
	// 7.7 GB and measured nothing; on 2 CPUs 10,000 already cut the
	// throughput tenfold.
	MaxWorkers = 100_000
	// WorkersPerCPU is how many workers a CPU serves before their
	// attempts queue for it past the default node timeout: a run with
	// more is warned at start, and told so when it measured nothing.
	// 100,000 workers on 2 CPUs acquired 0.6% of their attempts, their
	// median acquire taking 3.2 s; 10,000 already cut the throughput
	// tenfold.
	WorkersPerCPU = 1000
	// MaxClients bounds --clients. A client is an engine with its own
	// connections to every master, about 2.2 MiB (115 MB at 1 client,
	// 333 MB at 100, 1.15 GB at 500, where 71% of the attempts timed out).
	MaxClients = 256
	// MaxResources bounds --resources. A resource costs about 130 bytes:
	// its name and the oracle's slot (208 MB at 1,000,000, 670 MB at
	// 5,000,000; at 10,000,000, 1.16 GB, and the garbage collector's scans
	// cut the throughput from 500,000/s to 31/s).
	MaxResources = 5_000_000
	// MaxRate bounds --rate, in acquisitions/s: ten times what the fastest
	// engine here, nolock, does (about 850,000/s; redlock about 30,000/s).
	// Above what the engine does, an open loop only builds a backlog.
	MaxRate = 10_000_000
	// MaxOps bounds --ops: over 9 hours at redlock's 30,000/s.
	MaxOps = 1_000_000_000
	// MaxTime bounds every duration a flag sets (--duration, --warmup,
	// --ttl, --wait-timeout, --hold, how far ahead --start-at is, chaos's
	// --duration and --jump), as it bounds every time of a --fault
	// schedule.
	MaxTime = fault.MaxDuration
	// MaxKeyPrefix bounds --key-prefix, in bytes: every resource's name
	// holds it, so a long prefix times MaxResources would be gigabytes.
	MaxKeyPrefix = 64
	// MaxMasters bounds --masters and --local-masters for every engine, as
	// the redlock engine bounds its own (engine.MaxMasters): each local
	// master is a redis-server process.
	MaxMasters = engine.MaxMasters
	// MaxFaults bounds the items of a --fault schedule: each is a
	// goroutine and a timer, and the overlap check is quadratic.
	MaxFaults = 100
	// MaxSemaphoreSlots bounds --resources × --clients × (P+4) with --lock
	// semaphore:P (and chaos's resources × clients × (P+4)): each client
	// keeps a handle per semaphore it uses, which holds a key name per
	// permit: about 50 bytes per permit and 200 per handle (263 bytes at
	// P=1, 599 at 8, 3,415 at 64: the bytes allocated for 10,000 handles,
	// 2026-11-26), so that this many take about 0.4 GB whatever P.
	MaxSemaphoreSlots = 8_000_000
	// MaxRWHandles bounds --resources × --clients with --lock rw:F: each client keeps a handle per
	// read/write lock it uses, 222 bytes with its slot (the bytes
	// allocated for 10,000 handles, 2026-11-26), so that this many take
	// about 0.4 GB, as MaxSemaphoreSlots do.
	MaxRWHandles = 2_000_000
	// MaxCompareRounds bounds compare's --rounds.
	MaxCompareRounds = 100
	// MaxCeilingRequests bounds compare's --limit-requests: each
	// redis-benchmark test sends this many to every master (a few seconds
	// at a million pipelined requests a second).
	MaxCeilingRequests = 10_000_000
)
