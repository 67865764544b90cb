package results

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Objective is one service-level objective on a run, such as "p99<5ms",
// "release.p99<=2ms", "errors<0.1%", "throughput>=10000/s" or
// "violations<1", in the spirit of k6's thresholds. SLO, the sweep's
// latency objective, is the subset "a percentile of the acquisition
// latency below a limit"; both are read by the same parser.
type Objective struct {
	// Metric is p50, p90, p99, p999, max or mean (a latency), errors (the
	// percentage of operations that failed), throughput (acquisitions/s)
	// or violations (overlapping holds).
	Metric string `json:"metric"`
	// Latency names the histogram of a latency metric: empty for the run's
	// acquisition latency (acquire in mode try, wait in mode wait), else a
	// Kind's name such as "release".
	Latency string `json:"latency,omitempty"`
	// Op is "<", "<=", ">" or ">=".
	Op string `json:"op"`
	// Bound is in the metric's unit: µs, percent, acquisitions/s or a count.
	Bound float64 `json:"bound"`
	// Text is the objective as String writes it.
	Text string `json:"text"`
}

// latencyMetrics are the latency statistics an objective may name.
var latencyMetrics = []string{"p50", "p90", "p99", "p999", "max", "mean"}

// errObjectiveSyntax is the shape every objective parse error explains.
var errObjectiveSyntax = errors.New("want METRIC OP VALUE such as p99<5ms, errors<0.1% or throughput>=10000/s: " +
	"METRIC is p50, p90, p99, p999 (p99.9), max or mean of the acquisition latency (acquire in mode try, wait in mode wait), " +
	"or of one histogram as release.p99 (acquire, acquire_fail, wait, release, hold, handoff), " +
	"errors (failed operations, in %), throughput (acquisitions per second, /s) or violations (a count); " +
	"OP is <, <=, > or >=; a latency is from 1µs to 1h in µs, us, ms or s")

// splitObjective cuts "METRIC OP VALUE" into its parts; op is "" when s
// has no comparison. The name comes back lower case.
func splitObjective(s string) (name, op, value string) {
	in := strings.TrimSpace(s)
	i := strings.IndexAny(in, "<>")
	if i < 0 {
		return strings.ToLower(in), "", ""
	}
	op, value = in[i:i+1], in[i+1:]
	if strings.HasPrefix(value, "=") {
		op, value = op+"=", value[1:]
	}
	return strings.ToLower(strings.TrimSpace(in[:i])), op, strings.TrimSpace(value)
}

// canonicalMetric maps the aliases of a statistic to its name, k6's
// (p(99), avg, med) among them.
func canonicalMetric(name string) string {
	if p, ok := strings.CutPrefix(name, "p("); ok && strings.HasSuffix(p, ")") {
		if k := "p" + strings.TrimSuffix(p, ")"); isLatencyMetric(canonicalMetric(k)) {
			return canonicalMetric(k)
		}
	}
	switch name {
	case "avg":
		return "mean"
	case "med":
		return "p50"
	case "p99.9":
		return "p999"
	case "p50.0", "median":
		return "p50"
	case "error", "error_rate":
		return "errors"
	case "rate", "acquired_per_sec":
		return "throughput"
	}
	return name
}

// ParseObjective parses one objective (see Objective). Errors name the
// expression and say what is allowed.
func ParseObjective(s string) (Objective, error) {
	fail := func(format string, a ...any) (Objective, error) {
		return Objective{}, fmt.Errorf("slo %q: %s: %w", s, fmt.Sprintf(format, a...), errObjectiveSyntax)
	}
	name, op, value := splitObjective(s)
	if op == "" {
		return fail("no comparison")
	}
	o := Objective{Op: op}
	if k, m, ok := strings.Cut(name, "."); ok {
		if kind, known := ParseKind(k); known {
			o.Latency, name = kind.String(), m
		}
	}
	o.Metric = canonicalMetric(name)
	if value == "" && o.Metric != "" {
		return fail("no value after %q", op)
	}
	var err error
	switch {
	case isLatencyMetric(o.Metric):
		o.Bound, err = parseLimitUs(value)
	case o.Latency != "":
		return fail("%s is not a latency statistic", o.Metric)
	case o.Metric == "errors":
		o.Bound, err = parsePercent(value)
	case o.Metric == "throughput":
		o.Bound, err = parsePlainNumber(strings.TrimSpace(strings.TrimSuffix(value, "/s")))
	case o.Metric == "violations":
		o.Bound, err = parsePlainNumber(value)
		if err == nil && strings.Contains(value, ".") {
			err = fmt.Errorf("a count is a whole number, got %q", value)
		}
	case o.Metric == "":
		return fail("no metric")
	default:
		return fail("unknown metric %q", name)
	}
	if err != nil {
		return fail("%v", err)
	}
	o.Text = o.String()
	return o, nil
}

