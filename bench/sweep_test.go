package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/results"
)

func TestParseSweepValues(t *testing.T) {
	for _, c := range []struct {
		in      string
		integer bool
		want    []float64
	}{
		{"1,4,16,64,256,1024", true, []float64{1, 4, 16, 64, 256, 1024}},
		{"64, 1 ,16", true, []float64{1, 16, 64}},
		{"1:1024:x4", true, []float64{1, 4, 16, 64, 256, 1024}},
		{"1:1000:x4", true, []float64{1, 4, 16, 64, 256, 1000}},
		{"1000:50000:x2", false, []float64{1000, 2000, 4000, 8000, 16000, 32000, 50000}},
		{"1000:5000:+1000", false, []float64{1000, 2000, 3000, 4000, 5000}},
		{"1000:4500:+1000", false, []float64{1000, 2000, 3000, 4000, 4500}},
		{"0.5:2:+0.5", false, []float64{0.5, 1, 1.5, 2}},
		{"1:2:x1.1", true, []float64{1, 2}},
		{"1000:1500:x1.1", false, []float64{1000, 1100, 1210, 1331, 1464.1, 1500}},
		{"8:8:x2", true, []float64{8}},
		{"2500.5,100", false, []float64{100, 2500.5}},
		{"1:64:x1.01", true, nil}, // checked below: many values merge on rounding
	} {
		got, err := ParseSweepValues(c.in, c.integer)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if c.want != nil && !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %v, want %v", c.in, got, c.want)
		}
	}
	if got, _ := ParseSweepValues("1:64:x1.01", true); len(got) != 64 || got[0] != 1 || got[63] != 64 {
		t.Errorf("1:64:x1.01 as integers: %v", got)
	}
	for _, c := range []struct{ in, want string }{
		{"", "want a list"},
		{"1,,4", "is not a number"},
		{"1,4,4", "listed twice"},
		{"0,4", "must be > 0"},
		{"-1,4", "must be > 0"},
		{"1:16", "want a list"},
		{"1:16:2", "want a list"},
		{"1:16:y2", "must start with x"},
		{"16:1:x2", "below START"},
		{"1:16:x1", "FACTOR must be > 1"},
		{"1:16:+0", "must be > 0"},
		{"1:1000000:+1", "more than 100 values"},
		{"1:nan:x2", "not a number"},
		{"1:inf:x2", "not a number"},
		{"0.2,1", "rounds to 0"},
		{"a:b:xc", "not a number"},
	} {
		integer := c.in == "0.2,1"
		_, err := ParseSweepValues(c.in, integer)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %q", c.in, err, c.want)
		}
	}
}

// FuzzParseSweepValues: never a panic, and whatever is accepted is a short,
// ascending list of positive values without duplicates.
func FuzzParseSweepValues(f *testing.F) {
	for _, s := range []string{"1,4,16", "1:1024:x4", "1000:50000:x2", "1000:5000:+1000", "1:2:x1.0000001", "5:5:+1", ",", "1:1e12:x1.5"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, integer bool) {
		vals, err := ParseSweepValues(s, integer)
		if err != nil {
			return
		}
		if len(vals) == 0 || len(vals) > MaxSweepSteps {
			t.Fatalf("%q: %d values", s, len(vals))
		}
		for i, v := range vals {
			if !(v > 0) || (integer && v != float64(int64(v))) {
				t.Fatalf("%q: bad value %v in %v", s, v, vals)
			}
			if i > 0 && vals[i-1] >= v {
				t.Fatalf("%q: not strictly ascending: %v", s, vals)
			}
		}
	})
}

func sweepConfig(t *testing.T, base Config, param string, values ...float64) SweepConfig {
	t.Helper()
	return SweepConfig{Base: base, Param: param, Values: values, Dir: t.TempDir()}
}

func nolockBase() Config {
	c := DefaultConfig()
	c.Engine = engines.MustParse("nolock")
	c.Resources = 100000
	c.Check = false
	// Each step ends by count: a loaded machine slows it, never empties it.
	byCount(&c, 300)
	c.Warmup = 0
	return c
}

func TestSweepWritesARunPerStep(t *testing.T) {
	noLeaks(t)
	sc := sweepConfig(t, nolockBase(), SweepWorkers, 1, 2, 4)
	var progress, log bytes.Buffer
	sc.Progress, sc.Log = &progress, &log
	sw, err := RunSweep(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Points) != 3 || sw.Interrupted || sw.Param != "workers" || sw.Label != "sweep-workers-nolock-r100000-try" {
		t.Fatalf("sweep %+v", sw)
	}
	for i, p := range sw.Points {
		dir := filepath.Join(sc.Dir, p.Dir)
		for _, f := range []string{results.SummaryJSON, results.SummaryText, results.IntervalsLog, results.HistogramsLog, "acquire.hgrm", results.IntervalsJSON} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("step %d: %v", i+1, err)
			}
		}
		// A step's directory is a run's: its seconds are there too, and
		// they add up to what its summary counted.
		var acquired int64
		ivs := readIntervalsFile(t, dir)
		for _, iv := range ivs {
			acquired += iv.Acquired
		}
		if len(ivs) == 0 || acquired == 0 {
			t.Errorf("step %d: intervals.json holds %d seconds, %d acquired", i+1, len(ivs), acquired)
		}
		r, err := results.LoadRunDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		s := r.Summary
		if float64(s.Config.Workers) != float64(sc.Values[i]) || p.Workers != int(sc.Values[i]) || p.AcquiredPerSec <= 0 || p.LatencyUs.Count == 0 {
			t.Errorf("step %d: config %v, point %+v", i+1, s.Config, p)
		}
		if want := "rlb:s" + string(rune('1'+i)) + ":"; s.Config.KeyPrefix != want {
			t.Errorf("step %d: key prefix %v, want %s", i+1, s.Config.KeyPrefix, want)
		}
	}
	if sw.Points[0].Dir != "01-nolock-w1-r100000-try" {
		t.Errorf("step directory %q", sw.Points[0].Dir)
	}
	b, err := os.ReadFile(filepath.Join(sc.Dir, results.SweepJSON))
	if err != nil {
		t.Fatal(err)
	}
	back, err := results.ReadSweepJSON(bytes.NewReader(b))
	if err != nil || len(back.Points) != 3 || back.Config["workers"] != "1,2,4" {
		t.Errorf("sweep.json: %v %+v", err, back)
	}
	if !strings.Contains(log.String(), "step 2/3 (workers=2") && !strings.Contains(log.String(), "step 2/3 workers=2") {
		t.Errorf("log does not name the steps:\n%s", log.String())
	}
	if !strings.Contains(progress.String(), "step 3/3 workers=4, ETA ") {
		t.Errorf("progress lines lack the step and ETA:\n%s", progress.String())
	}
}

