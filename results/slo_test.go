package results

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseObjective(t *testing.T) {
	for _, c := range []struct {
		in, text, metric, latency, op string
		bound                         float64
	}{
		{"p99<5ms", "p99<5ms", "p99", "", "<", 5000},
		{" P99.9 >= 800us ", "p999>=800µs", "p999", "", ">=", 800},
		{"max<=1s", "max<=1s", "max", "", "<=", 1e6},
		{"release.p99<2ms", "release.p99<2ms", "p99", "release", "<", 2000},
		{"wait.p99.9<20ms", "wait.p999<20ms", "p999", "wait", "<", 20000},
		{"acquire_fail.mean<1ms", "acquire_fail.mean<1ms", "mean", "acquire_fail", "<", 1000},
		{"errors<0.1%", "errors<0.1%", "errors", "", "<", 0.1},
		{"errors <= 5 %", "errors<=5%", "errors", "", "<=", 5},
		{"throughput>=10000/s", "throughput>=10000/s", "throughput", "", ">=", 10000},
		{"throughput>2500.5", "throughput>2500.5/s", "throughput", "", ">", 2500.5},
		{"violations<1", "violations<1", "violations", "", "<", 1},
		// k6's names of the trend statistics.
		{"p(99)<5ms", "p99<5ms", "p99", "", "<", 5000},
		{"release.p(99.9)<5ms", "release.p999<5ms", "p999", "release", "<", 5000},
		{"avg<1ms", "mean<1ms", "mean", "", "<", 1000},
		{"med<=300us", "p50<=300µs", "p50", "", "<=", 300},
	} {
		o, err := ParseObjective(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if o.Text != c.text || o.String() != c.text || o.Metric != c.metric || o.Latency != c.latency || o.Op != c.op || o.Bound != c.bound {
			t.Errorf("%q: got %+v", c.in, o)
		}
		back, err := ParseObjective(o.Text)
		if err != nil || back != o {
			t.Errorf("%q does not read back: %+v, %v", o.Text, back, err)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", `slo "": no comparison: want METRIC OP VALUE`},
		{"p99", "no comparison"},
		{"<5ms", "no metric"},
		{"p95<5ms", `unknown metric "p95"`},
		{"latency<5ms", `unknown metric "latency"`},
		{"p99<5", `limit "5" has no unit`},
		{"p99<", `no value after "<"`},
		{"errors>=", `no value after ">="`},
		{"release.max<1h", `limit "1h": unknown unit "h" (µs, us, ms or s)`},
		{"p99<5sec", `limit "5sec": unknown unit "sec" (µs, us, ms or s)`},
		{"p(95)<5ms", `unknown metric "p(95)"`},
		{"p99<-5ms", "not a plain positive number"},
		{"errors<0.1", "errors take a percentage such as 0.1%"},
		{"errors<101%", "at most 100%"},
		{"errors<-1%", "not a plain positive number"},
		{"release.errors<1%", "errors is not a latency statistic"},
		{"throughput>fast", "not a plain positive number"},
		{"violations<0.5", "a count is a whole number"},
		{"bogus.p99<1ms", `unknown metric "bogus.p99"`},
		{"p99=5ms", "no comparison"},
	} {
		_, err := ParseObjective(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.in, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), "OP is <, <=, > or >=") {
			t.Errorf("%q: the error does not say what is allowed: %v", c.in, err)
		}
	}
}

func TestObjectiveCheck(t *testing.T) {
	s := fixedSummary() // mode try: acquire latency
	s.Attempts, s.Acquired, s.DurationS, s.AcquiredPerSec, s.Checked, s.Violations = 1000, 900, 1, 900, true, 0
	s.Errors = map[string]int64{"no_quorum": 1, "timeout": 1}
	p99 := s.AcquireLatencyUs.P99
	at := FormatLimitUs(float64(p99))
	for _, c := range []struct {
		in  string
		met bool
		why string
	}{
		{"p99<" + at, false, "p99<" + at + " missed: acquire p99 was " + FormatUs(p99) + ", bound < " + at},
		{"p99<=" + at, true, "met: acquire p99 was"},
		{"release.p99<3600s", true, "release p99 was"},
		{"release.p99>3600s", false, "missed"},
		{"errors<0.1%", false, "errors<0.1% missed: error rate was 0.2%, bound < 0.1%"},
		{"errors<=0.2%", true, "error rate was 0.2%"},
		{"throughput>=900/s", true, "throughput was 900.0/s, bound >= 900/s"},
		{"throughput>900/s", false, "missed"},
		{"violations<1", true, "violations was 0"},
		{"wait.p99<1s", false, "the run measured no wait p99, no evidence"},
	} {
		o, err := ParseObjective(c.in)
		if err != nil {
			t.Fatal(err)
		}
		r := o.Check(s)
		if r.Met != c.met || !strings.Contains(r.Why, c.why) {
			t.Errorf("%s: met %v, %q; want %v and %q", c.in, r.Met, r.Why, c.met, c.why)
		}
	}
	// Mode wait: the acquisition latency is the wait histogram.
	w := fixedWaitSummary()
	o, _ := ParseObjective("p99<3600s")
	if r := o.Check(w); !r.Met || !strings.Contains(r.Why, "wait p99") {
		t.Errorf("mode wait: %+v", r)
	}
	// No safety check is no evidence of safety.
	s.Checked = false
	o, _ = ParseObjective("violations<1")
	if r := o.Check(s); r.Met || r.Measured {
		t.Errorf("unchecked run met %s: %+v", o.Text, r)
	}
	s.Checked, s.Violations = true, 2
	if r := o.Check(s); r.Met {
		t.Errorf("2 violations met %s", o.Text)
	}
}

func TestCheckInput(t *testing.T) {
	fast, slow := fixedSummary(), fixedSummary()
	fast.AcquireLatencyUs.P99, slow.AcquireLatencyUs.P99 = 100, 9000
	objs, err := ParseObjectives([]string{"p99<1ms"})
	if err != nil {
		t.Fatal(err)
	}
	runs := []*RunDir{{Dir: "a", Summary: slow}, {Dir: "b", Summary: fast}}
	if m := CheckInput(&Input{Kind: "sweep", Dir: "sw", Runs: runs}, objs); m != nil {
		t.Errorf("a sweep with a step within the objective: %q", m)
	}
	m := CheckInput(&Input{Kind: "runs", Dir: "rs", Runs: runs}, objs)
	if len(m) != 1 || !strings.HasPrefix(m[0], "a: p99<1ms missed: acquire p99 was 9.00ms") {
		t.Errorf("runs: %q", m)
	}
	m = CheckInput(&Input{Kind: "sweep", Dir: "sw", Runs: runs[:1]}, objs)
	if len(m) != 2 || !strings.Contains(m[0], "no step of the sweep met every objective") {
		t.Errorf("sweep: %q", m)
	}
}

// Readers take summaries from before schema_version, and refuse a newer
// format with a message that says so.
func TestReadJSONSchemaVersion(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, fixedSummary()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"schema_version": 1,`) {
		t.Fatalf("no schema_version:\n%s", b.String())
	}
	old := strings.Replace(b.String(), `"schema_version": 1,`, "", 1)
	if s, err := ReadJSON(strings.NewReader(old)); err != nil || s.SchemaVersion != 0 || s.Label != "golden" {
		t.Errorf("a summary without schema_version: %v, %+v", err, s)
	}
	// A newer one, whose fields may no longer decode as this build thinks.
	newer := strings.Replace(b.String(), `"schema_version": 1,`, `"schema_version": 2,`, 1)
	newer = strings.Replace(newer, `"attempts": `, `"attempts": "many", "was": `, 1)
	_, err := ReadJSON(strings.NewReader(newer))
	if err == nil || !strings.Contains(err.Error(), "summary.json has schema_version 2, newer than the 1 this build reads") {
		t.Errorf("a newer summary: %v", err)
	}
	// Report and merge load run directories through it.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, SummaryJSON), []byte(newer), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRunDir(dir); err == nil || !strings.Contains(err.Error(), "newer than") {
		t.Errorf("LoadRunDir of a newer summary: %v", err)
	}
}

// FuzzParseObjective checks that the parser never panics and that what it
// accepts reads back unchanged from its String.
func FuzzParseObjective(f *testing.F) {
	for _, s := range []string{"p99<5ms", "release.p99.9>=2ms", "errors<0.1%", "throughput>=1e4/s", "violations<1", "wait.errors<1%",
		"max<=", ">5ms", "p99<5ms<6ms", "errors<%", "throughput>/s", "hold.mean>1.5s", "p(99.9)<1h", "release.avg<=1ms", "p(99<5ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseObjective(s)
		if err != nil {
			return
		}
		if o.Bound < 0 || o.Text != o.String() {
			t.Fatalf("%q: %+v", s, o)
		}
		back, err := ParseObjective(o.String())
		if err != nil || back != o {
			t.Fatalf("%q: %q reads back as %+v, %v; want %+v", s, o.String(), back, err, o)
		}
	})
}
