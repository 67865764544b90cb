package results

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// SweepJSON is the file name of a sweep's summary inside its directory.
const SweepJSON = "sweep.json"

// SweepText is the file name of a sweep's summary for a person to read.
const SweepText = "sweep.txt"

// Sweep is a series of runs on the same masters that varies one load
// parameter, and what it found: the saturation knee and, with an SLO, the
// highest throughput that still met it. Its JSON form is sweep.json; the
// names are a contract, as for Summary.
type Sweep struct {
	// Kind is always "sweep", so that a reader can tell the file apart.
	Kind string `json:"kind"`
	// Label names the sweep; its directory ends with it.
	Label string `json:"label"`
	// Param is the varied flag: "workers" (closed loop) or "rate" (open
	// loop, acquisitions per second).
	Param string `json:"param"`
	// Values are the planned values of Param, in order.
	Values []float64 `json:"values"`
	// Engine, Mode and LoadModel are those of every step.
	Engine    string `json:"engine"`
	Mode      string `json:"mode"`
	LoadModel string `json:"load_model"`
	// Latency names the histogram the points' percentiles come from:
	// "acquire" (successful attempts, mode try) or "wait" (mode wait).
	Latency string `json:"latency"`
	// Config is the configuration shared by every step, as in
	// summary.json; the swept flag holds the list as typed.
	Config map[string]any `json:"config"`
	// Machine, Masters and LocalMasters are as in summary.json. The
	// masters were started once for the whole sweep.
	Machine      Machine  `json:"machine"`
	Masters      []string `json:"masters"`
	LocalMasters bool     `json:"local_masters"`
	// StartedAt is when the first step began.
	StartedAt time.Time `json:"started_at"`
	// Interrupted reports that the sweep stopped before its last step.
	Interrupted bool `json:"interrupted"`
	// Points are the steps that ran, in order.
	Points []SweepPoint `json:"points"`
	// Knee is where throughput stopped growing while latency climbed.
	Knee Knee `json:"knee"`
	// Objectives are the objectives given with --slo, every one of which
	// a step must meet; absent without any (and from sweeps written
	// before they were recorded, which had SLO alone).
	Objectives []Objective `json:"objectives,omitempty"`
	// SLO is the objective on a percentile of the acquisition latency
	// among them (the first), which the charts draw; nil without one. A
	// sweep without Objectives is judged by it alone.
	SLO *SLO `json:"slo,omitempty"`
	// SLOPoint is the point of highest throughput that met every
	// objective; nil when no point did, or without objectives.
	SLOPoint *SweepPoint `json:"slo_point"`
}

// SweepPoint is one step of a sweep: one normal run.
type SweepPoint struct {
	// Index is the step's position, from 0.
	Index int `json:"index"`
	// Value is the swept parameter's value at this step.
	Value float64 `json:"value"`
	// Workers and Rate are the step's load, whichever was swept.
	Workers int     `json:"workers"`
	Rate    float64 `json:"rate"`
	// Label is the step run's label.
	Label string `json:"label"`
	// Dir is the step's run directory, relative to the sweep directory.
	Dir string `json:"dir"`
	// AcquiredPerSec is the step's throughput.
	AcquiredPerSec float64 `json:"acquired_per_sec"`
	// Attempts, Acquired, Errors and Violations are the step's counters
	// (Errors summed over kinds).
	Attempts   int64 `json:"attempts"`
	Acquired   int64 `json:"acquired"`
	Errors     int64 `json:"errors"`
	Violations int64 `json:"violations"`
	// LostLeases and StaleTokens are the step's, as in summary.json.
	LostLeases  int64 `json:"lost_leases"`
	StaleTokens int64 `json:"stale_tokens"`
	// BacklogMax is the open loop's largest backlog (0 in a closed loop).
	BacklogMax int64 `json:"backlog_max"`
	// Interrupted marks a step stopped early; it counts for neither the
	// knee nor the SLO.
	Interrupted bool `json:"interrupted"`
	// LatencyUs are the percentiles of the Sweep.Latency histogram.
	LatencyUs Stats `json:"latency_us"`
	// MeetsSLO says whether the step met every objective (absent
	// without any).
	MeetsSLO *bool `json:"meets_slo,omitempty"`
	// Misses says, per objective the step missed, why (SLOResult.Why).
	Misses []string `json:"misses,omitempty"`
}

