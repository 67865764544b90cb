package results

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// CapacityFile is the name of the capacity plan the report writes.
const CapacityFile = "capacity.md"

// Drift allowance of the engine's defaults (engine.Config.DriftFactor and
// the fixed 2 ms), which the TTL headroom takes into account. results does
// not import engine, so the values are repeated here.
const (
	capacityDriftFactor = 0.01
	capacityDriftFixed  = 2 * time.Millisecond
	// capacityHeadroom is the margin recommended between the TTL, less
	// drift, and acquire+hold at p99.9.
	capacityHeadroom = 3.0
)

// WriteCapacity writes capacity.md: for each sweep, the sustainable
// throughput at the SLO, the knee, the recommended worker count (or rate)
// and the TTL headroom, with the configuration behind them; for runs, what
// each shows at its own load. slo, when set, replaces the sweeps' own.
func WriteCapacity(w io.Writer, inputs []*Input, slo *SLO) error {
	return writeCapacity(w, capacityPlanOf(inputs, slo))
}

func writeCapacity(w io.Writer, plan *capacityPlan) error {
	if err := capacityMarkdown.Execute(w, plan); err != nil {
		return fmt.Errorf("results: %s: %w", CapacityFile, err)
	}
	return nil
}

// capacityPlanOf builds the capacity plan of the inputs, which both
// capacity.md and the report page render.
func capacityPlanOf(inputs []*Input, slo *SLO) *capacityPlan {
	plan := &capacityPlan{}
	from := text{}.p("Written by ").c("redlock-bench report").p(" from ")
	for i, in := range inputs {
		if i > 0 {
			from = from.p(", ")
		}
		from = from.c(filepath.ToSlash(in.Dir)).p(" (%s)", in.Kind)
	}
	plan.Intro = []text{from.p("."), text{}.p("Latency figures are of successful acquisitions (").c("acquire").
		p(" in mode try, ").c("wait").p(" in mode wait); throughput counts successful acquisitions per second.")}

	var runs []*Input
	needs := &ttlNeeds{}
	for _, in := range inputs {
		if in.Kind == "sweep" && in.Sweep != nil {
			plan.Sections = append(plan.Sections, capacitySweep(in, analyzed(in.Sweep, slo), needs))
		} else {
			runs = append(runs, in)
		}
	}
	if len(runs) > 0 {
		plan.Sections = append(plan.Sections, capacityRuns(runs, slo, needs))
	}
	if sec := capacityScaling(inputs); sec != nil {
		plan.Sections = append(plan.Sections, *sec)
	}
	plan.TTL = needs.rule()
	return plan
}

// analyzed returns sw analysed with slo (a copy), or sw itself.
func analyzed(sw *Sweep, slo *SLO) *Sweep {
	if slo == nil {
		return sw
	}
	c := *sw
	c.Points = append([]SweepPoint{}, sw.Points...)
	s := *slo
	c.Objectives, c.SLO = nil, &s // the report's replaces the sweep's own
	c.Analyze()
	return &c
}

func capacitySweep(in *Input, sw *Sweep, needs *ttlNeeds) capacitySection {
	var vals []string
	for _, v := range sw.Values {
		vals = append(vals, strconv.FormatFloat(v, 'f', -1, 64))
	}
	lead := text{}.p("%s loop, mode %s, engine %s: %d of %d steps ran, %s %s.",
		capitalize(sw.LoadModel), sw.Mode, sw.Engine, len(sw.Points), len(sw.Values), sw.Param, strings.Join(vals, ", "))
	if w := configString(sw.Config, "warmup"); w != "" {
		lead = lead.p(" Each step measured for %s after a warm-up of %s.", configString(sw.Config, "duration"), w)
	}
	if sw.Interrupted {
		lead = lead.p(" ").b("The sweep was interrupted: these figures are partial.")
	}
	sec := capacitySection{Title: "Sweep " + sw.Label, Lead: lead}
	add := func(t text) { sec.Items = append(sec.Items, capacityItem{Text: t}) }

	slo, rec, why := sweepSLO(sw)
	add(slo)
	knee, rec, why := sweepKnee(sw, rec, why)
	add(knee)
	add(sweepRecommendation(sw, rec, why))
	// TTL headroom and errors at the recommended point.
	if rec != nil {
		if r := pointRun(in, *rec); r != nil {
			at := ParamValue(sw.Param, rec.Value)
			add(ttlHeadroom(r, "At "+at, fmt.Sprintf("sweep %s at %s", sw.Label, at), needs))
			if f := faultNote(r); f != nil {
				add(append(text{}.p("At %s:", at), f...))
			}
			if e := r.Summary.ErrorTotal(); e > 0 {
				add(text{}.b("Errors at %s:", ParamValue(sw.Param, rec.Value)).p(" %d of %d attempts failed with an error, not contention (%s).",
					e, r.Summary.Attempts, errorBreakdown(r.Summary)))
			}
		}
	}
	for _, t := range sweepSafety(sw) {
		add(t)
	}

	sec.Config = text{}.p("Configuration behind these figures: %s Machine: %s.",
		describeConfig(sw.Config, sw.Engine, sw.Masters, sw.LocalMasters, sw.Machine.RedisVersion), describeMachine(sw.Machine))
	sec.Command = reproduce("sweep", sw.Config, sw.LocalMasters, sw.SLO)
	return sec
}

