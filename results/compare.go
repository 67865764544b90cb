package results

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// CompareText is the comparison for people, beside CompareJSON (declared
// with the report's loader, which recognises a comparison by it). Each run
// of the comparison is a normal run directory inside, named
// <round>-<engine>.
const CompareText = "compare.txt"

// Comparison is several engines measured on the same workload and the same
// masters, alternating run by run (A B C A B C ...), so that the drift of a
// noisy machine falls on every engine alike. Each engine's figure is the
// median of its runs, and ratios are against the first engine. Its JSON
// form is compare.json; the names are a contract: add fields, never rename
// them.
type Comparison struct {
	// Kind is "compare", so that a reader can tell compare.json apart.
	Kind string `json:"kind"`
	// Label names the comparison; the runs are labelled <label>-<round>-<engine>.
	Label string `json:"label"`
	// Engines are in the order they ran in each round; the first is the
	// reference of every ratio.
	Engines []string `json:"engines"`
	// Rounds is how many rounds were planned; Runs says how many ran.
	Rounds int `json:"rounds"`
	// Lock is what each operation took (--lock), as in summary.json;
	// absent from comparisons written before it was recorded, which are
	// of mutexes.
	Lock string `json:"lock,omitempty"`
	// Notes say how the engines took the lock where they differ (an
	// engine without a multi-resource lock takes K mutexes in turn), or
	// why no peer runs (no baseline has a semaphore).
	Notes []string `json:"notes,omitempty"`
	// Mode is "try" or "wait"; LoadModel "closed" or "open".
	Mode      string `json:"mode"`
	LoadModel string `json:"load_model"`
	// Latency names the histogram behind the acquire figures: "acquire"
	// (mode try) or "wait" (mode wait).
	Latency string `json:"latency"`
	// Config is the shared configuration of every run, as in summary.json,
	// with engine holding the list of engines.
	Config map[string]any `json:"config"`
	// Masters are the Redis masters of every run; an engine that votes on
	// fewer (CompareResult.Masters) uses the first ones. LocalMasters
	// reports that the comparison started them itself.
	Masters      []string `json:"masters"`
	LocalMasters bool     `json:"local_masters"`
	// Clusters are the votes that are Redis Clusters, after Masters, each
	// by its seeds (local ones: its primaries); ClusterShards is the
	// shards of each when the comparison started them. Absent without.
	Clusters      [][]string `json:"clusters,omitempty"`
	ClusterShards int        `json:"cluster_shards,omitempty"`
	// Machine is where the runs took place (from the first run).
	Machine Machine `json:"machine"`
	// StartedAt is when the first run began, in UTC.
	StartedAt time.Time `json:"started_at"`
	// Interrupted reports that the comparison stopped before every round
	// ran (Ctrl-C, SIGTERM); the medians are of the runs that completed.
	Interrupted bool `json:"interrupted"`
	// Runs are the runs in the order they ran, interrupted ones included.
	Runs []CompareRun `json:"runs"`
	// Results holds one row per engine, in Engines order. Analyze fills it.
	Results []CompareResult `json:"results"`
	// Ceiling is what the masters can do with pipelining (--limit); nil
	// when not measured.
	Ceiling *Ceiling `json:"ceiling,omitempty"`
}

// CompareFigures are the figures compared, for one run or as the medians of
// an engine's runs. Latencies are in microseconds, of the histogram named
// by Comparison.Latency for acquire and of release for release.
type CompareFigures struct {
	AcquiredPerSec float64 `json:"acquired_per_sec"`
	AcquireP50Us   float64 `json:"acquire_p50_us"`
	AcquireP99Us   float64 `json:"acquire_p99_us"`
	AcquireP999Us  float64 `json:"acquire_p999_us"`
	ReleaseP50Us   float64 `json:"release_p50_us"`
	ReleaseP99Us   float64 `json:"release_p99_us"`
	// ContendedPct is the share of attempts refused because held, in %.
	ContendedPct float64 `json:"contended_pct"`
	// Errors counts failed operations of every kind (Summary.ErrorTotal).
	Errors float64 `json:"errors"`
}

