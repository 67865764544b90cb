package results

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot/font"
)

// File names of a report.
const (
	ReportHTML = "report.html"
	// ChartsDir holds each chart as .svg and .png, beside report.html.
	ChartsDir = "charts"
)

// maxSeries is the most runs one chart overlays; the palette has as many
// colours.
const maxSeries = 10

// ReportOptions tune a report.
type ReportOptions struct {
	// SLO, when set, is checked for every run and replaces the sweeps' own.
	SLO *SLO
	// Title heads the page; default "redlock-bench report".
	Title string
	// Now is the time printed as the report's date; default time.Now.
	Now time.Time
}

// Report is a built report: its page, its charts and its capacity plan.
type Report struct {
	HTML     []byte
	Capacity []byte
	Charts   []*Chart
}

// BuildReport draws the charts and writes the page and the capacity plan
// for the inputs, in memory.
func BuildReport(inputs []*Input, opts ReportOptions) (*Report, error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("results: report needs at least one input")
	}
	if opts.Title == "" {
		opts.Title = "redlock-bench report"
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	rep := &Report{}
	plan := capacityPlanOf(inputs, opts.SLO)
	var capacity bytes.Buffer
	if err := writeCapacity(&capacity, plan); err != nil {
		return nil, err
	}
	rep.Capacity = capacity.Bytes()

	v := reportView{
		Title:     opts.Title,
		Generated: opts.Now.UTC().Format("2006-01-02 15:04:05 UTC"),
		Capacity:  plan,
	}
	if opts.SLO != nil {
		v.SLO = opts.SLO.Text
	}
	// Single runs share one section; sweeps, compares and run sets get
	// their own.
	var singles []*RunDir
	var singleDirs []string
	for _, in := range inputs {
		v.Inputs = append(v.Inputs, inputView{Kind: in.Kind, Dir: filepath.ToSlash(in.Dir), Title: in.Title, Runs: len(in.Runs)})
		v.Notes = append(v.Notes, in.Notes...)
		g := tableGroup{Input: in.Title, Ref: ratioReference(in)}
		for i, r := range in.Runs {
			g.Rows = append(g.Rows, runRow(in, i, r, opts.SLO))
		}
		v.Groups = append(v.Groups, g)
		if in.Kind == "run" {
			singles = append(singles, in.Runs...)
			singleDirs = append(singleDirs, filepath.ToSlash(in.Dir))
		}
	}
	b := &reportBuilder{rep: rep, slo: opts.SLO}
	if len(singles) > 0 {
		sec, err := b.runsSection(singles, singleDirs)
		if err != nil {
			return nil, err
		}
		v.Sections = append(v.Sections, sec)
	}
	for _, in := range inputs {
		if in.Kind == "run" {
			continue
		}
		sec, err := b.inputSection(in)
		if err != nil {
			return nil, err
		}
		v.Sections = append(v.Sections, sec)
	}
	if err := b.render(&v); err != nil {
		return nil, err
	}
	return rep, nil
}

// reportBuilder numbers the report's charts and collects them.
type reportBuilder struct {
	rep *Report
	slo *SLO
	n   int
}

// addChart returns a function that adds a chart, when there is one, to
// the report and to sec, or passes on the error drawing it.
func (b *reportBuilder) addChart(sec *sectionView) func(*Chart, error) error {
	return func(c *Chart, err error) error {
		if err != nil || c == nil {
			return err
		}
		b.n++
		c.ID = fmt.Sprintf("%02d-%s", b.n, c.ID)
		b.rep.Charts = append(b.rep.Charts, c)
		sec.Charts = append(sec.Charts, chartView{
			ID: c.ID, Title: c.Title, Caption: c.Caption, SVG: inlineSVG(c.SVG),
			Files: []string{filepath.ToSlash(filepath.Join(ChartsDir, c.ID+".svg")), filepath.ToSlash(filepath.Join(ChartsDir, c.ID+".png"))},
		})
		return nil
	}
}