// pointRun is the run directory of a sweep's step.
func pointRun(in *Input, pt SweepPoint) *RunDir {
	var run *RunDir
	for _, r := range in.Runs {
		if filepath.Base(r.Dir) == filepath.Base(pt.Dir) {
			run = r
		}
	}
	return run
}

// sweepSLO says what throughput the SLO allows, and returns the step it
// recommends for that (nil if none) and why.
func sweepSLO(sw *Sweep) (t text, rec *SweepPoint, why string) {
	switch {
	case sw.SLO == nil:
		t = text{}.b("No SLO was given").p(" (pass ").c("--slo 'p99<5ms'").p(" to ").c("sweep").p(" or ").c("report").p(").")
		if best := highest(sw.Points); best != nil {
			t = t.p(" The highest throughput measured was %s acquisitions/s, at %s, with p99 %s.",
				thousands(best.AcquiredPerSec), ParamValue(sw.Param, best.Value), FormatUs(best.LatencyUs.P99))
		}
		return t, nil, ""
	case sw.SLOPoint != nil:
		sp := *sw.SLOPoint
		t = text{}.b("Sustainable throughput at the SLO (%s): %s acquisitions/s", sw.SLO.Text, thousands(sp.AcquiredPerSec)).
			p(", at %s, where %s was %s.", ParamValue(sw.Param, sp.Value), sw.SLO.Percentile, FormatUs(sw.SLO.Value(sp.LatencyUs)))
		if next := nextMiss(sw, sp); next != nil {
			t = t.p(" The next step, %s, missed it with %s %s.", ParamValue(sw.Param, next.Value), sw.SLO.Percentile, FormatUs(sw.SLO.Value(next.LatencyUs)))
		}
		return t, &sp, "the highest throughput that met the SLO"
	}
	miss := strings.TrimPrefix(SLOMiss(sw), fmt.Sprintf("no point met the SLO %s: ", sw.SLO.Text))
	return text{}.b("No step met the SLO (%s).", sw.SLO.Text).p(" %s.", capitalize(miss)), nil, ""
}

// sweepKnee describes the knee and settles the recommendation: the SLO's
// step (rec) when it lies at or before the knee; the knee when the SLO's
// step lies past it (more load there buys latency, not throughput) or no
// step met the SLO; with no SLO and no knee, the highest throughput.
func sweepKnee(sw *Sweep, rec *SweepPoint, why string) (text, *SweepPoint, string) {
	t := text{}.b("No saturation knee found:").p(" %s.", sw.Knee.Reason)
	var knee *SweepPoint
	if sw.Knee.Found {
		t = text{}.b("Saturation knee: %s, %s acquisitions/s", ParamValue(sw.Param, sw.Knee.Value), thousands(sw.Knee.AcquiredPerSec)).
			p(" (p99 %s). %s.", FormatUs(sw.Knee.P99Us), capitalize(sw.Knee.Reason))
		for _, pt := range sw.Points {
			if pt.Index == sw.Knee.Index {
				pt := pt
				knee = &pt
			}
		}
	}
	switch {
	case knee == nil:
	case rec == nil:
		rec, why = knee, "the knee: past it, more load adds latency, not throughput"
	case rec.Index == knee.Index:
		why += ", and the knee"
	case rec.Value > knee.Value:
		why = fmt.Sprintf("the knee: the SLO holds up to %s, %s acquisitions/s, but past the knee more load adds latency, not throughput",
			ParamValue(sw.Param, rec.Value), thousands(rec.AcquiredPerSec))
		rec = knee
	default:
		why += fmt.Sprintf("; past it throughput still grows, up to the knee at %s, %s acquisitions/s, where %s was %s",
			ParamValue(sw.Param, knee.Value), thousands(knee.AcquiredPerSec), sw.SLO.Percentile, FormatUs(sw.SLO.Value(knee.LatencyUs)))
	}
	if rec == nil && sw.SLO == nil {
		if best := highest(sw.Points); best != nil {
			rec, why = best, "the highest throughput measured, since no knee was found"
		}
	}
	return t, rec, why
}

