package results

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Two halves of one run, recorded into two histograms, merge into exactly
// the histogram of the whole: every percentile equal, none averaged.
func TestMergeHalvesEqualsWhole(t *testing.T) {
	whole, a, b := NewSet(), NewSet(), NewSet()
	// Two different shapes, so that averaging percentiles would be wrong.
	for i := 0; i < 20000; i++ {
		fast := time.Duration(200+i%500) * time.Microsecond
		slow := time.Duration(1000+(i*7919)%90000) * time.Microsecond
		whole.Record(Acquire, fast)
		a.Record(Acquire, fast)
		if i%3 == 0 {
			whole.Record(Acquire, slow)
			b.Record(Acquire, slow)
		}
		whole.Record(Hold, fast/2)
		if i%2 == 0 {
			a.Record(Hold, fast/2)
		} else {
			b.Record(Hold, fast/2)
		}
	}
	dir := t.TempDir()
	start := synthStart
	mk := func(name, host string, set *Set, acquired int64, extra map[string]any) *RunDir {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		s := &Summary{Engine: "redlock", Label: name, Mode: "try", LoadModel: "closed", StartedAt: start, WarmupS: 1, DurationS: 10,
			Attempts: acquired + 5, Acquired: acquired, Contended: 5, Errors: map[string]int64{"no_quorum": 1, "timeout": 0, "other": 2, "release": 0},
			Violations: 1, ViolationExamples: []Violation{{Resource: "rlb:1", FirstHolder: 1, SecondHolder: 2, AtS: 3}},
			Checked: true, Masters: []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
			Config:  RunConfig{Workers: 64, Rate: 0, TTL: "10s", Resources: 1000},
			Machine: Machine{Hostname: host, OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2, GoVersion: "go1.26.0"},
		}
		s.AcquiredPerSec = float64(acquired) / 10
		s.SetLatencies(set)
		if err := WriteRun(d, s, set); err != nil {
			t.Fatal(err)
		}
		// A counter and an object this version does not know, and a ratio.
		b, _ := os.ReadFile(filepath.Join(d, SummaryJSON))
		var m map[string]any
		json.Unmarshal(b, &m)
		for k, v := range extra {
			m[k] = v
		}
		out, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(d, SummaryJSON), out, 0o644)
		r, err := LoadRunDir(d)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ra := mk("pod-0", "load-a", a, 20000, map[string]any{
		"stale_tokens": 3, "future_counters": map[string]any{"ok": 10, "failed": 1}, "fairness": map[string]any{"jain": 0.91, "min": 10, "max": 30},
		"future_latency_us": map[string]any{"count": 5, "p50": 10, "p99": 20}, "future_ratio": 0.5, "cpu": map[string]any{"window_s": 1, "client_s": 0.5, "host_busy": 1, "saturated": []any{"host"}},
	})
	rb := mk("pod-1", "load-b", b, 6667, map[string]any{
		"stale_tokens": 4, "future_counters": map[string]any{"ok": 5, "failed": 0}, "fairness": map[string]any{"jain": 0.87, "min": 7, "max": 40},
		"future_latency_us": map[string]any{"count": 7, "p50": 12, "p99": 30}, "future_ratio": 0.25, "cpu": map[string]any{"window_s": 1, "client_s": 0.5, "host_busy": 1, "saturated": []any{"host"}},
	})
	m, err := Merge([]*RunDir{ra, rb}, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Kind{Acquire, Hold} {
		got, want := StatsOf(m.Full[k.String()]), StatsOf(whole[k])
		if got != want {
			t.Errorf("%s: merged %+v, whole %+v", k, got, want)
		}
		if !m.Full[k.String()].Equals(whole[k]) {
			t.Errorf("%s: merged histogram differs from the whole's", k)
		}
	}
	s := m.Summary
	if s.AcquireLatencyUs != StatsOf(whole[Acquire]) || s.HoldUs != StatsOf(whole[Hold]) {
		t.Errorf("summary stats %+v / %+v are not the whole's", s.AcquireLatencyUs, s.HoldUs)
	}
	if s.Acquired != 26667 || s.Attempts != 26677 || s.Contended != 10 || s.Violations != 2 ||
		s.Errors["no_quorum"] != 2 || s.Errors["other"] != 4 || len(s.ViolationExamples) != 2 {
		t.Errorf("counters not summed: %+v", s)
	}
	if s.Label != "merged-pod" || s.Machine.Hostname != "load-a,load-b" || s.Machine.CPUs != 4 || !s.Checked {
		t.Errorf("label %q machine %+v checked %v", s.Label, s.Machine, s.Checked)
	}
	if got := s.Config.Workers; got != 128 {
		t.Errorf("merged workers %d, want 128", got)
	}
	// Unknown integer counters are summed; an unknown ratio is left out;
	// percentiles without a histogram are left out.
	if v, _ := m.Raw["stale_tokens"].(json.Number).Int64(); v != 7 {
		t.Errorf("stale_tokens %v, want 7", m.Raw["stale_tokens"])
	}
	if ext := m.Raw["future_counters"].(map[string]any); ext["ok"].(json.Number) != "15" || ext["failed"].(json.Number) != "1" {
		t.Errorf("future_counters %v", ext)
	}
	if _, ok := m.Raw["future_ratio"]; ok {
		t.Errorf("future_ratio %v: a ratio must not be merged", m.Raw["future_ratio"])
	}
	// A minimum and a maximum merge as such, not as sums.
	if f, ok := m.Raw["fairness"].(map[string]any); !ok || f["jain"] != nil || f["min"] != json.Number("7") || f["max"] != json.Number("40") {
		t.Errorf("fairness %v: a ratio must not be merged, min and max must stay min and max", m.Raw["fairness"])
	}
	if v, ok := m.Raw["cpu"]; ok {
		t.Errorf("cpu %v: Summary.Merge drops it (each source's window and process), so it must not come back merged as unknown", v)
	}
	if _, ok := m.Raw["future_latency_us"]; ok {
		t.Errorf("future_latency_us kept without a histogram: %v", m.Raw["future_latency_us"])
	}
	notes := strings.Join(m.Info.Notes, "\n")
	for _, want := range []string{"fairness.jain", "future_latency_us", "future_ratio"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes do not name %s:\n%s", want, notes)
		}
	}
	// Same window, no intervals: the throughput is the sum.
	if m.Info.OverlapS != 10 || math.Abs(m.Info.AcquiredPerSec-2666.7) > 0.05 {
		t.Errorf("window %v s, %v/s", m.Info.OverlapS, m.Info.AcquiredPerSec)
	}

	out := filepath.Join(dir, "merged")
	os.MkdirAll(out, 0o755)
	if err := WriteMerged(out, m); err != nil {
		t.Fatal(err)
	}
	back, err := LoadRunDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if back.Summary.AcquireLatencyUs != StatsOf(whole[Acquire]) || back.Histogram("acquire") == nil || !back.Histogram("acquire").Equals(whole[Acquire]) {
		t.Errorf("the merged run does not read back: %+v", back.Summary.AcquireLatencyUs)
	}
	for _, f := range []string{SummaryText, "acquire.hgrm", "hold.hgrm", HistogramsLog, IntervalsLog, MergeJSON} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// A merged run merges again, with a third: the histograms stay exact.
	if _, err := Merge([]*RunDir{back, ra}, MergeOptions{Label: "again"}); err != nil {
		t.Errorf("merging a merged run: %v", err)
	}
}

