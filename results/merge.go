package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/redlock-bench/redlock/internal/version"
)

// MergeJSON is the file that describes a merged run: its sources, the
// overlapping window and what could not be merged.
const MergeJSON = "merge.json"

// maxMergedExamples bounds the violation examples a merged summary keeps.
const maxMergedExamples = 10

// Merged is several runs taken at the same time on different load
// machines, against the same masters, combined into one run.
//
// The rules, so that nothing is averaged (see Summary.Merge and Close):
//
//   - Histograms are merged count by count from each run's full histograms
//     (histograms.hlog), so every percentile is exact; tags this version
//     does not know are merged too.
//   - Counters add; extremes (fairness min and max) take the least or
//     greatest; backlog_max and subscriptions_peak become the sum of the
//     maxima, an upper bound. CPUs add once per machine.
//   - acquired_per_sec is recomputed: the acquisitions that fell inside
//     the overlapping window (from intervals.hlog, prorated at its edges),
//     over the window's length, which is also duration_s.
//   - Settings that differ are joined ("a,b") or, for numbers, kept from
//     the first run, and named in merge.json's notes; the load (workers,
//     clients, rate) adds. Jain's index cannot be merged without the
//     per-worker counts: it is left out, and said so.
//   - Fields of summary.json this version does not know are merged by
//     their values: whole numbers add (or, named min or max, take the
//     extreme), a non-integer that differs or a percentile object without
//     a full histogram is left out and noted.
type Merged struct {
	// Raw is the merged summary.json, every field included.
	Raw map[string]any
	// Summary is Raw as this version's Summary, for summary.txt.
	Summary *Summary
	// Full are the merged full histograms by tag; Tags lists them in order.
	Full map[string]*hdrhistogram.Histogram
	Tags []string
	// Intervals are the merged per-second histograms, aligned on the wall
	// clock from Base.
	Intervals []Tagged
	Base      time.Time
	// Info is merge.json.
	Info MergeInfo
}

// MergeInfo is merge.json.
type MergeInfo struct {
	// Kind is always "merge".
	Kind  string `json:"kind"`
	Label string `json:"label"`
	// Sources are the merged runs.
	Sources []MergeSource `json:"sources"`
	// WindowStart and WindowEnd bound the overlap of the sources' measured
	// windows; OverlapS is its length in seconds.
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	OverlapS    float64   `json:"overlap_s"`
	// AcquiredInWindow counts acquisitions inside the window, all sources.
	AcquiredInWindow float64 `json:"acquired_in_window"`
	// AcquiredPerSec is AcquiredInWindow / OverlapS: the merged throughput.
	AcquiredPerSec float64 `json:"acquired_per_sec"`
	// SumOfSourceRates adds each source's own acquired_per_sec, over its
	// own window, for comparison.
	SumOfSourceRates float64 `json:"sum_of_source_acquired_per_sec"`
	// Notes list what was not merged, or merged with a caveat.
	Notes []string `json:"notes"`
}

// MergeSource is one merged run.
type MergeSource struct {
	Dir              string    `json:"dir"`
	Label            string    `json:"label"`
	Hostname         string    `json:"hostname"`
	WindowStart      time.Time `json:"window_start"`
	WindowEnd        time.Time `json:"window_end"`
	Acquired         int64     `json:"acquired"`
	AcquiredPerSec   float64   `json:"acquired_per_sec"`
	AcquiredInWindow float64   `json:"acquired_in_window"`
	// FromIntervals is false when intervals.hlog was missing and the
	// acquisitions in the window were prorated from the whole run.
	FromIntervals bool `json:"from_intervals"`
}

// MergeOptions tune Merge.
type MergeOptions struct {
	// Label names the merged run; default "merged-" plus the sources'
	// common label prefix.
	Label string
}

// ErrNoOverlap is returned when the sources' measured windows do not
// overlap: they were not taken at the same time.
var ErrNoOverlap = errors.New("results: the runs' measured windows do not overlap; merge combines runs taken at the same time (start them together, e.g. with --start-at)")

