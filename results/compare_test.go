package results

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{10, 1, 1000}, 10}, // an outlier does not move it
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, 5, 1, 9, 5}, 5},
	} {
		in := append([]float64(nil), c.in...)
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
		if !reflect.DeepEqual(in, c.in) {
			t.Errorf("Median reordered its input: %v", c.in)
		}
	}
}

func TestRatio(t *testing.T) {
	if r := Ratio(3, 2); r == nil || *r != 1.5 {
		t.Errorf("Ratio(3, 2) = %v", r)
	}
	if r := Ratio(0, 2); r == nil || *r != 0 {
		t.Errorf("Ratio(0, 2) = %v", r)
	}
	for _, c := range [][2]float64{{1, 0}, {0, 0}, {math.NaN(), 1}} {
		if r := Ratio(c[0], c[1]); r != nil {
			t.Errorf("Ratio(%v, %v) = %v, want nil", c[0], c[1], *r)
		}
	}
}

func TestCeilingCycles(t *testing.T) {
	// 200k SET/s and 100k EVALSHA/s: one of each per cycle takes
	// 5µs + 10µs, so 66,666.7 cycles/s.
	if got := CeilingCycles(200000, 100000); math.Abs(got-66666.67) > 0.01 {
		t.Errorf("CeilingCycles = %v", got)
	}
	if CeilingCycles(0, 1) != 0 {
		t.Error("a master that did nothing has no ceiling")
	}
	c := NewCeiling("redis-benchmark -P 16", 1000, []CeilingMaster{
		{Addr: "a:1", SetPerSec: 200000, EvalshaPerSec: 100000},
		{Addr: "a:2", SetPerSec: 100000, EvalshaPerSec: 100000},
	})
	if c.CyclesPerSec != 50000 || c.Masters[1].CyclesPerSec != 50000 {
		t.Errorf("ceiling %+v: want the slowest master's 50000", c)
	}
}

// Medians are taken figure by figure over complete runs only; ratios are
// against the first engine; violations add up over every run.
func TestComparisonAnalyze(t *testing.T) {
	c := fixedComparison()
	c.Ceiling = nil
	c.Analyze()
	a, b := c.Results[0], c.Results[1]
	if a.Runs != 3 || b.Runs != 2 {
		t.Fatalf("runs %d and %d, want 3 and 2 (one interrupted)", a.Runs, b.Runs)
	}
	if a.Median.AcquiredPerSec != 10000 || a.Median.AcquireP99Us != 900 {
		t.Errorf("first engine's medians: %+v", a.Median)
	}
	// Two complete runs: the mean of both.
	if b.Median.AcquiredPerSec != 4100 || b.Median.AcquireP50Us != 2050 {
		t.Errorf("second engine's medians: %+v", b.Median)
	}
	if a.Ratio != nil {
		t.Errorf("the reference has a ratio: %+v", a.Ratio)
	}
	if r := b.Ratio; r == nil || *r.AcquiredPerSec != 0.41 || *r.AcquireP50Us != 2050.0/500 {
		t.Errorf("ratios %+v", r)
	}
	if b.Ratio.Errors != nil {
		t.Errorf("errors ratio to 0 errors = %v, want none", *b.Ratio.Errors)
	}
	if a.Violations != 0 || b.Violations != 3 {
		t.Errorf("violations %d, %d: want 0, 3 (the interrupted run's count too)", a.Violations, b.Violations)
	}
	if a.OfCeiling != nil {
		t.Error("share of a ceiling that was not measured")
	}
}

func TestComparisonWithoutRuns(t *testing.T) {
	c := &Comparison{Kind: "compare", Label: "empty", Engines: []string{"a", "b"}, Rounds: 3, Interrupted: true}
	c.Analyze()
	if c.Results[0].Median != nil || c.Results[1].Ratio != nil {
		t.Errorf("results without runs: %+v", c.Results)
	}
	var b bytes.Buffer
	if err := WriteCompareText(&b, c); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), []byte("INTERRUPTED")) || !bytes.Contains(b.Bytes(), []byte("nothing ran")) {
		t.Errorf("empty comparison:\n%s", b.String())
	}
}

