package engine

// RWShares is how many read/write locks' shared entries the Locker keeps
// (see rwShare).
func (l *Locker) RWShares() int {
	l.shareMu.Lock()
	defer l.shareMu.Unlock()
	return len(l.shares)
}
