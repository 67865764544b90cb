package engine

import (
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// undo releases a failed attempt without waiting: the caller has its
// answer. Masters still to answer are released by Late when they do.
func (l *Locker) undo(le *Lease) {
	le.mu.Lock()
	le.failed = true
	nodes := le.toRelease()
	le.mu.Unlock()
	l.undoNodes(le, nodes)
}

// undoNodes deletes le's key, if it is still ours, on nodes. Where the
// acquire's connection broke, one delete is not
// enough: the SET may still sit in the broken connection's socket and run
// after a delete sent on a new connection, and the new connection may not
// open at all. Those nodes get a delete that is retried until a master
// answers it, and one more a little later for a SET that was behind it,
// within the key's lifetime.
func (l *Locker) undoNodes(le *Lease, nodes uint64) {
	if nodes == 0 {
		return
	}
	le.mu.Lock()
	unsure := nodes & le.broken
	le.mu.Unlock()
	if sure := nodes &^ unsure; sure != 0 {
		l.pool.Post(le.releaseCommand(sure, undoScript), classifyInt, nil)
	}
	for i := 0; unsure != 0; i++ {
		if unsure&(1<<i) != 0 {
			unsure &^= 1 << i
			u := &unsureUndo{le: le, node: i, until: time.Now().Add(l.cfg.TTL + l.cfg.ConnTimeout)}
			u.send()
		}
	}
}

// unsureUndo is the retried delete of one node's unsure acquire.
type unsureUndo struct {
	le    *Lease
	node  int
	until time.Time
	again bool // the master answered once; this is the later pass
}

func (u *unsureUndo) send() {
	u.le.l.pool.Post(u.le.releaseCommand(1<<u.node, undoScript), classifyInt, u)
}

// Late receives the delete's reply.
func (u *unsureUndo) Late(_ int, v multiplex.Vote) {
	l := u.le.l
	if l.closed.Load() || !time.Now().Before(u.until) {
		return
	}
	_, reply := rueidis.IsRedisErr(v.Err)
	answered := v.Outcome == multiplex.OK || v.Outcome == multiplex.Refused || (v.Outcome == multiplex.Failed && reply)
	switch {
	case answered && u.again:
		return
	case answered:
		u.again = true
		time.AfterFunc(min(l.cfg.ConnTimeout, l.cfg.TTL/2), u.send)
	default:
		time.AfterFunc(jitter(l.cfg.RetryDelayMin, l.cfg.RetryDelayMax)+l.cfg.NodeTimeout, u.send)
	}
}