// CompareRun is one run of a comparison.
type CompareRun struct {
	Round  int    `json:"round"`
	Engine string `json:"engine"`
	// Dir is the run's directory, relative to the comparison's.
	Dir string `json:"dir"`
	// Interrupted runs are kept on disk but left out of the medians: a
	// partial window is not comparable.
	Interrupted bool           `json:"interrupted"`
	Figures     CompareFigures `json:"figures"`
	Violations  int64          `json:"violations"`
	// Masters is how many masters the run's engine voted on (its
	// summary's masters); 0 for none, and in files written before it was
	// added.
	Masters int `json:"masters,omitempty"`
}

// CompareResult is one engine's row.
type CompareResult struct {
	Engine string `json:"engine"`
	// Runs counts the complete runs behind the medians.
	Runs int `json:"runs"`
	// Masters is how many masters the engine voted on, the first ones of
	// Comparison.Masters (the most of its runs); 0 for none.
	Masters int `json:"masters,omitempty"`
	// Median is the median of each figure over the complete runs (the mean
	// of the middle two for an even count); nil when none completed.
	Median *CompareFigures `json:"median"`
	// Ratio is Median divided by the first engine's, figure by figure; nil
	// for the first engine and when either has no runs. A figure whose
	// reference is 0 has no ratio (null).
	Ratio *CompareRatios `json:"ratio"`
	// Violations sums the safety violations of every run, interrupted ones
	// included: safety has no median.
	Violations int64 `json:"violations"`
	// OfCeiling is the median acquisitions/s as a fraction of
	// Ceiling.CyclesPerSec; nil without a ceiling.
	OfCeiling *float64 `json:"of_ceiling,omitempty"`
}

// CompareRatios are figure-by-figure ratios to the first engine. Above 1
// is faster for AcquiredPerSec and slower for the latencies.
type CompareRatios struct {
	AcquiredPerSec *float64 `json:"acquired_per_sec"`
	AcquireP50Us   *float64 `json:"acquire_p50_us"`
	AcquireP99Us   *float64 `json:"acquire_p99_us"`
	AcquireP999Us  *float64 `json:"acquire_p999_us"`
	ReleaseP50Us   *float64 `json:"release_p50_us"`
	ReleaseP99Us   *float64 `json:"release_p99_us"`
	ContendedPct   *float64 `json:"contended_pct"`
	Errors         *float64 `json:"errors"`
}

// Ceiling is the pipelined throughput of the masters for the two commands
// a lock cycle costs each of them: SET (acquire) and EVALSHA of the release
// script. It bounds what any client can get from these masters.
type Ceiling struct {
	// Tool is the command measured with, e.g. "redis-benchmark -P 16 -c 50".
	Tool string `json:"tool"`
	// Requests is the number of requests of each test on each master.
	Requests int `json:"requests"`
	// Masters are measured at the same time, as a lock cycle uses them.
	Masters []CeilingMaster `json:"masters"`
	// CyclesPerSec is the slowest master's: every cycle runs on every
	// master.
	CyclesPerSec float64 `json:"cycles_per_sec"`
}

// CeilingMaster is one master's measured ceiling.
type CeilingMaster struct {
	Addr          string  `json:"addr"`
	SetPerSec     float64 `json:"set_per_sec"`
	EvalshaPerSec float64 `json:"evalsha_per_sec"`
	// CyclesPerSec is 1/(1/SetPerSec + 1/EvalshaPerSec): one SET and one
	// EVALSHA per cycle.
	CyclesPerSec float64 `json:"cycles_per_sec"`
}

// CeilingCycles is the cycles/s of a master that does set SETs/s and
// evalsha EVALSHAs/s: 1/(1/set + 1/evalsha), 0 if either is 0.
func CeilingCycles(set, evalsha float64) float64 {
	if set <= 0 || evalsha <= 0 {
		return 0
	}
	return set * evalsha / (set + evalsha) // 1/(1/set + 1/evalsha), rounded once
}

