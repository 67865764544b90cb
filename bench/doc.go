// Package bench is the load generator behind redlock-bench: the workload
// model (resources, key distribution, hold times, closed or open loop), the
// workers, the recorder that feeds the results package, and the runner's
// view of the safety oracle (package check), which checks that mutual
// exclusion really held. Run measures one load, RunSweep a series that
// varies one parameter, RunCompare several engines alternating on one load.
//
// Every driver takes its locks through one client, package engines: a
// Spec parsed once from the flags (embedded in Config), the only builder of
// the engine's configuration, and Client.Take, the one switch over the
// lock kinds and the baselines. The workers read an operation's shape from
// the lock (engines.Lock: how many resources, how often it reads) and need
// no switch of their own. The chaos soak (package chaos) drives the same
// client; package masters starts, probes and cleans up the masters.
//
// bench may import engines, masters, check, fault, results and
// internal/redisproc. It must not import cmd/..., and engine, multiplex
// and results must never import it. It keeps no package-level state:
// everything lives in values Run owns.
package bench
