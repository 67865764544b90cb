package results

// The charts are drawn with gonum.org/v1/plot, the plotting library of the
// Gonum project: maintained, pure Go (no cgo, no browser, no network), with
// log axes, custom tickers, labels and polygons, and SVG and PNG back ends
// that draw the same figure. The report embeds the SVG inline and writes
// both files beside it. Hand-written SVG strings would be ours to maintain;
// a JavaScript charting library would need a browser to render and would
// have to be embedded; go-echarts and similar emit JavaScript too.
//
// Every text uses Liberation Sans, which gonum embeds in the binary: the
// PNGs need no system fonts, and report.html embeds the same font once, so
// that the SVGs render with the metrics they were laid out with.

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart is one figure of a report, with its SVG and PNG renderings.
type Chart struct {
	// ID names the chart: the HTML id and the base of its file names.
	ID string
	// Title is the figure's heading; Caption says how to read it.
	Title   string
	Caption string
	// SVG is a standalone SVG document; PNG the same figure as an image.
	SVG []byte
	PNG []byte
}

// chartFont is the typeface of every text in the charts.
var chartFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

// palette holds the series colours: the Tableau 10 palette, which stays
// distinguishable for the common forms of colour blindness.
var palette = []color.Color{
	color.RGBA{0x4e, 0x79, 0xa7, 0xff}, color.RGBA{0xf2, 0x8e, 0x2b, 0xff},
	color.RGBA{0xe1, 0x57, 0x59, 0xff}, color.RGBA{0x76, 0xb7, 0xb2, 0xff},
	color.RGBA{0x59, 0xa1, 0x4f, 0xff}, color.RGBA{0xed, 0xc9, 0x48, 0xff},
	color.RGBA{0xb0, 0x7a, 0xa1, 0xff}, color.RGBA{0xff, 0x9d, 0xa7, 0xff},
	color.RGBA{0x9c, 0x75, 0x5f, 0xff}, color.RGBA{0xba, 0xb0, 0xac, 0xff},
}

func seriesColor(i int) color.Color { return palette[i%len(palette)] }

var (
	warmupFill = color.NRGBA{0x90, 0x90, 0x90, 0x28}
	downFill   = color.NRGBA{0xb0, 0x7a, 0xa1, 0x40}
	faultFill  = color.NRGBA{0xe1, 0x57, 0x59, 0x38}
	faultLine  = color.RGBA{0xc0, 0x30, 0x30, 0xff}
	downLine   = color.RGBA{0x7a, 0x4a, 0x6e, 0xff}
	markerDark = color.RGBA{0x20, 0x20, 0x20, 0xff}
	gridColor  = color.Gray{Y: 0xe0}
)

// newPlot returns a plot with the report's fonts and a light grid.
func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(chartFont, 13)
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(chartFont, 11)
		a.Tick.Label.Font = font.From(chartFont, 9)
	}
	p.Legend.TextStyle.Font = font.From(chartFont, 9)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(6)
	p.Legend.YOffs = vg.Points(-4)
	p.Legend.Padding = vg.Points(2.5)
	p.Legend.ThumbnailWidth = vg.Points(22)
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = gridColor, gridColor
	p.Add(g)
	return p
}

// render draws the figure into SVG and PNG.
func render(c *Chart, w, h vg.Length, drawTo func(draw.Canvas)) error {
	sv := vgsvg.New(w, h)
	drawTo(draw.New(sv))
	var sb bytes.Buffer
	if _, err := sv.WriteTo(&sb); err != nil {
		return fmt.Errorf("results: chart %s: svg: %w", c.ID, err)
	}
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	drawTo(draw.New(img))
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&pb); err != nil {
		return fmt.Errorf("results: chart %s: png: %w", c.ID, err)
	}
	c.SVG, c.PNG = sb.Bytes(), pb.Bytes()
	return nil
}

// renderPlot draws one plot.
func renderPlot(c *Chart, p *plot.Plot, w, h vg.Length) error {
	return render(c, w, h, func(dc draw.Canvas) { p.Draw(dc) })
}

// line adds a polyline with the given colour, width and dashes.
func line(p *plot.Plot, xys plotter.XYs, clr color.Color, width float64, dashes ...vg.Length) (*plotter.Line, error) {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	l.LineStyle.Color = clr
	l.LineStyle.Width = vg.Points(width)
	l.LineStyle.Dashes = dashes
	p.Add(l)
	return l, nil
}

// labels adds texts at points.
func labels(p *plot.Plot, xys plotter.XYs, texts []string, clr color.Color, size float64, dx, dy vg.Length) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font = font.From(chartFont, vg.Length(size))
		l.TextStyle[i].Color = clr
	}
	l.Offset = vg.Point{X: dx, Y: dy}
	p.Add(l)
	return nil
}

// DistPoint is one point of a latency distribution: the quantile q (0..1)
// and its value in microseconds.
type DistPoint struct {
	Q  float64
	Us float64
}

// DistSeries is one run's latency distribution.
type DistSeries struct {
	Name   string
	Points []DistPoint
}

// distPointsPerDecade is how finely the distribution is sampled along the
// 1/(1-q) axis.
const distPointsPerDecade = 20

// DistributionOf samples a histogram's distribution evenly on the
// 1/(1-q) axis, up to the resolution its count allows, and ends at the max.
func DistributionOf(h interface {
	TotalCount() int64
	ValueAtQuantile(float64) int64
	Max() int64
}) []DistPoint {
	n := h.TotalCount()
	if n == 0 {
		return nil
	}
	var pts []DistPoint
	limit := float64(n) // beyond 1/(1-q) = n the data says nothing
	for k := 0; ; k++ {
		x := math.Pow(10, float64(k)/distPointsPerDecade)
		if x > limit {
			break
		}
		q := 1 - 1/x
		pts = append(pts, DistPoint{Q: q, Us: float64(h.ValueAtQuantile(q * 100))})
	}
	pts = append(pts, DistPoint{Q: 1 - 1/math.Max(limit, 1.0001), Us: float64(h.Max())})
	return pts
}