// NewCeiling computes each master's cycles and the slowest of them.
func NewCeiling(tool string, requests int, masters []CeilingMaster) *Ceiling {
	c := &Ceiling{Tool: tool, Requests: requests, Masters: masters}
	for i := range c.Masters {
		m := &c.Masters[i]
		m.CyclesPerSec = CeilingCycles(m.SetPerSec, m.EvalshaPerSec)
		if i == 0 || m.CyclesPerSec < c.CyclesPerSec {
			c.CyclesPerSec = m.CyclesPerSec
		}
	}
	return c
}

// CompareRunOf takes a run's figures from its summary. latency is Acquire
// in mode try and Wait in mode wait.
func CompareRunOf(round int, engine, dir string, s *Summary, latency Kind) CompareRun {
	acq, rel := s.Latency(latency), s.ReleaseLatencyUs
	f := CompareFigures{
		AcquiredPerSec: s.AcquiredPerSec,
		AcquireP50Us:   float64(acq.P50),
		AcquireP99Us:   float64(acq.P99),
		AcquireP999Us:  float64(acq.P999),
		ReleaseP50Us:   float64(rel.P50),
		ReleaseP99Us:   float64(rel.P99),
		Errors:         float64(s.ErrorTotal()),
	}
	if s.Attempts > 0 {
		f.ContendedPct = 100 * float64(s.Contended) / float64(s.Attempts)
	}
	return CompareRun{Round: round, Engine: engine, Dir: dir, Interrupted: s.Interrupted, Figures: f, Violations: s.Violations,
		Masters: len(s.Masters) + len(s.Clusters)}
}

// Analyze computes every engine's medians, ratios and share of the ceiling
// from Runs.
func (c *Comparison) Analyze() {
	c.Results = make([]CompareResult, len(c.Engines))
	for i, e := range c.Engines {
		r := CompareResult{Engine: e}
		var runs []CompareFigures
		for _, run := range c.Runs {
			if run.Engine != e {
				continue
			}
			r.Violations += run.Violations
			r.Masters = max(r.Masters, run.Masters)
			if !run.Interrupted {
				runs = append(runs, run.Figures)
			}
		}
		r.Runs = len(runs)
		if len(runs) > 0 {
			m := MedianFigures(runs)
			r.Median = &m
			if c.Ceiling != nil && c.Ceiling.CyclesPerSec > 0 {
				f := m.AcquiredPerSec / c.Ceiling.CyclesPerSec
				r.OfCeiling = &f
			}
		}
		c.Results[i] = r
	}
	if len(c.Results) == 0 || c.Results[0].Median == nil {
		return
	}
	ref := c.Results[0].Median
	for i := 1; i < len(c.Results); i++ {
		if m := c.Results[i].Median; m != nil {
			r := RatioFigures(*m, *ref)
			c.Results[i].Ratio = &r
		}
	}
}

// MedianFigures is the median of each figure over runs, taken figure by
// figure: the acquisitions/s and the p99 may come from different runs.
func MedianFigures(runs []CompareFigures) CompareFigures {
	pick := func(get func(CompareFigures) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		return Median(v)
	}
	return CompareFigures{
		AcquiredPerSec: pick(func(f CompareFigures) float64 { return f.AcquiredPerSec }),
		AcquireP50Us:   pick(func(f CompareFigures) float64 { return f.AcquireP50Us }),
		AcquireP99Us:   pick(func(f CompareFigures) float64 { return f.AcquireP99Us }),
		AcquireP999Us:  pick(func(f CompareFigures) float64 { return f.AcquireP999Us }),
		ReleaseP50Us:   pick(func(f CompareFigures) float64 { return f.ReleaseP50Us }),
		ReleaseP99Us:   pick(func(f CompareFigures) float64 { return f.ReleaseP99Us }),
		ContendedPct:   pick(func(f CompareFigures) float64 { return f.ContendedPct }),
		Errors:         pick(func(f CompareFigures) float64 { return f.Errors }),
	}
}

// Median is the middle value of v, or the mean of the two middle values
// for an even count; 0 for none. v is not modified.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Ratio is a/b, or nil when b is 0 (or either is not a number): a ratio to
// nothing means nothing.
func Ratio(a, b float64) *float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return nil
	}
	r := a / b
	return &r
}

