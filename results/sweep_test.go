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
	slo, err := ParseSLO("p99<5ms")
	if err != nil {
		t.Fatal(err)
	}
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
	slo, _ := ParseSLO("p99<1ms")
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
	slo, _ := ParseSLO("p999<=20ms")
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

func TestParseSLO(t *testing.T) {
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
	} {
		got, err := ParseSLO(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got.Percentile != c.pct || got.LimitUs != c.limitUs || got.Inclusive != c.inclusive || got.Text != c.text || got.String() != c.text {
			t.Errorf("%q: got %+v, want %s %v %v %q", c.in, got, c.pct, c.limitUs, c.inclusive, c.text)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", "want PERCENTILE<LIMIT"},
		{"p99", "want PERCENTILE<LIMIT"},
		{"p99>5ms", "want PERCENTILE<LIMIT"},
		{"p95<5ms", `unknown percentile "p95"`},
		{"avg<5ms", `unknown percentile "avg"`},
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
		{"p99<5 ms", ""},
		{"p99<<5ms", "not a plain positive number"},
	} {
		_, err := ParseSLO(c.in)
		if c.in == "p99<5 ms" { // a space before the unit is accepted
			if err != nil {
				t.Errorf("%q: %v", c.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.in, err, c.want)
		}
	}
}

func TestSLOMet(t *testing.T) {
	st := Stats{Count: 10, P50: 100, P90: 200, P99: 5000, P999: 9000}
	for _, c := range []struct {
		slo  string
		want bool
	}{
		{"p99<5ms", false}, {"p99<=5ms", true}, {"p99<5.001ms", true}, {"p50<101us", true}, {"p999<9ms", false}, {"p90<1ms", true},
	} {
		o, err := ParseSLO(c.slo)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Met(st); got != c.want {
			t.Errorf("%s on %+v: %v, want %v", c.slo, st, got, c.want)
		}
	}
	o, _ := ParseSLO("p99<1s")
	if o.Met(Stats{}) {
		t.Error("an empty histogram met an SLO")
	}
}

// FuzzParseSLO checks that the parser never panics, that whatever it
// accepts is sane, and that String reads back to the same objective.
func FuzzParseSLO(f *testing.F) {
	for _, s := range []string{"p99<5ms", "p50<800us", "p999<=1.5s", "p99.9<2µs", "p90 < 0.25ms", "", "p99<", "<5ms", "p99<5e3us", "p99<99999999999s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseSLO(s)
		if err != nil {
			return
		}
		if !(o.LimitUs >= 1 && o.LimitUs <= float64(HighestUs)) || math.IsNaN(o.LimitUs) {
			t.Fatalf("%q: limit %v out of range", s, o.LimitUs)
		}
		if o.Quantile() <= 0 || o.Quantile() >= 1 {
			t.Fatalf("%q: quantile %v", s, o.Quantile())
		}
		back, err := ParseSLO(o.String())
		if err != nil {
			t.Fatalf("%q: String %q does not parse: %v", s, o.String(), err)
		}
		if back != o {
			t.Fatalf("%q: round trip %+v != %+v", s, back, o)
		}
	})
}