// Knee is the saturation point of a sweep. See FindKnee for the rule.
type Knee struct {
	// Found is false when no step looked saturated; Reason says why.
	Found bool `json:"found"`
	// Index is the knee's point, -1 when not found.
	Index int `json:"index"`
	// Value, AcquiredPerSec and P99Us repeat the knee point's figures.
	Value          float64 `json:"value"`
	AcquiredPerSec float64 `json:"acquired_per_sec"`
	P99Us          int64   `json:"p99_us"`
	// Reason explains the finding in words.
	Reason string `json:"reason"`
}

// Thresholds of FindKnee.
const (
	// KneeGain: a later step adds throughput over an earlier one when it
	// achieved at least this much more (10%), or, for a step of less than
	// double the load, KneeEfficiency of the added load: with +10% of
	// load a step, +5% of throughput is still growth.
	KneeGain       = 0.10
	KneeEfficiency = 0.5
	// KneeKeepUp: in an open loop, a step that achieved less than this
	// share of its offered rate fell behind: its backlog grows without
	// bound, so the knee is at the latest the step before it.
	KneeKeepUp = 0.9
	// KneeLatencyGrowth: past the knee, p99 must grow by at least this
	// factor; flat throughput with flat latency is a limit of the load
	// generator, not saturation of the masters.
	KneeLatencyGrowth = 1.10
)

// PointFromSummary makes a sweep point from a step's summary. latency is
// the histogram kind the points compare (Acquire or Wait).
func PointFromSummary(index int, value float64, dir string, s *Summary, latency Kind) SweepPoint {
	p := SweepPoint{
		Index:          index,
		Value:          value,
		Label:          s.Label,
		Dir:            dir,
		AcquiredPerSec: s.AcquiredPerSec,
		Attempts:       s.Attempts,
		Acquired:       s.Acquired,
		Errors:         s.ErrorTotal(),
		Violations:     s.Violations,
		LostLeases:     s.LostLeases,
		StaleTokens:    s.StaleTokens,
		BacklogMax:     s.BacklogMax,
		Interrupted:    s.Interrupted,
		LatencyUs:      s.Latency(latency),
	}
	p.Workers = s.Config.Workers
	p.Rate = s.Config.Rate
	return p
}

// SetObjectives makes objs the sweep's objectives, and its SLO the first
// of them on a percentile of the acquisition latency.
func (sw *Sweep) SetObjectives(objs []Objective) {
	sw.Objectives, sw.SLO = objs, nil
	for _, o := range objs {
		if slo, ok := o.SLO(); ok {
			sw.SLO = &slo
			break
		}
	}
}

// CheckStep checks the sweep's objectives on step p's summary, which holds
// every figure they may name (the points keep a few): MeetsSLO and
// Misses.
func (sw *Sweep) CheckStep(p *SweepPoint, s *Summary) {
	if len(sw.Objectives) == 0 {
		return
	}
	p.Misses = nil
	for _, r := range CheckObjectives(s, sw.Objectives) {
		if !r.Met {
			p.Misses = append(p.Misses, r.Why)
		}
	}
	met := usable(*p) && len(p.Misses) == 0
	p.MeetsSLO = &met
}

// Analyze fills the knee, and the SLO point: the point of highest
// throughput among those that met every objective (CheckStep), or, for a
// sweep judged by its SLO alone, each point's MeetsSLO by it first.
func (sw *Sweep) Analyze() {
	sw.Knee = FindKnee(sw.Points, sw.Param)
	sw.SLOPoint = nil
	switch {
	case len(sw.Objectives) > 0:
	case sw.SLO != nil:
		for i := range sw.Points {
			met := usable(sw.Points[i]) && sw.SLO.Met(sw.Points[i].LatencyUs)
			sw.Points[i].MeetsSLO = &met
		}
	default:
		return
	}
	best := -1
	for i, p := range sw.Points {
		if p.MeetsSLO == nil || !*p.MeetsSLO || !usable(p) {
			continue
		}
		if best < 0 || p.AcquiredPerSec > sw.Points[best].AcquiredPerSec {
			best = i
		}
	}
	if best >= 0 {
		p := sw.Points[best]
		sw.SLOPoint = &p
	}
}

// ObjectivesText is the sweep's objectives as given: "p99<5ms,
// errors<0.1%"; "" without any.
func (sw *Sweep) ObjectivesText() string {
	if len(sw.Objectives) == 0 {
		if sw.SLO != nil {
			return sw.SLO.Text
		}
		return ""
	}
	texts := make([]string, len(sw.Objectives))
	for i, o := range sw.Objectives {
		texts[i] = o.Text
	}
	return strings.Join(texts, ", ")
}

