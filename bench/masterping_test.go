package bench

import (
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// Each master's round trip is sampled once an interval: a master that
// answered has a round trip, one that did not (never reached, or paused)
// has -1, take forgets what it returned, and close ends a PING a paused
// master holds rather than waiting for its timeout.
func TestMasterPings(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 2)
	gone := redistest.DeadAddr(t)
	// A timeout no test waits for: close must end the paused master's PING.
	m := newMasterPings(redisproc.Conn{}, append(c.Addrs(), gone), time.Hour)
	defer m.close()
	m.sample()
	m.wait()
	got := m.take()
	if len(got) != 3 || got[0] <= 0 || got[1] <= 0 || got[2] != -1 {
		t.Fatalf("round trips %v µs, want two and -1 for the address nothing listens on", got)
	}
	if again := m.take(); again[0] != -1 || again[1] != -1 {
		t.Errorf("a second take gave %v: the replies were already taken", again)
	}
	if err := c.Nodes[1].Pause(); err != nil {
		t.Fatal(err)
	}
	defer c.Nodes[1].Resume()
	m.sample()
	// The running master's reply comes; the paused one's does not.
	for m.take()[0] == -1 {
		m.sample()
		time.Sleep(time.Millisecond) // waits for a reply in flight, not a duration: the loop ends on it
	}
	if got := m.take(); got[1] != -1 {
		t.Errorf("the paused master answered: %v", got)
	}
}
