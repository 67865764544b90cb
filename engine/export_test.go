package engine

// GateWaiting exposes the gate's queue length to the tests.
func (l *Locker) GateWaiting(resource string) int {
	if l.gate == nil {
		return 0
	}
	return l.gate.waiting(resource)
}

// Waiting exposes the number of Lock callers between attempts.
func (l *Locker) Waiting() int { return int(l.waiting.Load()) }