// runsSection is the one section of all single runs.
func (b *reportBuilder) runsSection(singles []*RunDir, dirs []string) (sectionView, error) {
	title := "Runs"
	if len(singles) == 1 {
		title = "Run " + singles[0].Name()
	}
	sec := sectionView{Title: title, Dir: strings.Join(dirs, ", "), Kind: "run"}
	err := runCharts(&sec, &Input{Kind: "run", Title: title, Runs: singles}, b.addChart)
	return sec, err
}

// inputSection is the section of a sweep, a comparison or a run set.
func (b *reportBuilder) inputSection(in *Input) (sectionView, error) {
	sec := sectionView{Title: capitalize(in.Title), Dir: filepath.ToSlash(in.Dir), Kind: in.Kind}
	if in.Kind == "sweep" && in.Sweep != nil {
		sw := analyzed(in.Sweep, b.slo)
		sec.Sweep = sweepTable(sw)
		if err := b.addChart(&sec)(SweepLatencyChart("sweep-latency-throughput", sw)); err != nil {
			return sec, err
		}
		if err := b.addChart(&sec)(SweepThroughputChart("sweep-throughput", sw)); err != nil {
			return sec, err
		}
	}
	if in.Comparison != nil {
		sec.Compare = compareTable(in.Comparison)
	}
	err := runCharts(&sec, in, b.addChart)
	return sec, err
}

// render completes v and executes the page's template into rep.HTML.
func (b *reportBuilder) render(v *reportView) error {
	for _, s := range v.Sections {
		v.Notes = append(v.Notes, s.Notes...)
	}
	for _, c := range b.rep.Charts {
		v.ChartIDs = append(v.ChartIDs, c.ID)
	}
	css, err := fontFaceCSS()
	if err != nil {
		return err
	}
	v.FontCSS = css
	var page bytes.Buffer
	if err := reportTemplate.Execute(&page, v); err != nil {
		return fmt.Errorf("results: report: %w", err)
	}
	b.rep.HTML = page.Bytes()
	return nil
}

// runCharts adds the latency distribution and the time series of an
// input's runs. A sweep's runs are drawn one after another on the wall
// clock; other runs each from its own start, overlaid. A comparison's
// distribution has one line per engine, its runs' histograms merged.
func runCharts(sec *sectionView, in *Input, add func(*sectionView) func(*Chart, error) error) error {
	runs, title := in.Runs, in.Title
	sequential := in.Kind == "sweep"
	var dist []DistSeries
	tags := map[string]bool{}
	if in.Comparison != nil {
		dist = engineDistributions(in)
		for _, r := range runs {
			tags[r.PrimaryTag()] = true
		}
	}
	shown := runs
	if len(shown) > maxSeries {
		sec.Notes = append(sec.Notes, fmt.Sprintf("%s: the charts show the first %d of %d runs", title, maxSeries, len(runs)))
		shown = shown[:maxSeries]
	}
	var origin time.Time
	if sequential {
		for _, o := range shown {
			if origin.IsZero() || o.Start().Before(origin) {
				origin = o.Start()
			}
		}
	}
	var ts []TimeSeries
	for _, r := range shown {
		tag := r.PrimaryTag()
		tags[tag] = true
		if in.Comparison == nil {
			if pts := runDistribution(r, tag); len(pts) > 0 {
				dist = append(dist, DistSeries{Name: r.Name(), Points: pts})
			}
		}
		if s := TimeSeriesOf(r, tag, origin); len(s.AtS) > 0 {
			if in.Comparison != nil {
				s.Group = r.Summary.Engine // rounds of one engine share a colour
			}
			ts = append(ts, s)
		}
	}
	var kinds []string
	for t := range tags {
		kinds = append(kinds, t)
	}
	what := fmt.Sprintf("Histogram: %s (successful acquisitions).", strings.Join(sortedStrings(kinds), " and "))
	if in.Comparison != nil {
		what += " Each engine's line merges the histograms of all its complete rounds."
	}
	if err := add(sec)(DistributionChart("latency-distribution", "Latency distribution: "+title, what, dist)); err != nil {
		return err
	}
	xlabel := "seconds since the run started (the clock of --fault; the warm-up is shaded)"
	if sequential {
		xlabel = "seconds since the first step started (steps one after another; warm-ups shaded)"
	}
	if err := add(sec)(TimeSeriesChart("over-time", "Over time: "+title, xlabel, ts, sequential)); err != nil {
		return err
	}
	if !sequential && len(ts) != 1 {
		return nil // overlaid runs' masters would cross each other's lines
	}
	return add(sec)(MasterLatencyChart("master-latency", "Each master's round trip: "+title, xlabel, ts, sequential))
}

