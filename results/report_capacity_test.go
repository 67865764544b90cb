package results

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// One plan, two renderings: Markdown marks and HTML tags, with every text
// escaped in the HTML and left alone in the Markdown.
func TestCapacityRenderings(t *testing.T) {
	plan := &capacityPlan{
		Intro: []text{text{}.p("Intro ").c("x").p(" <b>"), text{}.p("more")},
		TTL:   text{}.b("TTL").p(" rule."),
		Sections: []capacitySection{{
			Title: "Sweep a<b",
			Lead:  text{}.p("Lead."),
			Items: []capacityItem{
				{Text: text{}.b("one").p(": ").c("c"), More: []text{text{}.p("continued")}},
				{Text: text{}.p("two"), Subs: []capacityItem{{Text: text{}.p("sub ").b("a"), More: []text{text{}.p("sub continued")}}, {Text: text{}.p("sub b")}},
					More: []text{text{}.p("back in two")}},
			},
			Config:  text{}.p("Config."),
			Command: "redlock-bench sweep --slo='p99<5ms'",
		}},
	}
	var md bytes.Buffer
	if err := writeCapacity(&md, plan); err != nil {
		t.Fatal(err)
	}
	wantMD := "# Capacity plan\n\nIntro `x` <b>\nmore\n\n**TTL** rule.\n\n## Sweep a<b\n\nLead.\n\n- **one**: `c`\n  continued\n- two\n  - sub **a**\n    sub continued\n  - sub b\n  back in two\n\nConfig.\n\nTo reproduce:\n\n```sh\nredlock-bench sweep --slo='p99<5ms'\n```\n"
	if md.String() != wantMD {
		t.Errorf("markdown: got\n%s\nwant\n%s", md.String(), wantMD)
	}
	var h bytes.Buffer
	if err := reportTemplate.ExecuteTemplate(&h, "capacity", plan); err != nil {
		t.Fatal(err)
	}
	wantHTML := "<p>Intro <code>x</code> &lt;b&gt;\nmore\n</p>\n<p><b>TTL</b> rule.</p>\n<h3>Sweep a&lt;b</h3>\n<p>Lead.</p>\n<ul>\n<li><b>one</b>: <code>c</code><div>continued</div></li>\n<li>two\n<ul>\n<li>sub <b>a</b><br>sub continued</li>\n<li>sub b</li>\n</ul><div>back in two</div></li>\n</ul>\n<p>Config.</p>\n<p>To reproduce:</p>\n<pre><code>redlock-bench sweep --slo=&#39;p99&lt;5ms&#39;</code></pre>\n"
	if h.String() != wantHTML {
		t.Errorf("html: got\n%s\nwant\n%s", h.String(), wantHTML)
	}
}

// The page's capacity section says what capacity.md says, word for word,
// on the report fixtures.
func TestCapacityPageMatchesMarkdown(t *testing.T) {
	t.Parallel()
	sweep, compare, run := reportFixtures(t)
	slo := sloOf(t, "p99<5ms")
	rep, err := BuildReport(loadInputs(t, sweep, compare, run), ReportOptions{SLO: &slo})
	if err != nil {
		t.Fatal(err)
	}
	page := string(rep.HTML)
	start := strings.Index(page, `<div class="capacity">`)
	end := strings.Index(page[start:], "</div>\n\n")
	if start < 0 || end < 0 {
		t.Fatalf("no capacity section in the page")
	}
	// Blocks part words; inline marks do not.
	section := regexp.MustCompile(`</?(p|h3|ul|li|div|br|pre)>`).ReplaceAllString(page[start:start+end], " ")
	section = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(section, "")
	fromHTML := strings.Fields(html.UnescapeString(section))

	md := strings.NewReplacer("# Capacity plan", "", "```sh", "", "```", "", "**", "", "`", "", "\n## ", "\n", "\n- ", "\n", "\n  - ", "\n").Replace(string(rep.Capacity))
	fromMD := strings.Fields(md)
	if len(fromMD) < 300 {
		t.Fatalf("capacity.md has only %d words", len(fromMD))
	}
	if strings.Join(fromHTML, " ") != strings.Join(fromMD, " ") {
		t.Errorf("the page's capacity plan differs from capacity.md:\npage: %s\nmd:   %s", strings.Join(fromHTML, " "), strings.Join(fromMD, " "))
	}
	if !strings.Contains(page, filepath.ToSlash(sweep)) {
		t.Errorf("the page does not name the sweep %s", sweep)
	}
}