// RatioFigures divides m by ref, figure by figure.
func RatioFigures(m, ref CompareFigures) CompareRatios {
	return CompareRatios{
		AcquiredPerSec: Ratio(m.AcquiredPerSec, ref.AcquiredPerSec),
		AcquireP50Us:   Ratio(m.AcquireP50Us, ref.AcquireP50Us),
		AcquireP99Us:   Ratio(m.AcquireP99Us, ref.AcquireP99Us),
		AcquireP999Us:  Ratio(m.AcquireP999Us, ref.AcquireP999Us),
		ReleaseP50Us:   Ratio(m.ReleaseP50Us, ref.ReleaseP50Us),
		ReleaseP99Us:   Ratio(m.ReleaseP99Us, ref.ReleaseP99Us),
		ContendedPct:   Ratio(m.ContendedPct, ref.ContendedPct),
		Errors:         Ratio(m.Errors, ref.Errors),
	}
}

// WriteCompareJSON writes the comparison as indented JSON (compare.json).
func WriteCompareJSON(w io.Writer, c *Comparison) error {
	cc := *c
	if cc.Engines == nil {
		cc.Engines = []string{}
	}
	if cc.Masters == nil {
		cc.Masters = []string{}
	}
	if cc.Runs == nil {
		cc.Runs = []CompareRun{}
	}
	if cc.Results == nil {
		cc.Results = []CompareResult{}
	}
	if cc.Config == nil {
		cc.Config = map[string]any{}
	}
	return writeJSON(w, &cc)
}

// ReadCompareJSON reads a comparison written by WriteCompareJSON.
func ReadCompareJSON(r io.Reader) (*Comparison, error) {
	return readJSON[Comparison](r, "comparison")
}

// WriteCompareText writes the comparison for a person to read
// (compare.txt): the medians, the ratios to the first engine, every
// round's acquisitions/s (to show the noise), the ceiling and safety.
func WriteCompareText(w io.Writer, c *Comparison) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	compareTextHeader(p, c)
	compareTextMedians(p, c)
	compareTextRounds(p, c)
	compareTextCeiling(p, c)
	compareTextSafety(p, c)
	_, err := io.WriteString(w, b.String())
	return err
}

// printf is where WriteCompareText's parts write.
type printf func(format string, a ...any)

// compareTextHeader says what ran, where and how.
func compareTextHeader(p printf, c *Comparison) {
	complete := 0
	for _, r := range c.Runs {
		if !r.Interrupted {
			complete++
		}
	}
	p("redlock-bench compare %q\n\n", c.Label)
	p("engines      %s: %d rounds, alternating engine by engine in this order\n", strings.Join(c.Engines, ", "), c.Rounds)
	if c.Interrupted {
		p("INTERRUPTED  stopped early: %d of %d runs complete; medians are of complete runs only\n",
			complete, c.Rounds*len(c.Engines))
	}
	p("workload     %s\n", compareWorkload(c))
	if c.Lock != "" {
		p("lock         %s\n", c.Lock)
	}
	for _, n := range c.Notes {
		p("note         %s\n", n)
	}
	p("each run     %s\n", compareWindow(c.Config))
	masters := "none (no engine uses Redis)"
	switch {
	case len(c.Clusters) > 0:
		masters = compareClusters(c)
	case len(c.Masters) > 0:
		masters = strings.Join(c.Masters, ", ")
		if c.LocalMasters {
			masters += " (started locally)"
		}
		masters += compareVoters(c)
	}
	p("masters      %s\n", masters)
	m := c.Machine
	p("machine      %s, %s/%s, %d CPUs, GOMAXPROCS %d, %s, redis %s\n",
		orNA(m.Hostname), m.OS, m.Arch, m.CPUs, m.GOMAXPROCS, m.GoVersion, orNA(m.RedisVersion))
	if !c.StartedAt.IsZero() {
		p("started      %s\n", c.StartedAt.UTC().Format(time.RFC3339))
	}
}