// DistributionOfHgrm takes the distribution from a parsed .hgrm file
// (values in milliseconds), for runs without histograms.hlog.
func DistributionOfHgrm(g *Hgrm) []DistPoint {
	var pts []DistPoint
	for _, l := range g.Lines {
		if l.Percentile >= 1 {
			continue
		}
		pts = append(pts, DistPoint{Q: l.Percentile, Us: l.Value * HgrmScale})
	}
	if g.Max > 0 && g.TotalCount > 1 {
		pts = append(pts, DistPoint{Q: 1 - 1/float64(g.TotalCount), Us: g.Max * HgrmScale})
	}
	return pts
}

// percentileTicks labels the 1/(1-q) axis with percentiles: 1 is 0%, 10
// is 90%, 100 is 99%, 1000 is 99.9%, ...
type percentileTicks struct{}

func (percentileTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for d := 0; d <= 9; d++ {
		v := math.Pow10(d)
		if v > max*1.0001 {
			break
		}
		label := "0%"
		if d > 0 {
			label = strings.TrimRight(strings.TrimRight(strconv.FormatFloat(100-100/v, 'f', d, 64), "0"), ".") + "%"
		}
		if v >= min/1.0001 {
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
		for m := 2; m < 10; m++ {
			if mv := v * float64(m); mv >= min && mv <= max {
				ticks = append(ticks, plot.Tick{Value: mv})
			}
		}
	}
	return ticks
}

// latencyTicks labels a log axis of microseconds with units: 10µs, 1ms, 1s.
type latencyTicks struct{}

func (latencyTicks) Ticks(min, max float64) []plot.Tick {
	min, max = math.Max(min, 0.1), math.Max(max, 1)
	var ticks []plot.Tick
	for d := math.Floor(math.Log10(min)); d <= math.Ceil(math.Log10(max)); d++ {
		v := math.Pow(10, d)
		for m := 1; m < 10; m++ {
			mv := v * float64(m)
			if mv < min/1.0001 || mv > max*1.0001 {
				continue
			}
			t := plot.Tick{Value: mv}
			ends := mv <= min*1.0001 || mv >= max/1.0001 // latencyRange puts 1-2-5 values there
			if m == 1 || (m == 2 || m == 5) && (ends || math.Log10(max/min) < 3) {
				t.Label = formatUsTick(mv)
			}
			ticks = append(ticks, t)
		}
	}
	if len(ticks) < 2 { // a narrow range: linear ticks, in units
		for _, t := range (plot.DefaultTicks{}).Ticks(min, max) {
			if t.Label != "" {
				t.Label = formatUsTick(t.Value)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// latencyRange widens a latency axis to labelled values at both ends, so
// that no line runs above the highest label or below the lowest: on a log
// axis to 1-2-5 values (latencyTicks labels them), on a linear one to the
// next labelled tick above.
func latencyRange(a *plot.Axis, logScale bool) {
	if a.Max <= a.Min || math.IsInf(a.Min, 0) || math.IsInf(a.Max, 0) {
		return
	}
	if logScale {
		a.Min, a.Max = oneTwoFive(math.Max(a.Min, 1), math.Floor), oneTwoFive(a.Max, math.Ceil)
		return
	}
	var labelled []float64
	for _, t := range (plot.DefaultTicks{}).Ticks(a.Min, a.Max) {
		if t.Label != "" {
			labelled = append(labelled, t.Value)
		}
	}
	if n := len(labelled); n >= 2 && labelled[n-1] < a.Max {
		step := labelled[n-1] - labelled[n-2]
		a.Max = labelled[n-1] + step*math.Ceil((a.Max-labelled[n-1])/step-1e-9)
	}
}

// oneTwoFive rounds v to a value 1, 2 or 5 times a power of ten: down with
// math.Floor, up with math.Ceil.
func oneTwoFive(v float64, round func(float64) float64) float64 {
	d := math.Pow10(int(math.Floor(math.Log10(v))))
	steps := []float64{1, 2, 5, 10}
	if round(1.5) == 1 { // down
		for i := len(steps) - 1; i >= 0; i-- {
			if steps[i]*d <= v*1.0001 {
				return steps[i] * d
			}
		}
		return d
	}
	for _, m := range steps {
		if m*d >= v/1.0001 {
			return m * d
		}
	}
	return 10 * d
}

// linearLatencyTicks labels a linear axis of microseconds with units.
type linearLatencyTicks struct{}

func (linearLatencyTicks) Ticks(min, max float64) []plot.Tick {
	ticks := (plot.DefaultTicks{}).Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = formatUsTick(ticks[i].Value)
		}
	}
	return ticks
}

// formatUsTick writes a tick of microseconds, keeping fractions that
// FormatUs would round away.
func formatUsTick(us float64) string {
	switch {
	case us == 0:
		return "0"
	case math.Abs(us) < 1000:
		return strconv.FormatFloat(us, 'f', -1, 64) + "µs"
	case math.Abs(us) < 1e6:
		return strconv.FormatFloat(us/1e3, 'f', -1, 64) + "ms"
	}
	return strconv.FormatFloat(us/1e6, 'f', -1, 64) + "s"
}

// secondsTicks label a time axis in seconds every 1, 2 or 5 × 10^k, as
// many as make 4 to 10 labels, with unlabelled ticks between.
type secondsTicks struct{}

func (secondsTicks) Ticks(min, max float64) []plot.Tick {
	if !(max > min) {
		return nil
	}
	step := oneTwoFive((max-min)/10, math.Ceil)
	minor := step / 5
	if step/math.Pow10(int(math.Floor(math.Log10(step)))) == 2 {
		minor = step / 4
	}
	var ticks []plot.Tick
	for i := math.Ceil(min/minor - 1e-9); i*minor <= max+1e-9; i++ {
		v := i * minor
		t := plot.Tick{Value: v}
		if r := math.Round(v / step); math.Abs(v/step-r) < 1e-6 {
			t.Label = strconv.FormatFloat(r*step+0, 'f', -1, 64) // +0: no "-0"
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// countTicks labels throughput with thousands as k: 20k, 1.5M.
type countTicks struct{ log bool }

func (t countTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	if t.log {
		ticks = (plot.LogTicks{Prec: -1}).Ticks(math.Max(min, 1e-9), math.Max(max, 1e-9))
	} else {
		ticks = (plot.DefaultTicks{}).Ticks(min, max)
	}
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = FormatCount(ticks[i].Value)
		}
	}
	return ticks
}

// sweptTicks label a log axis of swept values with each value swept and
// every power of ten, in full ("1024", not "1k"), with unlabelled ticks
// at the other multiples of each power of ten. A power of ten that would
// crowd a swept value's label (closer than a twentieth of the axis, about
// a label's width) goes unlabelled, as does a swept value too near the
// one labelled before it.
type sweptTicks struct{ values []float64 }

func (t sweptTicks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0 && max > min) {
		return nil
	}
	gap := math.Log10(max/min) / 20
	near := func(v float64, others []float64) bool {
		for _, o := range others {
			if math.Abs(math.Log10(v/o)) < gap {
				return true
			}
		}
		return false
	}
	var swept []float64
	for _, v := range t.values {
		if v >= min/1.0001 && v <= max*1.0001 && !near(v, swept) {
			swept = append(swept, v)
		}
	}
	var ticks []plot.Tick
	for _, v := range swept {
		ticks = append(ticks, plot.Tick{Value: v, Label: formatSwept(v)})
	}
	for d := math.Floor(math.Log10(min)); d <= math.Ceil(math.Log10(max)); d++ {
		for m := 1; m < 10; m++ {
			v := float64(m) * math.Pow(10, d)
			if v < min/1.0001 || v > max*1.0001 || slices.Contains(swept, v) {
				continue
			}
			tk := plot.Tick{Value: v}
			if m == 1 && !near(v, swept) {
				tk.Label = formatSwept(v)
			}
			ticks = append(ticks, tk)
		}
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Value < ticks[j].Value })
	return ticks
}

// formatSwept writes a swept value as compactly as FormatCount when that
// is exact (5k, 1.5M), in full otherwise (1024).
func formatSwept(v float64) string {
	c := FormatCount(v)
	scale := 1.0
	switch {
	case strings.HasSuffix(c, "M"):
		scale = 1e6
	case strings.HasSuffix(c, "k"):
		scale = 1e3
	}
	if f, err := strconv.ParseFloat(strings.TrimRight(c, "kM"), 64); err == nil && math.Abs(f*scale-v) <= 1e-9*math.Abs(v) {
		return c
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// FormatCount writes a count or a rate compactly: 950, 12.5k, 1.2M.
func FormatCount(v float64) string {
	trim := func(f float64, unit string) string {
		return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) + unit
	}
	switch a := math.Abs(v); {
	case a >= 1e6:
		return trim(v/1e6, "M")
	case a >= 1000:
		return trim(v/1e3, "k")
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

// logLatencyAxis reports whether values spread enough for a log axis.
func logLatencyAxis(lo, hi float64) bool { return lo > 0 && hi/lo >= 20 }

// DistributionChart overlays the latency distributions of several runs on
// the usual percentile axis, 1/(1-q) on a log scale, as HdrHistogram's
// plotter draws them.
func DistributionChart(id, title, what string, series []DistSeries) (*Chart, error) {
	c := &Chart{ID: id, Title: title,
		Caption: "Latency against percentile on the 1/(1−p) axis: each step right is a factor of ten rarer (90%, 99%, 99.9%...). The last point of each line is the maximum. " + what}
	p := newPlot(title, "percentile", "latency")
	lo, hi := math.Inf(1), 0.0
	for _, s := range series {
		for _, pt := range s.Points {
			lo, hi = math.Min(lo, math.Max(pt.Us, 1)), math.Max(hi, pt.Us)
		}
	}
	logY := logLatencyAxis(lo, hi)
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = percentileTicks{}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = latencyTicks{}
	} else {
		p.Y.Tick.Marker = linearLatencyTicks{}
		p.Y.Min = 0
	}
	n := 0
	for i, s := range series {
		var xys plotter.XYs
		for _, pt := range s.Points {
			x := 1 / math.Max(1-pt.Q, 1e-12)
			y := pt.Us
			if logY {
				y = math.Max(y, 1)
			}
			xys = append(xys, plotter.XY{X: x, Y: y})
		}
		if len(xys) == 0 {
			continue
		}
		if len(xys) == 1 {
			xys = append(xys, xys[0])
		}
		l, err := line(p, xys, seriesColor(i), 1.6)
		if err != nil {
			return nil, fmt.Errorf("results: chart %s: %w", id, err)
		}
		p.Legend.Add(s.Name, l)
		n++
	}
	if n == 0 {
		return nil, nil
	}
	if p.X.Max < 10 {
		p.X.Max = 10
	}
	p.X.Min = 1
	latencyRange(&p.Y, logY)
	return c, renderPlot(c, p, 9*vg.Inch, 4.6*vg.Inch)
}

// TimeSeries is one run's per-interval figures.
type TimeSeries struct {
	Name string
	// Group, when set, colours the series by group (an engine of a
	// comparison) and names only the group in the legend.
	Group string
	// AtS is each interval's middle, in seconds since the origin given to
	// TimeSeriesOf (the run's start by default, the clock its --fault
	// schedule is written in); PerSec and P99Us its throughput and 99th
	// percentile.
	AtS    []float64
	PerSec []float64
	P99Us  []float64
	// P50Us, P999Us and MaxUs are the intervals' other percentiles, for
	// the latency bands.
	P50Us, P999Us, MaxUs []float64
	// SecAtS is the middle of each second of intervals.json, warm-up
	// included, on AtS's clock; ErrorsPerSec and NoQuorumPerSec are its
	// errors (every kind) and no_quorum errors per second, and
	// MasterRTTUs[m] master m's PING round trip (NaN: none answered).
	// Empty for a run without intervals.json. Masters names the masters.
	SecAtS                       []float64
	ErrorsPerSec, NoQuorumPerSec []float64
	MasterRTTUs                  [][]float64
	Masters                      []string
	// Faults are the injected faults, and Down the spans when a master
	// was down: from a kill until the restart that followed it completed,
	// or until the end of the run. Same clock as AtS.
	Faults []Fault
	Down   []Fault
	// WarmupFromS and WarmupToS bound the warm-up, which is not measured;
	// EndS is when the measured window ended.
	WarmupFromS, WarmupToS, EndS float64
}

// TimeSeriesOf computes the per-interval throughput and p99 of tag from a
// run's interval log, in seconds since origin; a zero origin is the run's
// start (warm-up included).
func TimeSeriesOf(r *RunDir, tag string, origin time.Time) TimeSeries {
	ts := TimeSeries{Name: r.Name()}
	if origin.IsZero() {
		origin = r.Start()
	}
	since := func(t time.Time) float64 { return t.Sub(origin).Seconds() }
	shift := since(r.Start())
	ts.WarmupFromS, ts.WarmupToS = shift, since(r.MeasureStart())
	for _, f := range r.Faults() {
		f.FromS += shift
		f.ToS += shift
		ts.Faults = append(ts.Faults, f)
	}
	ts.EndS = since(r.MeasureEnd())
	ts.Down = downtime(ts.Faults, ts.EndS)
	for _, t := range r.Intervals {
		if t.Tag != tag {
			continue
		}
		s, e := t.Histogram.StartTimeMs(), t.Histogram.EndTimeMs()
		secs := float64(e-s) / 1000
		if secs <= 0.05 { // a sliver at the end says nothing about a rate
			continue
		}
		mid := float64(s+e)/2000 - float64(origin.UnixNano())/1e9
		ts.AtS = append(ts.AtS, mid)
		ts.PerSec = append(ts.PerSec, float64(t.Histogram.TotalCount())/secs)
		ts.P50Us = append(ts.P50Us, float64(t.Histogram.ValueAtQuantile(50)))
		ts.P99Us = append(ts.P99Us, float64(t.Histogram.ValueAtQuantile(99)))
		ts.P999Us = append(ts.P999Us, float64(t.Histogram.ValueAtQuantile(99.9)))
		ts.MaxUs = append(ts.MaxUs, float64(t.Histogram.Max()))
	}
	ts.Masters = r.Summary.Masters
	for _, iv := range r.PerSecond {
		if iv.LengthS <= 0.05 { // a sliver at the end says nothing about a rate
			continue
		}
		ts.SecAtS = append(ts.SecAtS, shift+iv.TS+iv.LengthS/2)
		ts.ErrorsPerSec = append(ts.ErrorsPerSec, float64(iv.Errors)/iv.LengthS)
		ts.NoQuorumPerSec = append(ts.NoQuorumPerSec, float64(iv.NoQuorum)/iv.LengthS)
		for m, us := range iv.MasterRTTUs {
			for len(ts.MasterRTTUs) <= m {
				ts.MasterRTTUs = append(ts.MasterRTTUs, nil)
			}
			v := math.NaN()
			if us > 0 {
				v = float64(us)
			}
			// A master missing from earlier seconds has none there.
			for len(ts.MasterRTTUs[m]) < len(ts.SecAtS)-1 {
				ts.MasterRTTUs[m] = append(ts.MasterRTTUs[m], math.NaN())
			}
			ts.MasterRTTUs[m] = append(ts.MasterRTTUs[m], v)
		}
	}
	for m := range ts.MasterRTTUs {
		for len(ts.MasterRTTUs[m]) < len(ts.SecAtS) {
			ts.MasterRTTUs[m] = append(ts.MasterRTTUs[m], math.NaN())
		}
	}
	return ts
}

// downtime pairs each kill that worked with the first restart of the same
// master after it: the master was down from the kill until the restart
// completed, or until end if none came.
func downtime(faults []Fault, end float64) []Fault {
	var down []Fault
	for _, k := range faults {
		if k.Action != "kill" || k.Error != "" {
			continue
		}
		d := Fault{Name: fmt.Sprintf("master %d down", k.Node), Action: "down", Node: k.Node, FromS: k.FromS, ToS: math.Max(end, k.ToS)}
		restarted := math.Inf(1)
		for _, r := range faults {
			if r.Action == "restart" && r.Node == k.Node && r.FromS >= k.FromS && r.FromS < restarted {
				restarted, d.ToS = r.FromS, math.Max(r.ToS, k.ToS)
			}
		}
		down = append(down, d)
	}
	return down
}

// TimeSeriesChart draws throughput (top), latency (middle) and, when the
// runs have intervals.json, errors and no_quorum errors per second
// (bottom) against time, with warm-ups, faults and masters' downtime
// shaded. xlabel says what time zero is. One run, or sequential runs (a
// sweep's steps, one after another), get their latency as bands (p50 to
// p99, p99 to p99.9, p99.9 to the max) under the p99 line; overlaid runs
// (a comparison's) a p99 line each. Sequential runs keep the legend on
// the left, and their faults are labelled without the schedule's time,
// which is each step's own.
func TimeSeriesChart(id, title, xlabel string, series []TimeSeries, sequential bool) (*Chart, error) {
	var drawn []TimeSeries
	for _, s := range series {
		if len(s.AtS) > 0 {
			drawn = append(drawn, s)
		}
	}
	if len(drawn) == 0 {
		return nil, nil
	}
	banded := sequential || len(drawn) == 1
	withErrors := false
	for _, s := range drawn {
		withErrors = withErrors || len(s.SecAtS) > 0
	}
	c := &Chart{ID: id, Title: title}
	caption := []string{"Successful acquisitions per second (top) and their latency, per second of measurement:"}
	if banded {
		caption = append(caption, "the p99 line over bands from p50 to p99, p99 to p99.9 and p99.9 to the maximum (middle).")
	} else {
		caption = append(caption, "the 99th percentile (middle).")
	}
	if withErrors {
		caption = append(caption, "Bottom: errors per second, every kind (solid), and those that were no quorum (dashed), warm-up included.")
	}
	caption = append(caption, "Grey: the warm-up, not measured. Red: injected faults, a dashed line where each was applied and a band until it was lifted. "+
		"Purple: a master down, from its kill until its restart completed (or the end of the run).")
	c.Caption = strings.Join(caption, " ")

	top := newPlot(title, "", "acquisitions/s")
	latencyLabel := "p99 latency"
	if banded {
		latencyLabel = "latency"
	}
	mid := newPlot("", xlabel, latencyLabel)
	panels := []*plot.Plot{top, mid}
	var errs *plot.Plot
	if withErrors {
		mid.X.Label.Text = ""
		errs = newPlot("", xlabel, "errors/s")
		errs.Y.Tick.Marker = countTicks{}
		errs.Y.Min = 0
		panels = append(panels, errs)
	}
	top.Y.Tick.Marker = countTicks{}
	top.Y.Min = 0
	lo, hi := math.Inf(1), 0.0
	for _, s := range drawn {
		vals := [][]float64{s.P99Us}
		if banded {
			vals = [][]float64{s.P50Us, s.P99Us, s.MaxUs}
		}
		for _, vs := range vals {
			for _, v := range vs {
				lo, hi = math.Min(lo, math.Max(v, 1)), math.Max(hi, v)
			}
		}
	}
	logY := logLatencyAxis(lo, hi)
	if logY {
		mid.Y.Scale = plot.LogScale{}
		mid.Y.Tick.Marker = latencyTicks{}
	} else {
		mid.Y.Tick.Marker = linearLatencyTicks{}
		mid.Y.Min = 0
	}
	yOf := func(v float64) float64 {
		if logY {
			return math.Max(v, 1)
		}
		return v
	}
	var faults, down, warmups []Fault
	xEnd := math.Inf(-1)
	seen := map[string]bool{}
	once := func(list *[]Fault, f Fault) {
		if k := fmt.Sprintf("%s %s@%.3f", f.Action, f.Name, f.FromS); !seen[k] {
			seen[k] = true
			*list = append(*list, f)
		}
	}
	groups := map[string]int{}
	bandsKeyed, errsKeyed := false, false
	for i, s := range drawn {
		colour, name := i, s.Name
		if s.Group != "" {
			g, ok := groups[s.Group]
			if !ok {
				g = len(groups)
				groups[s.Group] = g
			}
			colour, name = g, s.Group
			if ok {
				name = ""
			}
		}
		clr := seriesColor(colour)
		var tp, p99 plotter.XYs
		for j := range s.AtS {
			tp = append(tp, plotter.XY{X: s.AtS[j], Y: s.PerSec[j]})
			p99 = append(p99, plotter.XY{X: s.AtS[j], Y: yOf(s.P99Us[j])})
		}
		l, err := line(top, tp, clr, 1.4)
		if err != nil {
			return nil, fmt.Errorf("results: chart %s: %w", id, err)
		}
		if banded {
			for _, band := range []struct {
				name   string
				lo, hi []float64
				alpha  uint8
			}{{"p99.9–max", s.P999Us, s.MaxUs, 0x22}, {"p99–p99.9", s.P99Us, s.P999Us, 0x44}, {"p50–p99", s.P50Us, s.P99Us, 0x70}} {
				poly, err := bandPolygon(s.AtS, band.lo, band.hi, yOf)
				if err != nil {
					return nil, fmt.Errorf("results: chart %s: %w", id, err)
				}
				r, g, b, _ := clr.RGBA()
				poly.Color = color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), band.alpha}
				poly.LineStyle.Width = 0
				mid.Add(poly)
				if !bandsKeyed {
					key := *poly
					key.Color = color.NRGBA{0x50, 0x50, 0x50, band.alpha}
					mid.Legend.Add(band.name, &key)
				}
			}
		}
		pl, err := line(mid, p99, clr, 1.4)
		if err != nil {
			return nil, fmt.Errorf("results: chart %s: %w", id, err)
		}
		if banded && !bandsKeyed {
			mid.Legend.Add("p99", pl)
			bandsKeyed = true
		}
		if errs != nil && len(s.SecAtS) > 0 {
			var all, nq plotter.XYs
			for j := range s.SecAtS {
				all = append(all, plotter.XY{X: s.SecAtS[j], Y: s.ErrorsPerSec[j]})
				nq = append(nq, plotter.XY{X: s.SecAtS[j], Y: s.NoQuorumPerSec[j]})
			}
			el, err := line(errs, all, clr, 1.4)
			if err != nil {
				return nil, fmt.Errorf("results: chart %s: %w", id, err)
			}
			nl, err := line(errs, nq, clr, 1.4, vg.Points(4), vg.Points(2))
			if err != nil {
				return nil, fmt.Errorf("results: chart %s: %w", id, err)
			}
			if !errsKeyed {
				errsKeyed = true
				ek, nk := *el, *nl
				ek.LineStyle.Color, nk.LineStyle.Color = markerDark, markerDark
				errs.Legend.Add("errors/s, every kind", &ek)
				errs.Legend.Add("no quorum/s", &nk)
			}
		}
		if len(drawn) > 1 && name != "" {
			top.Legend.Add(name, l)
		}
		for _, f := range s.Faults {
			if sequential {
				f.Name, _, _ = strings.Cut(f.Name, "@")
			}
			once(&faults, f)
		}
		for _, f := range s.Down {
			once(&down, f)
		}
		if s.WarmupToS > s.WarmupFromS {
			once(&warmups, Fault{Name: "warm-up", Action: "warm-up", FromS: s.WarmupFromS, ToS: s.WarmupToS})
		}
		xEnd = math.Max(xEnd, s.EndS)
	}
	top.Legend.Left = sequential
	top.Y.Max *= 1.18 // room for the labels
	if errs != nil && errs.Y.Max < 1 {
		errs.Y.Max = 1 // no errors: a flat line at 0, under a readable axis
	}
	latencyRange(&mid.Y, logY)
	return c, drawTimePanels(c, panels, faults, down, warmups, xEnd, sequential)
}

// bandPolygon is the band between lo and hi over xs.
func bandPolygon(xs, lo, hi []float64, y func(float64) float64) (*plotter.Polygon, error) {
	var pts plotter.XYs
	for j := range xs {
		pts = append(pts, plotter.XY{X: xs[j], Y: y(hi[j])})
	}
	for j := len(xs) - 1; j >= 0; j-- {
		pts = append(pts, plotter.XY{X: xs[j], Y: y(lo[j])})
	}
	return plotter.NewPolygon(pts)
}

// drawTimePanels shares the time axis of panels (stacked top to bottom),
// shades the warm-ups, downtimes and faults on each, labelled on the top
// one, and renders them.
func drawTimePanels(c *Chart, panels []*plot.Plot, faults, down, warmups []Fault, xEnd float64, sequential bool) error {
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, pl := range panels {
		pl.X.Tick.Marker = secondsTicks{}
		xmin, xmax = math.Min(xmin, pl.X.Min), math.Max(xmax, pl.X.Max)
	}
	for _, f := range append(append(append([]Fault{}, faults...), down...), warmups...) {
		xmin, xmax = math.Min(xmin, f.FromS), math.Max(xmax, f.ToS)
	}
	xmin, xmax = math.Min(xmin, 0), math.Max(xmax, xEnd)
	top := panels[0]
	for _, pl := range panels {
		pl.X.Min, pl.X.Max = xmin, xmax
		// Labels on the top panel only.
		warmupText, downText, faultText := color.Color(nil), color.Color(nil), color.Color(nil)
		if pl == top {
			warmupText, downText, faultText = markerDark, downLine, faultLine
		}
		if sequential {
			warmupText = nil // the legend is there; the caption says what grey is
		}
		if err := shade(pl, warmups, warmupFill, nil, warmupText, 1); err != nil {
			return fmt.Errorf("results: chart %s: %w", c.ID, err)
		}
		if err := shade(pl, down, downFill, nil, downText, 2); err != nil {
			return fmt.Errorf("results: chart %s: %w", c.ID, err)
		}
		if err := shade(pl, faults, faultFill, faultLine, faultText, 1); err != nil {
			return fmt.Errorf("results: chart %s: %w", c.ID, err)
		}
	}
	h := []vg.Length{4.4, 6, 8}[min(len(panels), 3)-1] * vg.Inch
	return render(c, 9*vg.Inch, h, func(dc draw.Canvas) {
		rows := make([][]*plot.Plot, len(panels))
		for i, pl := range panels {
			rows[i] = []*plot.Plot{pl}
		}
		tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(6), PadBottom: vg.Points(2), PadTop: vg.Points(2)}
		cs := plot.Align(rows, tiles, dc)
		for i, pl := range panels {
			pl.Draw(cs[i][0])
		}
	})
}

// segments are the runs of vs without NaN, at xs: a line through each
// leaves a gap where a value is missing.
func segments(xs, vs []float64) []plotter.XYs {
	var out []plotter.XYs
	var seg plotter.XYs
	for j, v := range vs {
		if math.IsNaN(v) {
			if len(seg) > 0 {
				out = append(out, seg)
			}
			seg = nil
			continue
		}
		seg = append(seg, plotter.XY{X: xs[j], Y: v})
	}
	if len(seg) > 0 {
		out = append(out, seg)
	}
	return out
}

// MasterLatencyChart draws each master's PING round trip per second
// (intervals.json's master_rtt_us), one line per master, with the faults
// shaded as on the over-time chart; nil when no run recorded any. For one
// run, or sequential ones on the same masters.
func MasterLatencyChart(id, title, xlabel string, series []TimeSeries, sequential bool) (*Chart, error) {
	c := &Chart{ID: id, Title: title,
		Caption: "Each master's round trip: once a second, one PING on a connection of its own to the address the engine dials " +
			"(through the fault proxies when faults are on); the point is the round trip of the reply that came in that second. " +
			"A gap: no reply within the second (a paused, cut or stopped master; a paused one's late reply shows as one long round trip when it comes). " +
			"A vote waits for the quorum's slowest master, so a master apart from the others shows here before it shows in the acquisitions' latency."}
	p := newPlot(title, xlabel, "PING round trip")
	lo, hi := math.Inf(1), 0.0
	var masters []string
	for _, s := range series {
		for _, vs := range s.MasterRTTUs {
			for _, v := range vs {
				if !math.IsNaN(v) {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
		}
		if len(s.Masters) > len(masters) {
			masters = s.Masters
		}
	}
	if hi == 0 {
		return nil, nil
	}
	logY := logLatencyAxis(lo, hi)
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = latencyTicks{}
	} else {
		p.Y.Tick.Marker = linearLatencyTicks{}
		p.Y.Min = 0
	}
	var faults, down, warmups []Fault
	seen := map[string]bool{}
	once := func(list *[]Fault, f Fault) {
		if k := fmt.Sprintf("%s %s@%.3f", f.Action, f.Name, f.FromS); !seen[k] {
			seen[k] = true
			*list = append(*list, f)
		}
	}
	keyed := map[int]bool{}
	xEnd := math.Inf(-1)
	for _, s := range series {
		for m, vs := range s.MasterRTTUs {
			clr := seriesColor(m)
			var pts plotter.XYs
			for j, v := range vs {
				if !math.IsNaN(v) {
					pts = append(pts, plotter.XY{X: s.SecAtS[j], Y: v})
				}
			}
			if len(pts) == 0 {
				continue
			}
			for _, seg := range segments(s.SecAtS, vs) {
				if len(seg) > 1 {
					if _, err := line(p, seg, clr, 1.2); err != nil {
						return nil, fmt.Errorf("results: chart %s: %w", id, err)
					}
				}
			}
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, fmt.Errorf("results: chart %s: %w", id, err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: clr, Radius: vg.Points(1.6), Shape: draw.CircleGlyph{}}
			p.Add(sc)
			if !keyed[m] {
				keyed[m] = true
				name := fmt.Sprintf("master %d", m)
				if m < len(masters) {
					name += " " + masters[m]
				}
				p.Legend.Add(name, sc)
			}
		}
		for _, f := range s.Faults {
			if sequential {
				f.Name, _, _ = strings.Cut(f.Name, "@")
			}
			once(&faults, f)
		}
		for _, f := range s.Down {
			once(&down, f)
		}
		if s.WarmupToS > s.WarmupFromS {
			once(&warmups, Fault{Name: "warm-up", Action: "warm-up", FromS: s.WarmupFromS, ToS: s.WarmupToS})
		}
		xEnd = math.Max(xEnd, s.EndS)
	}
	// The legend at the top right, under the faults' labels, and room
	// above the data for both.
	p.Legend.Left = false
	p.Legend.YOffs = vg.Points(-40)
	if logY {
		p.Y.Max *= 4
	} else {
		p.Y.Max *= 1.25
	}
	latencyRange(&p.Y, logY)
	return c, drawTimePanels(c, []*plot.Plot{p}, faults, down, warmups, xEnd, sequential)
}

// shade draws each span as a band of fill over the plot's current y range
// (one under 50ms is too narrow for one); with an edge colour (faults), a
// dashed line of it at every span's start too, so that each label has its
// mark however narrow the band is at the chart's scale (a restart's third
// of a second in a minute's run). With a text colour, the spans are named
// at their start, on the given line from the top (1 or 2).
func shade(p *plot.Plot, spans []Fault, fill, edge, text color.Color, row int) error {
	if len(spans) == 0 {
		return nil
	}
	ylo, yhi := p.Y.Min, p.Y.Max
	if math.IsInf(ylo, 0) || math.IsInf(yhi, 0) {
		return nil
	}
	bands, lines := spanMarks(spans, edge != nil)
	for _, f := range bands {
		poly, err := plotter.NewPolygon(plotter.XYs{{X: f.FromS, Y: ylo}, {X: f.ToS, Y: ylo}, {X: f.ToS, Y: yhi}, {X: f.FromS, Y: yhi}})
		if err != nil {
			return err
		}
		poly.Color = fill
		poly.LineStyle.Width = 0
		p.Add(poly)
	}
	for _, x := range lines {
		if _, err := line(p, plotter.XYs{{X: x, Y: ylo}, {X: x, Y: yhi}}, edge, 1, vg.Points(3), vg.Points(2)); err != nil {
			return err
		}
	}
	if text == nil {
		return nil
	}
	var at plotter.XYs
	var texts []string
	for i, f := range spans {
		if f.Action == "warm-up" && i > 0 {
			continue // one label says what the grey bands are
		}
		if edge == nil && f.ToS-f.FromS <= instantS {
			continue // nothing drawn to name
		}
		at = append(at, plotter.XY{X: f.FromS, Y: yhi})
		texts = append(texts, f.Name)
	}
	return labels(p, at, texts, text, 8, vg.Points(2), vg.Points(-10*float64(row)))
}

// instantS is the longest span drawn as an instant: no band.
const instantS = 0.05

// spanMarks is what shade draws of spans: a band for each that lasts
// longer than an instant, and, when edged, a line at every span's start.
func spanMarks(spans []Fault, edged bool) (bands []Fault, lines []float64) {
	for _, f := range spans {
		if f.ToS-f.FromS > instantS {
			bands = append(bands, f)
		}
		if edged {
			lines = append(lines, f.FromS)
		}
	}
	return bands, lines
}

// SweepLatencyChart draws latency (p50, p99, p99.9) against throughput
// across a sweep, marking the knee, the SLO limit and the SLO point.
func SweepLatencyChart(id string, sw *Sweep) (*Chart, error) {
	title := fmt.Sprintf("Latency against throughput: %s", sw.Label)
	c := &Chart{ID: id, Title: title,
		Caption: fmt.Sprintf("Each point is one step of the sweep (labelled with its %s); x is the throughput it achieved, y its %s latency. Where the lines turn upward, more load buys latency, not throughput. "+
			"Hollow points, not joined: steps that achieved less than an earlier step did (past saturation, more load lost throughput); the line joins the others in the sweep's order, never going back.", sw.Param, sw.Latency)}
	p := newPlot(title, "acquisitions/s", sw.Latency+" latency")
	p.X.Tick.Marker = countTicks{}
	var pts []SweepPoint
	for _, pt := range sw.Points {
		if pt.LatencyUs.Count > 0 {
			pts = append(pts, pt)
		}
	}
	if len(pts) == 0 {
		return nil, nil
	}
	lo, hi := math.Inf(1), 0.0
	for _, pt := range pts {
		lo, hi = math.Min(lo, math.Max(float64(pt.LatencyUs.P50), 1)), math.Max(hi, float64(pt.LatencyUs.P999))
	}
	if sw.SLO != nil {
		lo, hi = math.Min(lo, sw.SLO.LimitUs), math.Max(hi, sw.SLO.LimitUs)
	}
	logY := logLatencyAxis(lo, hi)
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = latencyTicks{}
	} else {
		p.Y.Tick.Marker = linearLatencyTicks{}
		p.Y.Min = 0
	}
	y := func(v int64) float64 {
		if logY {
			return math.Max(float64(v), 1)
		}
		return float64(v)
	}
	curves := []struct {
		name string
		get  func(Stats) int64
	}{
		{"p50", func(s Stats) int64 { return s.P50 }},
		{"p99", func(s Stats) int64 { return s.P99 }},
		{"p99.9", func(s Stats) int64 { return s.P999 }},
	}
	ahead, behind := sweepCurve(pts)
	var p99 plotter.XYs
	var names []string
	for i, cv := range curves {
		at := func(pts []SweepPoint) plotter.XYs {
			var xys plotter.XYs
			for _, pt := range pts {
				xys = append(xys, plotter.XY{X: pt.AcquiredPerSec, Y: y(cv.get(pt.LatencyUs))})
			}
			return xys
		}
		xys := at(ahead)
		l, err := line(p, xys, seriesColor(i), 1.6)
		if err != nil {
			return nil, fmt.Errorf("results: chart %s: %w", id, err)
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, fmt.Errorf("results: chart %s: %w", id, err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: seriesColor(i), Radius: vg.Points(2.2), Shape: draw.CircleGlyph{}}
		p.Add(sc)
		p.Legend.Add(cv.name, l, sc)
		if len(behind) > 0 {
			back, err := plotter.NewScatter(at(behind))
			if err != nil {
				return nil, fmt.Errorf("results: chart %s: %w", id, err)
			}
			back.GlyphStyle = draw.GlyphStyle{Color: seriesColor(i), Radius: vg.Points(3), Shape: draw.RingGlyph{}}
			p.Add(back)
			if i == len(curves)-1 {
				key := *back
				key.GlyphStyle.Color = markerDark
				p.Legend.Add("less throughput than an earlier step (not joined)", &key)
			}
		}
		if cv.name == "p99" {
			p99 = append(xys, at(behind)...)
		}
	}
	for _, pt := range append(append([]SweepPoint{}, ahead...), behind...) {
		names = append(names, FormatSweepLabel(sw.Param, pt.Value))
	}
	if err := labels(p, p99, names, markerDark, 8, vg.Points(4), vg.Points(2)); err != nil {
		return nil, fmt.Errorf("results: chart %s: %w", id, err)
	}
	if err := markSweep(p, sw, func(pt SweepPoint) plotter.XY {
		return plotter.XY{X: pt.AcquiredPerSec, Y: y(pt.LatencyUs.P99)}
	}); err != nil {
		return nil, fmt.Errorf("results: chart %s: %w", id, err)
	}
	p.X.Min = 0
	if sw.SLO != nil {
		l, err := line(p, plotter.XYs{{X: 0, Y: sw.SLO.LimitUs}, {X: p.X.Max, Y: sw.SLO.LimitUs}}, faultLine, 1, vg.Points(5), vg.Points(3))
		if err != nil {
			return nil, fmt.Errorf("results: chart %s: %w", id, err)
		}
		p.Legend.Add("SLO "+sw.SLO.Text, l)
	}
	latencyRange(&p.Y, logY)
	return c, renderPlot(c, p, 9*vg.Inch, 4.8*vg.Inch)
}

// sweepCurve splits a sweep's points, in sweep order, into those a line
// joins, each having achieved at least the throughput of every step
// before it, and those behind, which achieved less than an earlier step
// did: a line through them would fold back on the throughput axis.
func sweepCurve(pts []SweepPoint) (ahead, behind []SweepPoint) {
	best := math.Inf(-1)
	for _, pt := range pts {
		if pt.AcquiredPerSec < best {
			behind = append(behind, pt)
			continue
		}
		best = pt.AcquiredPerSec
		ahead = append(ahead, pt)
	}
	return ahead, behind
}

// SweepThroughputChart draws throughput against the swept value, marking
// the knee and the SLO point.
func SweepThroughputChart(id string, sw *Sweep) (*Chart, error) {
	title := fmt.Sprintf("Throughput against %s: %s", sw.Param, sw.Label)
	xl := "workers"
	if sw.Param == "rate" {
		xl = "offered rate (acquisitions/s)"
	}
	c := &Chart{ID: id, Title: title,
		Caption: "Achieved throughput at each step. Below saturation it follows the load; past the knee it flattens (or falls, under contention)."}
	p := newPlot(title, xl, "acquisitions/s")
	p.Y.Tick.Marker = countTicks{}
	p.Y.Min = 0
	var xys plotter.XYs
	lo, hi := math.Inf(1), 0.0
	for _, pt := range sw.Points {
		if pt.Value <= 0 {
			continue
		}
		xys = append(xys, plotter.XY{X: pt.Value, Y: pt.AcquiredPerSec})
		lo, hi = math.Min(lo, pt.Value), math.Max(hi, pt.Value)
	}
	if len(xys) == 0 {
		return nil, nil
	}
	if lo > 0 && hi/lo >= 8 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = sweptTicks{values: sw.Values}
	} else {
		p.X.Tick.Marker = countTicks{}
	}
	l, err := line(p, xys, seriesColor(0), 1.6)
	if err != nil {
		return nil, fmt.Errorf("results: chart %s: %w", id, err)
	}
	sc, err := plotter.NewScatter(xys)
	if err != nil {
		return nil, fmt.Errorf("results: chart %s: %w", id, err)
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: seriesColor(0), Radius: vg.Points(2.2), Shape: draw.CircleGlyph{}}
	p.Add(sc)
	p.Legend.Add("achieved", l, sc)
	if sw.Param == "rate" {
		ideal := plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}}
		il, err := line(p, ideal, color.Gray{Y: 0x90}, 1, vg.Points(4), vg.Points(3))
		if err != nil {
			return nil, fmt.Errorf("results: chart %s: %w", id, err)
		}
		p.Legend.Add("offered", il)
	}
	if err := markSweep(p, sw, func(pt SweepPoint) plotter.XY { return plotter.XY{X: pt.Value, Y: pt.AcquiredPerSec} }); err != nil {
		return nil, fmt.Errorf("results: chart %s: %w", id, err)
	}
	return c, renderPlot(c, p, 9*vg.Inch, 4.2*vg.Inch)
}

