package engine

// SemGateWaiting is the number of this Locker's goroutines queued at the
// semaphore's gate behind the one that waits on the masters.
func (l *Locker) SemGateWaiting(s *Semaphore) int {
	if l.semGate == nil {
		return 0
	}
	return l.semGate.waiting(s.base)
}