func sweepRecommendation(sw *Sweep, rec *SweepPoint, why string) text {
	switch {
	case rec == nil:
		return text{}.b("No recommendation:").p(" no step qualifies.")
	case sw.Param == "workers":
		return text{}.b("Recommended worker count: %d", rec.Workers).p(" per load generator (%s).", why)
	}
	return text{}.b("Recommended offered rate: at most %s acquisitions/s", thousands(rec.Value)).
		p(", with %s (%s).", plural(rec.Workers, "worker"), why)
}

// sweepSafety sums the violations and errors across a sweep's steps.
func sweepSafety(sw *Sweep) []text {
	var viol, errs, attempts int64
	var degraded []string
	for _, pt := range sw.Points {
		viol += pt.Violations
		errs += pt.Errors
		attempts += pt.Attempts
		if pt.Verdict() == "DEGRADED" {
			degraded = append(degraded, ParamValue(sw.Param, pt.Value))
		}
	}
	var out []text
	switch {
	case viol > 0:
		out = append(out, text{}.b("Safety: VIOLATED.").p(" %d times two holders of one resource overlapped; see the steps' summary.txt.", viol))
	case configString(sw.Config, "check") != "false":
		out = append(out, text{}.b("Safety:").p(" the oracle found no overlapping holds in any step."))
	default:
		out = append(out, text{}.b("Safety:").p(" not checked (").c("--check=false").p(")."))
	}
	if errs > 0 {
		out = append(out, text{}.b("Errors across the sweep:").
			p(" %s of %s attempts failed with an error (not contention); see the steps' summaries.", thousands(float64(errs)), thousands(float64(attempts))))
	}
	if len(degraded) > 0 {
		out = append(out, text{}.b("DEGRADED steps").p(" (errors or lost leases; their figures include the failed operations): %s.", strings.Join(degraded, ", ")))
	}
	return out
}

// capacityRuns covers inputs that are not sweeps.
func capacityRuns(ins []*Input, slo *SLO, needs *ttlNeeds) capacitySection {
	sec := capacitySection{Title: "Runs", Lead: text{}.
		p("A single load level shows no knee: each figure below holds for its own load. Run ").
		c("redlock-bench sweep").p(" to find the capacity.")}
	for _, in := range ins {
		if in.Comparison != nil {
			sec.Items = append(sec.Items, capacityCompare(in, slo, needs))
			continue
		}
		for _, r := range in.Runs {
			sec.Items = append(sec.Items, capacityRun(r, slo, needs))
		}
	}
	return sec
}

func capacityRun(r *RunDir, slo *SLO, needs *ttlNeeds) capacityItem {
	s := r.Summary
	st := s.Latency(primaryKind(s))
	t := text{}.b("%s", r.Name()).p(" (").c(filepath.ToSlash(r.Dir)).p("): %s acquisitions/s, %s, p99 %s, p99.9 %s.",
		thousands(s.AcquiredPerSec), describeLoad(s), FormatUs(st.P99), FormatUs(st.P999))
	if slo != nil {
		verdict := "missed"
		if slo.Met(st) {
			verdict = "met"
		}
		t = t.p(" SLO %s %s (%s %s).", slo.Text, verdict, slo.Percentile, FormatUs(slo.Value(st)))
	}
	if s.Violations > 0 {
		t = t.p(" ").b("%d safety violations.", s.Violations)
	}
	if e := s.ErrorTotal(); e > 0 {
		t = t.p(" %s of %s attempts failed with an error (%s).", thousands(float64(e)), thousands(float64(s.Attempts)), errorBreakdown(s))
	}
	if f := faultNote(r); f != nil {
		t = append(t, f...)
	}
	if _, ok := r.Raw["merged_from"]; ok {
		t = t.p(" Merged from %d load generators.", len(r.Raw["merged_from"].([]any)))
	}
	return capacityItem{Text: t, More: []text{
		ttlHeadroom(r, "Here", r.Name(), needs),
		text{}.p("Configuration: %s Machine: %s.", describeConfig(s.Config.Map(), s.Engine, s.Masters, s.LocalMasters, s.Machine.RedisVersion), describeMachine(s.Machine)),
	}}
}

