// Package scenario holds the scripted, self-checking reproductions of the
// Redlock failure modes behind `redlock-bench scenario NAME`: a master that
// restarts with amnesia, a minority or a majority of masters down, a slow
// master, a holder paused past its TTL, a client partitioned from a
// majority, a master that answers with errors (OOM), and masters replaced
// by replicas that lack a lock (a promoted replica, a cluster shard's, a
// Sentinel failover's).
//
// Each scenario starts its own masters (real redis-server processes, on
// free 127.0.0.1 ports, through internal/redisproc) and, where it acts on
// the wire, in-process proxies (bench/fault), drives package engine against
// them, and stops all of it on every path, context cancellation included.
// Nothing that decides lock safety is mocked.
//
// Every scenario is split in two, so that its verdict can be trusted:
//
//   - a driver, which runs the script against real masters and collects an
//     observation struct (events, counts, latencies); and
//   - a pure judge over that observation, which says whether what was
//     observed is what the scenario expects for the given Options.
//
// The judges are unit-tested on synthetic observations, including ones on
// which they must fail: a check that cannot fail is worthless. "Passed"
// means "observed what was expected", which is not always "safe": with the
// quarantine off, restart-amnesia passes only if the oracle does see a
// double grant, and paused-holder without fencing passes only if the stale
// write does go through. Those runs document the weaknesses the defaults
// remove.
//
// The package owns the scenario table, the Result written to scenario.json
// and scenario.txt, a small overlap oracle and a fenced resource. It
// imports engine, multiplex (for vote outcomes), internal/redisproc and
// bench/fault. engine, multiplex and results must never import it, nor
// does it import the rest of bench: the CLI wires it in.
package scenario
