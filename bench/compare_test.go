package bench

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/results"
)

// fakeRuns stands in for Run: it records each run's configuration and
// returns a summary that says which run it was.
type fakeRuns struct {
	mu      sync.Mutex
	configs []Config
	// hook, when set, may change the result or fail run n (from 0).
	hook func(n int, r *Result) error
}

func (f *fakeRuns) run(ctx context.Context, cfg Config) (*Result, error) {
	f.mu.Lock()
	n := len(f.configs)
	f.configs = append(f.configs, cfg)
	f.mu.Unlock()
	s := &results.Summary{
		Engine: cfg.Engine.String(), Label: cfg.Label, Config: cfg.Flags(), Mode: string(cfg.Mode),
		// As Run does: masters a sweep or comparison started count as local.
		Masters: cfg.Masters, LocalMasters: cfg.sharedLocal && len(cfg.Masters) > 0,
		DurationS: 1, Attempts: 100, Acquired: int64(90 + n), Contended: 10,
		AcquiredPerSec: float64(1000 * (n + 1)), Errors: map[string]int64{}, Checked: true,
	}
	s.Machine.CPUs = 2
	ivs := []results.Interval{{TS: 0, LengthS: 1, Acquired: s.Acquired, AcquiredPerS: float64(s.Acquired)}}
	r := &Result{Summary: s, Histograms: results.NewSet(), Intervals: ivs}
	if f.hook != nil {
		if err := f.hook(n, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func compareConfig(t *testing.T, f *fakeRuns, names ...string) CompareConfig {
	base := DefaultConfig()
	base.LocalMasters = 3
	return CompareConfig{Base: base, Engines: engineList(names...), Dir: t.TempDir(), Label: "t", run: f.run}
}

// engineList parses names, known to be good.
func engineList(names ...string) []engines.Engine {
	var out []engines.Engine
	for _, n := range names {
		out = append(out, engines.MustParse(n))
	}
	return out
}

func readComparison(t *testing.T, dir string) *results.Comparison {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, results.CompareJSON))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := results.ReadCompareJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Engines alternate round by round on masters started once, each run with
// keys of its own, and every run lands in its own directory.
func TestCompareAlternatesOnSharedMasters(t *testing.T) {
	noLeaks(t)
	f := &fakeRuns{}
	cc := compareConfig(t, f, "redlock", engines.RedsyncGoredis.String(), "nolock")
	cmp, err := RunCompare(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	prefixes := map[string]bool{}
	for _, c := range f.configs {
		order = append(order, c.Engine.String())
		prefixes[c.KeyPrefix] = true
		if c.Engine.NeedsRedis() && strings.Join(c.Masters, ",") != strings.Join(f.configs[0].Masters, ",") {
			t.Errorf("%s ran on %v, the first run on %v", c.Label, c.Masters, f.configs[0].Masters)
		}
		if c.Quarantine != engines.QuarantineObserved {
			t.Errorf("%s: quarantine %q on masters the comparison started", c.Label, c.Quarantine)
		}
	}
	want := "redlock redsync-goredis nolock redlock redsync-goredis nolock redlock redsync-goredis nolock"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("order:\n got %s\nwant %s", got, want)
	}
	if len(prefixes) != 9 || f.configs[4].Label != "t-2-redsync-goredis" || f.configs[4].KeyPrefix != "rlb:c2-2:" {
		t.Errorf("labels and key prefixes: %d distinct, run 5: %q %q", len(prefixes), f.configs[4].Label, f.configs[4].KeyPrefix)
	}
	if len(f.configs[0].Masters) != 3 {
		t.Fatalf("masters %v, want 3 local ones", f.configs[0].Masters)
	}
	for _, a := range f.configs[0].Masters {
		if redistest.Ping(a, 200*time.Millisecond) == nil {
			t.Errorf("local master %s still answers after the comparison", a)
		}
	}
	for _, r := range cmp.Runs {
		s, err := os.ReadFile(filepath.Join(cc.Dir, r.Dir, results.SummaryJSON))
		if err != nil {
			t.Fatal(err)
		}
		if r.Engine != "nolock" && !strings.Contains(string(s), `"local_masters": true`) {
			t.Errorf("%s/summary.json does not say its masters were local", r.Dir)
		}
	}
	disk := readComparison(t, cc.Dir)
	if len(disk.Runs) != 9 || disk.Interrupted || !disk.LocalMasters || len(disk.Masters) != 3 {
		t.Errorf("compare.json: %d runs, interrupted %v, local %v, masters %v", len(disk.Runs), disk.Interrupted, disk.LocalMasters, disk.Masters)
	}
	// Run n reports 1000(n+1)/s: redlock ran 1st, 4th and 7th.
	if m := disk.Results[0].Median; m == nil || m.AcquiredPerSec != 4000 {
		t.Errorf("redlock median %+v, want 4000 acquisitions/s", m)
	}
	if _, err := os.Stat(filepath.Join(cc.Dir, results.CompareText)); err != nil {
		t.Error(err)
	}
}

// Every round's run directory is a full run directory, the same as run
// writes: its seconds (intervals.json) included.
func TestCompareRunDirsHoldIntervals(t *testing.T) {
	f := &fakeRuns{}
	cc := compareConfig(t, f, "nolock")
	cmp, err := RunCompare(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmp.Runs) != 3 {
		t.Fatalf("%d runs, want 3", len(cmp.Runs))
	}
	for i, r := range cmp.Runs {
		dir := filepath.Join(cc.Dir, r.Dir)
		for _, name := range []string{results.SummaryJSON, results.SummaryText, results.IntervalsLog, results.HistogramsLog, results.IntervalsJSON} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Errorf("run %d: %v", i+1, err)
			}
		}
		// The fake's run n acquired 90+n in its one second.
		if ivs := readIntervalsFile(t, dir); len(ivs) != 1 || ivs[0].Acquired != int64(90+i) {
			t.Errorf("run %d: intervals.json %+v, want one second with %d acquired", i+1, ivs, 90+i)
		}
	}
}

