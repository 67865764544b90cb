package results

import (
	"bytes"
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

// The latency-against-throughput line joins the steps in sweep order and
// never goes back on the throughput axis: a step that achieved less than
// an earlier one is left out of it (drawn hollow), and a later step that
// achieves more again is joined.
func TestSweepCurveNeverGoesBack(t *testing.T) {
	pts := points([]float64{1, 4, 16, 64, 256, 1024, 4096}, []float64{2000, 8000, 32000, 40000, 40000, 20000, 41000},
		[]int64{2300, 2300, 2300, 7400, 29000, 120000, 400000})
	ahead, behind := sweepCurve(pts)
	var joined, left []float64
	for i, p := range ahead {
		joined = append(joined, p.Value)
		if i > 0 && p.AcquiredPerSec < ahead[i-1].AcquiredPerSec {
			t.Errorf("the line goes back from %v/s to %v/s", ahead[i-1].AcquiredPerSec, p.AcquiredPerSec)
		}
	}
	for _, p := range behind {
		left = append(left, p.Value)
	}
	if !reflect.DeepEqual(joined, []float64{1, 4, 16, 64, 256, 4096}) || !reflect.DeepEqual(left, []float64{1024}) {
		t.Errorf("joined %v, left out %v; want 1..256 and 4096 joined, 1024 left out", joined, left)
	}
	sw := &Sweep{Label: "s", Param: "workers", Latency: "acquire", Points: pts}
	sw.Analyze()
	c, err := SweepLatencyChart("l", sw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(c.SVG, []byte("less throughput than an earlier step")) {
		t.Error("the chart's legend does not say what the hollow points are")
	}
}

// A log axis of swept values labels each value swept and each power of
// ten between, in full: a 1,4,16,64 sweep was labelled 1 and 10 only.
func TestSweptTicksLabelDecadesAndValues(t *testing.T) {
	for _, c := range []struct {
		values   []float64
		min, max float64
		labels   string
	}{
		{[]float64{1, 4, 16, 64}, 1, 64, "1 4 10 16 64"},
		// 1000 would crowd 1024: the value swept wins.
		{[]float64{1, 4, 16, 64, 256, 1024}, 1, 1024, "1 4 10 16 64 100 256 1024"},
		{[]float64{1000, 2000, 5000, 10000, 20000, 50000}, 1000, 50000, "1k 2k 5k 10k 20k 50k"},
		{[]float64{2500, 25000}, 2500, 25000, "2.5k 10k 25k"},
		{[]float64{1500, 15000}, 1500, 15000, "1.5k 10k 15k"},
		{[]float64{3, 30, 300}, 3, 300, "3 10 30 100 300"},
	} {
		var got []string
		for _, tk := range (sweptTicks{values: c.values}).Ticks(c.min, c.max) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if strings.Join(got, " ") != c.labels {
			t.Errorf("%v: labels %v, want %s", c.values, got, c.labels)
		}
	}
	// And on the chart itself.
	sw := &Sweep{Label: "s", Param: "workers", Values: []float64{1, 4, 16, 64}, Latency: "acquire",
		Points: points([]float64{1, 4, 16, 64}, []float64{2000, 8000, 32000, 40000}, []int64{2300, 2300, 2300, 7400})}
	c, err := SweepThroughputChart("t", sw)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"1", "4", "10", "16", "64"} {
		if !bytes.Contains(c.SVG, []byte(">"+l+"</text>")) {
			t.Errorf("the workers axis has no label %s", l)
		}
	}
}

// A DEGRADED step (errors or lost leases) and an UNSAFE one (violations
// or stale tokens) are marked on both sweep charts and in the report's
// table, as the run's one-line summary calls them.
func TestSweepMarksDegradedSteps(t *testing.T) {
	pts := points(workers6, []float64{2000, 8000, 32000, 40000, 40000, 38000}, []int64{2300, 2300, 2300, 7400, 29000, 120000})
	pts[4].Errors = 12
	pts[5].LostLeases = 1
	pts[3].StaleTokens = 2
	sw := &Sweep{Label: "s", Param: "workers", Values: workers6, Latency: "acquire", Points: pts}
	sw.Analyze()
	for _, draw := range []func(string, *Sweep) (*Chart, error){SweepLatencyChart, SweepThroughputChart} {
		c, err := draw("c", sw)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"DEGRADED (errors or lost leases): w256, w1024", "UNSAFE (violations or stale tokens): w64"} {
			if !bytes.Contains(c.SVG, []byte(want)) {
				t.Errorf("chart %s does not mark %q", c.Title, want)
			}
		}
	}
	var marks []string
	for _, r := range sweepTable(sw).Rows {
		marks = append(marks, r.Mark)
	}
	if !strings.Contains(marks[3], "UNSAFE") || marks[4] != "DEGRADED" || marks[5] != "DEGRADED" || marks[2] != "" {
		t.Errorf("table marks %q", marks)
	}
}