// capacityCompare covers a comparison: one line per engine, from the
// medians of its runs, with the TTL headroom of its slowest run.
func capacityCompare(in *Input, slo *SLO, needs *ttlNeeds) capacityItem {
	c := in.Comparison
	item := capacityItem{Text: text{}.b("Comparison %s", c.Label).p(" (").c(filepath.ToSlash(in.Dir)).
		p("): %d rounds alternating %s.", c.Rounds, strings.Join(c.Engines, ", "))}
	var first *RunDir
	for _, res := range c.Results {
		slowest := slowestRun(in, res.Engine)
		if res.Median == nil || slowest == nil {
			item.Subs = append(item.Subs, capacityItem{Text: text{}.b("%s", res.Engine).p(": no complete run.")})
			continue
		}
		if first == nil {
			first = slowest
		}
		item.Subs = append(item.Subs, capacityEngine(c, res, slowest, slo, needs))
	}
	item.More = append(item.More, compareCeiling(c))
	if first != nil {
		s := first.Summary
		cfg := c.Config
		if len(cfg) == 0 {
			cfg = s.Config.Map()
		}
		item.More = append(item.More, text{}.p("Configuration: %s Machine: %s.",
			describeConfig(cfg, strings.Join(c.Engines, ", "), s.Masters, s.LocalMasters, s.Machine.RedisVersion), describeMachine(s.Machine)))
	}
	return item
}

// slowestRun is the complete run of engine, in a comparison, with the
// highest p99.9.
func slowestRun(in *Input, engine string) *RunDir {
	byDir := map[string]*RunDir{}
	for _, r := range in.Runs {
		byDir[filepath.Clean(r.Dir)] = r
	}
	var slowest *RunDir
	for _, cr := range in.Comparison.Runs {
		r := byDir[filepath.Clean(filepath.Join(in.Dir, cr.Dir))]
		if cr.Engine != engine || cr.Interrupted || r == nil {
			continue
		}
		if slowest == nil || r.Summary.Latency(primaryKind(r.Summary)).P999 > slowest.Summary.Latency(primaryKind(slowest.Summary)).P999 {
			slowest = r
		}
	}
	return slowest
}

// capacityEngine is one engine's line of a comparison.
func capacityEngine(c *Comparison, res CompareResult, slowest *RunDir, slo *SLO, needs *ttlNeeds) capacityItem {
	m := res.Median
	t := text{}.b("%s", res.Engine).p(": median %s acquisitions/s over %d runs, p99 %s, p99.9 %s",
		thousands(m.AcquiredPerSec), res.Runs, FormatUs(int64(m.AcquireP99Us)), FormatUs(int64(m.AcquireP999Us)))
	if res.Ratio != nil && res.Ratio.AcquiredPerSec != nil {
		t = t.p(" (%.2f× %s's throughput)", *res.Ratio.AcquiredPerSec, c.Engines[0])
	}
	if slo != nil && slo.Percentile != "p90" { // the medians carry p50, p99 and p99.9
		st := Stats{Count: 1, P50: int64(m.AcquireP50Us), P99: int64(m.AcquireP99Us), P999: int64(m.AcquireP999Us)}
		verdict := "missed"
		if slo.Met(st) {
			verdict = "met"
		}
		t = t.p("; SLO %s %s by the medians", slo.Text, verdict)
	}
	if res.Violations > 0 {
		t = t.p("; ").b("%d safety violations", res.Violations)
	}
	if m.Errors > 0 {
		t = t.p("; %.0f errors per run (median)", m.Errors)
	}
	return capacityItem{Text: t.p("."), More: []text{ttlHeadroom(slowest, "In its slowest run ("+filepath.Base(slowest.Dir)+")",
		fmt.Sprintf("%s's slowest run in comparison %s", res.Engine, c.Label), needs)}}
}

