package engine

import (
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
	le.undoAgain |= nodes & le.broken
	le.mu.Unlock()
	(*undoReplies)(le).send(nodes)
}

// undoReplies is the Lease seen as the multiplex.LateHandler of its undo
// deletes, as acquireReplies is for its acquire: a pointer conversion, so
// that the late replies of an uncontended cycle, undone on every cycle,
// allocate nothing for it.
type undoReplies Lease

func (u *undoReplies) send(nodes uint64) {
	le := (*Lease)(u)
	le.l.pool.Post(le.releaseCommand(nodes, undoScript), classifyInt, u)
}

// Late receives each delete's reply.
func (u *undoReplies) Late(node int, v multiplex.Vote) {
	le := (*Lease)(u)
	l := le.l
	// Past the key's lifetime a SET can no longer be waiting to run.
	if l.closed.Load() || time.Since(le.start) > l.cfg.TTL+l.cfg.ConnTimeout {
		return
	}
	bit := uint64(1) << node
	_, reply := rueidis.IsRedisErr(v.Err)
	if v.Outcome == multiplex.OK || v.Outcome == multiplex.Refused || (v.Outcome == multiplex.Failed && reply) {
		le.mu.Lock()
		later := le.undoAgain&bit != 0
		le.undoAgain &^= bit
		le.mu.Unlock()
		if later {
			time.AfterFunc(min(l.cfg.ConnTimeout, l.cfg.TTL/2), func() { u.send(bit) })
		}
		return
	}
	time.AfterFunc(jitter(l.cfg.RetryDelayMin, l.cfg.RetryDelayMax)+l.cfg.NodeTimeout, func() { u.send(bit) })
}
