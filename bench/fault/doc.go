// Package fault injects faults into the masters of a benchmark run, so that
// their effect on the lock shows in the results.
//
// It owns three things:
//
//   - the --fault schedule: Parse reads "ACTION:NODE[=ARG]@AT[+FOR],..." and
//     Schedule.Validate checks it against the run's masters;
//   - Proxies: in-process toxiproxy proxies, one in front of each master
//     that redlock-bench started, through which slow (latency) and cut (a
//     partition that drops traffic) act on the wire;
//   - the Injector, which applies the schedule in time, lifts every fault
//     when its window ends or the run stops, and returns the log of results.FaultEvent that
//     goes into summary.json and the per-second intervals.
//
// Nodes are 0-based, in the order of --masters (or of the masters started
// locally). Process faults (kill, restart, pause) and proxy faults (slow,
// cut) exist only for masters redlock-bench started itself; on masters given
// with --masters only stall (DEBUG SLEEP, or CLIENT PAUSE where DEBUG is
// disabled) is offered, and Validate rejects the rest with a message that
// says so.
//
// Nothing here may outlive its owner: Run returns only after every fault it
// applied has been lifted (no process left stopped, no proxy left cut), and
// Proxies.Close stops every listener and proxied connection. The masters'
// processes belong to whoever started them.
//
// fault imports toxiproxy, zerolog (to silence toxiproxy's logger), the
// standard library, and results for the event record it logs. It must not
// import engine, multiplex or the rest of bench: it acts on masters, not on
// locks, and it sees processes only through the Process interface, which
// *redisproc.Node (internal/redisproc) satisfies.
package fault