// compareCeiling says what the masters can do at most, as compare.txt
// does, or that it was not measured.
func compareCeiling(c *Comparison) text {
	cl := c.Ceiling
	if cl == nil || cl.CyclesPerSec <= 0 || len(cl.Masters) == 0 {
		return text{}.p("The masters' ceiling was not measured (").c("compare --limit").p(" measures it).")
	}
	slowest := cl.Masters[0]
	for _, m := range cl.Masters {
		if m.CyclesPerSec < slowest.CyclesPerSec {
			slowest = m
		}
	}
	t := text{}.b("Ceiling of the masters:").p(" %s lock cycles/s, the slowest master's (%s), measured with %s (%s requests per test, every master at once). "+
		"Every lock cycle runs on every master, so no engine gets more", thousands(math.Round(cl.CyclesPerSec)), slowest.Addr, cl.Tool, thousands(float64(cl.Requests)))
	var shares []string
	for _, r := range c.Results {
		if r.OfCeiling != nil {
			shares = append(shares, fmt.Sprintf("%s %s", r.Engine, share(*r.OfCeiling)))
		}
	}
	if len(shares) > 0 {
		shares[0] = strings.Replace(shares[0], " ", " reached ", 1) + " of it"
		t = t.p(": %s", strings.Join(shares, ", "))
	}
	return t.p(".")
}

// share writes a fraction as a percentage: 0.468 is "47%", 0.061 "6.1%".
func share(f float64) string {
	if f >= 0.1 {
		return fmt.Sprintf("%.0f%%", 100*f)
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

func primaryKind(s *Summary) Kind {
	if s.Mode == "wait" {
		return Wait
	}
	return Acquire
}

// ttlHeadroom says how the TTL compares with acquire+hold at p99.9, by
// the rule the plan states once (ttlNeeds.rule), and adds the TTL the rule
// asks for to needs, under the name who.
func ttlHeadroom(r *RunDir, at, who string, needs *ttlNeeds) text {
	s := r.Summary
	t := text{}.b("TTL headroom:")
	ttl, err := time.ParseDuration(s.RunConfig().TTL)
	if err != nil || ttl <= 0 {
		return t.p(" unknown (the run's configuration has no TTL).")
	}
	drift := ttlDrift(ttl)
	// In mode wait the acquire histogram is empty and the wait one
	// includes queueing, which does not use up the TTL: a release, one
	// round to every master as the winning attempt is, stands for it.
	acq, what, longest := s.AcquireLatencyUs, "acquire p99.9 was", "acquire + hold"
	if s.Mode == "wait" {
		acq, what, longest = s.ReleaseLatencyUs, "one acquire round (release p99.9, as an estimate) was", "release + hold"
	}
	hold := s.HoldUs
	used := time.Duration(acq.P999+hold.P999) * time.Microsecond
	usedMax := time.Duration(acq.Max+hold.Max) * time.Microsecond
	t = t.p(" TTL %s. %s, %s %s and hold p99.9 %s: %s together", ttl, at, what, FormatUs(acq.P999), FormatUs(hold.P999), fmtDur(used))
	if used > 0 {
		t = t.p(", so the TTL less the drift allowance (%s) leaves %s× headroom, and 99.9%% of holds ended with %s of validity to spare",
			fmtDur(drift), thousands(math.Floor(float64(ttl-drift)/float64(used))), fmtDur(ttl-drift-used))
	}
	if usedMax > 0 {
		t = t.p("; the longest %s took %s", longest, fmtDur(usedMax))
	}
	t = t.p(". Lost leases: %d.", s.LostLeases)
	if used > 0 {
		need := ttlNeeded(used)
		if ttl-drift < time.Duration(capacityHeadroom*float64(used)) {
			t = t.p(" ").b("The TTL is too short by this rule:").p(" it needs a TTL of %s or more.", fmtDur(need))
		} else {
			t = t.p(" The rule holds here for a TTL of %s or more.", fmtDur(need))
		}
		*needs = append(*needs, ttlNeed{who: who, ttl: ttl, need: need})
	}
	if s.Mode == "wait" {
		t = t.p(" In mode wait the winning attempt's time is not recorded on its own: the wait p99.9, %s, includes queueing, "+
			"which does not use up the TTL (validity counts from the winning attempt's start).", FormatUs(s.WaitLatencyUs.P999))
	}
	return t
}

// ttlDrift is the engine's drift allowance for a TTL.
func ttlDrift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*capacityDriftFactor) + capacityDriftFixed
}

