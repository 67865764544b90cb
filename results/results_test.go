package results

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/version"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixedSet records a deterministic spread of values in every kind.
func fixedSet() *Set {
	set := NewSet()
	for i := 1; i <= 10000; i++ {
		us := time.Duration(i*i/5000+200) * time.Microsecond
		set.Record(Acquire, us)
		if i%10 == 0 {
			set.Record(AcquireFail, us/2)
		}
		set.Record(Release, us/3)
		set.Record(Hold, time.Millisecond+us/7)
	}
	return set
}

func fixedSummary() *Summary {
	s := &Summary{
		Engine: "redlock",
		Label:  "golden",
		Tool:   version.Info{Version: "v1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8"},
		Config: RunConfig{
			Engine: "redlock", Workers: 64, Resources: 1000, Distribution: "zipf:1.1",
			Mode: "try", Hold: "exp:1ms", TTL: "10s", Duration: "10s", Warmup: "1s",
			Rate: 0, Check: true,
		},
		Machine: Machine{
			Hostname: "bench-1", OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2,
			GoVersion: "go1.26.0", RedisVersion: "7.0.15",
		},
		Masters:             []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"},
		LocalMasters:        true,
		StartedAt:           time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		WarmupS:             1,
		DurationS:           10,
		Mode:                "try",
		LoadModel:           "closed",
		Attempts:            11000,
		Acquired:            10000,
		Contended:           990,
		Errors:              map[string]int64{"no_quorum": 4, "timeout": 3, "other": 3, "release": 1},
		ErrorExamples:       map[string]string{"no_quorum": "engine: acquire \"rlb:1\": no quorum: too many masters failed"},
		WarmupErrorExamples: map[string]string{"timeout": "engine: acquire \"rlb:2\": no quorum: 2 of 3 masters timed out"},
		NodeTimeoutMs:       100,
		CPU:                 NewCPU(CPUReading{WindowS: 10, ClientS: 12.5, Masters: []float64{3, 4.5, 2}, HostBusy: 0.97}, 10000, Machine{CPUs: 2, GOMAXPROCS: 2}),
		LostLeases:          2,
		AcquiredPerSec:      1000,
		Checked:             true,
		Violations:          1,
		ViolationExamples: []Violation{
			{Resource: "rlb:7", FirstHolder: 3, SecondHolder: 9, AtS: 4.25, FirstRemainingUs: 812},
		},
		Extensions:    0,
		Fairness:      Fairness{Jain: 0.9987, Min: 140, Max: 171},
		TokensChecked: 10000,
		StaleTokens:   1,
		StaleTokenExamples: []StaleToken{
			{Resource: "rlb:7", Worker: 9, Token: 41, Previous: 42, AtS: 4.25},
		},
		Faults: []FaultEvent{
			{Fault: "pause:1@3s+2s", Action: "pause", Node: 1, AtS: 3, ForS: 2, AppliedS: 3.0004,
				AppliedAt: time.Date(2025, 1, 2, 3, 4, 8, 400_000, time.UTC), EndedS: 5.0011, Ended: true},
			{Fault: "kill:2@6s", Action: "kill", Node: 2, AtS: 6, AppliedS: 6.0002,
				AppliedAt: time.Date(2025, 1, 2, 3, 4, 11, 200_000, time.UTC), EndedS: 6.0031, Ended: true},
		},
		Nodes: []Node{
			{Addr: "127.0.0.1:7001", State: "up", RunID: "a1", Version: "7.0.15", OK: 9000, Refused: 900, Failed: 3, TimedOut: 2},
			{Addr: "127.0.0.1:7002", State: "quarantined", QuarantinedUntil: time.Date(2025, 1, 2, 3, 4, 25, 0, time.UTC),
				RunID: "b2", Version: "7.0.15", Restarts: 1, OK: 8000, Refused: 800, TimedOut: 40},
			{Addr: "127.0.0.1:7003", State: "down", Error: "dial tcp 127.0.0.1:7003: connect: connection refused", OK: 5000, Refused: 500, Failed: 9},
		},
	}
	s.SetLatencies(fixedSet())
	return s
}

