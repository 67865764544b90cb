package results

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// summary.json files written before RunConfig, and by older merges that
// wrote differing numeric settings as "a,b", still load; the rest of the
// config is read.
func TestRunConfigReadsOldConfigs(t *testing.T) {
	const old = `{"engine":"redlock","label":"x","config":{"workers":64,"rate":0.5,"seed":"1,2","ttl":"10s","check":true,"future_flag":3}}`
	s, err := ReadJSON(strings.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	c := s.RunConfig()
	if c.Workers != 64 || c.Rate != 0.5 || c.TTL != "10s" || !c.Check || c.Seed != 0 {
		t.Errorf("config read as %+v", c)
	}
	var strict RunConfig
	if err := strict.UnmarshalJSON([]byte(`{"workers":"8,16","ttl":"1s"}`)); err != nil || strict.TTL != "1s" {
		t.Errorf("a setting of another type fails the config: %v, %+v", err, strict)
	}
	if err := strict.UnmarshalJSON([]byte(`{"workers":`)); err == nil {
		t.Error("broken JSON read without error")
	}
	// Map has exactly the JSON names, so sweep.json and compare.json keep
	// their keys.
	m := RunConfig{Workers: 3}.Map()
	if len(m) != 31 || m["workers"] == nil || m["no_wait_quarantine"] == nil {
		t.Errorf("Map() = %v", m)
	}
	// The struct writes its keys in the order a map of them always had,
	// so summary.json does not change.
	full := RunConfig{Workers: 3, Engine: "redlock", TTL: "1s", Seed: 1 << 60, Rate: 1e6, Check: true}
	b1, _ := json.Marshal(full)
	b2, _ := json.Marshal(full.Map())
	if string(b1) != string(b2) {
		t.Errorf("RunConfig writes\n%s\nits map writes\n%s", b1, b2)
	}
}

// Summary.Merge is typed: counters add, extremes stay extremes, a machine
// counted once, the masters' views merged by address, the load adds and
// settings that differ are named.
func TestSummaryMerge(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mk := func(label string, start time.Time, ttl string) *Summary {
		return &Summary{
			Label: label, StartedAt: start, Checked: true, Attempts: 10, Acquired: 8, Contended: 2,
			BacklogMax: 5, Errors: map[string]int64{"timeout": 1},
			Config:            RunConfig{Workers: 4, Clients: 1, Rate: 100, TTL: ttl, Seed: 1, Label: label},
			Machine:           Machine{Hostname: "host", CPUs: 2, GOMAXPROCS: 2},
			Fairness:          Fairness{Jain: 0.9, Min: 1, Max: 3},
			Masters:           []string{"a:1", "b:1"},
			Nodes:             []Node{{Addr: "a:1", State: "up", OK: 5, Restarts: 1}, {Addr: "b:1", State: "up", OK: 7}},
			ViolationExamples: []Violation{{Resource: "r"}},
		}
	}
	s := mk("one", t0.Add(time.Second), "10s").clone()
	o := mk("two", t0, "20s")
	o.Checked = false
	o.Nodes[0].State, o.Nodes[0].Restarts, o.Fairness = "down", 0, Fairness{Jain: 1, Min: 0, Max: 9}
	notes := strings.Join(s.Merge(o), "\n")
	if s.Attempts != 20 || s.Acquired != 16 || s.Errors["timeout"] != 2 || s.BacklogMax != 10 || s.Checked {
		t.Errorf("counters: %+v", s)
	}
	if s.Machine.CPUs != 2 || s.Machine.Hostname != "host" {
		t.Errorf("one host counted twice: %+v", s.Machine)
	}
	if s.Fairness != (Fairness{Min: 0, Max: 9}) || !strings.Contains(notes, "fairness.jain") {
		t.Errorf("fairness %+v, notes %q", s.Fairness, notes)
	}
	if len(s.Nodes) != 2 || s.Nodes[0].OK != 10 || s.Nodes[0].Restarts != 1 || s.Nodes[0].State != "up,down" {
		t.Errorf("nodes %+v", s.Nodes)
	}
	c := s.RunConfig()
	if c.Workers != 8 || c.Clients != 2 || c.Rate != 200 || c.TTL != "10s,20s" || c.Label != "" || c.Seed != 1 {
		t.Errorf("config %+v", c)
	}
	if !strings.Contains(notes, "config ttl differs between runs: 10s,20s") {
		t.Errorf("notes do not name the differing ttl: %q", notes)
	}
	if len(s.ViolationExamples) != 2 || s.ViolationExamples[0].Source != "one" || s.ViolationExamples[1].Source != "two" {
		t.Errorf("violation examples %+v", s.ViolationExamples)
	}
	var txt strings.Builder
	shown := *s
	shown.Checked, shown.Violations = true, 2
	WriteText(&txt, &shown)
	if !strings.Contains(txt.String(), "r (run two): worker 0") {
		t.Errorf("summary.txt does not say which run found a violation:\n%s", txt.String())
	}
	if !s.StartedAt.Equal(t0) {
		t.Errorf("started %v, want the earliest %v", s.StartedAt, t0)
	}
	s.Close(t0.Add(2*time.Second), 7, 2.5, nil)
	if s.WarmupS != 2 || s.DurationS != 7 || s.AcquiredPerSec != 2.5 {
		t.Errorf("closed: warm-up %v, duration %v, rate %v", s.WarmupS, s.DurationS, s.AcquiredPerSec)
	}
	// The other machine is counted.
	o.Machine.Hostname = "other"
	s.Merge(o)
	if s.Machine.CPUs != 4 || s.Machine.Hostname != "host,other" {
		t.Errorf("a second host not counted: %+v", s.Machine)
	}
}

// A Jain index that was never measured (a merged run's) is not printed as
// a measured 0.
func TestWriteTextJainNotMeasured(t *testing.T) {
	s := &Summary{Label: "m", Fairness: Fairness{Min: 1, Max: 9}, Config: RunConfig{Workers: 8}}
	var b strings.Builder
	if err := WriteText(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "fairness     Jain n/a over 8 workers (fewest 1, most 9") {
		t.Errorf("summary.txt:\n%s", b.String())
	}
	s.Fairness.Jain = 0.5
	b.Reset()
	WriteText(&b, s)
	if !strings.Contains(b.String(), "Jain 0.5000 over 8 workers") {
		t.Errorf("summary.txt:\n%s", b.String())
	}
}
