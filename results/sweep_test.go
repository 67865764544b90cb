package results

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// points builds a sweep from values, throughputs and p99s (µs); the other
// percentiles follow p99.
func points(values, perSec []float64, p99 []int64) []SweepPoint {
	out := make([]SweepPoint, len(values))
	for i := range values {
		out[i] = SweepPoint{
			Index: i, Value: values[i], Workers: int(values[i]),
			AcquiredPerSec: perSec[i], Acquired: int64(perSec[i] * 10), Attempts: int64(perSec[i] * 10),
			LatencyUs: Stats{Count: int64(perSec[i] * 10), P50: p99[i] / 4, P90: p99[i] / 2, P99: p99[i], P999: p99[i] * 2, Max: p99[i] * 3},
		}
	}
	return out
}

var workers6 = []float64{1, 4, 16, 64, 256, 1024}

func TestFindKnee(t *testing.T) {
	for _, c := range []struct {
		name     string
		param    string
		values   []float64
		perSec   []float64
		p99      []int64
		found    bool
		knee     float64
		inReason string
	}{
		{
			// Throughput grows with the load and latency stays flat: the
			// sweep never reached saturation.
			name: "flat latency, still scaling", param: "workers", values: workers6,
			perSec: []float64{2000, 8000, 32000, 128000, 512000, 2048000},
			p99:    []int64{900, 910, 905, 920, 915, 930},
			found:  false, inReason: "still growing",
		},
		{
			// Throughput grows by a quarter from 16 to 64 workers, then
			// stops: the knee is 64, where it stopped.
			name: "clear knee", param: "workers", values: workers6,
			perSec: []float64{2000, 8000, 32000, 40000, 40000, 38000},
			p99:    []int64{2300, 2300, 2300, 7400, 29000, 120000},
			found:  true, knee: 64,
			inReason: "past 64 workers, throughput did not grow (the best later step: 40,000/s at 256 workers) and then fell by 5%, to 38,000/s at 1024 workers, " +
				"while p99 grew 3.9x, from 7.40ms to 29.00ms at 256 workers",
		},
		{
			// Past the knee, throughput halves: the reason says it fell,
			// not that it "did not grow".
			name: "halved past the knee", param: "workers", values: workers6[:4],
			perSec: []float64{2000, 8000, 32000, 16000},
			p99:    []int64{2300, 2300, 2300, 60000},
			found:  true, knee: 16, inReason: "past 16 workers, throughput fell by half, to 16,000/s at 64 workers, while p99 grew 26.1x",
		},
		{
			// Flat, then a fall by a third at the last step.
			name: "flat then a third less", param: "workers", values: workers6[:5],
			perSec: []float64{2000, 8000, 32000, 32100, 21300},
			p99:    []int64{2300, 2300, 2300, 9000, 60000},
			found:  true, knee: 16, inReason: "did not grow (the best later step: 32,100/s at 64 workers) and then fell by a third, to 21,300/s at 256 workers",
		},
		{
			// A little growth past the knee, and no fall.
			name: "grew a little", param: "workers", values: workers6[:5],
			perSec: []float64{2000, 8000, 32000, 33000, 32900},
			p99:    []int64{2300, 2300, 2300, 9000, 60000},
			found:  true, knee: 16, inReason: "past 16 workers, throughput grew by at most 3% (the best later step: 33,000/s at 64 workers), while p99",
		},
		{
			// Saturated from the first point: throughput flat, latency
			// climbing at once.
			name: "flat throughput from the start", param: "workers", values: workers6,
			perSec: []float64{40000, 40100, 39900, 40000, 40050, 39800},
			p99:    []int64{100, 400, 1600, 6400, 25600, 102400},
			found:  true, knee: 1, inReason: "first point is already saturated",
		},
		{
			// A dip at one step, then growth resumes: noise, not a knee.
			name: "dip then recovery", param: "workers", values: []float64{1, 2, 4, 8, 16},
			perSec: []float64{100, 200, 210, 800, 1600},
			p99:    []int64{1000, 1000, 1500, 1000, 1000},
			found:  false, inReason: "still growing",
		},
		{
			// Throughput stops but latency does not climb: the generator,
			// not the masters, is the limit.
			name: "ceiling without latency", param: "workers", values: workers6,
			perSec: []float64{2000, 8000, 10000, 10100, 10000, 10050},
			p99:    []int64{1000, 1000, 1000, 1000, 1000, 1000},
			found:  false, inReason: "load generator",
		},
		{
			// Open loop: the rate outgrows a capacity of 20000/s.
			name: "open loop", param: "rate", values: []float64{1000, 2000, 4000, 8000, 16000, 32000, 64000},
			perSec: []float64{1000, 2000, 4000, 8000, 16000, 20000, 20000},
			p99:    []int64{800, 800, 810, 820, 900, 250000, 900000},
			found:  true, knee: 16000, inReason: "16000/s offered",
		},
		{
			// Arithmetic steps: +10% load each, flattening at 5000/s.
			name: "arithmetic", param: "rate", values: []float64{4000, 4400, 4800, 5200, 5600},
			perSec: []float64{4000, 4400, 4800, 4950, 4960},
			p99:    []int64{1000, 1000, 1100, 9000, 40000},
			found:  true, knee: 4800,
		},
		{
			// Throughput keeps growing, less than the load but steadily,
			// while p99 climbs within a 5ms SLO: no knee yet. The old rule
			// put it at 16 workers, where growth per step first fell below
			// half the added load.
			name: "sublinear growth", param: "workers", values: workers6,
			perSec: []float64{2000, 8000, 23000, 31000, 42000, 55600},
			p99:    []int64{900, 950, 1100, 1900, 2800, 4100},
			found:  false, inReason: "still growing at the last point (1024 workers",
		},
		{
			// The same, then a step that adds load but no throughput: the
			// knee is where the growth stopped.
			name: "sublinear growth, then a ceiling", param: "workers", values: append(workers6[:len(workers6):len(workers6)], 4096),
			perSec: []float64{2000, 8000, 23000, 31000, 42000, 55600, 56100},
			p99:    []int64{900, 950, 1100, 1900, 2800, 4100, 16000},
			found:  true, knee: 1024, inReason: "past 1024 workers",
		},
		{
			name: "one point", param: "workers", values: []float64{8}, perSec: []float64{100}, p99: []int64{10},
			found: false, inReason: "at least two",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := FindKnee(points(c.values, c.perSec, c.p99), c.param)
			if k.Found != c.found || (c.found && k.Value != c.knee) {
				t.Fatalf("knee %+v, want found=%v at %v", k, c.found, c.knee)
			}
			if !c.found && k.Index != -1 {
				t.Errorf("index %d for no knee, want -1", k.Index)
			}
			if !strings.Contains(k.Reason, c.inReason) {
				t.Errorf("reason %q does not say %q", k.Reason, c.inReason)
			}
		})
	}
}