// ParseObjectives parses each expression of a repeated --slo flag.
func ParseObjectives(list []string) ([]Objective, error) {
	var objs []Objective
	for _, s := range list {
		o, err := ParseObjective(s)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return objs, nil
}

func isLatencyMetric(m string) bool {
	for _, l := range latencyMetrics {
		if m == l {
			return true
		}
	}
	return false
}

// parsePercent reads "0.1%" as 0.1.
func parsePercent(s string) (float64, error) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("errors take a percentage such as 0.1%%, got %q", s)
	}
	v, err := parsePlainNumber(strings.TrimSpace(num))
	if err != nil {
		return 0, err
	}
	if v > 100 {
		return 0, fmt.Errorf("a percentage is at most 100%%, got %q", s)
	}
	return v, nil
}

// parsePlainNumber reads a plain decimal: no sign, exponent, hex, Inf or
// NaN.
func parsePlainNumber(num string) (float64, error) {
	if num == "" || strings.Trim(num, "0123456789.") != "" || strings.Count(num, ".") > 1 || num == "." {
		return 0, fmt.Errorf("%q is not a plain positive number", num)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", num)
	}
	return v, nil
}

// String writes the objective so that ParseObjective reads it back
// unchanged: "release.p99<5ms", "errors<0.1%", "throughput>=10000/s".
func (o Objective) String() string {
	name := o.Metric
	if o.Latency != "" {
		name = o.Latency + "." + name
	}
	return name + o.Op + o.formatBound(o.Bound)
}

