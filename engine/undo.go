package engine

import (
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// undo releases a failed attempt without waiting: the caller has its
// answer. Masters still to answer are released by Lease.late when they do.
func (l *Locker) undo(le *Lease) {
	le.mu.Lock()
	le.failed = true
	nodes := le.toRelease()
	le.mu.Unlock()
	l.undoNodes(le, nodes)
}

// undoNodes deletes le's key, if it is still ours, on nodes, without
// waiting. A delete that does not reach its master (its connection broke,
// or none could be opened) is sent again until one is answered, within the
// key's lifetime. Where the acquire's own connection broke, one answered
// delete is not enough either: the SET may have been still on its way in
// the broken connection and run after a delete sent on a new one, so those
// masters get one more delete a little later.
func (l *Locker) undoNodes(le *Lease, nodes uint64) {
	if nodes == 0 {
		return
	}
	le.mu.Lock()
	broken := nodes & le.broken
	le.mu.Unlock()
	u := &le.undoReplies
	u.mu.Lock()
	u.again |= broken
	u.mu.Unlock()
	u.send(nodes)
}

// retriedUndo receives the replies to a lease's undo deletes. It lives in
// the Lease, so that the late replies of an uncontended cycle, which are
// undone on every cycle, allocate nothing for it.
type retriedUndo struct {
	le    *Lease // set when the lease is made, read-only after
	mu    sync.Mutex
	again uint64 // nodes still owed the later pass
}

func (u *retriedUndo) send(nodes uint64) {
	u.le.l.pool.Post(u.le.releaseCommand(nodes, undoScript), classifyInt, u)
}

// Late receives each delete's reply.
func (u *retriedUndo) Late(node int, v multiplex.Vote) {
	le := u.le
	l := le.l
	// Past the key's lifetime a SET can no longer be waiting to run.
	if l.closed.Load() || time.Since(le.start) > l.cfg.TTL+l.cfg.ConnTimeout {
		return
	}
	bit := uint64(1) << node
	_, reply := rueidis.IsRedisErr(v.Err)
	if v.Outcome == multiplex.OK || v.Outcome == multiplex.Refused || (v.Outcome == multiplex.Failed && reply) {
		u.mu.Lock()
		later := u.again&bit != 0
		u.again &^= bit
		u.mu.Unlock()
		if later {
			time.AfterFunc(min(l.cfg.ConnTimeout, l.cfg.TTL/2), func() { u.send(bit) })
		}
		return
	}
	time.AfterFunc(jitter(l.cfg.RetryDelayMin, l.cfg.RetryDelayMax)+l.cfg.NodeTimeout, func() { u.send(bit) })
}