func TestFindKneeIgnoresInterruptedPoints(t *testing.T) {
	pts := points(workers6, []float64{2000, 8000, 32000, 40000, 40000, 38000}, []int64{2300, 2300, 2300, 7400, 29000, 120000})
	// An interrupted step with a high throughput (a short burst) would
	// look like growth past 64 workers.
	pts[4].Interrupted = true
	pts[4].AcquiredPerSec = 80000
	k := FindKnee(pts, "workers")
	if !k.Found || k.Value != 64 {
		t.Fatalf("knee %+v: the interrupted step must not count", k)
	}
}

func TestSLOPoint(t *testing.T) {
	slo := sloOf(t, "p99<5ms")
	sw := &Sweep{Param: "workers", SLO: &slo,
		Points: points(workers6, []float64{2000, 8000, 32000, 40000, 40000, 38000}, []int64{2300, 2300, 2300, 7400, 29000, 120000})}
	sw.Analyze()
	if sw.SLOPoint == nil || sw.SLOPoint.Value != 16 {
		t.Fatalf("SLO point %+v, want 16 workers", sw.SLOPoint)
	}
	for _, p := range sw.Points {
		if p.MeetsSLO == nil || *p.MeetsSLO != (p.Value <= 16) {
			t.Errorf("point %v: meets %v", p.Value, p.MeetsSLO)
		}
	}
	// The best point is chosen by throughput, not by position: a later
	// point within the SLO wins even after a miss.
	sw.Points[4].LatencyUs.P99 = 4000
	sw.Analyze()
	if sw.SLOPoint == nil || sw.SLOPoint.Value != 64 && sw.SLOPoint.Value != 256 {
		t.Fatalf("SLO point %+v, want the 40000/s point", sw.SLOPoint)
	}
}

func TestSLONeverMet(t *testing.T) {
	slo := sloOf(t, "p99<1ms")
	sw := &Sweep{Param: "workers", SLO: &slo,
		Points: points(workers6, []float64{2000, 8000, 32000, 40000, 40000, 38000}, []int64{2300, 2300, 2300, 7400, 29000, 120000})}
	sw.Analyze()
	if sw.SLOPoint != nil {
		t.Fatalf("SLO point %+v, want none", sw.SLOPoint)
	}
	msg := SLOMiss(sw)
	for _, want := range []string{"no point met the SLO p99<1ms", "lowest p99 was 2.30ms", "1 worker"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
	var b bytes.Buffer
	if err := WriteSweepText(&b, sw); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "missed") || strings.Contains(b.String(), "best within SLO") {
		t.Errorf("sweep text:\n%s", b.String())
	}
}