// The command to reproduce a run names the connection flags only when they
// were given: --tls=false on local masters is refused by run, as every
// connection flag is without --masters.
func TestReproduceConnectionFlags(t *testing.T) {
	local := RunConfig{Workers: 8, LocalMasters: 5, Engine: "redlock", TTL: "10s", Check: true}
	got := reproduce("run", local.Map(), true, nil)
	for _, f := range []string{"--tls", "--insecure", "--user", "--sni"} {
		if strings.Contains(got, f) {
			t.Errorf("local run: %s names %s", got, f)
		}
	}
	remote := RunConfig{Workers: 8, Masters: "a:1,b:1,c:1", Engine: "redlock", TTL: "10s", TLS: true, User: "bench", SNI: "redis.internal"}
	got = reproduce("run", remote.Map(), false, nil)
	for _, f := range []string{" --tls=true ", " --user=bench ", " --sni=redis.internal "} {
		if !strings.Contains(got+" ", f) {
			t.Errorf("TLS run: %s lacks %q", got, f)
		}
	}
	if strings.Contains(got, "--insecure") {
		t.Errorf("TLS run: %s names --insecure", got)
	}
	if d := describeConfig(remote.Map(), "redlock", []string{"a:1", "b:1", "c:1"}, false, ""); !strings.Contains(d, "over TLS as user bench") {
		t.Errorf("configuration %q does not say TLS and the user", d)
	}
}

// capacityOf renders the capacity plan of one sweep held in memory.
func capacityOf(t *testing.T, sw *Sweep) string {
	t.Helper()
	sw.Analyze()
	var b bytes.Buffer
	if err := WriteCapacity(&b, []*Input{{Kind: "sweep", Dir: "sweep", Sweep: sw}}, nil); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A sweep whose throughput keeps growing, by less than the load but
// steadily, within the SLO: no knee, and the recommendation is the
// highest throughput within the SLO, not an early step "past the knee".
func TestCapacityKneeWhileThroughputGrows(t *testing.T) {
	slo := sloOf(t, "p99<5ms")
	sw := &Sweep{Label: "growing", Param: "workers", Values: workers6, LoadModel: "closed", Mode: "try", Engine: "redlock", SLO: &slo,
		Points: points(workers6, []float64{2000, 8000, 23000, 31000, 42000, 55600}, []int64{900, 950, 1100, 1900, 2800, 4100})}
	md := capacityOf(t, sw)
	wantIn(t, md, "**No saturation knee found:** throughput was still growing at the last point (1024 workers, 55,600/s)",
		"**Recommended worker count: 1024** per load generator (the highest throughput that met the SLO)")
	if strings.Contains(md, "past the knee") || strings.Contains(md, "knee: 16") {
		t.Errorf("capacity.md puts a knee where throughput still grew:\n%s", md)
	}

	// One more step that adds no throughput: the knee is 1024 workers,
	// and the SLO's step beyond it is not recommended.
	values := append(workers6[:len(workers6):len(workers6)], 4096)
	sw = &Sweep{Label: "ceiling", Param: "workers", Values: values, LoadModel: "closed", Mode: "try", Engine: "redlock", SLO: &slo,
		Points: points(values, []float64{2000, 8000, 23000, 31000, 42000, 55600, 56100}, []int64{900, 950, 1100, 1900, 2800, 4100, 4900})}
	wantIn(t, capacityOf(t, sw), "**Saturation knee: 1024 workers, 55,600 acquisitions/s**",
		"**Recommended worker count: 1024** per load generator (the knee: the SLO holds up to 4096 workers, 56,100 acquisitions/s, but past the knee more load adds latency, not throughput)")
}

// capacityOfDirs renders the capacity plan of input directories.
func capacityOfDirs(t *testing.T, dirs ...string) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteCapacity(&b, loadInputs(t, dirs...), nil); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// capacityOfRuns renders the capacity plan of run directories written by
// writeSynthRun.
func capacityOfRuns(t *testing.T, runs ...synthRun) string {
	t.Helper()
	root := t.TempDir()
	var dirs []string
	for i, r := range runs {
		d := filepath.Join(root, fmt.Sprintf("run%d", i))
		writeSynthRun(t, d, r)
		dirs = append(dirs, d)
	}
	return capacityOfDirs(t, dirs...)
}

// wantIn reports each of wants that md lacks.
func wantIn(t *testing.T, md string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(md, w) {
			t.Errorf("capacity.md lacks %q:\n%s", w, md)
		}
	}
}