// readIntervalsFile reads dir's intervals.json.
func readIntervalsFile(t *testing.T, dir string) []results.Interval {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, results.IntervalsJSON))
	if err != nil {
		t.Error(err)
		return nil
	}
	var ivs []results.Interval
	if err := json.Unmarshal(b, &ivs); err != nil {
		t.Errorf("%s: %v", filepath.Join(dir, results.IntervalsJSON), err)
	}
	return ivs
}

// Ctrl-C during a run: that run is kept, marked interrupted, and the
// comparison stops and is written as it stands.
func TestCompareInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeRuns{hook: func(n int, r *Result) error {
		if n == 2 {
			cancel()
			r.Summary.Interrupted = true
		}
		return nil
	}}
	cc := compareConfig(t, f, "nolock", "redlock")
	cc.Base.Masters = []string{"127.0.0.1:1"} // never dialled by the fake
	cmp, err := RunCompare(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.configs) != 3 || len(cmp.Runs) != 3 || !cmp.Interrupted {
		t.Fatalf("%d runs started, %d kept, interrupted %v", len(f.configs), len(cmp.Runs), cmp.Interrupted)
	}
	disk := readComparison(t, cc.Dir)
	if !disk.Interrupted || !disk.Runs[2].Interrupted || disk.Results[0].Runs != 1 || disk.Results[1].Runs != 1 {
		t.Errorf("compare.json after an interrupt: %+v", disk.Results)
	}
}

// A run that fails ends the comparison with its error; what ran before is
// kept, and the failed run leaves no directory.
func TestCompareRunError(t *testing.T) {
	boom := errors.New("boom")
	f := &fakeRuns{hook: func(n int, r *Result) error {
		if n == 1 {
			return boom
		}
		return nil
	}}
	cc := compareConfig(t, f, "nolock", "redlock")
	cc.Base.Masters = []string{"127.0.0.1:1"}
	cmp, err := RunCompare(context.Background(), cc)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "round 1, redlock") {
		t.Fatalf("error %v", err)
	}
	if len(cmp.Runs) != 1 || len(readComparison(t, cc.Dir).Runs) != 1 {
		t.Errorf("runs kept: %d", len(cmp.Runs))
	}
	if _, err := os.Stat(filepath.Join(cc.Dir, "1-redlock")); !os.IsNotExist(err) {
		t.Errorf("the failed run left its directory: %v", err)
	}
}

