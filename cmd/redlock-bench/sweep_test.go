package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/results"
)

func TestParseSweepFlagsGood(t *testing.T) {
	for _, c := range []struct {
		args  []string
		check func(bench.SweepConfig) bool
	}{
		{[]string{"--workers", "1,4,16"}, func(sc bench.SweepConfig) bool {
			return sc.Param == "workers" && reflect.DeepEqual(sc.Values, []float64{1, 4, 16}) && sc.Objectives == nil &&
				sc.Label == "sweep-workers-redlock-r1000-try" && sc.Base.Label == ""
		}},
		{[]string{"--workers=1:64:x4", "--slo", "p99<5ms", "--resources", "10"}, func(sc bench.SweepConfig) bool {
			return reflect.DeepEqual(sc.Values, []float64{1, 4, 16, 64}) && len(sc.Objectives) == 1 && sc.Objectives[0].Text == "p99<5ms" && sc.Base.Resources == 10
		}},
		// Any objective a run takes, and every --slo given, in order.
		{[]string{"--workers", "1,4", "--slo", "errors<0.1%", "--slo", "p99<5ms", "--slo", "throughput>=100/s"}, func(sc bench.SweepConfig) bool {
			return len(sc.Objectives) == 3 && sc.Objectives[0].Text == "errors<0.1%" && sc.Objectives[1].Text == "p99<5ms" &&
				sc.Objectives[2].Text == "throughput>=100/s"
		}},
		{[]string{"--rate", "1000:4000:x2", "--workers", "32", "--label", "open"}, func(sc bench.SweepConfig) bool {
			return sc.Param == "rate" && reflect.DeepEqual(sc.Values, []float64{1000, 2000, 4000}) && sc.Base.Workers == 32 &&
				sc.Label == "open" && sc.Base.Label == "open"
		}},
		{[]string{"--rate=500,1000", "--mode", "wait", "--hold", "1ms", "--masters", "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002"}, func(sc bench.SweepConfig) bool {
			return sc.Param == "rate" && sc.Base.Mode == bench.ModeWait && len(sc.Base.Masters) == 3
		}},
		{[]string{"--workers", "2,4", "--rate", "100"}, func(sc bench.SweepConfig) bool {
			return sc.Param == "workers" && sc.Base.Rate == 100
		}},
	} {
		sc, _, err := parseSweepFlags(c.args)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if !c.check(sc) {
			t.Errorf("%q: unexpected sweep %+v", c.args, sc)
		}
	}
}

func TestParseSweepFlagsBad(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "sweep: give --workers or --rate a list of values"},
		{[]string{"--workers", "64"}, "sweep: give --workers or --rate a list of values"},
		{[]string{"--workers", "1,2", "--rate", "1,2"}, "sweep one of --workers and --rate"},
		{[]string{"--workers", "1,x"}, `--workers: "x" is not a number`},
		{[]string{"--workers", "1,1"}, "--workers: value 1 is listed twice"},
		{[]string{"--workers", "4:4:x2"}, "a sweep needs at least two values"},
		{[]string{"--workers", "1,2", "--slo", "p95<1ms"}, `--slo: slo "p95<1ms": unknown metric "p95"`},
		{[]string{"--workers", "1,2", "--slo", "wait.p99<1ms"}, "--slo: mode try measures no wait latency (--mode wait does), got wait.p99<1ms"},
		{[]string{"--workers", "1,2", "--ttl", "-1s"}, "--ttl: must be > 0, got -1s"},
		{[]string{"--workers", "1,2", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"--workers", "1,2", "extra"}, `sweep: unexpected argument "extra"`},
		{[]string{"--workers", "1,2", "--label", "a b"}, "--label: may hold only"},
		{[]string{"--workers", "1,2", "--clients", "2"}, "step 1 (1 worker): --clients: must be <= --workers (1)"},
		{[]string{"--workers"}, "flag needs an argument: --workers"},
	} {
		_, _, err := parseSweepFlags(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
			continue
		}
		var stderr bytes.Buffer
		if code := exitCode(err, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2", c.args, code)
		}
	}
}

func TestSweepHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"sweep", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("sweep --help: exit %d: %s", code, stderr.String())
	}
	for _, f := range []string{"--workers", "--rate", "--slo", "--out", "--label", "--ttl", "--resources", "--masters", "START:END:xFACTOR"} {
		if !strings.Contains(stdout.String(), f) {
			t.Errorf("sweep --help lacks %s", f)
		}
	}
	for _, sub := range []string{"report", "merge"} {
		stdout.Reset()
		if code := run(context.Background(), []string{sub, "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "--out") {
			t.Errorf("%s --help: exit %d, %q", sub, code, stdout.String())
		}
	}
}

// A whole sweep with the control engine, then its report, in process.
// Each step is 1000 attempts at 4000/s: at least 250 ms however fast the
// machine, so that every step has an interval to draw over time (a
// sliver of 50 ms or less draws none).
func TestSweepThenReport(t *testing.T) {
	t.Chdir(t.TempDir())
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"sweep", "--engine", "nolock", "--workers", "1,2,4", "--ops", "1000", "--rate", "4000",
		"--warmup", "0", "--check=false", "--resources", "100000", "--slo", "p99<1s"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("sweep: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	dirs, _ := filepath.Glob(filepath.Join("results", "sweeps", "*-sweep-workers-nolock-r100000-*"))
	if len(dirs) != 1 {
		t.Fatalf("sweep directories %v", dirs)
	}
	dir := dirs[0]
	for _, want := range []string{"knee", "slo          p99<1s: met up to", "results: " + dir, "redlock-bench report " + dir} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "step 3/3") {
		t.Errorf("stderr does not show the steps:\n%s", stderr.String())
	}
	for _, f := range []string{results.SweepJSON, results.SweepText, "01-nolock-w1-r100000-try-rate4000/summary.json", "03-nolock-w4-r100000-try-rate4000/intervals.hlog"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}

	stdout.Reset()
	stderr.Reset()
	out := t.TempDir()
	if code := run(context.Background(), []string{"report", dir, "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr.String())
	}
	for _, f := range []string{results.ReportHTML, results.CapacityFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	charts, _ := filepath.Glob(filepath.Join(out, results.ChartsDir, "*.svg"))
	pngs, _ := filepath.Glob(filepath.Join(out, results.ChartsDir, "*.png"))
	if len(charts) != 4 || len(pngs) != 4 {
		t.Errorf("charts %v %v", charts, pngs)
	}
	// Without --out, the report goes into the first directory.
	if code := run(context.Background(), []string{"report", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, results.ReportHTML)); err != nil {
		t.Error(err)
	}
}

// No step meets an SLO below a Redis round trip: status 3 and one line that
// says so.
func TestSweepSLONeverMet(t *testing.T) {
	t.Chdir(t.TempDir())
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"sweep", "--workers", "1,2", "--local-masters", "3", "--ops", "300",
		"--warmup", "0", "--slo", "p50<1us", "--out", "s"}, &stdout, &stderr)
	if code != exitSLOMissed {
		t.Fatalf("exit %d, want 3\n%s\n%s", code, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "redlock-bench: no point met the SLO p50<1µs: the closest, at ") || !strings.Contains(last, "missed p50<1µs missed: acquire p50 was ") {
		t.Errorf("last line %q", last)
	}
	b, err := os.ReadFile(filepath.Join("s", results.SweepJSON))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"slo_point": null`)) || !bytes.Contains(b, []byte(`"meets_slo": false`)) {
		t.Errorf("sweep.json:\n%s", b)
	}
}

func TestReportAndMergeUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"report"}, "report: give at least one run, sweep or compare directory"},
		{[]string{"report", t.TempDir()}, "holds no run"},
		{[]string{"report", "/nonexistent/dir"}, "no such file"},
		{[]string{"report", "x", "--slo", "p99"}, "--slo: slo"},
		{[]string{"merge", "one"}, "merge: give at least two run directories, got 1"},
		{[]string{"merge", "a", "b", "--label", "a b"}, "--label: may hold only"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), c.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, %q, want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// Two load generators at once (here two runs in one process), merged.
func TestMergeCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	start := time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	var wg sync.WaitGroup
	codes := make([]int, 2)
	outs := make([]bytes.Buffer, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var stdout bytes.Buffer
			// By count, with holds: each window has attempts however slow
			// the machine, and lasts at least 500 ms (2000 holds of 1 ms
			// by 4 workers), so that the two pods' windows overlap.
			codes[i] = run(context.Background(), []string{"run", "--engine", "nolock", "--workers", "4", "--resources", "100000",
				"--check=false", "--ops", "2000", "--hold", "1ms", "--warmup", "100ms", "--start-at", start,
				"--label", "pod-" + string(rune('0'+i)), "--out", "pod-" + string(rune('0'+i))}, &stdout, &outs[i])
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != 0 {
			t.Fatalf("pod-%d: exit %d: %s", i, c, outs[i].String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"merge", "pod-0", "pod-1", "--out", "merged"}, &stdout, &stderr); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, stderr.String())
	}
	m, err := results.LoadRunDir("merged")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := results.LoadRunDir("pod-0")
	b, _ := results.LoadRunDir("pod-1")
	if m.Summary.Acquired != a.Summary.Acquired+b.Summary.Acquired || m.Summary.Label != "merged-pod" {
		t.Errorf("merged acquired %d label %q, sources %d + %d", m.Summary.Acquired, m.Summary.Label, a.Summary.Acquired, b.Summary.Acquired)
	}
	if got := m.Histogram("acquire").TotalCount(); got != m.Summary.Acquired {
		t.Errorf("merged histogram holds %d, acquired %d", got, m.Summary.Acquired)
	}
	if !strings.Contains(stdout.String(), "merged 2 runs over a common window") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	if _, err := os.Stat(filepath.Join("merged", results.MergeJSON)); err != nil {
		t.Error(err)
	}
	// A merged summary.json is a summary.json: the schema holds for it too
	// (it lacks fairness.jain and adds merged_from and overlap_s).
	mb, err := os.ReadFile(filepath.Join("merged", results.SummaryJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(summarySchema(t), mb); err != nil {
		t.Errorf("merged summary.json does not validate against results/summary.schema.json: %#v", err)
	}
	// A merged run is a run: the report reads it.
	if code := run(context.Background(), []string{"report", "merged"}, &stdout, &stderr); code != 0 {
		t.Errorf("report of a merged run: exit %d: %s", code, stderr.String())
	}
}

// Ctrl-C in a sweep's first step: exit 130, sweep.json and the step's
// summary marked interrupted, and the sweep's masters stopped.
func TestSweepInterrupt(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sw")
	cmd := command(t, "sweep", "--workers", "1,2", "--local-masters", "3", "--duration", "1m", "--warmup", "0", "--out", out)
	lines := stderrLines(start(t, cmd))
	// Interrupted once the first step has acquired.
	m := awaitLines(t, cmd, lines, regexp.MustCompile(`^redlock-bench: started 3 local redis-server for the whole sweep: (.*)$`), measuredProgress)
	drain(lines)
	masters := strings.Split(m[0][1], ",")
	interruptAndWait(t, cmd)
	f, err := os.Open(filepath.Join(out, results.SweepJSON))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sw, err := results.ReadSweepJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if !sw.Interrupted || len(sw.Points) != 1 || !sw.Points[0].Interrupted {
		t.Errorf("sweep.json: interrupted %v, points %+v", sw.Interrupted, sw.Points)
	}
	if s := readSummary(t, filepath.Join(out, sw.Points[0].Dir)); s["interrupted"] != true || s["acquired"].(float64) == 0 {
		t.Errorf("the step's summary: interrupted %v, acquired %v", s["interrupted"], s["acquired"])
	}
	for _, a := range masters {
		if pids := serversOnPort(a[strings.LastIndexByte(a, ':')+1:]); len(pids) > 0 {
			t.Errorf("redis-server %s still running after the sweep: pids %v", a, pids)
		}
	}
}