// fixedWaitSummary is a run in mode wait with auto-extension and the
// figures that only mode wait has: waiting, handoff and subscriptions.
func fixedWaitSummary() *Summary {
	s := fixedSummary()
	s.Label = "golden-wait"
	s.Mode = "wait"
	s.Config.Mode = "wait"
	s.Config.Extend = true
	s.Extensions = 23456
	s.WokenByNotification = 5120
	s.FallbackRetries = 17
	s.BackoffRetries = 3
	s.Gated = 4100
	s.SubscriptionsPeak = 12
	s.Faults, s.Nodes, s.StaleTokens, s.StaleTokenExamples, s.TokensChecked = nil, nil, 0, nil, 0
	set := NewSet()
	for i := 1; i <= 10000; i++ {
		us := time.Duration(i*i/5000+200) * time.Microsecond
		set.Record(Wait, us*3)
		set.Record(Release, us/3)
		set.Record(Hold, time.Millisecond+us/7)
		if i%2 == 0 {
			set.Record(Handoff, us/4)
		}
	}
	s.SetLatencies(set)
	return s
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./results -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./results -update if the change is intended)\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestSummaryTextGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, fixedSummary()); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.txt", b.Bytes())
}

func TestSummaryWaitTextGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, fixedWaitSummary()); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary_wait.txt", b.Bytes())
}

func TestSummaryJSONGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, fixedSummary()); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.json", b.Bytes())
}

func TestSummaryJSONFieldsAndRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, fixedSummary()); err != nil {
		t.Fatal(err)
	}
	// The field names the issue fixes; a rename must fail here.
	for _, f := range []string{"engine", "label", "config", "machine", "cpus", "gomaxprocs", "go_version",
		"redis_version", "masters", "started_at", "duration_s", "interrupted", "attempts", "acquired",
		"contended", "errors", "acquired_per_sec", "violations", "acquire_latency_us",
		"acquire_fail_latency_us", "wait_latency_us", "release_latency_us", "hold_us",
		"count", "p50", "p90", "p99", "p999", "max", "mean",
		"handoff_latency_us", "woken_by_notification", "fallback_retries", "fairness", "jain", "min",
		"extensions", "lost_leases", "stale_tokens", "faults", "applied_s", "ended_s", "nodes", "state",
		"quarantined_until", "warmup_error_examples", "node_timeout_ms", "cpu", "client_us_per_op", "masters_us_per_op",
		"saturated"} {
		if !strings.Contains(b.String(), `"`+f+`":`) {
			t.Errorf("summary.json lacks field %q", f)
		}
	}
	back, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	want := fixedSummary()
	if back.AcquireLatencyUs != want.AcquireLatencyUs || back.Violations != want.Violations ||
		!back.StartedAt.Equal(want.StartedAt) || back.Errors["no_quorum"] != 4 {
		t.Errorf("round trip changed the summary:\n got %+v\nwant %+v", back, want)
	}
}

func TestSummaryTextSaysWhatHappened(t *testing.T) {
	s := fixedSummary()
	s.Violations, s.ViolationExamples = 0, nil
	s.Interrupted = true
	var b bytes.Buffer
	WriteText(&b, s)
	for _, want := range []string{"INTERRUPTED", "OK: no two holds", "warm-up of 1.00 s", "excluded"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary.txt lacks %q:\n%s", want, b.String())
		}
	}
	s.Checked = false
	b.Reset()
	WriteText(&b, s)
	if !strings.Contains(b.String(), "not checked") {
		t.Errorf("an unchecked run must say so:\n%s", b.String())
	}
}