// Every fault gets a line at its start, under its label, however short:
// a restart of a third of a second in a minute's run was labelled with
// no mark to be seen. Lasting ones get a band too; a master's downtime,
// a band only.
func TestEveryFaultHasItsLine(t *testing.T) {
	faults := []Fault{
		{Name: "pause:1@10s+5s", Action: "pause", FromS: 10, ToS: 15},
		{Name: "restart:2@30s", Action: "restart", FromS: 30, ToS: 30.3},
		{Name: "kill:0@40s", Action: "kill", FromS: 40, ToS: 40.01},
	}
	bands, lines := spanMarks(faults, true)
	if !reflect.DeepEqual(lines, []float64{10, 30, 40}) || len(bands) != 2 || bands[1].Action != "restart" {
		t.Errorf("faults: lines at %v, bands %+v", lines, bands)
	}
	bands, lines = spanMarks([]Fault{{Action: "down", FromS: 40, ToS: 50}}, false)
	if len(lines) != 0 || len(bands) != 1 {
		t.Errorf("downtime: lines at %v, bands %+v", lines, bands)
	}
}

// The time series take each second's other percentiles from the interval
// log, and its errors, no-quorum errors and masters' round trips from
// intervals.json, on the run's clock, warm-up included.
func TestTimeSeriesReadsIntervalsJSON(t *testing.T) {
	t.Parallel()
	_, _, run := reportFixtures(t)
	r := loadInputs(t, run)[0].Runs[0]
	ts := TimeSeriesOf(r, "acquire", r.Start())
	for j := range ts.AtS {
		if !(ts.P50Us[j] <= ts.P99Us[j] && ts.P99Us[j] <= ts.P999Us[j] && ts.P999Us[j] <= ts.MaxUs[j]) || ts.P50Us[j] <= 0 {
			t.Fatalf("second at %vs: p50 %v p99 %v p99.9 %v max %v", ts.AtS[j], ts.P50Us[j], ts.P99Us[j], ts.P999Us[j], ts.MaxUs[j])
		}
	}
	// One warm-up second and twelve measured, centred on their middles.
	if len(ts.SecAtS) != 13 || ts.SecAtS[0] != 0.5 || ts.SecAtS[12] != 12.5 {
		t.Fatalf("seconds at %v", ts.SecAtS)
	}
	// The pause (4s to 7s) brought timeouts, the kill at 9s no quorum.
	if ts.ErrorsPerSec[5] != 40 || ts.NoQuorumPerSec[5] != 0 || ts.ErrorsPerSec[9] != 12 || ts.NoQuorumPerSec[9] != 10 || ts.ErrorsPerSec[1] != 0 {
		t.Errorf("errors/s %v, no quorum/s %v", ts.ErrorsPerSec, ts.NoQuorumPerSec)
	}
	if len(ts.MasterRTTUs) != 5 || len(ts.Masters) != 5 {
		t.Fatalf("%d masters' round trips, %d masters", len(ts.MasterRTTUs), len(ts.Masters))
	}
	m2 := ts.MasterRTTUs[2]
	if !math.IsNaN(m2[4]) || !math.IsNaN(m2[6]) || m2[7] != 3e6 || m2[1] <= 0 {
		t.Errorf("master 2 (paused from 4s to 7s): %v", m2)
	}
	var gaps []int
	for _, seg := range segments(ts.SecAtS, m2) {
		gaps = append(gaps, len(seg))
	}
	if !reflect.DeepEqual(gaps, []int{4, 6}) {
		t.Errorf("master 2's line in runs of %v seconds, want 4 and 6 around the pause", gaps)
	}
}

// One run's latency is drawn as bands from p50 to the max under its p99,
// with an errors panel below; overlaid runs get a p99 line each. Each
// master's round trip gets a chart of its own, when recorded.
func TestOverTimeChartsShowBandsErrorsAndMasters(t *testing.T) {
	t.Parallel()
	_, compare, run := reportFixtures(t)
	r := loadInputs(t, run)[0].Runs[0]
	ts := TimeSeriesOf(r, "acquire", time.Time{})
	one, err := TimeSeriesChart("t", "t", "s", []TimeSeries{ts}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"p50–p99", "p99–p99.9", "p99.9–max", ">p99<", "errors/s, every kind", "no quorum/s", "errors/s<"} {
		if !bytes.Contains(one.SVG, []byte(want)) {
			t.Errorf("one run's chart lacks %q", want)
		}
	}
	var overlaid []TimeSeries
	for _, r := range loadInputs(t, compare)[0].Runs {
		overlaid = append(overlaid, TimeSeriesOf(r, "acquire", time.Time{}))
	}
	many, err := TimeSeriesChart("t", "t", "s", overlaid, false)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(many.SVG, []byte("p50–p99")) || !bytes.Contains(many.SVG, []byte("p99 latency")) {
		t.Error("overlaid runs are drawn with bands, or without their p99 axis")
	}
	masters, err := MasterLatencyChart("m", "m", "s", []TimeSeries{ts}, false)
	if err != nil || masters == nil {
		t.Fatalf("masters' chart: %v, %v", masters, err)
	}
	if !bytes.Contains(masters.SVG, []byte("master 2 127.0.0.1:7003")) {
		t.Error("the masters' chart does not name master 2")
	}
	ts.MasterRTTUs = nil
	if c, err := MasterLatencyChart("m", "m", "s", []TimeSeries{ts}, false); c != nil || err != nil {
		t.Errorf("a run without round trips got a masters' chart: %v, %v", c, err)
	}
}