// formatBound writes v in the objective's unit, as it is typed.
func (o Objective) formatBound(v float64) string {
	switch {
	case isLatencyMetric(o.Metric):
		return FormatLimitUs(v)
	case o.Metric == "errors":
		return strconv.FormatFloat(v, 'f', -1, 64) + "%"
	case o.Metric == "throughput":
		return strconv.FormatFloat(v, 'f', -1, 64) + "/s"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// formatValue writes a measured value for a person.
func (o Objective) formatValue(v float64) string {
	switch {
	case isLatencyMetric(o.Metric):
		if o.Metric == "mean" {
			return strconv.FormatFloat(v, 'f', 1, 64) + "µs"
		}
		return FormatUs(int64(v))
	case o.Metric == "errors":
		return strconv.FormatFloat(v, 'g', 4, 64) + "%"
	case o.Metric == "throughput":
		return strconv.FormatFloat(v, 'f', 1, 64) + "/s"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// latencyKind is the histogram a latency objective reads in s.
func (o Objective) latencyKind(s *Summary) Kind {
	if k, ok := ParseKind(o.Latency); ok && o.Latency != "" {
		return k
	}
	return primaryKind(s)
}

// what names the measured quantity: "acquire p99", "error rate".
func (o Objective) what(s *Summary) string {
	switch {
	case isLatencyMetric(o.Metric):
		return o.latencyKind(s).String() + " " + o.Metric
	case o.Metric == "errors":
		return "error rate"
	}
	return o.Metric
}

// SLOResult is an objective checked against one run.
type SLOResult struct {
	Objective Objective `json:"objective"`
	// Measured is false when the run holds no evidence: an empty
	// histogram, no attempt, or no safety check. Such an objective is not
	// met.
	Measured bool `json:"measured"`
	// Value is the measured value, in the objective's unit.
	Value float64 `json:"value"`
	Met   bool    `json:"met"`
	// Why says in one line what was measured against which bound.
	Why string `json:"why"`
}

// Check measures the objective on s.
func (o Objective) Check(s *Summary) SLOResult {
	r := SLOResult{Objective: o}
	switch {
	case isLatencyMetric(o.Metric):
		st := s.Latency(o.latencyKind(s))
		r.Measured = st.Count > 0
		r.Value = map[string]float64{"p50": float64(st.P50), "p90": float64(st.P90), "p99": float64(st.P99),
			"p999": float64(st.P999), "max": float64(st.Max), "mean": st.Mean}[o.Metric]
	case o.Metric == "errors":
		r.Measured = s.Attempts > 0
		if r.Measured {
			r.Value = 100 * float64(s.ErrorTotal()) / float64(s.Attempts)
		}
	case o.Metric == "throughput":
		r.Measured = s.DurationS > 0
		r.Value = s.AcquiredPerSec
	case o.Metric == "violations":
		r.Measured = s.Checked
		r.Value = float64(s.Violations)
	}
	if r.Measured {
		switch o.Op {
		case "<":
			r.Met = r.Value < o.Bound
		case "<=":
			r.Met = r.Value <= o.Bound
		case ">":
			r.Met = r.Value > o.Bound
		case ">=":
			r.Met = r.Value >= o.Bound
		}
	}
	verdict := "met"
	if !r.Met {
		verdict = "missed"
	}
	if !r.Measured {
		why := map[bool]string{true: "the run measured no " + o.what(s), false: "the run had no safety check (--check=false)"}[o.Metric != "violations"]
		r.Why = fmt.Sprintf("%s %s: %s, no evidence", o.Text, verdict, why)
		return r
	}
	r.Why = fmt.Sprintf("%s %s: %s was %s, bound %s %s", o.Text, verdict, o.what(s), o.formatValue(r.Value), o.Op, o.formatBound(o.Bound))
	return r
}

// CheckObjectives checks every objective on s, in order.
func CheckObjectives(s *Summary, objs []Objective) []SLOResult {
	out := make([]SLOResult, len(objs))
	for i, o := range objs {
		out[i] = o.Check(s)
	}
	return out
}

// SLO is the sweep's objective o stands for, when o is an upper bound on
// a percentile of the acquisition latency; ok is false otherwise.
func (o Objective) SLO() (slo SLO, ok bool) {
	if o.Latency != "" || (o.Op != "<" && o.Op != "<=") {
		return SLO{}, false
	}
	for _, p := range sloPercentiles {
		if o.Metric == p {
			slo = SLO{Percentile: p, LimitUs: o.Bound, Inclusive: o.Op == "<="}
			slo.Text = slo.String()
			return slo, true
		}
	}
	return SLO{}, false
}

// CheckInput checks the objectives on a report's input and returns one
// line per miss; none when they are met. Each run of a run, a set of runs
// or a comparison must meet every objective; a sweep must have a step
// that meets them all, as the sweep's own SLO point does.
func CheckInput(in *Input, objs []Objective) []string {
	if len(objs) == 0 {
		return nil
	}
	var misses []string
	var closest []string
	for _, r := range in.Runs {
		var m []string
		for _, res := range CheckObjectives(r.Summary, objs) {
			if !res.Met {
				m = append(m, res.Why)
			}
		}
		if in.Kind == "sweep" {
			if len(m) == 0 {
				return nil
			}
			if closest == nil || len(m) < len(closest) {
				closest = prefixAll(r.Dir+": ", m)
			}
			continue
		}
		misses = append(misses, prefixAll(r.Dir+": ", m)...)
	}
	if in.Kind == "sweep" {
		if closest == nil {
			return []string{in.Dir + ": the sweep has no step to check"}
		}
		return append([]string{in.Dir + ": no step of the sweep met every objective; the closest:"}, closest...)
	}
	return misses
}

func prefixAll(p string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = p + l
	}
	return out
}