// Verdict is the step's verdict, as the run's one-line summary gives it:
// "UNSAFE" for violations or stale fencing tokens, "DEGRADED" for errors
// or lost leases (its figures include failed operations), "" otherwise.
func (p SweepPoint) Verdict() string {
	switch {
	case p.Violations > 0 || p.StaleTokens > 0:
		return "UNSAFE"
	case p.Errors > 0 || p.LostLeases > 0:
		return "DEGRADED"
	}
	return ""
}

// usable reports whether a point may count for the knee or the SLO.
func usable(p SweepPoint) bool {
	return !p.Interrupted && p.Acquired > 0 && p.AcquiredPerSec > 0 && p.Value > 0
}

// FindKnee finds the saturation knee: the step where throughput stopped
// growing while latency climbed.
//
// The rule: the knee is the first usable step after which no later step
// adds throughput, that is, achieves KneeGain (10%) more than it (or, for
// a later step under twice its load, KneeEfficiency of the added load).
// In an open loop, it is moreover no later than the last step before the
// first that fell behind its offered rate (achieved less than KneeKeepUp
// of it). Past the knee, p99 must grow by KneeLatencyGrowth at some step;
// otherwise the load generator, not the masters, is the limit and there
// is no knee. Throughput that keeps growing, even far less than the load,
// is not a knee: a step that adds 30% with four times the workers still
// buys throughput, and the SLO says whether its latency is acceptable.
func FindKnee(points []SweepPoint, param string) Knee {
	var use []SweepPoint
	for _, p := range points {
		if usable(p) && (len(use) == 0 || p.Value > use[len(use)-1].Value) {
			use = append(use, p)
		}
	}
	none := Knee{Index: -1}
	if len(use) < 2 {
		none.Reason = fmt.Sprintf("%d usable points: a knee needs at least two", len(use))
		return none
	}
	k := -1
	for i := 0; i+1 < len(use) && k < 0; i++ {
		if !growsAfter(use[i], use[i+1:]) {
			k = i
		}
	}
	behind := -1
	if param == "rate" {
		for i, p := range use {
			if p.AcquiredPerSec < KneeKeepUp*p.Value {
				behind = i
				break
			}
		}
	}
	byRate := behind >= 0 && (k < 0 || behind <= k)
	if byRate {
		k = max(behind-1, 0)
	}
	if k < 0 {
		last := use[len(use)-1]
		none.Reason = fmt.Sprintf("throughput was still growing at the last point (%s, %s/s): sweep higher values to find the knee",
			ParamValue(param, last.Value), thousands(last.AcquiredPerSec))
		return none
	}
	a := use[k]
	// p99's growth to the next step, or else the steepest past the knee.
	at := use[k+1]
	climb := latencyGrowth(a, at)
	for _, c := range use[k+2:] {
		if g := latencyGrowth(a, c); climb < KneeLatencyGrowth && g > climb {
			climb, at = g, c
		}
	}
	if climb < KneeLatencyGrowth {
		none.Reason = fmt.Sprintf("throughput stopped growing after %s (%s/s) but p99 did not climb: the load generator, not the masters, may be the limit",
			ParamValue(param, a.Value), thousands(a.AcquiredPerSec))
		return none
	}
	knee := Knee{Found: true, Index: a.Index, Value: a.Value, AcquiredPerSec: a.AcquiredPerSec, P99Us: a.LatencyUs.P99}
	lat := fmt.Sprintf("p99 grew %.1fx, from %s to %s at %s", climb, FormatUs(a.LatencyUs.P99), FormatUs(at.LatencyUs.P99), ParamValue(param, at.Value))
	if byRate && behind > 0 {
		b := use[behind]
		knee.Reason = fmt.Sprintf("%s was the highest rate fully served: at %s the masters achieved %s/s (%.0f%% of it), and %s",
			ParamValue(param, a.Value), ParamValue(param, b.Value), thousands(b.AcquiredPerSec), 100*b.AcquiredPerSec/b.Value, lat)
	} else {
		knee.Reason = fmt.Sprintf("past %s, throughput %s, while %s", ParamValue(param, a.Value), pastKnee(a, use[k+1:], param), lat)
	}
	if k == 0 {
		knee.Reason += "; the first point is already saturated: sweep lower values to see where it begins"
	}
	return knee
}