// ttlNeeded is the shortest whole-millisecond TTL that, less its drift
// allowance, leaves capacityHeadroom times used.
func ttlNeeded(used time.Duration) time.Duration {
	want := time.Duration(capacityHeadroom * float64(used))
	need := time.Duration((float64(want+capacityDriftFixed) / (1 - capacityDriftFactor))).Truncate(time.Millisecond)
	for need-ttlDrift(need) < want {
		need += time.Millisecond
	}
	return need
}

// ttlNeed is the TTL the rule asks for at one load, and the TTL used.
type ttlNeed struct {
	who       string
	ttl, need time.Duration
}

// ttlNeeds gathers the TTL headrooms of a plan, for its TTL paragraph.
type ttlNeeds []ttlNeed

// rule states the TTL rule once, with the TTL it asks for across the
// plan's loads and the runs whose TTL falls short of it.
func (n ttlNeeds) rule() text {
	t := text{}.b("TTL rule:").p(" a lease is valid for the TTL less its acquire time and the drift allowance (1%% of the TTL + 2ms). "+
		"This plan asks that the TTL less the drift allowance be at least %.0f× acquire + hold at p99.9: with less, a slow hold can outlive its lease; "+
		"a longer TTL only delays recovery when a holder dies without releasing.", capacityHeadroom)
	if len(n) == 0 {
		return t
	}
	most := n[0]
	var short []string
	for _, x := range n {
		if x.need > most.need {
			most = x
		}
		if x.ttl < x.need {
			short = append(short, fmt.Sprintf("the TTL of %s, %s, is too short", x.who, fmtDur(x.ttl)))
		}
	}
	t = t.p(" By this rule, the loads below need a TTL of at least %s (the most, for %s): a floor for these loads, which a heavier load or a slower network raises", fmtDur(most.need), most.who)
	if len(short) > 0 {
		return t.p(". ").b("%s.", capitalize(strings.Join(short, "; ")))
	}
	return t.p("; every TTL they ran with meets it.")
}

// faultNote says that faults were injected into a run, which then shows
// their effect rather than what healthy masters give; nil if none were.
func faultNote(r *RunDir) text {
	var names []string
	for _, f := range r.Faults() {
		names = append(names, f.Name)
	}
	if len(names) == 0 {
		return nil
	}
	return text{}.p(" ").b("Faults were injected").p(" (%s): these figures include their effect, not only the load's.", strings.Join(names, ", "))
}