// Merge combines runs; see Merged for the rules. Every run needs
// histograms.hlog; engine, lock, mode and load model must agree.
func Merge(runs []*RunDir, opts MergeOptions) (*Merged, error) {
	if err := checkMergeable(runs); err != nil {
		return nil, err
	}
	m := &Merged{}
	var err error
	if m.Full, m.Tags, err = mergeFull(runs); err != nil {
		return nil, err
	}
	if err := m.window(runs); err != nil {
		return nil, err
	}
	m.Info.Kind = "merge"
	m.Info.Label = opts.Label
	if m.Info.Label == "" {
		m.Info.Label = defaultMergeLabel(runs)
	}
	s := runs[0].Summary.clone()
	for _, r := range runs[1:] {
		m.Info.Notes = append(m.Info.Notes, s.Merge(r.Summary)...)
	}
	s.Label = m.Info.Label
	s.Tool = version.Get() // the merged file is this build's
	s.Close(m.Base, m.Info.OverlapS, m.Info.AcquiredPerSec, m.Full)
	m.Summary = s
	if m.Raw, err = m.raw(runs); err != nil {
		return nil, err
	}
	m.Intervals = mergeIntervals(runs, m.Base)
	m.Info.Notes = dedupe(m.Info.Notes)
	return m, nil
}

func checkMergeable(runs []*RunDir) error {
	if len(runs) < 2 {
		return fmt.Errorf("results: merge needs at least two runs, got %d", len(runs))
	}
	first := runs[0].Summary
	for _, r := range runs {
		if r.Full == nil {
			return fmt.Errorf("results: %s has no %s: its histograms cannot be merged without loss", r.Dir, HistogramsLog)
		}
		s := r.Summary
		for _, f := range []struct{ name, a, b string }{
			{"engine", s.Engine, first.Engine}, {"lock", s.LockKind(), first.LockKind()}, {"mode", s.Mode, first.Mode},
			{"load_model", s.LoadModel, first.LoadModel},
		} {
			if f.a != f.b {
				return fmt.Errorf("results: %s: %s is %q, but %s has %q: only runs of one workload merge", r.Dir, f.name, f.a, runs[0].Dir, f.b)
			}
		}
	}
	return nil
}

// mergeFull merges the runs' full histograms tag by tag, count by count.
func mergeFull(runs []*RunDir) (map[string]*hdrhistogram.Histogram, []string, error) {
	full := map[string]*hdrhistogram.Histogram{}
	var tags []string
	for _, r := range runs {
		for _, t := range r.Full {
			if err := sameGeometry(t.Histogram); err != nil {
				return nil, nil, fmt.Errorf("results: %s: %s: %w", r.Dir, t.Tag, err)
			}
			h := full[t.Tag]
			if h == nil {
				h = NewHistogram()
				full[t.Tag] = h
				tags = append(tags, t.Tag)
			}
			if dropped := h.Merge(t.Histogram); dropped > 0 {
				return nil, nil, fmt.Errorf("results: %s: %d values of %s out of range", r.Dir, dropped, t.Tag)
			}
		}
	}
	sortTags(tags)
	return full, tags, nil
}

