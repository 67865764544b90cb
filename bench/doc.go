// Package bench is the load generator behind redlock-bench: the workload
// model (resources, key distribution, hold times, closed or open loop), the
// workers that drive a lock engine, the recorder that feeds the results
// package, and the safety oracle that checks mutual exclusion really held.
// It also starts local Redis masters when none are given.
//
// The entry point is Run(ctx, Config). Engines are behind the small Engine
// interface so that baselines (redsync, ...) can be measured the same way;
// "redlock" drives package engine and "nolock" is a control that grants
// every request, so that the oracle can be seen to fire. Config.Lock picks
// the member of the lock family each operation takes (a mutex, a
// semaphore's permit, one lease on K resources, a read or a write of a
// read/write lock; lock.go, family.go), and the oracle judges each by its
// own rule.
//
// bench may import engine, internal/redisproc, results and bench/fault
// (the --fault injector, wired in faults.go). It must not import cmd/...,
// and engine, multiplex and results must never import it.
// It keeps no package-level state: everything lives in values Run owns.
package bench
