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
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Capacity plan\n\n")
	var from []string
	for _, in := range inputs {
		from = append(from, fmt.Sprintf("`%s` (%s)", filepath.ToSlash(in.Dir), in.Kind))
	}
	p("Written by `redlock-bench report` from %s.\n", strings.Join(from, ", "))
	p("Latency figures are of successful acquisitions (`acquire` in mode try, `wait` in mode wait); throughput counts successful acquisitions per second.\n")

	var runs []*Input
	for _, in := range inputs {
		if in.Kind == "sweep" && in.Sweep != nil {
			sw := analyzed(in.Sweep, slo)
			capacitySweep(p, in, sw)
		} else {
			runs = append(runs, in)
		}
	}
	if len(runs) > 0 {
		capacityRuns(p, runs, slo)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// analyzed returns sw analysed with slo (a copy), or sw itself.
func analyzed(sw *Sweep, slo *SLO) *Sweep {
	if slo == nil {
		return sw
	}
	c := *sw
	c.Points = append([]SweepPoint{}, sw.Points...)
	s := *slo
	c.SLO = &s
	c.Analyze()
	return &c
}

type printer func(format string, a ...any)

func capacitySweep(p printer, in *Input, sw *Sweep) {
	p("\n## Sweep %s\n\n", sw.Label)
	var vals []string
	for _, v := range sw.Values {
		vals = append(vals, strconv.FormatFloat(v, 'f', -1, 64))
	}
	p("%s loop, mode %s, engine %s: %d of %d steps ran, %s %s.",
		capitalize(sw.LoadModel), sw.Mode, sw.Engine, len(sw.Points), len(sw.Values), sw.Param, strings.Join(vals, ", "))
	if w := configString(sw.Config, "warmup"); w != "" {
		p(" Each step measured for %s after a warm-up of %s.", configString(sw.Config, "duration"), w)
	}
	if sw.Interrupted {
		p(" **The sweep was interrupted: these figures are partial.**")
	}
	p("\n\n")

	byDir := map[string]*RunDir{}
	for _, r := range in.Runs {
		byDir[filepath.Base(r.Dir)] = r
	}
	pointRun := func(pt SweepPoint) *RunDir { return byDir[filepath.Base(pt.Dir)] }

	// Sustainable throughput at the SLO.
	var rec *SweepPoint
	why := ""
	switch {
	case sw.SLO == nil:
		best := highest(sw.Points)
		p("- **No SLO was given** (pass `--slo 'p99<5ms'` to `sweep` or `report`).")
		if best != nil {
			p(" The highest throughput measured was %s acquisitions/s, at %s, with p99 %s.", thousands(best.AcquiredPerSec), ParamValue(sw.Param, best.Value), FormatUs(best.LatencyUs.P99))
		}
		p("\n")
	case sw.SLOPoint != nil:
		sp := *sw.SLOPoint
		rec, why = &sp, "the highest throughput that met the SLO"
		p("- **Sustainable throughput at the SLO (%s): %s acquisitions/s**, at %s, where %s was %s.",
			sw.SLO.Text, thousands(sp.AcquiredPerSec), ParamValue(sw.Param, sp.Value), sw.SLO.Percentile, FormatUs(sw.SLO.Value(sp.LatencyUs)))
		if next := nextMiss(sw, sp); next != nil {
			p(" The next step, %s, missed it with %s %s.", ParamValue(sw.Param, next.Value), sw.SLO.Percentile, FormatUs(sw.SLO.Value(next.LatencyUs)))
		}
		p("\n")
	default:
		p("- **No step met the SLO (%s).** %s.\n", sw.SLO.Text, capitalize(strings.TrimPrefix(SLOMiss(sw), fmt.Sprintf("no point met the SLO %s: ", sw.SLO.Text))))
	}

	// The knee.
	if sw.Knee.Found {
		p("- **Saturation knee: %s, %s acquisitions/s** (p99 %s). %s.\n",
			ParamValue(sw.Param, sw.Knee.Value), thousands(sw.Knee.AcquiredPerSec), FormatUs(sw.Knee.P99Us), capitalize(sw.Knee.Reason))
		if rec == nil {
			for _, pt := range sw.Points {
				if pt.Index == sw.Knee.Index {
					pt := pt
					rec, why = &pt, "the knee: past it, more load adds latency, not throughput"
				}
			}
		} else if rec.Index == sw.Knee.Index {
			why += ", and the knee"
		} else if rec.Value > sw.Knee.Value {
			why += "; it lies past the knee, so it buys its throughput with latency"
		}
	} else {
		p("- **No saturation knee found:** %s.\n", sw.Knee.Reason)
	}
	if rec == nil && sw.SLO == nil {
		if best := highest(sw.Points); best != nil {
			rec, why = best, "the highest throughput measured, since no knee was found"
		}
	}

	// Recommendation.
	if rec != nil {
		switch sw.Param {
		case "workers":
			p("- **Recommended worker count: %d** per load generator (%s).\n", rec.Workers, why)
		default:
			p("- **Recommended offered rate: at most %s acquisitions/s**, with %d workers (%s).\n",
				thousands(rec.Value), rec.Workers, why)
		}
	} else {
		p("- **No recommendation:** no step qualifies.\n")
	}

	// TTL headroom and errors at the recommended point.
	if rec != nil {
		if r := pointRun(*rec); r != nil {
			p("- %s\n", ttlHeadroom(r, "At "+ParamValue(sw.Param, rec.Value)))
			if e := r.Summary.ErrorTotal(); e > 0 {
				p("- **Errors at %s:** %d of %d attempts failed with an error, not contention (%s).\n",
					ParamValue(sw.Param, rec.Value), e, r.Summary.Attempts, errorBreakdown(r.Summary))
			}
		}
	}

	// Safety and errors across the sweep.
	var viol, errs, attempts int64
	for _, pt := range sw.Points {
		viol += pt.Violations
		errs += pt.Errors
		attempts += pt.Attempts
	}
	checked := configString(sw.Config, "check") != "false"
	switch {
	case viol > 0:
		p("- **Safety: VIOLATED.** %d times two holders of one resource overlapped; see the steps' summary.txt.\n", viol)
	case checked:
		p("- **Safety:** the oracle found no overlapping holds in any step.\n")
	default:
		p("- **Safety:** not checked (`--check=false`).\n")
	}
	if errs > 0 {
		p("- **Errors across the sweep:** %d of %d attempts failed with an error (not contention); see the steps' summaries.\n", errs, attempts)
	}

	p("\nConfiguration behind these figures: %s", describeConfig(sw.Config, sw.Engine, sw.Masters, sw.LocalMasters, sw.Machine.RedisVersion))
	p(" Machine: %s.\n", describeMachine(sw.Machine))
	p("\nTo reproduce:\n\n```sh\n%s\n```\n", reproduce("sweep", sw.Config, sw.LocalMasters, sw.SLO))
}

// capacityRuns covers inputs that are not sweeps.
func capacityRuns(p printer, ins []*Input, slo *SLO) {
	p("\n## Runs\n\n")
	p("A single load level shows no knee: each figure below holds for its own load. Run `redlock-bench sweep` to find the capacity.\n\n")
	for _, in := range ins {
		if in.Comparison != nil {
			capacityCompare(p, in, slo)
			continue
		}
		for _, r := range in.Runs {
			s := r.Summary
			st := s.Latency(primaryKind(s))
			p("- **%s** (`%s`): %s acquisitions/s, %s, p99 %s, p99.9 %s.",
				r.Name(), filepath.ToSlash(r.Dir), thousands(s.AcquiredPerSec), describeLoad(s), FormatUs(st.P99), FormatUs(st.P999))
			if slo != nil {
				verdict := "missed"
				if slo.Met(st) {
					verdict = "met"
				}
				p(" SLO %s %s (%s %s).", slo.Text, verdict, slo.Percentile, FormatUs(slo.Value(st)))
			}
			if s.Violations > 0 {
				p(" **%d safety violations.**", s.Violations)
			}
			if e := s.ErrorTotal(); e > 0 {
				p(" %d of %d attempts failed with an error (%s).", e, s.Attempts, errorBreakdown(s))
			}
			if _, ok := r.Raw["merged_from"]; ok {
				p(" Merged from %d load generators.", len(r.Raw["merged_from"].([]any)))
			}
			p("\n  %s\n", ttlHeadroom(r, "Here"))
			p("  Configuration: %s Machine: %s.\n", describeConfig(s.Config, s.Engine, s.Masters, s.LocalMasters, s.Machine.RedisVersion), describeMachine(s.Machine))
		}
	}
}

// capacityCompare covers a comparison: one line per engine, from the
// medians of its runs, with the TTL headroom of its slowest run.
func capacityCompare(p printer, in *Input, slo *SLO) {
	c := in.Comparison
	p("- **Comparison %s** (`%s`): %d rounds alternating %s.\n", c.Label, filepath.ToSlash(in.Dir), c.Rounds, strings.Join(c.Engines, ", "))
	byDir := map[string]*RunDir{}
	for _, r := range in.Runs {
		byDir[filepath.Clean(r.Dir)] = r
	}
	var first *RunDir
	for _, res := range c.Results {
		var slowest *RunDir
		for _, cr := range c.Runs {
			r := byDir[filepath.Clean(filepath.Join(in.Dir, cr.Dir))]
			if cr.Engine != res.Engine || cr.Interrupted || r == nil {
				continue
			}
			if slowest == nil || r.Summary.Latency(primaryKind(r.Summary)).P999 > slowest.Summary.Latency(primaryKind(slowest.Summary)).P999 {
				slowest = r
			}
		}
		if res.Median == nil || slowest == nil {
			p("  - **%s**: no complete run.\n", res.Engine)
			continue
		}
		if first == nil {
			first = slowest
		}
		m := res.Median
		p("  - **%s**: median %s acquisitions/s over %d runs, p99 %s, p99.9 %s",
			res.Engine, thousands(m.AcquiredPerSec), res.Runs, FormatUs(int64(m.AcquireP99Us)), FormatUs(int64(m.AcquireP999Us)))
		if res.Ratio != nil && res.Ratio.AcquiredPerSec != nil {
			p(" (%.2f× %s's throughput)", *res.Ratio.AcquiredPerSec, c.Engines[0])
		}
		if slo != nil && slo.Percentile != "p90" { // the medians carry p50, p99 and p99.9
			st := Stats{Count: 1, P50: int64(m.AcquireP50Us), P99: int64(m.AcquireP99Us), P999: int64(m.AcquireP999Us)}
			verdict := "missed"
			if slo.Met(st) {
				verdict = "met"
			}
			p("; SLO %s %s by the medians", slo.Text, verdict)
		}
		if res.Violations > 0 {
			p("; **%d safety violations**", res.Violations)
		}
		if m.Errors > 0 {
			p("; %.0f errors per run (median)", m.Errors)
		}
		p(".\n    %s\n", ttlHeadroom(slowest, "In its slowest run ("+filepath.Base(slowest.Dir)+")"))
	}
	if first != nil {
		s := first.Summary
		cfg := c.Config
		if len(cfg) == 0 {
			cfg = s.Config
		}
		p("  Configuration: %s Machine: %s.\n", describeConfig(cfg, strings.Join(c.Engines, ", "), s.Masters, s.LocalMasters, s.Machine.RedisVersion), describeMachine(s.Machine))
	}
}

func primaryKind(s *Summary) Kind {
	if s.Mode == "wait" {
		return Wait
	}
	return Acquire
}

// ttlHeadroom says how the TTL compares with acquire+hold at p99.9.
func ttlHeadroom(r *RunDir, at string) string {
	s := r.Summary
	ttl, err := time.ParseDuration(configString(s.Config, "ttl"))
	if err != nil || ttl <= 0 {
		return "**TTL headroom:** unknown (the run's configuration has no TTL)."
	}
	drift := time.Duration(float64(ttl)*capacityDriftFactor) + capacityDriftFixed
	hold := s.HoldUs
	acq := s.AcquireLatencyUs
	note := ""
	if s.Mode == "wait" {
		acq = Stats{}
		note = " In mode wait the acquire time includes queueing, which does not use up the TTL, so only the hold counts here."
	}
	used := time.Duration(acq.P999+hold.P999) * time.Microsecond
	usedMax := time.Duration(acq.Max+hold.Max) * time.Microsecond
	left := ttl - drift - used
	var b strings.Builder
	fmt.Fprintf(&b, "**TTL headroom:** TTL %s. %s, acquire p99.9 was %s and hold p99.9 %s: %s together",
		ttl, at, FormatUs(acq.P999), FormatUs(hold.P999), fmtDur(used))
	if used > 0 {
		fmt.Fprintf(&b, ", %s of the TTL (%s× headroom)", percentOf(used, ttl), thousands(math.Floor(float64(ttl)/float64(used))))
	}
	fmt.Fprintf(&b, ". A lease is valid for the TTL less the acquire time and the drift allowance (1%% of the TTL + 2ms = %s), so 99.9%% of holds ended with %s to spare", fmtDur(drift), fmtDur(left))
	if usedMax > 0 {
		fmt.Fprintf(&b, "; the longest acquire + hold took %s", fmtDur(usedMax))
	}
	fmt.Fprintf(&b, ". Lost leases: %d.", s.LostLeases)
	need := time.Duration((capacityHeadroom*float64(used) + float64(capacityDriftFixed)) / (1 - capacityDriftFactor))
	need = need.Round(time.Millisecond) + time.Millisecond
	switch {
	case used == 0:
	case ttl-drift < time.Duration(capacityHeadroom*float64(used)):
		fmt.Fprintf(&b, " **The TTL is too short:** keep at least %.0f× headroom with a TTL of %s or more.", capacityHeadroom, fmtDur(need))
	default:
		fmt.Fprintf(&b, " A TTL down to %s would still leave %.0f× headroom over acquire + hold at p99.9; a longer TTL only delays recovery when a holder dies.", fmtDur(need), capacityHeadroom)
	}
	b.WriteString(note)
	return b.String()
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
	w := configInt(s.Config, "workers")
	if s.LoadModel == "open" {
		return fmt.Sprintf("open loop at %s/s offered with %d workers", thousands(configFloat(s.Config, "rate")), w)
	}
	return fmt.Sprintf("%d workers, closed loop", w)
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
	add("%s client(s)", "clients")
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
		case k == "duration" && configString(c, "ops") != "0" && configString(c, "ops") != "":
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

func percentOf(a, b time.Duration) string {
	f := 100 * float64(a) / float64(b)
	switch {
	case f >= 10:
		return fmt.Sprintf("%.0f%%", f)
	case f >= 0.1:
		return fmt.Sprintf("%.1f%%", f)
	}
	return fmt.Sprintf("%.3f%%", f)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
