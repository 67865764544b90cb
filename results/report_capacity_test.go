package results

import (
	"bytes"
	"html"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// One plan, two renderings: Markdown marks and HTML tags, with every text
// escaped in the HTML and left alone in the Markdown.
func TestCapacityRenderings(t *testing.T) {
	plan := &capacityPlan{
		Intro: []text{text{}.p("Intro ").c("x").p(" <b>"), text{}.p("more")},
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
	wantMD := "# Capacity plan\n\nIntro `x` <b>\nmore\n\n## Sweep a<b\n\nLead.\n\n- **one**: `c`\n  continued\n- two\n  - sub **a**\n    sub continued\n  - sub b\n  back in two\n\nConfig.\n\nTo reproduce:\n\n```sh\nredlock-bench sweep --slo='p99<5ms'\n```\n"
	if md.String() != wantMD {
		t.Errorf("markdown: got\n%s\nwant\n%s", md.String(), wantMD)
	}
	var h bytes.Buffer
	if err := reportTemplate.ExecuteTemplate(&h, "capacity", plan); err != nil {
		t.Fatal(err)
	}
	wantHTML := "<p>Intro <code>x</code> &lt;b&gt;\nmore\n</p>\n<h3>Sweep a&lt;b</h3>\n<p>Lead.</p>\n<ul>\n<li><b>one</b>: <code>c</code><div>continued</div></li>\n<li>two\n<ul>\n<li>sub <b>a</b><br>sub continued</li>\n<li>sub b</li>\n</ul><div>back in two</div></li>\n</ul>\n<p>Config.</p>\n<p>To reproduce:</p>\n<pre><code>redlock-bench sweep --slo=&#39;p99&lt;5ms&#39;</code></pre>\n"
	if h.String() != wantHTML {
		t.Errorf("html: got\n%s\nwant\n%s", h.String(), wantHTML)
	}
}

// The page's capacity section says what capacity.md says, word for word,
// on the report fixtures.
func TestCapacityPageMatchesMarkdown(t *testing.T) {
	t.Parallel()
	sweep, compare, run := writeReportFixtures(t, t.TempDir())
	slo, _ := ParseSLO("p99<5ms")
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
	slo, _ := ParseSLO("p99<5ms")
	sw := &Sweep{Label: "growing", Param: "workers", Values: workers6, LoadModel: "closed", Mode: "try", Engine: "redlock", SLO: &slo,
		Points: points(workers6, []float64{2000, 8000, 23000, 31000, 42000, 55600}, []int64{900, 950, 1100, 1900, 2800, 4100})}
	md := capacityOf(t, sw)
	for _, want := range []string{
		"**No saturation knee found:** throughput was still growing at the last point (1024 workers, 55,600/s)",
		"**Recommended worker count: 1024** per load generator (the highest throughput that met the SLO)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("capacity.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "past the knee") || strings.Contains(md, "knee: 16") {
		t.Errorf("capacity.md puts a knee where throughput still grew:\n%s", md)
	}

	// One more step that adds no throughput: the knee is 1024 workers,
	// and the SLO's step beyond it is not recommended.
	values := append(workers6[:len(workers6):len(workers6)], 4096)
	sw = &Sweep{Label: "ceiling", Param: "workers", Values: values, LoadModel: "closed", Mode: "try", Engine: "redlock", SLO: &slo,
		Points: points(values, []float64{2000, 8000, 23000, 31000, 42000, 55600, 56100}, []int64{900, 950, 1100, 1900, 2800, 4100, 4900})}
	md = capacityOf(t, sw)
	for _, want := range []string{
		"**Saturation knee: 1024 workers, 55,600 acquisitions/s**",
		"**Recommended worker count: 1024** per load generator (the knee: the SLO holds up to 4096 workers, 56,100 acquisitions/s, but past the knee more load adds latency, not throughput)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("capacity.md lacks %q:\n%s", want, md)
		}
	}
}