func TestSweepJSONRoundTrip(t *testing.T) {
	slo := sloOf(t, "p999<=20ms")
	sw := &Sweep{Label: "x", Param: "rate", Values: []float64{1000, 2000}, SLO: &slo,
		Points: points([]float64{1000, 2000}, []float64{1000, 1990}, []int64{900, 950})}
	sw.Analyze()
	var b bytes.Buffer
	if err := WriteSweepJSON(&b, sw); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"kind": "sweep"`, `"knee"`, `"slo"`, `"slo_point"`, `"points"`, `"dir"`, `"acquired_per_sec"`, `"latency_us"`, `"p99"`} {
		if !strings.Contains(b.String(), field) {
			t.Errorf("sweep.json lacks %s:\n%s", field, b.String())
		}
	}
	back, err := ReadSweepJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	if back.SLO == nil || *back.SLO != slo || back.SLOPoint == nil || back.SLOPoint.Value != 2000 || len(back.Points) != 2 {
		t.Fatalf("round trip: %+v", back)
	}
	if _, err := ReadSweepJSON(strings.NewReader(`{"kind":"compare"}`)); err == nil {
		t.Error("a compare.json read as a sweep")
	}
}

// The sweep's SLO is an objective's: ParseObjective reads it, and an
// upper bound on a percentile of the acquisition latency becomes one.
func TestObjectiveAsSLO(t *testing.T) {
	for _, c := range []struct {
		in        string
		pct       string
		limitUs   float64
		inclusive bool
		text      string
	}{
		{"p99<5ms", "p99", 5000, false, "p99<5ms"},
		{"p50<800us", "p50", 800, false, "p50<800µs"},
		{"p90<800µs", "p90", 800, false, "p90<800µs"},
		{"p90<800μs", "p90", 800, false, "p90<800µs"},
		{"p999<1.5s", "p999", 1.5e6, false, "p999<1.5s"},
		{"p99.9<250ms", "p999", 250000, false, "p999<250ms"},
		{" P99 <= 2.5ms ", "p99", 2500, true, "p99<=2.5ms"},
		{"p99<1s", "p99", 1e6, false, "p99<1s"},
		{"p99<0.5ms", "p99", 500, false, "p99<500µs"},
		{"p99<1000ms", "p99", 1e6, false, "p99<1s"},
		{"p99<1us", "p99", 1, false, "p99<1µs"},
		{"p99<3600s", "p99", 3.6e9, false, "p99<3600s"},
		{"p99<5 ms", "p99", 5000, false, "p99<5ms"},
	} {
		got := sloOf(t, c.in)
		if got.Percentile != c.pct || got.LimitUs != c.limitUs || got.Inclusive != c.inclusive || got.Text != c.text || got.String() != c.text {
			t.Errorf("%q: got %+v, want %s %v %v %q", c.in, got, c.pct, c.limitUs, c.inclusive, c.text)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", "no comparison"},
		{"p99", "no comparison"},
		{"p95<5ms", `unknown metric "p95"`},
		{"p99<", `no value after "<"`},
		{"p99<5", `limit "5" has no unit`},
		{"p99<5min", `unknown unit "min"`},
		{"p99<-5ms", "not a plain positive number"},
		{"p99<ms", "not a plain positive number"},
		{"p99<1e3ms", "not a plain positive number"},
		{"p99<0ms", "from 1µs"},
		{"p99<0.5us", "from 1µs"},
		{"p99<2h", `unknown unit "h"`},
		{"p99<3601s", "to 1h"},
		{"p99<<5ms", "not a plain positive number"},
	} {
		if _, err := ParseObjective(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.in, err, c.want)
		}
	}
	// Objectives that a sweep meets step by step but that are no latency
	// bound of the acquisition: no SLO of their own.
	for _, in := range []string{"p99>5ms", "avg<5ms", "release.p99<5ms", "errors<0.1%"} {
		if o, err := ParseObjective(in); err != nil {
			t.Errorf("%q: %v", in, err)
		} else if _, ok := o.SLO(); ok {
			t.Errorf("%q became a sweep SLO", in)
		}
	}
}

// sloOf is the sweep SLO of the objective s.
func sloOf(t testing.TB, s string) SLO {
	t.Helper()
	o, err := ParseObjective(s)
	if err != nil {
		t.Fatal(err)
	}
	slo, ok := o.SLO()
	if !ok {
		t.Fatalf("%q is no sweep SLO", s)
	}
	return slo
}

func TestSLOMet(t *testing.T) {
	st := Stats{Count: 10, P50: 100, P90: 200, P99: 5000, P999: 9000}
	for _, c := range []struct {
		slo  string
		want bool
	}{
		{"p99<5ms", false}, {"p99<=5ms", true}, {"p99<5.001ms", true}, {"p50<101us", true}, {"p999<9ms", false}, {"p90<1ms", true},
	} {
		o := sloOf(t, c.slo)
		if got := o.Met(st); got != c.want {
			t.Errorf("%s on %+v: %v, want %v", c.slo, st, got, c.want)
		}
	}
	if o := sloOf(t, "p99<1s"); o.Met(Stats{}) {
		t.Error("an empty histogram met an SLO")
	}
}

// FuzzObjectiveSLO checks that whatever sweep SLO the objectives' parser
// accepts is sane, and that String reads back to the same objective.
func FuzzObjectiveSLO(f *testing.F) {
	for _, s := range []string{"p99<5ms", "p50<800us", "p999<=1.5s", "p99.9<2µs", "p90 < 0.25ms", "", "p99<", "<5ms", "p99<5e3us", "p99<99999999999s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		obj, err := ParseObjective(s)
		if err != nil {
			return
		}
		o, ok := obj.SLO()
		if !ok {
			return
		}
		if !(o.LimitUs >= 1 && o.LimitUs <= float64(HighestUs)) || math.IsNaN(o.LimitUs) {
			t.Fatalf("%q: limit %v out of range", s, o.LimitUs)
		}
		if o.Quantile() <= 0 || o.Quantile() >= 1 {
			t.Fatalf("%q: quantile %v", s, o.Quantile())
		}
		back, err := ParseObjective(o.String())
		if err != nil {
			t.Fatalf("%q: String %q does not parse: %v", s, o.String(), err)
		}
		if slo, ok := back.SLO(); !ok || slo != o {
			t.Fatalf("%q: round trip %+v != %+v", s, slo, o)
		}
	})
}

// A sweep's objectives may be any of run's: each step is checked on its
// own summary, which holds every figure they name, and the best step is
// the one of highest throughput that met them all.
func TestSweepObjectives(t *testing.T) {
	var objs []Objective
	for _, in := range []string{"p99<5ms", "errors<0.1%"} {
		o, err := ParseObjective(in)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	sw := &Sweep{Param: "workers",
		Points: points(workers6, []float64{2000, 8000, 32000, 40000, 40000, 38000}, []int64{2300, 2300, 2300, 2300, 29000, 120000})}
	sw.SetObjectives(objs)
	if sw.SLO == nil || sw.SLO.Text != "p99<5ms" {
		t.Fatalf("SLO %+v, want the latency objective", sw.SLO)
	}
	for i := range sw.Points {
		p := &sw.Points[i]
		s := &Summary{Attempts: 1000, Acquired: 900, DurationS: 1, AcquiredPerSec: p.AcquiredPerSec, AcquireLatencyUs: p.LatencyUs,
			Mode: "try", Errors: map[string]int64{"no_quorum": 0}}
		if p.Value == 64 {
			s.Errors["no_quorum"] = 5 // 0.5%: the fastest step within the latency bound misses the error bound
		}
		sw.CheckStep(p, s)
	}
	sw.Analyze()
	if sw.SLOPoint == nil || sw.SLOPoint.Value != 16 {
		t.Fatalf("SLO point %+v, want 16 workers: 64 missed the error bound", sw.SLOPoint)
	}
	if m := sw.Points[3].Misses; len(m) != 1 || !strings.HasPrefix(m[0], "errors<0.1% missed: error rate was 0.5%") {
		t.Errorf("64 workers' misses %q", m)
	}
	var b bytes.Buffer
	if err := WriteSweepText(&b, sw); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "slo          p99<5ms, errors<0.1%: met up to 32000.0 acquisitions/s, at 16 workers") {
		t.Errorf("sweep text:\n%s", b.String())
	}
	// Read back, the sweep keeps its verdicts.
	b.Reset()
	if err := WriteSweepJSON(&b, sw); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSweepJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	back.Analyze()
	if back.SLOPoint == nil || back.SLOPoint.Value != 16 || len(back.Objectives) != 2 {
		t.Errorf("read back: SLO point %+v, objectives %v", back.SLOPoint, back.Objectives)
	}
	// None met: the closest step, and what it missed.
	for i := range sw.Points {
		sw.Points[i].Misses = append(sw.Points[i].Misses, "x missed")
		f := false
		sw.Points[i].MeetsSLO = &f
	}
	sw.Analyze()
	if msg := SLOMiss(sw); sw.SLOPoint != nil || !strings.Contains(msg, "no point met the SLO p99<5ms, errors<0.1%: the closest, at 16 workers (32000 acquisitions/s), missed x missed") {
		t.Errorf("SLO point %+v, miss %q", sw.SLOPoint, msg)
	}
}
