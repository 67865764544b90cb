package results

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeReportFixtures writes one of each input a report reads: a sweep
// with an SLO, a comparison of two engines, and a run with faults. It
// returns their directories.
func writeReportFixtures(t testing.TB, root string) (sweep, compare, run string) {
	t.Helper()
	slo := sloOf(t, "p99<5ms")
	sweep = filepath.Join(root, "sweep")
	writeSynthSweep(t, sweep, &slo)

	compare = filepath.Join(root, "compare")
	cmp := &Comparison{Kind: "compare", Label: "engines", Engines: []string{"redlock", "redsync"}, Rounds: 2,
		Mode: "try", LoadModel: "closed", Latency: "acquire", StartedAt: synthStart}
	for round := 1; round <= 2; round++ {
		for i, e := range []struct {
			engine string
			perSec int64
			meanUs float64
		}{{"redlock", 30000, 900}, {"redsync", 12000, 2400}} {
			dir := fmt.Sprintf("%d-%s", round, e.engine)
			s := writeSynthRun(t, filepath.Join(compare, dir), synthRun{
				label: fmt.Sprintf("engines-%d-%s", round, e.engine), engine: e.engine, workers: 64,
				start: synthStart.Add(time.Duration((round-1)*2+i) * 10 * time.Second), warmupS: 1, seconds: 8,
				perSec:    func(sec int) int64 { return e.perSec + int64(sec%3+round)*500 },
				latencyUs: exponential(150, e.meanUs), holdUs: 1000,
			})
			cmp.Runs = append(cmp.Runs, CompareRunOf(round, e.engine, dir, s, Acquire))
		}
	}
	cmp.Ceiling = NewCeiling("redis-benchmark -P 16 -c 50", 200000, []CeilingMaster{
		{Addr: "127.0.0.1:7001", SetPerSec: 250000, EvalshaPerSec: 150000},
		{Addr: "127.0.0.1:7002", SetPerSec: 240000, EvalshaPerSec: 160000},
		{Addr: "127.0.0.1:7003", SetPerSec: 200000, EvalshaPerSec: 100000},
	})
	cmp.Analyze()
	var cb bytes.Buffer
	if err := WriteCompareJSON(&cb, cmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(compare, CompareJSON), cb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	run = filepath.Join(root, "run")
	writeSynthRun(t, run, synthRun{
		label: "redlock-w64-r1000-try-faults", workers: 64, start: synthStart, warmupS: 1, seconds: 12,
		perSec: func(sec int) int64 {
			if sec >= 3 && sec < 6 {
				return 9000 // a master paused
			}
			return 25000
		},
		latencyUs: exponential(200, 700), holdUs: 500,
		// Timeouts while master 2 is paused; a few no-quorum errors as
		// master 4 is killed.
		errorsAt: func(sec int) (int64, int64) {
			switch {
			case sec >= 3 && sec < 6:
				return 40, 0
			case sec == 8:
				return 12, 10
			}
			return 0, 0
		},
		// Master 2's PING sent as it is paused is answered when the pause
		// ends, 3s later; master 4 answers nothing from its kill until a
		// second after its restart.
		masterRTTUs: func(sec, m int) int64 {
			switch {
			case m == 2 && sec >= 3 && sec < 6, m == 4 && sec >= 8 && sec < 11:
				return -1
			case m == 2 && sec == 6:
				return 3_000_000
			}
			return int64(180 + 20*m + 15*(sec%3))
		},
		slowdown: func(sec int) float64 {
			switch {
			case sec >= 3 && sec < 6:
				return 4 // the vote waits for a slower quorum
			case sec == 8:
				return 1.8
			}
			return 1 + 0.05*float64(sec%4)
		},
		faults: []map[string]any{
			{"fault": "pause:2@4s+3s", "action": "pause", "node": 2, "at_s": 4, "for_s": 3, "applied_s": 4.001, "ended_s": 7.002, "ended": true},
			{"fault": "kill:4@9s", "action": "kill", "node": 4, "at_s": 9, "for_s": 0, "applied_s": 9.0, "ended_s": 9.01, "ended": true,
				"applied_at": synthStart.Add(9 * time.Second).Format(time.RFC3339Nano)},
			{"fault": "restart:4@11s", "action": "restart", "node": 4, "at_s": 11, "for_s": 0, "applied_s": 11.0, "ended_s": 11.35, "ended": true},
		},
	})
	return sweep, compare, run
}

// shared holds the report fixtures, written once per test binary: they
// are the same for every test that reads them, and writing them is much
// of such a test's time under -race. Tests only read them.
var shared struct {
	once                     sync.Once
	dir, sweep, compare, run string
}

// reportFixtures returns the shared fixtures' directories (see
// writeReportFixtures).
func reportFixtures(t testing.TB) (sweep, compare, run string) {
	t.Helper()
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "results-fixtures-")
		if err != nil {
			t.Fatal(err)
		}
		shared.dir = dir
		shared.sweep, shared.compare, shared.run = writeReportFixtures(t, dir)
	})
	if shared.run == "" {
		t.Fatal("the shared report fixtures could not be written")
	}
	return shared.sweep, shared.compare, shared.run
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func loadInputs(t testing.TB, dirs ...string) []*Input {
	t.Helper()
	var ins []*Input
	for _, d := range dirs {
		in, err := LoadInput(d)
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, in)
	}
	return ins
}