// errorBreakdown lists the error kinds that occurred: "timeout 3, release 1".
func errorBreakdown(s *Summary) string {
	var parts []string
	for _, k := range ErrorKinds() {
		if n := s.Errors[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	return strings.Join(parts, ", ")
}

// describeLoad says what load a run applied: "64 workers, closed loop".
func describeLoad(s *Summary) string {
	c := s.RunConfig()
	if s.LoadModel == "open" {
		return fmt.Sprintf("open loop at %s/s offered with %s", thousands(c.Rate), plural(c.Workers, "worker"))
	}
	return plural(c.Workers, "worker") + ", closed loop"
}

// describeConfig renders the settings that shape the figures.
func describeConfig(c map[string]any, engine string, masters []string, local bool, redis string) string {
	var parts []string
	parts = append(parts, "engine "+engine)
	switch {
	case len(masters) == 0:
		parts = append(parts, "no masters")
	case local:
		parts = append(parts, fmt.Sprintf("%d masters started locally", len(masters)))
	default:
		parts = append(parts, fmt.Sprintf("%d masters (%s)", len(masters), strings.Join(masters, ", ")))
	}
	if configString(c, "tls") == "true" {
		parts = append(parts, "over TLS")
	}
	if u := configString(c, "user"); u != "" {
		parts[len(parts)-1] += " as user " + u
	}
	if redis != "" {
		parts = append(parts, "redis "+redis)
	}
	add := func(format, key string) {
		if v := configString(c, key); v != "" {
			parts = append(parts, fmt.Sprintf(format, v))
		}
	}
	add("%s resources", "resources")
	add("distribution %s", "distribution")
	add("mode %s", "mode")
	add("hold %s", "hold")
	add("TTL %s", "ttl")
	if n := configInt(c, "clients"); n > 0 {
		parts = append(parts, plural(n, "client"))
	}
	add("quarantine %s", "quarantine")
	if configString(c, "check") == "false" {
		parts = append(parts, "oracle off")
	} else {
		parts = append(parts, "oracle on")
	}
	add("seed %s", "seed")
	return strings.Join(parts, "; ") + "."
}

func describeMachine(m Machine) string {
	host := m.Hostname
	if host == "" {
		host = "unknown host"
	}
	return fmt.Sprintf("%s, %s/%s, %d CPUs, GOMAXPROCS %d, %s", host, m.OS, m.Arch, m.CPUs, m.GOMAXPROCS, m.GoVersion)
}

// reproduce rebuilds the command line from a configuration. Local
// masters' addresses are left out: they were chosen at random.
func reproduce(cmd string, c map[string]any, local bool, slo *SLO) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// The swept flag and the load first: they are what a reader looks for.
	first := map[string]int{"workers": 0, "rate": 1}
	sort.SliceStable(keys, func(i, j int) bool {
		fi, iok := first[keys[i]]
		fj, jok := first[keys[j]]
		if iok != jok {
			return iok
		}
		return iok && fi < fj
	})
	args := []string{"redlock-bench", cmd}
	for _, k := range keys {
		v := configString(c, k)
		switch {
		case k == "label", k == "out", k == "start_at":
			continue
		case k == "masters" && (local || v == ""):
			continue
		case k == "local_masters" && !local:
			continue
		case v == "" || k == "ops" && v == "0":
			continue
		case (k == "tls" || k == "insecure") && v == "false":
			continue // run refuses a connection flag, even false, without --masters
		case k == "duration" && configString(c, "ops") != "0" && configString(c, "ops") != "":
			continue
		case k == "sentinel":
			// A repeatable flag: one --sentinel per vote.
			for _, vote := range strings.Fields(v) {
				args = append(args, "--sentinel="+shellQuote(vote))
			}
			continue
		}
		args = append(args, "--"+strings.ReplaceAll(k, "_", "-")+"="+shellQuote(v))
	}
	if slo != nil {
		args = append(args, "--slo="+shellQuote(slo.Text))
	}
	return strings.Join(args, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:_-+/@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// highest is the usable point of highest throughput.
func highest(points []SweepPoint) *SweepPoint {
	var best *SweepPoint
	for i := range points {
		if usable(points[i]) && (best == nil || points[i].AcquiredPerSec > best.AcquiredPerSec) {
			p := points[i]
			best = &p
		}
	}
	return best
}

// nextMiss is the first step after sp that missed the SLO.
func nextMiss(sw *Sweep, sp SweepPoint) *SweepPoint {
	for _, pt := range sw.Points {
		if pt.Value > sp.Value && pt.MeetsSLO != nil && !*pt.MeetsSLO && usable(pt) {
			return &pt
		}
	}
	return nil
}

// thousands writes a number with thousands separators and at most one
// decimal: 41200 is "41,200", 950.25 is "950.3".
func thousands(v float64) string {
	neg := v < 0
	v = math.Abs(v)
	whole := math.Floor(v)
	frac := math.Round((v - whole) * 10)
	if frac == 10 {
		whole, frac = whole+1, 0
	}
	s := strconv.FormatFloat(whole, 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if frac > 0 && whole < 1000 {
		s += "." + strconv.Itoa(int(frac))
	}
	if neg {
		s = "-" + s
	}
	return s
}

// fmtDur writes a duration with the precision a reader needs.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDur(-d)
	case d < time.Millisecond:
		return FormatUs(d.Microseconds())
	case d < time.Second:
		return strconv.FormatFloat(math.Round(float64(d)/1e4)/100, 'f', -1, 64) + "ms"
	}
	return strconv.FormatFloat(math.Round(float64(d)/1e6)/1000, 'f', -1, 64) + "s"
}

// plural writes a count and its noun: "1 worker", "64 workers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