// window finds the overlap of the runs' measured windows, each source's
// acquisitions inside it, the merged throughput and the time origin (the
// earliest measured window).
func (m *Merged) window(runs []*RunDir) error {
	ws, we := runs[0].MeasureStart(), runs[0].MeasureEnd()
	m.Base = ws
	for _, r := range runs[1:] {
		ws, we, m.Base = latest(ws, r.MeasureStart()), earliest(we, r.MeasureEnd()), earliest(m.Base, r.MeasureStart())
	}
	if !we.After(ws) {
		return ErrNoOverlap
	}
	overlap := we.Sub(ws).Seconds()
	m.Info.WindowStart, m.Info.WindowEnd, m.Info.OverlapS = ws.UTC(), we.UTC(), round3(overlap)
	for _, r := range runs {
		src := MergeSource{
			Dir: r.Dir, Label: r.Summary.Label, Hostname: r.Summary.Machine.Hostname,
			WindowStart: r.MeasureStart().UTC(), WindowEnd: r.MeasureEnd().UTC(),
			Acquired: r.Summary.Acquired, AcquiredPerSec: r.Summary.AcquiredPerSec,
		}
		src.AcquiredInWindow, src.FromIntervals = acquiredIn(r, ws, we)
		if !src.FromIntervals {
			m.Info.Notes = append(m.Info.Notes, fmt.Sprintf("%s: no per-second %s counts in %s; its acquisitions in the window are prorated from the whole run", r.Dir, r.PrimaryTag(), IntervalsLog))
		}
		if d := r.Summary.DurationS; d > 0 && overlap < 0.9*d {
			m.Info.Notes = append(m.Info.Notes, fmt.Sprintf("%s: the window covers only %.0f%% of its %.1f s; start the runs together (--start-at) with the same --duration", r.Dir, 100*overlap/d, d))
		}
		m.Info.Sources = append(m.Info.Sources, src)
		m.Info.AcquiredInWindow += src.AcquiredInWindow
		m.Info.SumOfSourceRates += src.AcquiredPerSec
	}
	m.Info.AcquiredInWindow = round3(m.Info.AcquiredInWindow)
	m.Info.SumOfSourceRates = math.Round(m.Info.SumOfSourceRates*10) / 10
	m.Info.AcquiredPerSec = math.Round(m.Info.AcquiredInWindow/overlap*10) / 10
	return nil
}

// dedupe drops repeated notes (each merged run repeats some), in order.
func dedupe(notes []string) []string {
	out := []string{}
	for _, n := range notes {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func sameGeometry(h *hdrhistogram.Histogram) error {
	if h.LowestTrackableValue() != LowestUs || h.SignificantFigures() != SigFigs || h.HighestTrackableValue() < HighestUs {
		return errors.New("histogram geometry differs from this version's; cannot merge losslessly")
	}
	return nil
}

// sortTags puts the known kinds first, in their order, then the rest by name.
func sortTags(tags []string) {
	rank := func(t string) int {
		if k, ok := ParseKind(t); ok {
			return int(k)
		}
		return int(NumKinds)
	}
	sort.SliceStable(tags, func(i, j int) bool {
		ri, rj := rank(tags[i]), rank(tags[j])
		if ri != rj {
			return ri < rj
		}
		return tags[i] < tags[j]
	})
}

// acquiredIn counts the run's acquisitions inside [ws, we) from its
// per-second intervals, prorating the intervals cut by the edges. Without
// intervals it prorates the run's total over its window, and says so.
func acquiredIn(r *RunDir, ws, we time.Time) (float64, bool) {
	tag := r.PrimaryTag()
	var n float64
	found := false
	for _, t := range r.Intervals {
		if t.Tag != tag {
			continue
		}
		found = true
		s := time.UnixMilli(t.Histogram.StartTimeMs())
		e := time.UnixMilli(t.Histogram.EndTimeMs())
		n += float64(t.Histogram.TotalCount()) * overlapFraction(s, e, ws, we)
	}
	if found {
		return n, true
	}
	d := r.Summary.DurationS
	if d <= 0 {
		return 0, false
	}
	return float64(r.Summary.Acquired) * math.Min(1, we.Sub(ws).Seconds()/d), false
}

// overlapFraction is the share of [s, e) inside [ws, we). An instant
// interval counts whole when it falls inside.
func overlapFraction(s, e, ws, we time.Time) float64 {
	if !e.After(s) {
		if !s.Before(ws) && s.Before(we) {
			return 1
		}
		return 0
	}
	lo, hi := s, e
	if ws.After(lo) {
		lo = ws
	}
	if we.Before(hi) {
		hi = we
	}
	if !hi.After(lo) {
		return 0
	}
	return hi.Sub(lo).Seconds() / e.Sub(s).Seconds()
}

// mergeIntervals merges the runs' per-second histograms that start in the
// same second since base, tag by tag.
func mergeIntervals(runs []*RunDir, base time.Time) []Tagged {
	type key struct {
		tag    string
		second int64
	}
	type bucket struct {
		h      *hdrhistogram.Histogram
		length int64 // ms, the longest contributing interval
	}
	buckets := map[key]*bucket{}
	var keys []key
	for _, r := range runs {
		for _, t := range r.Intervals {
			rel := float64(t.Histogram.StartTimeMs()-base.UnixMilli()) / 1000
			k := key{t.Tag, int64(math.Floor(rel + 0.5))}
			b := buckets[k]
			if b == nil {
				b = &bucket{h: NewHistogram()}
				buckets[k] = b
				keys = append(keys, k)
			}
			b.h.Merge(t.Histogram)
			b.length = max(b.length, t.Histogram.EndTimeMs()-t.Histogram.StartTimeMs())
		}
	}
	var tags []string
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k.tag] {
			seen[k.tag] = true
			tags = append(tags, k.tag)
		}
	}
	sortTags(tags)
	order := map[string]int{}
	for i, t := range tags {
		order[t] = i
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].second != keys[j].second {
			return keys[i].second < keys[j].second
		}
		return order[keys[i].tag] < order[keys[j].tag]
	})
	out := make([]Tagged, 0, len(keys))
	for _, k := range keys {
		b := buckets[k]
		start := base.UnixMilli() + k.second*1000
		b.h.SetStartTimeMs(start)
		b.h.SetEndTimeMs(start + min(b.length, 1000))
		b.h.SetTag(k.tag)
		out = append(out, Tagged{Tag: k.tag, Histogram: b.h})
	}
	return out
}

