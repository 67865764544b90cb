package multiplex

import (
	"testing"
	"time"
)

// The offset is the server's clock minus ours at the middle of the round
// trip, with its sign: a server ahead gives a positive offset.
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
		if !si.ClockKnown || si.ClockOffset != tc.want {
			t.Errorf("server at %v: offset %v (known %v), want %v", tc.server.Sub(sent), si.ClockOffset, si.ClockKnown, tc.want)
		}
	}
	var si serverInfo
	si.measureClock(sent, received)
	if si.ClockKnown || si.ClockOffset != 0 {
		t.Errorf("no server time: %+v", si)
	}
}