// compareClusters is the masters line of a comparison with cluster
// votes: its plain masters (or none), its clusters and which votes each
// engine used.
func compareClusters(c *Comparison) string {
	masters := "none"
	if len(c.Masters) > 0 {
		masters = strings.Join(c.Masters, ", ")
	}
	seeds := make([]string, len(c.Clusters))
	for i, cl := range c.Clusters {
		seeds[i] = strings.Join(cl, ",")
	}
	shape := fmt.Sprintf("%d Redis Clusters", len(c.Clusters))
	if c.ClusterShards > 0 {
		shape += fmt.Sprintf(" of %d shards each", c.ClusterShards)
	}
	if c.LocalMasters {
		shape += " (started locally)"
	}
	return fmt.Sprintf("%s, then %s: %s%s", masters, shape, strings.Join(seeds, " / "), compareVoters(c))
}

// compareVoters says which masters each engine voted on: all of them, or
// the first few for the engines that vote on fewer (a single-master
// baseline, redlock@1).
func compareVoters(c *Comparison) string {
	var all []string
	fewer := map[int][]string{}
	var counts []int
	for _, r := range c.Results {
		switch {
		case r.Masters == 0:
		case r.Masters >= len(c.Masters)+len(c.Clusters):
			all = append(all, r.Engine)
		default:
			if fewer[r.Masters] == nil {
				counts = append(counts, r.Masters)
			}
			fewer[r.Masters] = append(fewer[r.Masters], r.Engine)
		}
	}
	if len(counts) == 0 {
		return ", the same for every run"
	}
	sort.Ints(counts)
	var parts []string
	for _, n := range counts {
		first := "the first only"
		if n > 1 {
			first = fmt.Sprintf("the first %d", n)
		}
		parts = append(parts, strings.Join(fewer[n], ", ")+" on "+first)
	}
	if len(all) > 0 {
		parts = append(parts, strings.Join(all, ", ")+fmt.Sprintf(" on all %d", len(c.Masters)+len(c.Clusters)))
	}
	return "; " + strings.Join(parts, "; ")
}

// compareTextMedians writes the table of medians per engine and, with
// more than one engine, their ratios to the first.
func compareTextMedians(p printf, c *Comparison) {
	acq := c.Latency
	if acq == "" {
		acq = "acquire"
	}
	head := func(first string) {
		p("%-16s %12s %12s %8s %8s %12s %8s %10s %8s", first, "acq/s",
			acq+" p50", "p99", "p99.9", "release p50", "p99", "contended", "errors")
	}
	p("\nmedian of each engine's runs (latencies in µs)\n")
	head("engine")
	p(" %6s %10s\n", "runs", "violations")
	for _, r := range c.Results {
		p("%-16s", r.Engine)
		if f := r.Median; f != nil {
			p(" %12.1f %12.0f %8.0f %8.0f %12.0f %8.0f %9.2f%% %8.0f",
				f.AcquiredPerSec, f.AcquireP50Us, f.AcquireP99Us, f.AcquireP999Us,
				f.ReleaseP50Us, f.ReleaseP99Us, f.ContendedPct, f.Errors)
		} else {
			p(" %12s %12s %8s %8s %12s %8s %10s %8s", "-", "-", "-", "-", "-", "-", "-", "-")
		}
		p(" %6d %10d\n", r.Runs, r.Violations)
	}
	if len(c.Results) < 2 {
		return
	}
	p("\nratio to %s (acq/s: above 1 is faster; latencies: above 1 is slower)\n", c.Engines[0])
	head("engine")
	p("\n")
	for _, r := range c.Results[1:] {
		p("%-16s", r.Engine)
		if q := r.Ratio; q != nil {
			p(" %12s %12s %8s %8s %12s %8s %10s %8s", fmtRatio(q.AcquiredPerSec), fmtRatio(q.AcquireP50Us),
				fmtRatio(q.AcquireP99Us), fmtRatio(q.AcquireP999Us), fmtRatio(q.ReleaseP50Us),
				fmtRatio(q.ReleaseP99Us), fmtRatio(q.ContendedPct), fmtRatio(q.Errors))
		} else {
			p(" %12s %12s %8s %8s %12s %8s %10s %8s", "-", "-", "-", "-", "-", "-", "-", "-")
		}
		p("\n")
	}
}