func TestCompareGolden(t *testing.T) {
	c := fixedComparison()
	c.Analyze()
	var txt, js bytes.Buffer
	if err := WriteCompareText(&txt, c); err != nil {
		t.Fatal(err)
	}
	if err := WriteCompareJSON(&js, c); err != nil {
		t.Fatal(err)
	}
	golden(t, "compare.txt", txt.Bytes())
	golden(t, "compare.json", js.Bytes())

	back, err := ReadCompareJSON(bytes.NewReader(js.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Results, c.Results) || !reflect.DeepEqual(back.Ceiling, c.Ceiling) {
		t.Errorf("compare.json does not round-trip:\n%+v\n%+v", back.Results, c.Results)
	}
}

// fixedComparison is two engines, three rounds, the second engine's last
// run interrupted, with a measured ceiling: every branch of the report.
func fixedComparison() *Comparison {
	c := &Comparison{
		Kind:      "compare",
		Label:     "golden",
		Engines:   []string{"redlock", "redsync-goredis"},
		Rounds:    3,
		Mode:      "try",
		LoadModel: "closed",
		Latency:   "acquire",
		Config: map[string]any{
			"engine": "redlock,redsync-goredis", "workers": 256, "resources": 100000, "distribution": "uniform",
			"mode": "try", "hold": "0", "ttl": "10s", "duration": "5s", "warmup": "1s", "ops": 0,
			"rate": 0, "check": true, "rounds": 3,
		},
		Masters:      []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"},
		LocalMasters: true,
		Machine: Machine{
			Hostname: "bench-1", OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2,
			GoVersion: "go1.26.0", RedisVersion: "7.0.15",
		},
		StartedAt:   time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Interrupted: true,
	}
	fig := func(acq, p50, p99, p999, rel50, rel99, cont, errs float64) CompareFigures {
		return CompareFigures{acq, p50, p99, p999, rel50, rel99, cont, errs}
	}
	c.Runs = []CompareRun{
		{Round: 1, Engine: "redlock", Dir: "1-redlock", Figures: fig(9000, 520, 950, 2100, 400, 800, 0.01, 0)},
		{Round: 1, Engine: "redsync-goredis", Dir: "1-redsync-goredis", Figures: fig(4000, 2000, 6000, 9000, 1900, 5000, 0.02, 0), Violations: 1},
		{Round: 2, Engine: "redlock", Dir: "2-redlock", Figures: fig(10000, 500, 900, 2000, 380, 790, 0, 0)},
		{Round: 2, Engine: "redsync-goredis", Dir: "2-redsync-goredis", Figures: fig(4200, 2100, 6100, 9900, 2000, 5100, 0.04, 0)},
		{Round: 3, Engine: "redlock", Dir: "3-redlock", Figures: fig(11000, 480, 880, 1900, 390, 810, 0.03, 0)},
		{Round: 3, Engine: "redsync-goredis", Dir: "3-redsync-goredis", Interrupted: true, Figures: fig(100, 9000, 9900, 9990, 9000, 9900, 50, 7), Violations: 2},
	}
	c.Ceiling = NewCeiling("redis-benchmark -P 16 -c 50", 200000, []CeilingMaster{
		{Addr: "127.0.0.1:7001", SetPerSec: 250000, EvalshaPerSec: 150000},
		{Addr: "127.0.0.1:7002", SetPerSec: 240000, EvalshaPerSec: 160000},
		{Addr: "127.0.0.1:7003", SetPerSec: 200000, EvalshaPerSec: 100000},
	})
	return c
}

// An engine that voted on fewer masters than the comparison has (a
// single-master baseline, redlock@1) is named in the header with the
// masters it used, so that a row is not read as the same deployment as
// the others'.
func TestCompareTextNamesEnginesOnFewerMasters(t *testing.T) {
	c := fixedComparison()
	c.Engines = []string{"redlock", "bsm-redislock", "redlock@1", "redsync-goredis@2"}
	c.Runs = []CompareRun{
		{Round: 1, Engine: "redlock", Dir: "1-redlock", Masters: 3},
		{Round: 1, Engine: "bsm-redislock", Dir: "1-bsm-redislock", Masters: 1},
		{Round: 1, Engine: "redlock@1", Dir: "1-redlock_1", Masters: 1},
		{Round: 1, Engine: "redsync-goredis@2", Dir: "1-redsync-goredis_2", Masters: 2},
	}
	c.Analyze()
	if got := []int{c.Results[0].Masters, c.Results[1].Masters, c.Results[2].Masters, c.Results[3].Masters}; !slices.Equal(got, []int{3, 1, 1, 2}) {
		t.Errorf("masters per engine %v, want [3 1 1 2]", got)
	}
	var b strings.Builder
	if err := WriteCompareText(&b, c); err != nil {
		t.Fatal(err)
	}
	want := "masters      127.0.0.1:7001, 127.0.0.1:7002, 127.0.0.1:7003 (started locally); " +
		"bsm-redislock, redlock@1 on the first only; redsync-goredis@2 on the first 2; redlock on all 3\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("header does not say which masters each engine used; want\n%s\ngot\n%s", want, b.String())
	}
	// Every engine on every master: the header says so, as before.
	c = fixedComparison()
	for i := range c.Runs {
		c.Runs[i].Masters = 3
	}
	c.Analyze()
	b.Reset()
	WriteCompareText(&b, c)
	if !strings.Contains(b.String(), "(started locally), the same for every run\n") {
		t.Errorf("every engine on every master:\n%s", b.String())
	}
}

// compare.txt's safety line states the rule of the comparison's lock, as
// each run's summary.txt does: a semaphore's or a read/write lock's is
// not a mutex's.
func TestCompareTextSafetyNamesTheLocksRule(t *testing.T) {
	for _, c := range []struct {
		lock, ok, bad string
	}{
		{"", "OK: no two holds of one resource overlapped in any run\n", "VIOLATED: two holds of one resource overlapped (redsync-goredis 3)"},
		{"rw:0.9", "OK: no writer held a resource beside another holder (readers share) in any run\n",
			"VIOLATED: a writer held a resource beside another holder (redsync-goredis 3)"},
		{"semaphore:8", "OK: never more holders of a semaphore at once than its 8 permits in any run\n",
			"VIOLATED: more holders of a semaphore at once than its 8 permits (redsync-goredis 3)"},
	} {
		cmp := fixedComparison()
		cmp.Lock = c.lock
		cmp.Analyze()
		var b strings.Builder
		WriteCompareText(&b, cmp)
		if !strings.Contains(b.String(), "safety       "+c.bad) {
			t.Errorf("lock %q: want %q in\n%s", c.lock, c.bad, b.String())
		}
		cmp.Runs = slices.DeleteFunc(cmp.Runs, func(r CompareRun) bool { return r.Violations > 0 })
		cmp.Analyze()
		b.Reset()
		WriteCompareText(&b, cmp)
		if !strings.Contains(b.String(), "safety       "+c.ok) {
			t.Errorf("lock %q: want %q in\n%s", c.lock, c.ok, b.String())
		}
	}
}