// defaultMergeLabel is "merged-" and the sources' common label prefix
// ("merged-pod" for pod-0, pod-1), or "merged".
func defaultMergeLabel(runs []*RunDir) string {
	p := runs[0].Summary.Label
	for _, r := range runs[1:] {
		l := r.Summary.Label
		i := 0
		for i < len(p) && i < len(l) && p[i] == l[i] {
			i++
		}
		p = p[:i]
	}
	p = strings.TrimRight(p, "-_.")
	if p == "" {
		return "merged"
	}
	return "merged-" + p
}

// clone copies s deeply enough that merging into the copy leaves s alone.
func (s *Summary) clone() *Summary {
	c := *s
	c.Errors = maps.Clone(s.Errors)
	c.ErrorExamples = maps.Clone(s.ErrorExamples)
	c.WarmupErrorExamples = maps.Clone(s.WarmupErrorExamples)
	c.Masters = slices.Clone(s.Masters)
	c.ViolationExamples = slices.Clone(s.ViolationExamples)
	c.StaleTokenExamples = slices.Clone(s.StaleTokenExamples)
	c.Faults = slices.Clone(s.Faults)
	c.Nodes = slices.Clone(s.Nodes)
	return &c
}

// Merge adds o, a run of the same workload measured at the same time on
// another load machine, into s, as vegeta's Metrics.Add adds a result:
// counters add, extremes take the least or greatest, examples and lists
// concatenate, settings that differ are joined. What depends on the merged
// window or on the raw samples (warm-up, duration, throughput, percentiles)
// is Close's. It returns what could not be merged, for merge.json's notes.
func (s *Summary) Merge(o *Summary) (notes []string) {
	for i := range s.ViolationExamples {
		if s.ViolationExamples[i].Source == "" {
			s.ViolationExamples[i].Source = s.Label
		}
	}
	notes = s.Config.merge(o.Config)
	s.Machine.merge(o.Machine)
	if !sameSet(s.Masters, o.Masters) {
		notes = append(notes, "the runs used different masters; a merged run should be one load on the same masters")
	}
	s.Masters = union(s.Masters, o.Masters)
	s.LocalMasters = s.LocalMasters || o.LocalMasters
	s.StartedAt = earliest(s.StartedAt, o.StartedAt)
	s.Interrupted = s.Interrupted || o.Interrupted
	s.Checked = s.Checked && o.Checked
	for _, c := range []struct{ into, add *int64 }{
		{&s.Attempts, &o.Attempts}, {&s.Acquired, &o.Acquired}, {&s.Contended, &o.Contended},
		{&s.LostLeases, &o.LostLeases}, {&s.Extensions, &o.Extensions},
		{&s.WokenByNotification, &o.WokenByNotification}, {&s.FallbackRetries, &o.FallbackRetries},
		{&s.BackoffRetries, &o.BackoffRetries}, {&s.Gated, &o.Gated},
		{&s.BacklogMax, &o.BacklogMax}, {&s.BacklogEnd, &o.BacklogEnd}, // maxima add: an upper bound
		{&s.Violations, &o.Violations}, {&s.TokensChecked, &o.TokensChecked}, {&s.StaleTokens, &o.StaleTokens},
	} {
		*c.into += *c.add
	}
	s.SubscriptionsPeak += o.SubscriptionsPeak // an upper bound, as the backlog
	if s.Errors == nil {
		s.Errors = map[string]int64{}
	}
	for k, v := range o.Errors {
		s.Errors[k] += v
	}
	s.ErrorExamples = addExamples(s.ErrorExamples, o.ErrorExamples)
	s.WarmupErrorExamples = addExamples(s.WarmupErrorExamples, o.WarmupErrorExamples)
	s.Fairness = Fairness{Min: min(s.Fairness.Min, o.Fairness.Min), Max: max(s.Fairness.Max, o.Fairness.Max)}
	notes = append(notes, "fairness.jain: left out: Jain's index needs every worker's count, which the runs do not keep")
	for _, v := range o.ViolationExamples {
		if v.Source == "" {
			v.Source = o.Label
		}
		s.ViolationExamples = append(s.ViolationExamples, v)
	}
	s.ViolationExamples = s.ViolationExamples[:min(len(s.ViolationExamples), maxMergedExamples)]
	s.StaleTokenExamples = append(s.StaleTokenExamples, o.StaleTokenExamples...)
	s.StaleTokenExamples = s.StaleTokenExamples[:min(len(s.StaleTokenExamples), maxMergedExamples)]
	s.Faults = append(s.Faults, o.Faults...)
	s.Nodes = mergeNodes(s.Nodes, o.Nodes)
	// Each generator read the nodes over its own window, and its own
	// process alone: the readings do not add up to the merged run's
	// (mergeDropped).
	s.Server, s.CPU = nil, nil
	return notes
}

