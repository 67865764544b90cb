package engine

import (
	"testing"
	"time"
)

// TestCheckClock walks a handle's check clock through the orders in which
// checks' answers may come back: due until a quorum answered one; an
// answer moves it to the check's sending, never back; a disagreement
// makes the check due again, and an answer to a check sent before the
// disagreeing one does not undo that, while one sent after does.
func TestCheckClock(t *testing.T) {
	const every = time.Second
	var c checkClock
	t0 := time.Now().UnixNano()
	due := func(what string, at int64, want bool) {
		t.Helper()
		if got := c.due(at, every); got != want {
			t.Fatalf("%s: due %v, want %v", what, got, want)
		}
	}
	due("no check answered", t0, true)
	due("no check answered, later", t0+int64(every), true)

	c.answered(t0)
	due("just after a check sent at t0 was answered", t0+1, false)
	due("every after t0", t0+int64(every), true)
	c.answered(t0 - 5)
	due("an earlier check answered after a later one", t0+int64(every)-1, false)

	c.refused(t0 + 10)
	due("a check sent at t0+10 found the masters disagree", t0+11, true)
	c.answered(t0 + 5)
	due("a check sent before the disagreeing one answered after it", t0+12, true)
	c.answered(t0 + 10)
	due("a check sent with the disagreeing one answered after it", t0+12, true)
	c.refused(t0 + 7)
	c.answered(t0 + 9)
	due("a disagreement sent earlier than the last one", t0+12, true)
	c.answered(t0 + 20)
	due("a check sent after the disagreeing one answered", t0+21, false)

	c.refused(t0 + 15)
	due("a disagreement from a check sent before the last answered one", t0+21, true)
	c.answered(t0 + 16)
	due("then a check sent after it answered", t0+21, false)
}
