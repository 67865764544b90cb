package results

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestFairnessOf(t *testing.T) {
	for _, c := range []struct {
		name   string
		counts []int64
		want   Fairness
	}{
		{"none", nil, Fairness{}},
		{"nothing acquired", []int64{0, 0, 0}, Fairness{Jain: 0, Min: 0, Max: 0}},
		{"equal shares", []int64{5, 5, 5, 5}, Fairness{Jain: 1, Min: 5, Max: 5}},
		// One worker of four got everything: 1/n.
		{"one takes all", []int64{0, 12, 0, 0}, Fairness{Jain: 0.25, Min: 0, Max: 12}},
		// (1+2+3+4)^2 / (4 * (1+4+9+16)) = 100/120.
		{"spread", []int64{1, 2, 3, 4}, Fairness{Jain: 0.8333, Min: 1, Max: 4}},
		// Two of four share evenly: 1/2.
		{"half", []int64{7, 7, 0, 0}, Fairness{Jain: 0.5, Min: 0, Max: 7}},
	} {
		if got := FairnessOf(c.counts); got != c.want {
			t.Errorf("%s: FairnessOf(%v) = %+v, want %+v", c.name, c.counts, got, c.want)
		}
	}
	// Large counts must not overflow: squares are summed as floats.
	big := []int64{math.MaxInt32 * 4, math.MaxInt32 * 4}
	if f := FairnessOf(big); f.Jain != 1 {
		t.Errorf("large equal counts: Jain %v", f.Jain)
	}
}

func TestFaultEventDuring(t *testing.T) {
	pause := FaultEvent{Fault: "pause:1@3s+2s", AppliedS: 3.0004, EndedS: 5.001, Ended: true}
	kill := FaultEvent{Fault: "kill:2@6s", AppliedS: 6.0002, EndedS: 6.003, Ended: true}
	running := FaultEvent{Fault: "cut:0@7s+5s", AppliedS: 7.001}
	for _, c := range []struct {
		e        FaultEvent
		from, to float64
		want     bool
	}{
		{pause, 2, 3, false},
		{pause, 3, 4, true},
		{pause, 4, 5, true},
		{pause, 5, 6, true}, // lifted at 5.001
		{pause, 6, 7, false},
		{kill, 6, 7, true}, // instantaneous: in the interval where it happened
		{kill, 5, 6, false},
		{running, 9, 10, true},
		{running, 6, 7, false},
	} {
		if got := c.e.During(c.from, c.to); got != c.want {
			t.Errorf("%s During(%v, %v) = %v, want %v", c.e.Fault, c.from, c.to, got, c.want)
		}
	}
}

func TestIntervalsRoundTrip(t *testing.T) {
	ivs := []Interval{
		{TS: 0, LengthS: 1, Warmup: true, Acquired: 900, AcquiredPerS: 900, P99Us: 1500},
		{TS: 1, LengthS: 1, Acquired: 1000, AcquiredPerS: 1000, P99Us: 2100, Errors: 3, FaultsActive: []string{"pause:1@1s+300ms"}},
	}
	var b bytes.Buffer
	if err := WriteIntervals(&b, ivs); err != nil {
		t.Fatal(err)
	}
	// One interval per line, every record with the same fields.
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || lines[0] != "[" || lines[3] != "]" {
		t.Fatalf("intervals.json layout:\n%s", b.String())
	}
	for _, f := range []string{`"t_s":`, `"acquired_per_s":`, `"p99_us":`, `"errors":`, `"faults_active":[`} {
		if !strings.Contains(lines[1], f) || !strings.Contains(lines[2], f) {
			t.Errorf("interval lines lack %s:\n%s", f, b.String())
		}
	}
	back, err := ReadIntervals(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[1].FaultsActive[0] != "pause:1@1s+300ms" || back[1].P99Us != 2100 || !back[0].Warmup {
		t.Errorf("round trip: %+v", back)
	}
}