// compareTextRounds writes each run's throughput, engines by rounds.
func compareTextRounds(p printf, c *Comparison) {
	rounds := 0
	for _, r := range c.Runs {
		rounds = max(rounds, r.Round)
	}
	if rounds == 0 {
		return
	}
	p("\nacquisitions/s of each run, in the order they ran (* interrupted, left out of the medians)\n")
	p("%-16s", "engine")
	for i := 1; i <= rounds; i++ {
		p(" %12s", fmt.Sprintf("round %d", i))
	}
	p("\n")
	for _, e := range c.Engines {
		p("%-16s", e)
		for i := 1; i <= rounds; i++ {
			cell := "-"
			for _, r := range c.Runs {
				if r.Engine == e && r.Round == i {
					cell = fmt.Sprintf("%.1f", r.Figures.AcquiredPerSec)
					if r.Interrupted {
						cell += "*"
					}
				}
			}
			p(" %12s", cell)
		}
		p("\n")
	}
}

// compareTextCeiling writes the masters' ceiling, when it was measured.
func compareTextCeiling(p printf, c *Comparison) {
	cl := c.Ceiling
	if cl == nil {
		return
	}
	p("\nceiling of the masters (%s, %d requests per test, every master at once)\n", cl.Tool, cl.Requests)
	p("%-22s %12s %12s %12s\n", "master", "SET/s", "EVALSHA/s", "cycles/s")
	for _, m := range cl.Masters {
		p("%-22s %12.1f %12.1f %12.1f\n", m.Addr, m.SetPerSec, m.EvalshaPerSec, m.CyclesPerSec)
	}
	p("ceiling      %.1f cycles/s, the slowest master's: every lock cycle runs on every master\n", cl.CyclesPerSec)
	for _, r := range c.Results {
		if r.OfCeiling != nil {
			p("  %-16s %6.1f%% of the ceiling\n", r.Engine, 100**r.OfCeiling)
		}
	}
}

// compareTextSafety writes the oracle's verdict and where the runs are.
func compareTextSafety(p printf, c *Comparison) {
	p("\nsafety       ")
	lock := c.Lock
	if lock == "" {
		lock = "mutex" // a comparison from before the lock was recorded
	}
	var bad []string
	for _, r := range c.Results {
		if r.Violations > 0 {
			bad = append(bad, fmt.Sprintf("%s %d", r.Engine, r.Violations))
		}
	}
	switch {
	case len(c.Runs) == 0:
		p("nothing ran\n")
	case compareChecked(c.Config) == "false":
		p("not checked (--check=false)\n")
	case len(bad) == 0:
		p("OK: %s in any run\n", SafetyRule(lock))
	default:
		p("VIOLATED: %s (%s); see each run's summary.txt\n", BrokenRule(lock), strings.Join(bad, ", "))
	}
	p("runs         each in <round>-<engine>/ beside this file, a normal run directory (summary.txt, ...)\n")
}

func fmtRatio(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2fx", *r)
}

func compareChecked(config map[string]any) string { return fmt.Sprint(config["check"]) }

// compareWorkload describes the shared workload from the config in one line.
func compareWorkload(c *Comparison) string {
	g := func(k string) any {
		if v, ok := c.Config[k]; ok {
			return v
		}
		return "?"
	}
	load := "closed loop"
	if c.LoadModel == "open" {
		load = fmt.Sprintf("open loop at %v acquisitions/s", g("rate"))
	}
	return fmt.Sprintf("%v workers, %v resources (%v), mode %s, hold %v, ttl %v, %s",
		g("workers"), g("resources"), g("distribution"), c.Mode, g("hold"), g("ttl"), load)
}

// compareWindow describes each run's measured window.
func compareWindow(config map[string]any) string {
	if ops, ok := config["ops"]; ok && fmt.Sprint(ops) != "0" {
		return fmt.Sprintf("%v acquire attempts measured after a %v warm-up", ops, config["warmup"])
	}
	return fmt.Sprintf("%v measured after a %v warm-up", config["duration"], config["warmup"])
}