func TestLoadInputKinds(t *testing.T) {
	t.Parallel()
	// Fixtures of its own: it spoils compare.json below.
	sweep, compare, run := writeReportFixtures(t, t.TempDir())
	ins := loadInputs(t, sweep, compare, run, filepath.Dir(run))
	for i, want := range []struct {
		kind string
		runs int
	}{{"sweep", 6}, {"compare", 4}, {"run", 1}, {"runs", 11}} {
		if ins[i].Kind != want.kind || len(ins[i].Runs) != want.runs {
			t.Errorf("%s: kind %s with %d runs, want %s with %d", ins[i].Dir, ins[i].Kind, len(ins[i].Runs), want.kind, want.runs)
		}
	}
	if ins[1].Title != "compare engines" || ins[1].Comparison == nil || len(ins[1].Comparison.Results) != 2 {
		t.Errorf("compare title %q, comparison %+v", ins[1].Title, ins[1].Comparison)
	}
	// A compare.json this version cannot read: the runs below still load.
	os.WriteFile(filepath.Join(compare, CompareJSON), []byte(`{"kind":"compare","runs":"not a list"}`), 0o644)
	if in, err := LoadInput(compare); err != nil || in.Kind != "compare" || len(in.Runs) != 4 || in.Comparison != nil || len(in.Notes) == 0 {
		t.Errorf("unreadable compare.json: %v, %+v", err, in)
	}
	f := ins[2].Runs[0].Faults()
	// Times are since the run started, as applied_s: the pause at 4 s;
	// the kill is placed by its wall-clock time.
	if len(f) != 3 || f[0].Action != "pause" || f[0].FromS < 4 || f[0].FromS > 4.01 || f[0].ToS < 7 || f[1].FromS != 9 {
		t.Errorf("faults %+v", f)
	}
	if _, err := LoadInput(t.TempDir()); err == nil {
		t.Error("an empty directory loaded as an input")
	}
}

func TestReportFiles(t *testing.T) {
	t.Parallel()
	sweep, compare, run := reportFixtures(t)
	out := t.TempDir()
	written, err := WriteReport(out, loadInputs(t, sweep, compare, run), ReportOptions{Now: synthStart})
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(out, ReportHTML))
	if err != nil {
		t.Fatal(err)
	}
	ids := chartIDs(html)
	// Run: distribution, time, masters; sweep: latency/throughput,
	// throughput, distribution, time, masters; compare: distribution,
	// time (its overlaid runs get no masters' chart).
	if len(ids) != 10 {
		t.Fatalf("%d charts (%v), want 10", len(ids), ids)
	}
	for _, id := range ids {
		for _, ext := range []string{".svg", ".png"} {
			p := filepath.Join(out, ChartsDir, id+ext)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if ext == ".png" {
				if _, err := png.Decode(bytes.NewReader(b)); err != nil {
					t.Errorf("%s: %v", p, err)
				}
			} else if !bytes.Contains(b, []byte("<svg")) {
				t.Errorf("%s is not an SVG", p)
			}
		}
	}
	if len(written) != 2+2*len(ids) {
		t.Errorf("wrote %d files: %v", len(written), written)
	}
	// Offline: nothing to fetch. The only URLs are XML namespace names.
	page := regexp.MustCompile(`xmlns(:xlink)?="http://www\.w3\.org/[^"]*"`).ReplaceAll(html, nil)
	for _, bad := range []string{"http://", "https://", "<script", "<link", "@import", "src=\"//"} {
		if bytes.Contains(page, []byte(bad)) {
			t.Errorf("report.html contains %q: it must work offline", bad)
		}
	}
	for _, want := range []string{"knee", "best within SLO", "compare engines", "redsync (2 runs)", "× redlock", "pause:2@4s+3s", "kill:4@9s", "restart:4@11s", "master 4 down", "warm-up", `id="comparison-table"`, "Capacity plan"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	// Charts are inline SVG drawn by gonum, not images.
	if n := bytes.Count(html, []byte("<svg ")); n != len(ids) {
		t.Errorf("%d inline SVGs for %d charts", n, len(ids))
	}
	if bytes.Contains(html, []byte("<?xml")) {
		t.Error("an XML prolog was left inside the page")
	}
}