// markSweep rings the knee and the SLO point, with a legend entry each.
func markSweep(p *plot.Plot, sw *Sweep, at func(SweepPoint) plotter.XY) error {
	mark := func(pt SweepPoint, name string, shape draw.GlyphDrawer, clr color.Color, r float64) error {
		sc, err := plotter.NewScatter(plotter.XYs{at(pt)})
		if err != nil {
			return err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: clr, Radius: vg.Points(r), Shape: shape}
		p.Add(sc)
		p.Legend.Add(name, sc)
		return nil
	}
	if sw.Knee.Found {
		for _, pt := range sw.Points {
			if pt.Index == sw.Knee.Index {
				if err := mark(pt, "knee: "+ParamValue(sw.Param, pt.Value), draw.RingGlyph{}, markerDark, 5.5); err != nil {
					return err
				}
			}
		}
	}
	if sw.SLOPoint != nil {
		if err := mark(*sw.SLOPoint, "best within "+sw.ObjectivesText()+": "+ParamValue(sw.Param, sw.SLOPoint.Value), draw.SquareGlyph{}, color.RGBA{0x59, 0xa1, 0x4f, 0xff}, 4.5); err != nil {
			return err
		}
	}
	// Steps whose run was DEGRADED or UNSAFE: one legend entry each,
	// naming the steps.
	for _, v := range []struct {
		verdict, why string
		shape        draw.GlyphDrawer
	}{{"DEGRADED", "errors or lost leases", draw.CrossGlyph{}}, {"UNSAFE", "violations or stale tokens", draw.PyramidGlyph{}}} {
		var xys plotter.XYs
		var steps []string
		for _, pt := range sw.Points {
			if pt.Verdict() == v.verdict && pt.LatencyUs.Count > 0 {
				xys = append(xys, at(pt))
				steps = append(steps, FormatSweepLabel(sw.Param, pt.Value))
			}
		}
		if len(xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: faultLine, Radius: vg.Points(5), Shape: v.shape}
		p.Add(sc)
		p.Legend.Add(fmt.Sprintf("%s (%s): %s", v.verdict, v.why, strings.Join(steps, ", ")), sc)
	}
	return nil
}

// FormatSweepLabel is a short point label: "w64" or "5k/s".
func FormatSweepLabel(param string, v float64) string {
	if param == "workers" {
		return "w" + strconv.FormatFloat(v, 'f', -1, 64)
	}
	return FormatCount(v) + "/s"
}