// pastKnee says what throughput did at the steps after the knee a: how
// much it grew at most, or that it did not, and how far it fell by the
// last step when it fell (a sweep whose throughput halved past the knee
// must not read as one that merely stopped growing).
func pastKnee(a SweepPoint, later []SweepPoint, param string) string {
	best, last := later[0], later[len(later)-1]
	for _, c := range later {
		if c.AcquiredPerSec > best.AcquiredPerSec {
			best = c
		}
	}
	at := func(p SweepPoint) string {
		return fmt.Sprintf("%s/s at %s", thousands(p.AcquiredPerSec), ParamValue(param, p.Value))
	}
	gain := best.AcquiredPerSec/a.AcquiredPerSec - 1
	drop := 1 - last.AcquiredPerSec/a.AcquiredPerSec
	switch {
	case best.Index == last.Index && drop >= KneeFall:
		return fmt.Sprintf("fell %s, to %s", fallBy(drop), at(last))
	case gain >= 0.005:
		return fmt.Sprintf("grew by at most %.0f%% (the best later step: %s)", gain*100, at(best))
	case drop >= KneeFall:
		return fmt.Sprintf("did not grow (the best later step: %s) and then fell %s, to %s", at(best), fallBy(drop), at(last))
	}
	return fmt.Sprintf("did not grow (the best later step: %s)", at(best))
}

// KneeFall is the fall of throughput below the knee's, at the last step,
// that the knee's reason reports (5%).
const KneeFall = 0.05

// fallBy words a fall of frac (0..1) of the throughput: "by half", "by a
// third", or "by 12%".
func fallBy(frac float64) string {
	for _, f := range []struct {
		v    float64
		name string
	}{{1.0 / 4, "a quarter"}, {1.0 / 3, "a third"}, {1.0 / 2, "half"}, {2.0 / 3, "two thirds"}, {3.0 / 4, "three quarters"}} {
		if math.Abs(frac-f.v) < 0.015 {
			return "by " + f.name
		}
	}
	return fmt.Sprintf("by %.0f%%", frac*100)
}

// growsAfter reports whether some later point adds throughput over a:
// KneeGain more, or for less than double the load, KneeEfficiency of the
// load it added.
func growsAfter(a SweepPoint, later []SweepPoint) bool {
	for _, c := range later {
		need := math.Min(KneeGain, KneeEfficiency*(c.Value/a.Value-1))
		if c.AcquiredPerSec >= a.AcquiredPerSec*(1+need) {
			return true
		}
	}
	return false
}

func latencyGrowth(a, b SweepPoint) float64 {
	if a.LatencyUs.P99 <= 0 {
		if b.LatencyUs.P99 > 0 {
			return math.Inf(1)
		}
		return 1
	}
	return float64(b.LatencyUs.P99) / float64(a.LatencyUs.P99)
}

// SLOMiss explains, in one line, why no point met the objectives: the
// step that came closest (the fewest objectives missed, then the highest
// throughput) and what it missed; for a sweep judged by its SLO alone, the
// best value of the percentile seen, and where.
func SLOMiss(sw *Sweep) string {
	if len(sw.Objectives) > 0 {
		return objectivesMiss(sw)
	}
	if sw.SLO == nil {
		return ""
	}
	best := -1
	for i, p := range sw.Points {
		if !usable(p) {
			continue
		}
		if best < 0 || sw.SLO.Value(p.LatencyUs) < sw.SLO.Value(sw.Points[best].LatencyUs) {
			best = i
		}
	}
	if best < 0 {
		return fmt.Sprintf("no point met the SLO %s: no step completed with acquisitions", sw.SLO.Text)
	}
	p := sw.Points[best]
	return fmt.Sprintf("no point met the SLO %s: the lowest %s was %s, at %s (%.0f acquisitions/s)",
		sw.SLO.Text, sw.SLO.Percentile, FormatUs(sw.SLO.Value(p.LatencyUs)), ParamValue(sw.Param, p.Value), p.AcquiredPerSec)
}

func objectivesMiss(sw *Sweep) string {
	best := -1
	for i, p := range sw.Points {
		switch {
		case !usable(p):
		case best < 0, len(p.Misses) < len(sw.Points[best].Misses),
			len(p.Misses) == len(sw.Points[best].Misses) && p.AcquiredPerSec > sw.Points[best].AcquiredPerSec:
			best = i
		}
	}
	if best < 0 {
		return fmt.Sprintf("no point met the SLO %s: no step completed with acquisitions", sw.ObjectivesText())
	}
	p := sw.Points[best]
	return fmt.Sprintf("no point met the SLO %s: the closest, at %s (%.0f acquisitions/s), missed %s",
		sw.ObjectivesText(), ParamValue(sw.Param, p.Value), p.AcquiredPerSec, strings.Join(p.Misses, "; "))
}

