package multiplex

import (
	"testing"
	"time"
)

// The offset is the server's clock minus ours at the middle of the round
// trip, with its sign: a server ahead gives a positive offset. Its
// uncertainty is half the round trip, and the microsecond the server's
// time is truncated to.
func TestMeasureClock(t *testing.T) {
	sent := time.Unix(1700000000, 0)
	received := sent.Add(10 * time.Millisecond)
	for _, tc := range []struct {
		server time.Time
		want   time.Duration
	}{
		{sent.Add(5 * time.Millisecond), 0},
		{sent.Add(705 * time.Millisecond), 700 * time.Millisecond},
		{sent.Add(-2 * time.Second), -2005 * time.Millisecond},
	} {
		si := serverInfo{ServerTime: tc.server}
		si.measureClock(sent, received)
		if !si.ClockKnown || si.ClockOffset != tc.want || si.ClockError != 5*time.Millisecond+time.Microsecond {
			t.Errorf("server at %v: offset %v ±%v (known %v), want %v ±5.001ms", tc.server.Sub(sent), si.ClockOffset, si.ClockError, si.ClockKnown, tc.want)
		}
	}
	var si serverInfo
	si.measureClock(sent, received)
	if si.ClockKnown || si.ClockOffset != 0 {
		t.Errorf("no server time: %+v", si)
	}
}

// checkSkew judges a node's new measurement against the nodes that vote:
// one kept out for its clock must not move the reference. With three
// nodes the others are two, and the median of two is their mean, so one
// bad clock among them would push every healthy node that reconnects out
// as well, and the quorum with it.
func TestCheckSkewIgnoresNodesKeptOutForTheirClock(t *testing.T) {
	const maxSkew = time.Second
	p := &Pool{maxSkew: maxSkew}
	for i := range 3 {
		p.nodes = append(p.nodes, &node{Index: i, info: serverInfo{ClockKnown: true}})
	}
	measure := func(i int, off time.Duration) {
		p.nodes[i].info = serverInfo{ClockOffset: off, ClockKnown: true}
		p.checkSkew(p.nodes[i], p.nodes[i].info)
	}
	out := func(i int) bool { return p.nodes[i].skew.Load() != nil }

	measure(2, -time.Hour)
	if !out(2) {
		t.Fatal("set-up: node 2 an hour behind votes")
	}
	measure(1, 0)
	if out(1) {
		t.Errorf("healthy node 1 kept out: %v", *p.nodes[1].skew.Load())
	}
	// A second node back an hour behind is measured against the healthy
	// one alone, not waved through by the first.
	measure(0, -time.Hour)
	if !out(0) {
		t.Error("node 0 an hour behind votes")
	}
	// Back within: it votes again.
	measure(2, 10*time.Millisecond)
	if out(2) {
		t.Errorf("node 2 back within kept out: %v", *p.nodes[2].skew.Load())
	}
}