func TestCompareValidate(t *testing.T) {
	for _, c := range []struct {
		change func(*CompareConfig)
		want   string
	}{
		{func(cc *CompareConfig) { cc.Rounds = 2 }, "--rounds: must be >= 3: a median of fewer runs is one noisy run, got 2"},
		{func(cc *CompareConfig) { cc.Engines = engineList("redlock", "redlock") }, `--engines: engine "redlock" is listed twice, got redlock,redlock`},
		{func(cc *CompareConfig) { cc.Engines, cc.Limit = engineList("nolock"), true }, "--limit: needs Redis masters, and none of --engines nolock uses them, got true"},
		{func(cc *CompareConfig) { cc.Label = "a b" }, `--label: may hold only letters, digits, '.', '_' and '-', got "a b"`},
		{func(cc *CompareConfig) { cc.Base.Workers = 0 }, "redlock: --workers: must be > 0, got 0"},
	} {
		cc := CompareConfig{Base: DefaultConfig(), Dir: "x"}
		c.change(&cc)
		err := cc.Validate()
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v\nwant %s", err, c.want)
		}
	}
	cc := CompareConfig{Base: DefaultConfig(), Dir: "x"}
	if err := cc.Validate(); err != nil || cc.Rounds != 3 || len(cc.Engines) != 3 || cc.Label != "w64-r1000-try" {
		t.Errorf("defaults: %v, %d rounds, engines %v, label %q", err, cc.Rounds, cc.Engines, cc.Label)
	}
}

// The release script the ceiling runs is the engine's: a redlock client
// loads its scripts on connect, so the SHA of what releaseScript returns
// must be loaded.
func TestReleaseScriptIsTheEngines(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	a := c.Addrs()[0]
	sha := releaseScriptSHA()
	if _, err := redistest.Do(a, 10*time.Second, "EVALSHA", sha, "1", "k", "v"); err == nil {
		t.Fatal("the script is loaded before any client connected")
	}
	cfg := DefaultConfig()
	cfg.Quarantine = engines.QuarantineOff
	e, err := engines.Open(context.Background(), cfg.Spec, engines.Votes{Masters: c.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if reply, err := redistest.Do(a, 10*time.Second, "EVALSHA", sha, "1", "k", "v"); err != nil || reply != ":0" {
		t.Errorf("EVALSHA of releaseScript() after a redlock client connected: %q, %v; "+
			"releaseScript (compare_limit.go) no longer returns the script the engine loads", reply, err)
	}
}

func TestMeasureCeiling(t *testing.T) {
	binary, err := exec.LookPath("redis-benchmark")
	if err != nil {
		t.Skip("redis-benchmark not installed")
	}
	c := redistest.StartT(t, 2)
	cl, err := measureCeiling(context.Background(), binary, c.Addrs(), 5000, "rlb:limit:")
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Masters) != 2 || cl.CyclesPerSec <= 0 || cl.Requests != 5000 {
		t.Fatalf("ceiling %+v", cl)
	}
	for _, m := range cl.Masters {
		if m.SetPerSec <= 0 || m.EvalshaPerSec <= 0 || m.CyclesPerSec >= min(m.SetPerSec, m.EvalshaPerSec) {
			t.Errorf("master %+v", m)
		}
	}
	// A master that is gone is named.
	c.Nodes[1].Kill()
	_, err = measureCeiling(context.Background(), binary, c.Addrs(), 1000, "rlb:limit:")
	if err == nil || !strings.Contains(err.Error(), c.Addrs()[1]) {
		t.Errorf("dead master: %v", err)
	}
}