// addExamples adds to into the kinds of from that it lacks.
func addExamples(into, from map[string]string) map[string]string {
	for k, v := range from {
		if _, ok := into[k]; !ok {
			if into == nil {
				into = map[string]string{}
			}
			into[k] = v
		}
	}
	return into
}

// Close sets what Merge cannot add, as vegeta's Metrics.Close: the window
// (its start base, the warm-up before it since the earliest start, its
// length), the throughput over it, and the latency statistics of the
// merged full histograms.
func (s *Summary) Close(base time.Time, durationS, acquiredPerSec float64, full map[string]*hdrhistogram.Histogram) {
	s.WarmupS = round3(base.Sub(s.StartedAt).Seconds())
	s.DurationS = durationS
	s.AcquiredPerSec = acquiredPerSec
	set := NewSet()
	for k := Kind(0); k < NumKinds; k++ {
		set[k] = full[k.String()]
	}
	s.SetLatencies(set)
}

// merge adds another run's config: the load (workers, clients, rate)
// adds, the per-machine settings (label, start_at) are dropped, strings
// that differ are joined and other settings that differ keep the first
// run's value; both are noted.
func (c *RunConfig) merge(o RunConfig) (notes []string) {
	c.Workers += o.Workers
	c.Clients += o.Clients
	c.Rate += o.Rate
	c.Label, c.StartAt = "", ""
	for _, f := range []struct {
		name string
		into *string
		add  string
	}{
		{"engine", &c.Engine, o.Engine}, {"masters", &c.Masters, o.Masters}, {"distribution", &c.Distribution, o.Distribution},
		{"mode", &c.Mode, o.Mode}, {"wait_timeout", &c.WaitTimeout, o.WaitTimeout}, {"hold", &c.Hold, o.Hold},
		{"ttl", &c.TTL, o.TTL}, {"node_timeout", &c.NodeTimeout, o.NodeTimeout}, {"duration", &c.Duration, o.Duration}, {"warmup", &c.Warmup, o.Warmup},
		{"key_prefix", &c.KeyPrefix, o.KeyPrefix}, {"quarantine", &c.Quarantine, o.Quarantine}, {"fault", &c.Fault, o.Fault},
		{"user", &c.User, o.User}, {"sni", &c.SNI, o.SNI},
	} {
		if *f.into != f.add {
			*f.into = joinDistinct(*f.into, f.add)
			notes = append(notes, fmt.Sprintf("config %s differs between runs: %s", f.name, *f.into))
		}
	}
	if c.Sentinel != o.Sentinel {
		// Votes separated by spaces, each with commas of its own.
		c.Sentinel = strings.Join(union(strings.Fields(c.Sentinel), strings.Fields(o.Sentinel)), " ")
		notes = append(notes, fmt.Sprintf("config sentinel differs between runs: %s", c.Sentinel))
	}
	for _, f := range []struct {
		name      string
		kept, add any
	}{
		{"local_masters", c.LocalMasters, o.LocalMasters}, {"resources", c.Resources, o.Resources}, {"ops", c.Ops, o.Ops},
		{"check", c.Check, o.Check}, {"seed", c.Seed, o.Seed}, {"extend", c.Extend, o.Extend}, {"fencing", c.Fencing, o.Fencing},
		{"gate", c.Gate, o.Gate}, {"notify", c.Notify, o.Notify}, {"no_wait_quarantine", c.NoWaitQuarantine, o.NoWaitQuarantine},
		{"tls", c.TLS, o.TLS}, {"insecure", c.Insecure, o.Insecure},
	} {
		if f.kept != f.add {
			notes = append(notes, fmt.Sprintf("config %s differs between runs: %v, %v (kept %v)", f.name, f.kept, f.add, f.kept))
		}
	}
	return notes
}