func TestStatsOf(t *testing.T) {
	set := NewSet()
	for i := 1; i <= 1000; i++ {
		set.Record(Acquire, time.Duration(i)*time.Microsecond)
	}
	st := StatsOf(set[Acquire])
	want := Stats{Count: 1000, P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000, Mean: 500.5}
	if st != want {
		t.Errorf("StatsOf = %+v, want %+v", st, want)
	}
	if (StatsOf(set[Wait]) != Stats{}) {
		t.Error("an empty histogram must give zero stats")
	}
}

func TestRecordClampsInsteadOfDropping(t *testing.T) {
	set := NewSet()
	set.Record(Hold, -time.Second)
	set.Record(Hold, 2*time.Hour)
	h := set[Hold]
	if h.TotalCount() != 2 {
		t.Fatalf("count = %d, want 2: out-of-range values must be kept", h.TotalCount())
	}
	if h.Min() != 0 || !h.ValuesAreEquivalent(h.Max(), HighestUs) {
		t.Errorf("min %d max %d, want 0 and ~%d", h.Min(), h.Max(), HighestUs)
	}
}

func TestHistogramCoversOneMicrosecondToOneHour(t *testing.T) {
	h := NewHistogram()
	for _, us := range []int64{1, 60_000_000, HighestUs} {
		if err := h.RecordValue(us); err != nil {
			t.Errorf("record %d µs: %v", us, err)
		}
	}
	if h.SignificantFigures() != 3 {
		t.Errorf("significant figures = %d, want 3", h.SignificantFigures())
	}
}

// The .hgrm text must describe the same distribution as the histogram: every
// row's value is the histogram's value at that row's percentile, the footer
// matches, and the summary's percentiles can be read back from it.
func TestHgrmParsesBackToTheSamePercentiles(t *testing.T) {
	set := fixedSet()
	h := set[Acquire]
	var b bytes.Buffer
	if err := WriteHgrm(&b, h); err != nil {
		t.Fatal(err)
	}
	g, err := ParseHgrm(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Lines) < 20 {
		t.Fatalf("only %d rows parsed", len(g.Lines))
	}
	n := float64(h.TotalCount())
	for _, l := range g.Lines {
		// A row says: TotalCount values are <= Value, and that reaches the
		// row's percentile (printed to six decimals). The histogram must
		// agree on the value of the TotalCount-th sample.
		got := int64(math.Round(l.Value * HgrmScale))
		if want := h.ValueAtPercentile(100 * float64(l.TotalCount) / n); got != want {
			t.Errorf("row at percentile %v: value %d µs, histogram says %d µs", l.Percentile, got, want)
		}
		if float64(l.TotalCount)/n < l.Percentile-1e-6 {
			t.Errorf("row at percentile %v holds only %d of %v values", l.Percentile, l.TotalCount, n)
		}
	}
	st := StatsOf(h)
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.5, st.P50}, {0.9, st.P90}, {1, st.Max}} {
		v, ok := g.ValueAt(c.q)
		if !ok || int64(math.Round(v*HgrmScale)) != c.want {
			t.Errorf("hgrm value at %v = %v ms, summary says %d µs", c.q, v, c.want)
		}
	}
	// p99 and p99.9 fall between rows: they must lie between the rows around them.
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.99, st.P99}, {0.999, st.P999}} {
		var below, above float64
		for _, l := range g.Lines {
			if l.Percentile <= c.q {
				below = l.Value
			}
			if l.Percentile >= c.q {
				above = l.Value
				break
			}
		}
		w := float64(c.want) / HgrmScale
		if w < below || w > above {
			t.Errorf("summary p%v = %v ms is outside the hgrm rows [%v, %v]", c.q*100, w, below, above)
		}
	}
	if g.TotalCount != h.TotalCount() || int64(math.Round(g.Max*HgrmScale)) != h.Max() {
		t.Errorf("footer count %d max %v, histogram %d %d", g.TotalCount, g.Max, h.TotalCount(), h.Max())
	}
	if math.Abs(g.Mean*HgrmScale-h.Mean()) > 1 {
		t.Errorf("footer mean %v ms, histogram %v µs", g.Mean, h.Mean())
	}
}