// Runs that started at different times merge over their common window, and
// the throughput counts only the acquisitions inside it.
func TestMergeThroughputOverTheOverlap(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, offset time.Duration, perSec int64) *RunDir {
		writeSynthRun(t, filepath.Join(dir, name), synthRun{
			label: name, workers: 32, start: synthStart.Add(offset), warmupS: 1, seconds: 10,
			perSec: func(int) int64 { return perSec }, latencyUs: exponential(100, 500), holdUs: 100, hostname: name,
		})
		r, err := LoadRunDir(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := mk("a", 0, 1000)
	b := mk("b", 2*time.Second, 3000)
	m, err := Merge([]*RunDir{a, b}, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Windows [1s, 11s) and [3s, 13s): 8 s in common, 4000/s inside it.
	if m.Info.OverlapS != 8 || m.Summary.DurationS != 8 {
		t.Errorf("overlap %v s, duration %v s, want 8", m.Info.OverlapS, m.Summary.DurationS)
	}
	if m.Info.AcquiredPerSec != 4000 || m.Summary.AcquiredPerSec != 4000 {
		t.Errorf("throughput %v (summary %v), want 4000", m.Info.AcquiredPerSec, m.Summary.AcquiredPerSec)
	}
	if m.Summary.Acquired != 40000 {
		t.Errorf("acquired %d, want every acquisition of both: 40000", m.Summary.Acquired)
	}
	// Both runs' seconds lie on whole seconds from the earliest window:
	// 12 buckets, the middle ones holding both runs.
	perBucket := map[int64]int64{}
	for _, iv := range m.Intervals {
		if iv.Tag == "acquire" {
			perBucket[(iv.Histogram.StartTimeMs()-m.Base.UnixMilli())/1000] += iv.Histogram.TotalCount()
		}
	}
	if len(perBucket) != 12 || perBucket[0] != 1000 || perBucket[5] != 4000 || perBucket[11] != 3000 {
		t.Errorf("merged intervals per second: %v", perBucket)
	}
	if !strings.Contains(strings.Join(m.Info.Notes, "\n"), "covers only 80%") {
		t.Errorf("notes do not warn about the partial overlap: %v", m.Info.Notes)
	}

	c := mk("c", time.Minute, 1000)
	if _, err := Merge([]*RunDir{a, c}, MergeOptions{}); err != ErrNoOverlap {
		t.Errorf("disjoint runs: %v, want ErrNoOverlap", err)
	}
	w := mk("w", 0, 10)
	w.Summary.Mode = "wait"
	if _, err := Merge([]*RunDir{a, w}, MergeOptions{}); err == nil || !strings.Contains(err.Error(), "mode") {
		t.Errorf("different modes: %v", err)
	}
}