// merge adds another machine: names join, and the CPUs of a machine not
// yet counted add (two runs on one host do not double its CPUs).
func (m *Machine) merge(o Machine) {
	if !slices.Contains(strings.Split(m.Hostname, ","), o.Hostname) {
		m.CPUs += o.CPUs
		m.GOMAXPROCS += o.GOMAXPROCS
	}
	m.Hostname = joinDistinct(m.Hostname, o.Hostname)
	m.OS = joinDistinct(m.OS, o.OS)
	m.Arch = joinDistinct(m.Arch, o.Arch)
	m.GoVersion = joinDistinct(m.GoVersion, o.GoVersion)
	m.RedisVersion = joinDistinct(m.RedisVersion, o.RedisVersion)
}

// mergeNodes merges the masters' views by address: votes and their
// outcomes add, restarts take the most any load machine noticed, and
// states that differ are joined.
func mergeNodes(into, add []Node) []Node {
	for _, n := range add {
		i := slices.IndexFunc(into, func(x Node) bool { return x.Addr == n.Addr })
		if i < 0 {
			into = append(into, n)
			continue
		}
		x := &into[i]
		x.OK, x.Refused, x.Failed, x.TimedOut = x.OK+n.OK, x.Refused+n.Refused, x.Failed+n.Failed, x.TimedOut+n.TimedOut
		x.Restarts = max(x.Restarts, n.Restarts)
		x.State = joinDistinct(x.State, n.State)
		x.Via = joinDistinct(x.Via, n.Via)
		x.RunID = joinDistinct(x.RunID, n.RunID)
		x.Version = joinDistinct(x.Version, n.Version)
		x.QuarantinedUntil = latest(x.QuarantinedUntil, n.QuarantinedUntil)
		if x.Error == "" {
			x.Error = n.Error
		}
	}
	return into
}

