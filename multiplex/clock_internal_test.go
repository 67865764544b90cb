package multiplex

import (
	"errors"
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

// The median of readings is the interval the median of their true
// offsets lies in: between the median of their lowest possible offsets
// and that of their highest. One uncertain reading among precise ones
// widens it only as far as it could move the median.
func TestMedianClock(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		rs   []clockReading
		want clockReading
	}{
		{[]clockReading{{off: 5 * ms, err: ms}}, clockReading{off: 5 * ms, err: ms}},
		// The far reading is not the median: the middle one is.
		{[]clockReading{{off: 0, err: ms}, {off: 2 * ms, err: ms}, {off: 300 * ms, err: ms}}, clockReading{off: 2 * ms, err: ms}},
		// Far but so uncertain that it may be as low as 0: the median
		// may then be it, or the middle one at its highest, 3 ms.
		{[]clockReading{{off: 0, err: ms}, {off: 2 * ms, err: ms}, {off: 300 * ms, err: 300 * ms}},
			clockReading{off: 1500 * time.Microsecond, err: 1500 * time.Microsecond}},
		// Two: the midpoint of their lows (-1, 7 ms) and of their highs
		// (1, 13 ms).
		{[]clockReading{{off: 0, err: ms}, {off: 10 * ms, err: 3 * ms}}, clockReading{off: 5 * ms, err: 2 * ms}},
	} {
		got, ok := medianClock(tc.rs)
		if !ok || got != tc.want {
			t.Errorf("median of %v: %v, want %v", tc.rs, got, tc.want)
		}
	}
	if _, ok := medianClock(nil); ok {
		t.Error("median of no readings")
	}
}

// checkSkew keeps a node out only when its reading is provably
// MaxClockSkew or more from the others' median: the difference less both
// uncertainties. A healthy node read through a slow round trip (250 ms
// ahead, ±250 ms) votes; one a second behind, read as far off and as
// uncertain, does not. The others read 0 and 1 ms, ±0.1 ms: their
// median is 0.5 ms ±0.1 ms.
func TestCheckSkewJudgesWhatTheReadingsProve(t *testing.T) {
	const maxSkew = 200 * time.Millisecond
	ms, tenth := time.Millisecond, 100*time.Microsecond
	p := &Pool{maxSkew: maxSkew}
	for i := range 3 {
		p.nodes = append(p.nodes, &node{Index: i, info: serverInfo{ClockOffset: time.Duration(i) * ms, ClockError: tenth, ClockKnown: true}})
	}
	for _, tc := range []struct {
		off, err time.Duration
		out      bool
	}{
		{250 * ms, 250 * ms, false},
		{-750 * ms, 250 * ms, true},
		// At the edge: 448.5 ms less 250.1 ms is below the bound, 450.5
		// ms less 250.1 ms above it.
		{449 * ms, 250 * ms, false},
		{451 * ms, 250 * ms, true},
		// Precise readings are judged as they are.
		{200*ms + 600*time.Microsecond, tenth, false},
		{200*ms + 800*time.Microsecond, tenth, true},
	} {
		n := p.nodes[2]
		n.info = serverInfo{ClockOffset: tc.off, ClockError: tc.err, ClockKnown: true}
		p.checkSkew(n, n.info)
		if out := n.skew.Load() != nil; out != tc.out {
			t.Errorf("read %v ±%v: kept out %v, want %v", tc.off, tc.err, out, tc.out)
		}
	}
}

// A cluster's node is judged as a master is, against the median of the
// masters' and the other nodes' readings: refused at connect only where
// its reading is provably MaxClockSkew or more off, and judged again
// (rejudgeClocks) on the same terms.
func TestJudgeMemberClockJudgesWhatTheReadingsProve(t *testing.T) {
	const maxSkew = 200 * time.Millisecond
	ms, tenth := time.Millisecond, 100*time.Microsecond
	p := &Pool{maxSkew: maxSkew}
	for i := range 2 {
		p.nodes = append(p.nodes, &node{Index: i, info: serverInfo{ClockError: tenth, ClockKnown: true}})
	}
	c := &node{Index: 2, Addr: "cluster(a:1)", seeds: []string{"a:1"}, members: map[string]member{}}
	p.nodes = append(p.nodes, c)
	judge := func(addr string, off, err time.Duration) error {
		c.members[addr] = member{primary: true}
		return p.judgeMemberClock(c, addr, serverInfo{ClockOffset: off, ClockError: err, ClockKnown: true})
	}
	if err := judge("a:1", 250*ms, 250*ms); err != nil {
		t.Errorf("a node whose clock may agree, read through a slow round trip: %v", err)
	}
	if err := judge("b:1", -time.Second+250*ms, 250*ms); !errors.Is(err, ErrClockSkew) {
		t.Errorf("a node a second behind, read through a slow round trip: %v, want ErrClockSkew", err)
	}
	if err := judge("c:1", 2*ms, tenth); err != nil {
		t.Errorf("a node whose clock agrees: %v", err)
	}
	if !c.members["a:1"].clockKnown || c.members["b:1"].clockKnown || !c.members["c:1"].clockKnown {
		t.Errorf("readings kept: %+v", c.members)
	}
	p.rejudgeClocks()
	if !c.members["a:1"].clockKnown || !c.members["c:1"].clockKnown {
		t.Errorf("judged again, a node that may agree lost its reading: %+v", c.members)
	}
}