// ParamValue renders a swept value with its meaning: "64 workers" or
// "5000/s offered".
func ParamValue(param string, v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	switch param {
	case "workers":
		if v == 1 {
			return "1 worker"
		}
		return s + " workers"
	case "rate":
		return s + "/s offered"
	}
	return param + " " + s
}

// WriteSweepJSON writes sw as indented JSON (sweep.json).
func WriteSweepJSON(w io.Writer, sw *Sweep) error {
	c := *sw
	c.Kind = "sweep"
	if c.Points == nil {
		c.Points = []SweepPoint{}
	}
	if c.Masters == nil {
		c.Masters = []string{}
	}
	if c.Config == nil {
		c.Config = map[string]any{}
	}
	return writeJSON(w, &c)
}

// ReadSweepJSON reads a sweep written by WriteSweepJSON.
func ReadSweepJSON(r io.Reader) (*Sweep, error) {
	sw, err := readJSON[Sweep](r, "sweep")
	if err != nil {
		return nil, err
	}
	if sw.Kind != "" && sw.Kind != "sweep" {
		return nil, fmt.Errorf("results: read sweep: kind %q is not a sweep", sw.Kind)
	}
	return sw, nil
}

// WriteSweepText writes the sweep as a table for a person (sweep.txt and
// the end of `redlock-bench sweep`).
func WriteSweepText(w io.Writer, sw *Sweep) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("redlock-bench sweep %q: %s over %d steps, %s loop, mode %s, engine %s\n",
		sw.Label, sw.Param, len(sw.Values), sw.LoadModel, sw.Mode, sw.Engine)
	if sw.Interrupted {
		p("INTERRUPTED  the sweep stopped early; these are partial results\n")
	}
	p("latency is of %q (µs)\n\n", sw.Latency)
	p("  %-4s %10s %12s %10s %10s %10s %10s %8s %6s  %s\n", "step", sw.Param, "acquired/s", "p50", "p90", "p99", "p99.9", "errors", "slo", "dir")
	for _, pt := range sw.Points {
		mark := ""
		if sw.Knee.Found && pt.Index == sw.Knee.Index {
			mark += " <- knee"
		}
		if sw.SLOPoint != nil && pt.Index == sw.SLOPoint.Index {
			mark += " <- best within SLO"
		}
		if pt.Interrupted {
			mark += " (interrupted)"
		}
		if pt.Violations > 0 {
			mark += fmt.Sprintf(" VIOLATIONS %d", pt.Violations)
		}
		slo := "-"
		if pt.MeetsSLO != nil {
			slo = map[bool]string{true: "met", false: "missed"}[*pt.MeetsSLO]
		}
		st := pt.LatencyUs
		p("  %-4d %10s %12.1f %10d %10d %10d %10d %8d %6s  %s%s\n", pt.Index+1, strconv.FormatFloat(pt.Value, 'f', -1, 64),
			pt.AcquiredPerSec, st.P50, st.P90, st.P99, st.P999, pt.Errors, slo, pt.Dir, mark)
	}
	p("\nknee         ")
	if sw.Knee.Found {
		p("%s: %.1f acquisitions/s, p99 %s\n             %s\n", ParamValue(sw.Param, sw.Knee.Value), sw.Knee.AcquiredPerSec, FormatUs(sw.Knee.P99Us), sw.Knee.Reason)
	} else {
		p("not found: %s\n", sw.Knee.Reason)
	}
	if text := sw.ObjectivesText(); text != "" {
		p("slo          %s: ", text)
		switch sp := sw.SLOPoint; {
		case sp == nil:
			p("%s\n", SLOMiss(sw))
		case sw.SLO != nil:
			p("met up to %.1f acquisitions/s, at %s (%s %s)\n", sp.AcquiredPerSec, ParamValue(sw.Param, sp.Value),
				sw.SLO.Percentile, FormatUs(sw.SLO.Value(sp.LatencyUs)))
		default:
			p("met up to %.1f acquisitions/s, at %s\n", sp.AcquiredPerSec, ParamValue(sw.Param, sp.Value))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// configInt reads an integer flag out of a summary's config, which JSON
// decoding turns into float64.
func configInt(c map[string]any, key string) int {
	switch v := c[key].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	case json.Number:
		n, _ := v.Int64()
		return int(n)
	}
	return 0
}

// configString reads a flag as text, whatever its JSON type.
func configString(c map[string]any, key string) string {
	v, ok := c[key]
	if !ok || v == nil {
		return ""
	}
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}
