package engine

import (
	"sync/atomic"
	"time"

	"github.com/redlock-bench/redlock/multiplex"
)

// checkClock is when a handle's check on the masters (a Semaphore's
// permit count, an RWMutex's mark of its name's kind) was last answered,
// so that its attempts may skip the check for a while after. It moves
// only once a quorum of the masters answered a check, and then to when
// that check was sent: until then every attempt carries the check, those
// made while one is on its way included (skipping it on the strength of
// a check nobody has answered yet would take a slot the masters' count
// may not have), and a check that too few masters answered (timed out,
// failed) leaves it as it was. A check that found the masters disagree
// (another count, another kind) makes the check due again, and the
// answer to a check sent before that one does not move it forward.
type checkClock struct {
	// at is the sending (Locker.mono: monotonic, so that a step of the
	// system clock moves no check) of the last check a quorum answered,
	// or, at or below zero, minus the sending of the last check that
	// found the masters disagree: a check is due until a later one is
	// answered.
	at atomic.Int64
}

// due reports whether an attempt made at now (Locker.mono) carries the check:
// none was answered within every.
func (c *checkClock) due(now int64, every time.Duration) bool {
	at := c.at.Load()
	return at <= 0 || now-at >= int64(every)
}

// answered notes that a quorum of the masters answered the check sent at
// sent and found it right, unless a later check was answered or found
// the masters disagree.
func (c *checkClock) answered(sent int64) {
	for {
		at := c.at.Load()
		if sent <= at || sent <= -at || c.at.CompareAndSwap(at, sent) {
			return
		}
	}
}

// refused notes that a check sent at sent found the masters disagree:
// the next attempt checks again, whatever earlier checks answer later.
func (c *checkClock) refused(sent int64) {
	for {
		at := c.at.Load()
		if (at <= 0 && sent <= -at) || c.at.CompareAndSwap(at, -sent) {
			return
		}
	}
}

// checkAnswered reports whether a quorum of the masters ran the attempt's
// check: its script answered there, admitting or refusing.
func checkAnswered(t *multiplex.Tally) bool { return t.OK+t.Refused >= t.Quorum }