// joinDistinct joins comma-separated lists, each item once, in order.
func joinDistinct(a, b string) string {
	var parts []string
	for _, p := range strings.Split(a+","+b, ",") {
		if p != "" && !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ",")
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// raw is the merged summary.json: the typed merged summary, without the
// figures it could not compute, with the fields of the sources this
// version does not know merged by their values, and what it merged.
func (m *Merged) raw(runs []*RunDir) (map[string]any, error) {
	var b bytes.Buffer
	if err := WriteJSON(&b, m.Summary); err != nil {
		return nil, fmt.Errorf("results: merged summary: %w", err)
	}
	out := map[string]any{}
	dec := json.NewDecoder(&b)
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("results: merged summary: %w", err)
	}
	if f, ok := out["fairness"].(map[string]any); ok {
		delete(f, "jain") // see Summary.Merge's note
	}
	for _, k := range unknownKeys(runs, out) {
		var vals []any
		for _, r := range runs {
			if v, ok := r.Raw[k]; ok {
				vals = append(vals, v)
			}
		}
		if v, ok := m.mergeUnknown(vals, k); ok {
			out[k] = v
		}
	}
	srcs := make([]any, len(runs))
	for i, r := range runs {
		srcs[i] = r.Dir
	}
	out["merged_from"] = srcs
	out["overlap_s"] = m.Info.OverlapS
	return out, nil
}

// mergeDropped are the summary.json fields Summary.Merge leaves out on
// purpose: they are known, so they must not come back merged as unknown.
var mergeDropped = []string{"server", "cpu"}

