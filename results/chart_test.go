package results

import (
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The over-time chart's x axis is the run's own clock, the one --fault
// schedules are written in: a fault labelled pause:2@4s+3s is drawn from
// 4 s, and the first measured second, after a 1 s warm-up, is centred on
// 1.5 s.
func TestTimeSeriesFaultsAtTheirScheduledTime(t *testing.T) {
	t.Parallel()
	_, _, run := reportFixtures(t)
	r := loadInputs(t, run)[0].Runs[0]
	ts := TimeSeriesOf(r, "acquire", r.Start())
	if len(ts.AtS) == 0 || math.Abs(ts.AtS[0]-1.5) > 0.01 {
		t.Errorf("first interval at %v s, want 1.5 (after the 1 s warm-up)", ts.AtS)
	}
	at := regexp.MustCompile(`@([0-9.]+)s`)
	if len(ts.Faults) < 2 {
		t.Fatalf("faults %+v", ts.Faults)
	}
	for _, f := range ts.Faults {
		m := at.FindStringSubmatch(f.Name)
		if m == nil {
			t.Fatalf("fault %q names no time", f.Name)
		}
		planned, _ := strconv.ParseFloat(m[1], 64)
		if math.Abs(f.FromS-planned) > 0.05 {
			t.Errorf("%s is drawn from %.3f s, not at the %v s its label says", f.Name, f.FromS, planned)
		}
	}
}

// A master killed and later restarted was down from the kill until the
// restart completed; one never restarted, until the end of the run; a
// kill that failed took nothing down.
func TestDowntime(t *testing.T) {
	t.Parallel()
	_, _, run := reportFixtures(t)
	r := loadInputs(t, run)[0].Runs[0]
	ts := TimeSeriesOf(r, "acquire", time.Time{})
	if len(ts.Down) != 1 || ts.Down[0].Node != 4 || ts.Down[0].FromS != 9 || math.Abs(ts.Down[0].ToS-11.35) > 1e-9 {
		t.Errorf("downtime %+v, want master 4 from 9 s to 11.35 s", ts.Down)
	}
	got := downtime([]Fault{
		{Action: "kill", Node: 1, FromS: 2, ToS: 2.01},
		{Action: "kill", Node: 2, FromS: 3, ToS: 3.01, Error: "no such process"},
		{Action: "restart", Node: 1, FromS: 1, ToS: 1.2}, // before the kill: not its restart
		{Action: "restart", Node: 1, FromS: 6, ToS: 6.3},
		{Action: "restart", Node: 1, FromS: 8, ToS: 8.3},
		{Action: "kill", Node: 3, FromS: 4, ToS: 4.01},
	}, 10)
	want := []Fault{
		{Name: "master 1 down", Action: "down", Node: 1, FromS: 2, ToS: 6.3},
		{Name: "master 3 down", Action: "down", Node: 3, FromS: 4, ToS: 10},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("downtime:\n got %+v\nwant %+v", got, want)
	}
}

// tickLabels are the latency labels of an SVG chart's axes, in µs.
func tickLabels(t *testing.T, svg []byte) []float64 {
	t.Helper()
	var out []float64
	for _, m := range regexp.MustCompile(`font-size:9px[^>]*>([0-9.]+)(µs|ms|s|)</text>`).FindAllSubmatch(svg, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		if len(m[2]) == 0 && v != 0 {
			continue // a percentile or a count, not a latency
		}
		out = append(out, v*map[string]float64{"": 0, "µs": 1, "ms": 1e3, "s": 1e6}[string(m[2])])
	}
	return out
}

// A latency axis is labelled above its highest value and below its
// lowest: the compare chart's lines went up to 14.5ms with no label above
// 10ms.
func TestLatencyAxisLabelsItsEnds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ lo, hi float64 }{
		{150, 14540},     // the compare fixture: under two decades
		{1, 160000},      // a sweep: five decades
		{2200, 120000},   // a sweep's p99 over time
		{900, 1100},      // narrow: a linear axis
		{1000, 2.5e6},    // into seconds
		{12, 98},         // microseconds only
		{40000, 3900000}, // two decades, ms to s
	} {
		var pts []DistPoint
		for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999} {
			pts = append(pts, DistPoint{Q: q, Us: c.lo + (c.hi-c.lo)*q*q*q})
		}
		pts = append(pts, DistPoint{Q: 0.9999, Us: c.hi})
		ch, err := DistributionChart("d", "d", "", []DistSeries{{Name: "a", Points: pts}})
		if err != nil {
			t.Fatal(err)
		}
		labels := tickLabels(t, ch.SVG)
		if len(labels) < 2 {
			t.Errorf("%v..%v µs: labels %v", c.lo, c.hi, labels)
			continue
		}
		top, bottom := labels[0], labels[0]
		for _, v := range labels {
			top, bottom = math.Max(top, v), math.Min(bottom, v)
		}
		if top < c.hi {
			t.Errorf("%v..%v µs: the highest label is %vµs, below the data", c.lo, c.hi, top)
		}
		if bottom > c.lo {
			t.Errorf("%v..%v µs: the lowest label is %vµs, above the data", c.lo, c.hi, bottom)
		}
	}
}

// A time axis has 4 to 10 labels, at round seconds.
func TestSecondsTicks(t *testing.T) {
	for _, c := range []struct {
		min, max float64
		labels   string
	}{
		{0, 13, "0 2 4 6 8 10 12"},
		{0, 30.5, "0 5 10 15 20 25 30"},
		{0, 9, "0 1 2 3 4 5 6 7 8 9"},
		{0, 600, "0 100 200 300 400 500 600"},
		{-2, 3.2, "-2 -1 0 1 2 3"},
	} {
		var got []string
		for _, tk := range (secondsTicks{}).Ticks(c.min, c.max) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if strings.Join(got, " ") != c.labels {
			t.Errorf("%v..%v: labels %v, want %s", c.min, c.max, got, c.labels)
		}
	}
}