// chartIDs lists the data-chart ids of a report page.
func chartIDs(html []byte) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`data-chart="([^"]+)"`).FindAllSubmatch(html, -1) {
		ids = append(ids, string(m[1]))
	}
	return ids
}

func TestCapacityGolden(t *testing.T) {
	t.Parallel()
	sweep, compare, run := reportFixtures(t)
	ins := loadInputs(t, sweep, compare, run)
	// Directories as a reader would type them, not the test's temporary ones.
	for i, d := range []string{"results/sweeps/20250102T030405Z-sweep-workers-redlock-r1000-try",
		"results/runs/20250102T030405Z-compare-engines", "results/runs/20250102T030405Z-faults"} {
		for _, r := range ins[i].Runs {
			rel, _ := filepath.Rel(ins[i].Dir, r.Dir)
			r.Dir = filepath.Join(d, rel)
		}
		ins[i].Dir = d
	}
	var b bytes.Buffer
	if err := WriteCapacity(&b, ins, nil); err != nil {
		t.Fatal(err)
	}
	golden(t, "capacity.md", b.Bytes())

	// The same sweep judged against an SLO nothing meets.
	slo := sloOf(t, "p99<1ms")
	b.Reset()
	if err := WriteCapacity(&b, ins[:1], &slo); err != nil {
		t.Fatal(err)
	}
	golden(t, "capacity_slo_missed.md", b.Bytes())
}

// chromium finds headless Chromium, installing it with .ci/ensure-chromium
// when it is missing; it skips the test, saying why, with -short or when
// that fails.
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	const bin = "/usr/bin/chromium"
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	script, _ := filepath.Abs(filepath.Join("..", ".ci", "ensure-chromium"))
	out, err := exec.Command(script).CombinedOutput()
	if err != nil {
		t.Skipf("headless Chromium is not available and %s could not install it: %v\n%s", script, err, out)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s ran but %s is still missing", script, bin)
	}
	return bin
}

// runChromium runs headless Chromium on a page with the extra arguments and
// returns its standard output (the DOM, with --dump-dom) and its log.
func runChromium(t *testing.T, bin, page string, extra ...string) (stdout, log string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0", "--log-level=0",
	}
	args = append(append(args, extra...), "file://"+page)
	cmd := exec.CommandContext(ctx, bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("chromium %v timed out:\n%s", extra, e.String())
	}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || o.Len() == 0 && !strings.Contains(strings.Join(extra, " "), "--screenshot") {
			t.Fatalf("chromium %v: %v\n%s", extra, err, e.String())
		}
	}
	return o.String(), e.String()
}

// consoleErrors picks the page's console errors and uncaught exceptions out
// of Chromium's log.
func consoleErrors(log string) []string {
	var bad []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "CONSOLE") && (strings.Contains(l, ":ERROR:") || strings.Contains(l, "Uncaught") || strings.Contains(l, "rror")) ||
			strings.Contains(l, "Uncaught") {
			bad = append(bad, l)
		}
	}
	return bad
}

// writeFixtureReport writes the report of the fixtures into out (and,
// with REDLOCK_REPORT_DIR, the fixtures under out/inputs); it returns the
// page's absolute path and its content.
func writeFixtureReport(t *testing.T, out string, opts ReportOptions) (page string, html []byte) {
	t.Helper()
	sweep, compare, run := reportFixtures(t)
	if os.Getenv("REDLOCK_REPORT_DIR") != "" {
		// The report is kept: its inputs with it.
		sweep, compare, run = writeReportFixtures(t, filepath.Join(out, "inputs"))
	}
	if _, err := WriteReport(out, loadInputs(t, sweep, compare, run), opts); err != nil {
		t.Fatal(err)
	}
	page, _ = filepath.Abs(filepath.Join(out, ReportHTML))
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	return page, html
}