// unknownKeys are the sources' summary.json fields that Summary lacks, in
// a stable order; merged_from and overlap_s are the merge's own.
func unknownKeys(runs []*RunDir, known map[string]any) []string {
	var keys []string
	for _, r := range runs {
		for k := range r.Raw {
			if _, ok := known[k]; !ok && k != "merged_from" && k != "overlap_s" && !slices.Contains(mergeDropped, k) && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// mergeUnknown merges the values of a field this version does not know,
// by what they are: whole numbers add (named min or max, or ending so,
// they take the extreme), booleans or, strings join, lists concatenate,
// objects merge key by key; a percentile object comes from the merged
// histogram of its tag, if there is one. Anything else that differs is
// left out (false) and noted.
func (m *Merged) mergeUnknown(vals []any, path string) (any, bool) {
	if len(vals) == 0 {
		return nil, false
	}
	if isStats(vals) {
		tag := strings.TrimSuffix(strings.TrimSuffix(path, "_latency_us"), "_us")
		if h := m.Full[tag]; h != nil {
			return statsMap(StatsOf(h)), true
		}
		m.note("%s: left out: percentiles merge only from full histograms, and %s has none for it", path, HistogramsLog)
		return nil, false
	}
	switch vals[0].(type) {
	case json.Number:
		if v, ok := mergeWhole(vals, path); ok {
			return v, true
		}
	case bool:
		return slices.Contains(vals, any(true)), true
	case string:
		out := ""
		for _, v := range vals {
			out = joinDistinct(out, fmt.Sprint(v))
		}
		return out, true
	case []any:
		var out []any
		for _, v := range vals {
			list, _ := v.([]any)
			out = append(out, list...)
		}
		return out, true
	case map[string]any:
		return m.mergeUnknownObjects(vals, path), true
	}
	if b0, _ := json.Marshal(vals[0]); slices.IndexFunc(vals, func(v any) bool { b, _ := json.Marshal(v); return !bytes.Equal(b, b0) }) < 0 {
		return vals[0], true
	}
	m.note("%s: left out: the runs' values differ and a non-integer cannot be merged without the raw data", path)
	return nil, false
}

func (m *Merged) mergeUnknownObjects(vals []any, path string) map[string]any {
	out := map[string]any{}
	var keys []string
	for _, v := range vals {
		for k := range v.(map[string]any) {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		var vs []any
		for _, v := range vals {
			if x, ok := v.(map[string]any)[k]; ok {
				vs = append(vs, x)
			}
		}
		if v, ok := m.mergeUnknown(vs, path+"."+k); ok {
			out[k] = v
		}
	}
	return out
}

// mergeWhole adds whole numbers; false if one is not whole.
func mergeWhole(vals []any, path string) (json.Number, bool) {
	name := path[strings.LastIndex(path, ".")+1:]
	var out int64
	for i, v := range vals {
		n, ok := v.(json.Number)
		if !ok {
			return "", false
		}
		x, err := n.Int64()
		if err != nil {
			return "", false
		}
		switch {
		case i == 0:
			out = x
		case name == "min" || strings.HasSuffix(name, "_min"):
			out = min(out, x)
		case name == "max" || strings.HasSuffix(name, "_max"):
			out = max(out, x)
		default:
			out += x
		}
	}
	return json.Number(fmt.Sprint(out)), true
}

func (m *Merged) note(format string, a ...any) {
	m.Info.Notes = append(m.Info.Notes, fmt.Sprintf(format, a...))
}

func statsMap(s Stats) map[string]any {
	return map[string]any{"count": s.Count, "p50": s.P50, "p90": s.P90, "p99": s.P99, "p999": s.P999, "max": s.Max, "mean": s.Mean}
}

// isStats tells a percentile object of a field this version does not
// know, by its keys.
func isStats(vals []any) bool {
	for _, v := range vals {
		mv, ok := v.(map[string]any)
		if !ok {
			return false
		}
		_, c := mv["count"]
		_, p := mv["p99"]
		if !c || !p {
			return false
		}
	}
	return true
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// WriteMerged writes a merged run into dir, which must exist, as a normal
// run directory: summary.json (every field), summary.txt, the .hgrm of
// each histogram, histograms.hlog and intervals.hlog, plus merge.json.
func WriteMerged(dir string, m *Merged) error {
	dw := &dirWriter{dir: dir}
	write := dw.write
	indent := func(v any) func(*bytes.Buffer) error {
		return func(b *bytes.Buffer) error { return writeJSON(b, v) }
	}
	write(SummaryJSON, indent(m.Raw))
	write(SummaryText, func(b *bytes.Buffer) error {
		if err := WriteText(b, m.Summary); err != nil {
			return err
		}
		fmt.Fprintf(b, "\nmerged from %d runs over their common window of %.2f s (see %s):\n", len(m.Info.Sources), m.Info.OverlapS, MergeJSON)
		for _, s := range m.Info.Sources {
			fmt.Fprintf(b, "  %s (%s): %.1f acquisitions/s on its own\n", s.Dir, orNA(s.Hostname), s.AcquiredPerSec)
		}
		for _, n := range m.Info.Notes {
			fmt.Fprintf(b, "  note: %s\n", n)
		}
		return nil
	})
	for _, tag := range m.Tags {
		h := m.Full[tag]
		switch tag {
		case Acquire.String(), AcquireFail.String(), Release.String(), Hold.String():
		default:
			if h.TotalCount() == 0 && !(tag == Wait.String() && m.Summary.Mode == "wait") {
				continue // as WriteRun: no empty wait.hgrm outside mode wait, and so on
			}
		}
		write(tag+hgrmFileSuffix, func(b *bytes.Buffer) error { return WriteHgrm(b, h) })
	}
	write(HistogramsLog, func(b *bytes.Buffer) error {
		l, err := NewIntervalLog(b, m.Info.WindowStart, "cumulative histograms of the merged runs' measured windows, one line per kind")
		if err != nil {
			return err
		}
		for _, tag := range m.Tags {
			if err := l.Write(tag, m.Info.WindowStart, m.Info.WindowEnd, m.Full[tag]); err != nil {
				return err
			}
		}
		return nil
	})
	write(IntervalsLog, func(b *bytes.Buffer) error {
		l, err := NewIntervalLog(b, m.Base, fmt.Sprintf("merged from %d runs, aligned on the wall clock, one line per kind per second", len(m.Info.Sources)))
		if err != nil {
			return err
		}
		for _, t := range m.Intervals {
			s := time.UnixMilli(t.Histogram.StartTimeMs())
			e := time.UnixMilli(t.Histogram.EndTimeMs())
			if err := l.Write(t.Tag, s, e, t.Histogram); err != nil {
				return err
			}
		}
		return nil
	})
	write(MergeJSON, indent(m.Info))
	return errors.Join(dw.errs...)
}