// runDistribution samples a run's distribution of tag: from its full
// histogram, or else from its .hgrm file.
func runDistribution(r *RunDir, tag string) []DistPoint {
	if h := r.Histogram(tag); h != nil {
		return DistributionOf(h)
	}
	if g := r.Hgrm[tag]; g != nil {
		return DistributionOfHgrm(g)
	}
	return nil
}

// engineDistributions merges, per engine of a comparison, the full
// histograms of its complete runs, losslessly.
func engineDistributions(in *Input) []DistSeries {
	byDir := map[string]*RunDir{}
	for _, r := range in.Runs {
		byDir[filepath.Clean(r.Dir)] = r
	}
	var out []DistSeries
	for _, e := range in.Comparison.Engines {
		var merged *Set
		var fallback []DistPoint
		n := 0
		for _, cr := range in.Comparison.Runs {
			r := byDir[filepath.Clean(filepath.Join(in.Dir, cr.Dir))]
			if cr.Engine != e || cr.Interrupted || r == nil {
				continue
			}
			tag := r.PrimaryTag()
			h := r.Histogram(tag)
			if h == nil {
				if fallback == nil {
					fallback = runDistribution(r, tag)
				}
				continue
			}
			if merged == nil {
				merged = NewSet()
			}
			k, _ := ParseKind(tag)
			merged[k].Merge(h)
			n++
		}
		name := fmt.Sprintf("%s (%d runs)", e, n)
		switch {
		case merged != nil:
			k := Acquire
			if in.Comparison.Mode == "wait" {
				k = Wait
			}
			out = append(out, DistSeries{Name: name, Points: DistributionOf(merged[k])})
		case fallback != nil:
			out = append(out, DistSeries{Name: e + " (one run, from .hgrm)", Points: fallback})
		}
	}
	return out
}

func sortedStrings(s []string) []string {
	c := append([]string{}, s...)
	sort.Strings(c)
	return c
}

// WriteReport builds the report and writes report.html, capacity.md and
// charts/*.svg, *.png into dir (created if needed). It returns the paths
// written.
func WriteReport(dir string, inputs []*Input, opts ReportOptions) ([]string, error) {
	rep, err := BuildReport(inputs, opts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, ChartsDir), 0o755); err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var written []string
	write := func(name string, b []byte) error {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("results: %w", err)
		}
		written = append(written, p)
		return nil
	}
	if err := write(ReportHTML, rep.HTML); err != nil {
		return written, err
	}
	if err := write(CapacityFile, rep.Capacity); err != nil {
		return written, err
	}
	for _, c := range rep.Charts {
		if err := write(filepath.Join(ChartsDir, c.ID+".svg"), c.SVG); err != nil {
			return written, err
		}
		if err := write(filepath.Join(ChartsDir, c.ID+".png"), c.PNG); err != nil {
			return written, err
		}
	}
	return written, nil
}

var svgProlog = regexp.MustCompile(`(?s)^\s*<\?xml[^>]*\?>\s*(<!--.*?-->\s*)?`)