// The masters are started once: every step reports the same addresses, and
// they are marked as local.
func TestSweepSharesLocalMasters(t *testing.T) {
	noLeaks(t)
	base := DefaultConfig()
	base.LocalMasters = 3
	base.Workers = 4
	base.Resources = 1000
	// Each step by count, on a minute's TTL (a 600 ms node timeout): a
	// loaded machine slows the steps, but neither empties them nor times
	// out healthy masters into the errors the objectives judge.
	loadProof(&base)
	byCount(&base, 100)
	base.Warmup = 0
	base.Rate = 0
	sc := sweepConfig(t, base, SweepRate, 200, 400)
	objs, err := results.ParseObjectives([]string{"p99<2s", "errors<50%"})
	if err != nil {
		t.Fatal(err)
	}
	sc.Objectives = objs
	sw, err := RunSweep(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Points) != 2 || len(sw.Masters) != 3 || !sw.LocalMasters || sw.LoadModel != "open" {
		t.Fatalf("sweep %+v", sw)
	}
	for _, p := range sw.Points {
		r, err := results.LoadRunDir(filepath.Join(sc.Dir, p.Dir))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Summary.Masters, sw.Masters) || !r.Summary.LocalMasters || r.Summary.Violations != 0 {
			t.Errorf("step %s: masters %v local %v, want the sweep's %v", p.Dir, r.Summary.Masters, r.Summary.LocalMasters, sw.Masters)
		}
		if r.Summary.LoadModel != "open" || p.Rate != p.Value {
			t.Errorf("step %s: load %s rate %v", p.Dir, r.Summary.LoadModel, p.Rate)
		}
	}
	if sw.SLOPoint == nil {
		t.Errorf("p99<2s not met at a few hundred acquisitions/s: %+v", sw.Points)
	}
}

func TestSweepStopsWhenCancelled(t *testing.T) {
	noLeaks(t)
	sc := sweepConfig(t, nolockBase(), SweepWorkers, 1, 2, 3, 4, 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancelled as the second step begins: the event, not a moment.
	sc.Log = &onLine{match: "(sweep ETA ", nth: 2, do: cancel}
	sw, err := RunSweep(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if !sw.Interrupted || len(sw.Points) == 0 || len(sw.Points) >= 5 {
		t.Fatalf("interrupted %v with %d points", sw.Interrupted, len(sw.Points))
	}
	b, _ := os.ReadFile(filepath.Join(sc.Dir, results.SweepJSON))
	if !bytes.Contains(b, []byte(`"interrupted": true`)) {
		t.Errorf("sweep.json does not say it was interrupted")
	}
}

func TestSweepValidate(t *testing.T) {
	base := nolockBase()
	for _, c := range []struct {
		sc   SweepConfig
		want string
	}{
		{SweepConfig{Base: base, Param: "resources", Values: []float64{1, 2}, Dir: "x"}, "must be workers or rate"},
		{SweepConfig{Base: base, Param: SweepWorkers, Values: []float64{4}, Dir: "x"}, "at least two values"},
		{SweepConfig{Base: func() Config { c := base; c.Clients = 3; return c }(), Param: SweepWorkers, Values: []float64{2, 4}, Dir: "x"},
			"step 1 (2 workers): --clients: must be <= --workers (2)"},
	} {
		err := c.sc.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.sc.Param, err, c.want)
		}
	}
	if _, err := RunSweep(context.Background(), SweepConfig{Base: base, Param: SweepWorkers, Values: []float64{1, 2}}); err == nil || !strings.Contains(err.Error(), "Dir is empty") {
		t.Errorf("no Dir: %v", err)
	}
	var ce *ConfigError
	if err := (&SweepConfig{Base: base, Param: "x", Values: []float64{1, 2}, Dir: "d"}).Validate(); !errors.As(err, &ce) {
		t.Errorf("not a *ConfigError: %v", err)
	}
}

func TestDeriveSweepLabel(t *testing.T) {
	c := DefaultConfig()
	if got := DeriveSweepLabel(c, SweepWorkers); got != "sweep-workers-redlock-r1000-try" {
		t.Errorf("workers: %q", got)
	}
	c.Rate = 5000
	if got := DeriveSweepLabel(c, SweepRate); got != "sweep-rate-redlock-w64-r1000-try" {
		t.Errorf("rate: %q", got)
	}
}

// onLine is a log writer that calls do once, at the nth write that
// contains match.
type onLine struct {
	mu    sync.Mutex
	match string
	nth   int
	do    func()
}

func (o *onLine) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if bytes.Contains(b, []byte(o.match)) {
		if o.nth--; o.nth == 0 {
			o.do()
		}
	}
	return len(b), nil
}