func TestParseHgrmRejectsGarbage(t *testing.T) {
	if _, err := ParseHgrm(strings.NewReader("1.0 0.5 x 2.0\n")); err == nil {
		t.Error("want an error for a bad row")
	}
}

func TestSetRoundTripsThroughHlog(t *testing.T) {
	set := fixedSet()
	var b bytes.Buffer
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	l, err := NewIntervalLog(&b, start, "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteSet(l, set, start, start.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSet(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for k := Kind(0); k < NumKinds; k++ {
		if !back[k].Equals(set[k]) {
			t.Errorf("%s changed through the log: count %d -> %d", k, set[k].TotalCount(), back[k].TotalCount())
		}
	}
	// Merging two runs read back is lossless: counts add up exactly.
	twice, _ := ReadSet(bytes.NewReader(append(b.Bytes(), b.Bytes()...)))
	if twice[Acquire].TotalCount() != 2*set[Acquire].TotalCount() ||
		twice[Acquire].ValueAtPercentile(99) != set[Acquire].ValueAtPercentile(99) {
		t.Error("merging a run with itself must double counts and keep percentiles")
	}
}

func TestIntervalLogLineFormat(t *testing.T) {
	var b bytes.Buffer
	start := time.Unix(1700000000, 0)
	l, _ := NewIntervalLog(&b, start)
	h := NewHistogram()
	h.RecordValue(2500)
	if err := l.Write("acquire", start.Add(time.Second), start.Add(2*time.Second), h); err != nil {
		t.Fatal(err)
	}
	if err := l.Write("bad tag", start, start, h); err == nil {
		t.Error("a tag with a space must be refused")
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "Tag=acquire,1.000,1.000,2.501,HISTF") {
		t.Errorf("interval line = %q", last)
	}
	if !strings.Contains(b.String(), "#[StartTime: 1700000000.000") {
		t.Errorf("missing StartTime header:\n%s", b.String())
	}
}

func TestWriteRunFiles(t *testing.T) {
	dir := t.TempDir()
	s := fixedSummary()
	if err := WriteRun(dir, s, fixedSet()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{SummaryText, SummaryJSON, "acquire.hgrm", "release.hgrm", "hold.hgrm", HistogramsLog} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "wait.hgrm")); err == nil {
		t.Error("wait.hgrm written for a run in mode try")
	}
}

func TestProgressWriter(t *testing.T) {
	line := Progress{Elapsed: 3 * time.Second, Total: 10 * time.Second, Interval: time.Second, Acquired: 5}.String()
	var plain, tty bytes.Buffer
	pw := NewProgressWriter(&plain, false)
	pw.Line(line)
	pw.Line(line)
	pw.Done()
	if n := strings.Count(plain.String(), "\n"); n != 2 || strings.Contains(plain.String(), "\r") {
		t.Errorf("plain progress must be one line per update, got %q", plain.String())
	}
	tw := NewProgressWriter(&tty, true)
	tw.Line(line)
	tw.Line(line)
	tw.Done()
	if !strings.HasPrefix(tty.String(), "\r") || !strings.Contains(tty.String(), "\x1b[K") || strings.Count(tty.String(), "\n") != 1 {
		t.Errorf("terminal progress must rewrite one line, got %q", tty.String())
	}
	if NewProgressWriter(nil, false) != nil {
		t.Error("a writer to nowhere must be nil")
	}
}

func TestFormatUs(t *testing.T) {
	for us, want := range map[int64]string{0: "0µs", 999: "999µs", 1500: "1.50ms", 2_500_000: "2.50s"} {
		if got := FormatUs(us); got != want {
			t.Errorf("FormatUs(%d) = %q, want %q", us, got, want)
		}
	}
}