// TestReportInChromium opens report.html in headless Chromium, once (a
// browser start is most of the test's time): it must render every chart
// with no console error, a screenshot is kept (its path is logged;
// REDLOCK_REPORT_DIR keeps the report and the screenshot there too), and
// at 1280 px, as a laptop shows it, no table scrolls sideways and the
// comparison's p99, max, errors, violations and SLO columns are on
// screen. A script added to a copy of the page measures the laid out
// tables (report.html itself has no script), then logs an error and
// throws, as the control: the console check must see those two, or it
// proves nothing.
func TestReportInChromium(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	out := t.TempDir()
	if d := os.Getenv("REDLOCK_REPORT_DIR"); d != "" {
		out = d
	}
	slo := sloOf(t, "p99<5ms")
	_, html := writeFixtureReport(t, out, ReportOptions{Now: synthStart, SLO: &slo})
	ids := chartIDs(html)
	const measure = `<script>
window.addEventListener("load", function () {
  var out = [];
  document.querySelectorAll("table").forEach(function (t, i) {
    var box = t.parentElement;
    out.push("table " + (t.id || t.className || i) + " " + box.scrollWidth + " " + box.clientWidth + " " + Math.round(t.getBoundingClientRect().right));
  });
  document.querySelectorAll("#comparison-table th").forEach(function (th) {
    out.push("th " + Math.round(th.getBoundingClientRect().right) + " " + th.textContent.trim());
  });
  out.push("viewport " + document.documentElement.clientWidth);
  var pre = document.createElement("pre");
  pre.id = "layout";
  pre.textContent = out.join("\n");
  document.body.appendChild(pre);
  console.error("control error");
  controlUndefinedFunction();
});
</script></body>`
	page := filepath.Join(out, "measure.html")
	if err := os.WriteFile(page, bytes.Replace(html, []byte("</body>"), []byte(measure), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(out, "report-screenshot.png")
	dom, log := runChromium(t, bin, page, "--dump-dom", "--screenshot="+shot, "--window-size=1280,7000", "--virtual-time-budget=2000")

	var control int
	var errs []string
	for _, e := range consoleErrors(log) {
		if strings.Contains(e, `"control error"`) || strings.Contains(e, "controlUndefinedFunction is not defined") {
			control++
		} else {
			errs = append(errs, e)
		}
	}
	if control != 2 {
		t.Errorf("the console check is blind: the control's error and exception were not both caught; log:\n%s", log)
	}
	if len(errs) > 0 {
		t.Errorf("console errors while rendering report.html:\n%s", strings.Join(errs, "\n"))
	}
	if !strings.Contains(dom, "Comparison of runs") || !strings.Contains(dom, "<b>Recommended worker count: 16</b>") {
		t.Fatalf("the DOM Chromium rendered is not the report:\n%.2000s", dom)
	}
	for _, id := range ids {
		// Each chart's figure holds its SVG with drawn paths and text.
		re := regexp.MustCompile(`(?s)data-chart="` + regexp.QuoteMeta(id) + `".*?<svg.*?<path.*?<text.*?</svg>`)
		if !re.MatchString(dom) {
			t.Errorf("chart %s is not in the rendered page", id)
		}
	}
	if len(ids) != 10 {
		t.Errorf("%d charts, want 10", len(ids))
	}

	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// A blank page compresses to almost nothing; charts do not.
	if img.Bounds().Dx() < 1000 || len(b) < 100_000 {
		t.Errorf("screenshot %s: %v, %d bytes: looks blank", shot, img.Bounds(), len(b))
	}
	t.Logf("report %s, screenshot %s", filepath.Join(out, ReportHTML), shot)

	m := regexp.MustCompile(`(?s)<pre id="layout">(.*?)</pre>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the measuring script did not run:\n%.2000s", dom)
	}
	var viewport int
	fmt.Sscanf(m[1][strings.LastIndex(m[1], "viewport "):], "viewport %d", &viewport)
	if viewport < 1200 || viewport > 1280 {
		t.Fatalf("viewport %d px wide, want about 1280:\n%s", viewport, m[1])
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(m[1], "\n") {
		var name string
		var a, b, c int
		switch {
		case strings.HasPrefix(l, "table "):
			fmt.Sscanf(l, "table %s %d %d %d", &name, &a, &b, &c)
			if a > b || c > viewport {
				t.Errorf("at 1280 px, table %s is %d px wide in a box of %d (right edge at %d of %d): it scrolls sideways", name, a, b, c, viewport)
			}
		case strings.HasPrefix(l, "th "):
			fmt.Sscanf(l, "th %d", &a)
			name = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(strings.SplitN(l, " ", 3)[2])
			seen[name] = true
			if a > viewport {
				t.Errorf("at 1280 px, the comparison's %q column ends at %d px, off screen", name, a)
			}
		}
	}
	for _, col := range []string{"p99", "max", "errors", "violations", "SLO p99<5ms"} {
		if !seen[col] {
			t.Errorf("the comparison table has no %q column: %v", col, seen)
		}
	}
	if t.Failed() {
		t.Logf("layout:\n%s", m[1])
	}
}