// inlineSVG turns a standalone SVG document into an element for the page:
// without its XML prolog, and scaling to the page's width.
func inlineSVG(doc []byte) template.HTML {
	s := svgProlog.ReplaceAllString(string(doc), "")
	s = strings.Replace(s, "<svg ", `<svg role="img" preserveAspectRatio="xMidYMid meet" `, 1)
	return template.HTML(s) // produced by gonum's SVG back end, which escapes its texts
}

// fontFaceCSS embeds the charts' typeface in the page, so that the inline
// SVGs render with the metrics they were laid out with, offline.
func fontFaceCSS() (template.CSS, error) {
	face := font.DefaultCache.Lookup(font.From(chartFont, 10), 10)
	if face.Face == nil {
		return "", fmt.Errorf("results: report: the chart font %s %s is not available", chartFont.Typeface, chartFont.Variant)
	}
	var raw bytes.Buffer
	if _, err := face.Face.WriteSourceTo(nil, &raw); err != nil {
		return "", fmt.Errorf("results: report: chart font: %w", err)
	}
	return template.CSS(fmt.Sprintf(`@font-face{font-family:"Liberation Sans";font-style:normal;font-weight:normal;src:url(data:font/ttf;base64,%s) format("truetype");}`,
		base64.StdEncoding.EncodeToString(raw.Bytes()))), nil
}

type reportView struct {
	Title, Generated, SLO string
	Inputs                []inputView
	Notes                 []string
	Groups                []tableGroup // the comparison of runs, by input
	Sections              []sectionView
	Capacity              *capacityPlan
	FontCSS               template.CSS
	ChartIDs              []string
}

type inputView struct {
	Kind, Dir, Title string
	Runs             int
}

type sectionView struct {
	Title, Dir, Kind string
	Sweep            *sweepView
	Compare          *compareView
	Charts           []chartView
	Notes            []string
}

type chartView struct {
	ID, Title, Caption string
	SVG                template.HTML
	Files              []string
}

// tableGroup is one input's rows in the comparison of runs; Ref says what
// their throughput ratio is against, when they have one.
type tableGroup struct {
	Input, Ref string
	Rows       []rowView
}

// ratioReference says what a compare input's ratios are against.
func ratioReference(in *Input) string {
	if in.Kind != "compare" || len(in.Runs) == 0 {
		return ""
	}
	if c := in.Comparison; c != nil && len(c.Results) > 0 && c.Results[0].Median != nil {
		return fmt.Sprintf("× ref.: throughput against %s's median", c.Results[0].Engine)
	}
	return "× ref.: throughput against the first run's"
}

type rowView struct {
	Name, Dir, Engine, Mode, Load, Duration string
	PerSec, VsRef                           string
	P50, P90, P99, P999, Max                string
	Errors, Lost, Violations                int64
	SLO                                     string
	Bad                                     bool
}

type sweepView struct {
	Param, Latency string
	Rows           []sweepRowView
	Knee, SLO      string
}

type compareView struct {
	Reference string
	Latency   string
	Rows      []compareRowView
	Ceiling   string
}

type compareRowView struct {
	Engine                                   string
	Runs                                     int
	PerSec, Ratio, P50, P99, P999, OfCeiling string
	Violations                               int64
}