// The TTL advice follows one rule, stated once: the TTL less the drift
// allowance is at least 3× acquire + hold at p99.9. Every item's shortest
// TTL follows from its figures by that rule, and the top of the plan
// names the TTL that satisfies it for every load in the report.
func TestCapacityTTLRule(t *testing.T) {
	t.Parallel()
	sweep, compare, run := reportFixtures(t)
	md := capacityOfDirs(t, sweep, compare, run)
	if n := strings.Count(md, "**TTL rule:**"); n != 1 {
		t.Fatalf("the TTL rule is stated %d times, want once:\n%s", n, md)
	}
	if strings.Contains(md, "would still leave") {
		t.Errorf("capacity.md still invites a TTL by another rule:\n%s", md)
	}
	// Each headroom: "...: X together; ... H× headroom ... a TTL of N or more".
	item := regexp.MustCompile(`TTL (\S+)\. [^\n]*? p99\.9 was (\S+) and hold p99\.9 (\S+): (\S+) together[^\n]*? leaves ([0-9,.]+)× headroom[^\n]*?(?:holds here for a TTL of|needs a TTL of) (\S+) or more`)
	all := item.FindAllStringSubmatch(md, -1)
	if len(all) != 4 { // the sweep's step, two engines, the run
		t.Fatalf("%d TTL headroom items with the rule's figures, want 4:\n%s", len(all), md)
	}
	var most time.Duration
	for _, m := range all {
		ttl, _ := time.ParseDuration(m[1])
		used := parseFormatted(t, m[4])
		drift := time.Duration(float64(ttl)*0.01) + 2*time.Millisecond
		head, _ := strconv.ParseFloat(strings.ReplaceAll(m[5], ",", ""), 64)
		if want := math.Floor(float64(ttl-drift) / float64(used)); math.Abs(head-want) > 1+want/200 { // used is rounded as printed
			t.Errorf("%q: headroom %v×, want (TTL − drift)/used = %v×", m[0], head, want)
		}
		need := parseFormatted(t, m[6])
		if needDrift := time.Duration(float64(need)*0.01) + 2*time.Millisecond; need-needDrift < 3*used || need-time.Millisecond-needDrift > 3*used {
			t.Errorf("%q: a TTL of %s is not the shortest that leaves 3× %s after drift", m[0], need, used)
		}
		most = max(most, need)
	}
	if want := "By this rule, the loads below need a TTL of at least " + fmtDur(most); !strings.Contains(md, want) {
		t.Errorf("capacity.md does not say %q:\n%s", want, md)
	}
}

// parseFormatted reads a duration as fmtDur and FormatUs write it.
func parseFormatted(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(strings.ReplaceAll(strings.TrimRight(s, ".,;"), "µs", "us"))
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return d
}

// A TTL below the rule is called too short, in its item and at the top.
func TestCapacityTTLTooShort(t *testing.T) {
	t.Parallel()
	md := capacityOfRuns(t, synthRun{label: "short-ttl", workers: 8, start: synthStart, warmupS: 1, seconds: 3,
		perSec: func(int) int64 { return 1000 }, latencyUs: exponential(500, 1000), holdUs: 4000, ttl: "30ms"})
	wantIn(t, md, "**The TTL is too short by this rule:**", "The TTL of redlock short-ttl, 30ms, is too short")
}

// In mode wait the acquire histogram is empty: the headroom must not read
// "acquire p99.9 was 0µs", and must say what it counts instead.
func TestCapacityWaitModeTTL(t *testing.T) {
	t.Parallel()
	md := capacityOfRuns(t, synthRun{label: "waiting", mode: "wait", workers: 8, start: synthStart, warmupS: 1, seconds: 3,
		perSec: func(int) int64 { return 1000 }, latencyUs: exponential(500, 20000), holdUs: 1000})
	if strings.Contains(md, "was 0µs") {
		t.Errorf("the wait-mode headroom counts an empty histogram:\n%s", md)
	}
	wantIn(t, md, "one acquire round (release p99.9, as an estimate) was", "includes queueing")
}

// A comparison's plan gives the masters' ceiling, as compare.txt does.
func TestCapacityCompareCeiling(t *testing.T) {
	t.Parallel()
	_, compare, _ := reportFixtures(t)
	wantIn(t, capacityOfDirs(t, compare), "**Ceiling of the masters:** 66,667 lock cycles/s", "127.0.0.1:7003", "redlock reached 47% of it")
}

// A run with injected faults says so: its throughput and latency are not
// what healthy masters give. One worker is "1 worker", one client "1
// client".
func TestCapacityRunWithFaults(t *testing.T) {
	t.Parallel()
	_, _, run := reportFixtures(t)
	md := capacityOfDirs(t, run)
	wantIn(t, md, "**Faults were injected** (pause:2@4s+3s, kill:4@9s, restart:4@11s): these figures include their effect, not only the load's.")
	if strings.Contains(md, "client(s)") {
		t.Errorf("capacity.md says client(s):\n%s", md)
	}
	md = capacityOfRuns(t, synthRun{label: "single", workers: 1, start: synthStart, warmupS: 1, seconds: 2,
		perSec: func(int) int64 { return 500 }, latencyUs: exponential(500, 1000), holdUs: 1000})
	if !strings.Contains(md, "1 worker, closed loop") || !strings.Contains(md, "; 1 client;") {
		t.Errorf("capacity.md of one worker and one client:\n%s", md)
	}
}
