// Package chaos is the seeded nemesis soak behind redlock-bench chaos:
// several lock clients (package engines, every feature of the redlock
// engine on) lock a few hot resources while a schedule drawn from the
// seed injects faults into the masters and the clients, and the oracle
// (package check) judges every hold, fencing token, lost-lease signal
// and write to a fenced store. In model, the faults Redlock claims to
// survive; out of model, the ones it cannot, where fencing must reject
// every stale write.
package chaos