func compareTable(c *Comparison) *compareView {
	v := &compareView{Latency: c.Latency}
	if len(c.Engines) > 0 {
		v.Reference = c.Engines[0]
	}
	if c.Ceiling != nil {
		v.Ceiling = fmt.Sprintf("%s acquire+release cycles/s on the slowest master (%s)", thousands(c.Ceiling.CyclesPerSec), c.Ceiling.Tool)
	}
	for _, r := range c.Results {
		row := compareRowView{Engine: r.Engine, Runs: r.Runs, Violations: r.Violations, PerSec: "-", Ratio: "", P50: "-", P99: "-", P999: "-"}
		if m := r.Median; m != nil {
			row.PerSec = thousands(m.AcquiredPerSec)
			row.P50, row.P99, row.P999 = FormatUs(int64(m.AcquireP50Us)), FormatUs(int64(m.AcquireP99Us)), FormatUs(int64(m.AcquireP999Us))
		}
		if r.Ratio != nil && r.Ratio.AcquiredPerSec != nil {
			row.Ratio = fmt.Sprintf("%.2f×", *r.Ratio.AcquiredPerSec)
		}
		if r.OfCeiling != nil {
			row.OfCeiling = fmt.Sprintf("%.0f%%", 100**r.OfCeiling)
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

type sweepRowView struct {
	Step                      int
	Value, PerSec, Dir        string
	P50, P90, P99, P999, Mark string
	Errors, Violations        int64
	SLO                       string
}

func runRow(in *Input, i int, r *RunDir, slo *SLO) rowView {
	s := r.Summary
	st := s.Latency(primaryKind(s))
	row := rowView{
		Name: r.Name(), Dir: filepath.ToSlash(r.Dir), Engine: s.Engine, Mode: s.Mode,
		Load: describeLoad(s), Duration: strconv.FormatFloat(s.DurationS, 'f', 1, 64) + " s",
		PerSec: thousands(s.AcquiredPerSec),
		P50:    FormatUs(st.P50), P90: FormatUs(st.P90), P99: FormatUs(st.P99), P999: FormatUs(st.P999), Max: FormatUs(st.Max),
		Errors: s.ErrorTotal(), Lost: s.LostLeases, Violations: s.Violations,
		Bad: s.Violations > 0 || s.Interrupted,
	}
	if in.Kind == "compare" {
		ref := in.Runs[0].Summary.AcquiredPerSec
		if c := in.Comparison; c != nil && len(c.Results) > 0 && c.Results[0].Median != nil {
			ref = c.Results[0].Median.AcquiredPerSec
		}
		if ref > 0 && (i > 0 || in.Comparison != nil) {
			row.VsRef = fmt.Sprintf("%.2f×", s.AcquiredPerSec/ref)
		}
	}
	if slo != nil {
		row.SLO = "missed"
		if slo.Met(st) {
			row.SLO = "met"
		}
	}
	return row
}

func sweepTable(sw *Sweep) *sweepView {
	v := &sweepView{Param: sw.Param, Latency: sw.Latency}
	for _, pt := range sw.Points {
		r := sweepRowView{
			Step: pt.Index + 1, Value: strconv.FormatFloat(pt.Value, 'f', -1, 64), PerSec: thousands(pt.AcquiredPerSec), Dir: pt.Dir,
			P50: FormatUs(pt.LatencyUs.P50), P90: FormatUs(pt.LatencyUs.P90), P99: FormatUs(pt.LatencyUs.P99), P999: FormatUs(pt.LatencyUs.P999),
			Errors: pt.Errors, Violations: pt.Violations,
		}
		var marks []string
		if sw.Knee.Found && sw.Knee.Index == pt.Index {
			marks = append(marks, "knee")
		}
		if sw.SLOPoint != nil && sw.SLOPoint.Index == pt.Index {
			marks = append(marks, "best within SLO")
		}
		if pt.Interrupted {
			marks = append(marks, "interrupted")
		}
		if v := pt.Verdict(); v != "" {
			marks = append(marks, v)
		}
		r.Mark = strings.Join(marks, ", ")
		if pt.MeetsSLO != nil {
			r.SLO = map[bool]string{true: "met", false: "missed"}[*pt.MeetsSLO]
		}
		v.Rows = append(v.Rows, r)
	}
	if sw.Knee.Found {
		v.Knee = fmt.Sprintf("%s, %s acquisitions/s, p99 %s: %s.", ParamValue(sw.Param, sw.Knee.Value), thousands(sw.Knee.AcquiredPerSec), FormatUs(sw.Knee.P99Us), sw.Knee.Reason)
	} else {
		v.Knee = "not found: " + sw.Knee.Reason + "."
	}
	if text := sw.ObjectivesText(); text != "" {
		if sw.SLOPoint != nil {
			v.SLO = fmt.Sprintf("%s met up to %s acquisitions/s, at %s.", text, thousands(sw.SLOPoint.AcquiredPerSec), ParamValue(sw.Param, sw.SLOPoint.Value))
		} else {
			v.SLO = SLOMiss(sw) + "."
		}
	}
	return v
}

var reportTemplate = template.Must(template.Must(template.New("report").Parse(capacityHTMLTemplates)).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
{{.FontCSS}}
:root{--fg:#1d2430;--muted:#5b6473;--line:#d9dee5;--bad:#b3261e;--good:#2e7d32;--bg:#fff;--panel:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 "Liberation Sans",Arial,Helvetica,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:1180px;margin:0 auto;padding:24px}
h1{font-size:26px;margin:0 0 4px}
h2{font-size:20px;margin:36px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:16px;margin:20px 0 6px}
.muted{color:var(--muted)}
table{border-collapse:collapse;width:100%;font-size:13px;margin:8px 0 16px}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:right;white-space:nowrap}
th{background:var(--panel);position:sticky;top:0}
td.l,th.l{text-align:left}
th{white-space:normal;vertical-align:bottom}
td.name{white-space:normal;overflow-wrap:anywhere;min-width:12em}
td.load{white-space:normal;min-width:8em}
td .sub{font-size:11px;color:var(--muted)}
tr.group th{background:none;position:static;font-size:13px;padding-top:12px;border-bottom:1px solid var(--muted)}
tr.bad td{color:var(--bad)}
.met{color:var(--good)}.missed{color:var(--bad)}
.scroll{overflow-x:auto}
figure.chart{margin:18px 0 28px;padding:12px;border:1px solid var(--line);border-radius:6px;background:#fff}
figure.chart svg{display:block;width:100%;height:auto}
figcaption{font-size:13px;color:var(--muted);margin-top:6px}
figcaption b{color:var(--fg)}
div.capacity{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:4px 18px 8px;font-size:14px}
div.capacity h3{margin-top:14px}
div.capacity li{margin:4px 0}
div.capacity li>div{margin-top:4px}
div.capacity pre{white-space:pre-wrap;word-break:break-all;background:#fff;border:1px solid var(--line);border-radius:4px;padding:8px 10px}
ul.notes{font-size:13px;color:var(--muted)}
code{font:12px "Liberation Mono",Menlo,Consolas,monospace}
</style>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
<p class="muted">Generated {{.Generated}}{{if .SLO}} &middot; SLO {{.SLO}}{{end}} &middot; {{len .ChartIDs}} charts, each also in <code>charts/</code> as SVG and PNG.</p>

<h2 id="inputs">Inputs</h2>
<table><thead><tr><th class="l">kind</th><th class="l">directory</th><th class="l">name</th><th>runs</th></tr></thead><tbody>
{{range .Inputs}}<tr><td class="l">{{.Kind}}</td><td class="l"><code>{{.Dir}}</code></td><td class="l">{{.Title}}</td><td>{{.Runs}}</td></tr>
{{end}}</tbody></table>

<h2 id="comparison">Comparison of runs</h2>
<p class="muted">One row per run, by input. Latencies are of successful acquisitions: <code>acquire</code> in mode try, <code>wait</code> in mode wait. Hover over a run for its directory.</p>
<div class="scroll"><table id="comparison-table"><thead><tr>
<th class="l">run</th><th class="l">load</th><th>acquisitions/s</th><th title="throughput against the input's reference">× ref.</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th>
<th>errors</th><th>lost leases</th><th>violations</th>{{if .SLO}}<th>SLO {{.SLO}}</th>{{end}}
</tr></thead>
{{range .Groups}}<tbody><tr class="group"><th class="l" colspan="{{if $.SLO}}13{{else}}12{{end}}">{{.Input}}{{with .Ref}} <span class="muted">&middot; {{.}}</span>{{end}}</th></tr>
{{range .Rows}}<tr{{if .Bad}} class="bad"{{end}}><td class="l name" title="{{.Dir}}">{{.Name}}<div class="sub">{{.Engine}} &middot; mode {{.Mode}} &middot; {{.Duration}} measured</div></td><td class="l load">{{.Load}}</td>
<td>{{.PerSec}}</td><td>{{.VsRef}}</td><td>{{.P50}}</td><td>{{.P90}}</td><td>{{.P99}}</td><td>{{.P999}}</td><td>{{.Max}}</td>
<td>{{.Errors}}</td><td>{{.Lost}}</td><td>{{.Violations}}</td>{{if $.SLO}}<td class="{{.SLO}}">{{.SLO}}</td>{{end}}</tr>
{{end}}</tbody>
{{end}}</table></div>

<h2 id="capacity">Capacity plan</h2>
<p class="muted">Also written beside this page as <code>capacity.md</code>.</p>
<div class="capacity">{{template "capacity" .Capacity}}</div>

{{range .Sections}}
<h2>{{.Title}}</h2>
<p class="muted">{{.Kind}} &middot; <code>{{.Dir}}</code></p>
{{with .Sweep}}
<div class="scroll"><table class="sweep"><thead><tr><th>step</th><th>{{.Param}}</th><th>acquisitions/s</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>errors</th><th>violations</th><th>SLO</th><th class="l">run directory</th><th class="l"></th></tr></thead><tbody>
{{range .Rows}}<tr{{if .Violations}} class="bad"{{end}}><td>{{.Step}}</td><td>{{.Value}}</td><td>{{.PerSec}}</td><td>{{.P50}}</td><td>{{.P90}}</td><td>{{.P99}}</td><td>{{.P999}}</td><td>{{.Errors}}</td><td>{{.Violations}}</td><td class="{{.SLO}}">{{.SLO}}</td><td class="l"><code>{{.Dir}}</code></td><td class="l"><b>{{.Mark}}</b></td></tr>
{{end}}</tbody></table></div>
<p><b>Knee:</b> {{.Knee}}{{if .SLO}}<br><b>SLO:</b> {{.SLO}}{{end}}</p>
{{end}}
{{with .Compare}}
<div class="scroll"><table class="compare"><thead><tr><th class="l">engine</th><th>complete runs</th><th>median acquisitions/s</th><th>× {{.Reference}}</th><th>p50</th><th>p99</th><th>p99.9</th><th>of ceiling</th><th>violations</th></tr></thead><tbody>
{{range .Rows}}<tr{{if .Violations}} class="bad"{{end}}><td class="l">{{.Engine}}</td><td>{{.Runs}}</td><td>{{.PerSec}}</td><td>{{.Ratio}}</td><td>{{.P50}}</td><td>{{.P99}}</td><td>{{.P999}}</td><td>{{.OfCeiling}}</td><td>{{.Violations}}</td></tr>
{{end}}</tbody></table></div>
<p class="muted">Medians over the engines' complete runs, which alternated round by round; latency of {{.Latency}}.{{if .Ceiling}} Ceiling: {{.Ceiling}}.{{end}}</p>
{{end}}
{{range .Charts}}
<figure class="chart" id="chart-{{.ID}}" data-chart="{{.ID}}">
{{.SVG}}
<figcaption><b>{{.Title}}.</b> {{.Caption}} Files: {{range $i, $f := .Files}}{{if $i}}, {{end}}<code>{{$f}}</code>{{end}}.</figcaption>
</figure>
{{end}}
{{end}}

{{if .Notes}}<h2 id="notes">Notes</h2>
<ul class="notes">{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
</main>
</body>
</html>
`))
