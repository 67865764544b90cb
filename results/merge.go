package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// MergeJSON is the file that describes a merged run: its sources, the
// overlapping window and what could not be merged.
const MergeJSON = "merge.json"

// maxMergedExamples bounds the violation examples a merged summary keeps.
const maxMergedExamples = 10

// Merged is several runs taken at the same time on different load
// machines, against the same masters, combined into one run.
//
// The rules, so that nothing is averaged:
//
//   - Histograms are merged count by count from each run's full histograms
//     (histograms.hlog), so every percentile is exact; tags this version
//     does not know are merged too.
//   - Counters are summed: attempts, acquired, contended, errors by kind,
//     lost leases, violations, and any integer field of summary.json,
//     including ones added after this code was written (by the type of the
//     Summary field, or, for a field Summary does not have, when every
//     source wrote a whole number). Integers named min or max (or ending
//     in _min or _max) are extremes and merge as the least or greatest;
//     backlog_max becomes the sum of the maxima, an upper bound.
//   - acquired_per_sec is recomputed: the acquisitions that fell inside
//     the overlapping window (from intervals.hlog, prorated at its edges),
//     over the window's length, which is also duration_s.
//   - Other fields: booleans are true if any source's is (checked: if all
//     are); equal strings and numbers are kept, different strings are
//     joined with ","; lists are concatenated with duplicates dropped;
//     objects are merged key by key with these rules. A non-integer
//     number that differs (a ratio, a mean) cannot be merged without the
//     raw data: it is left out and named in merge.json's notes, as are
//     percentile objects that have no full histogram.
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
// histograms.hlog; engine, mode and load model must agree.
func Merge(runs []*RunDir, opts MergeOptions) (*Merged, error) {
	if len(runs) < 2 {
		return nil, fmt.Errorf("results: merge needs at least two runs, got %d", len(runs))
	}
	first := runs[0].Summary
	for _, r := range runs {
		if r.Full == nil {
			return nil, fmt.Errorf("results: %s has no %s: its histograms cannot be merged without loss", r.Dir, HistogramsLog)
		}
		s := r.Summary
		for _, f := range []struct{ name, a, b string }{
			{"engine", s.Engine, first.Engine}, {"mode", s.Mode, first.Mode}, {"load_model", s.LoadModel, first.LoadModel},
		} {
			if f.a != f.b {
				return nil, fmt.Errorf("results: %s: %s is %q, but %s has %q: only runs of one workload merge", r.Dir, f.name, f.a, runs[0].Dir, f.b)
			}
		}
	}
	m := &Merged{Full: map[string]*hdrhistogram.Histogram{}}
	m.Info.Kind = "merge"
	notes := &m.Info.Notes

	// Histograms, by tag, count by count.
	for _, r := range runs {
		for _, t := range r.Full {
			if err := sameGeometry(t.Histogram); err != nil {
				return nil, fmt.Errorf("results: %s: %s: %w", r.Dir, t.Tag, err)
			}
			h := m.Full[t.Tag]
			if h == nil {
				h = NewHistogram()
				m.Full[t.Tag] = h
				m.Tags = append(m.Tags, t.Tag)
			}
			if dropped := h.Merge(t.Histogram); dropped > 0 {
				return nil, fmt.Errorf("results: %s: %d values of %s out of range", r.Dir, dropped, t.Tag)
			}
		}
	}
	sortTags(m.Tags)

	// The overlapping window.
	ws, we := runs[0].MeasureStart(), runs[0].MeasureEnd()
	for _, r := range runs[1:] {
		if s := r.MeasureStart(); s.After(ws) {
			ws = s
		}
		if e := r.MeasureEnd(); e.Before(we) {
			we = e
		}
	}
	if !we.After(ws) {
		return nil, ErrNoOverlap
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
			*notes = append(*notes, fmt.Sprintf("%s: no per-second %s counts in %s; its acquisitions in the window are prorated from the whole run", r.Dir, r.PrimaryTag(), IntervalsLog))
		}
		if d := r.Summary.DurationS; d > 0 && overlap < 0.9*d {
			*notes = append(*notes, fmt.Sprintf("%s: the window covers only %.0f%% of its %.1f s; start the runs together (--start-at) with the same --duration", r.Dir, 100*overlap/d, d))
		}
		m.Info.Sources = append(m.Info.Sources, src)
		m.Info.AcquiredInWindow += src.AcquiredInWindow
		m.Info.SumOfSourceRates += src.AcquiredPerSec
	}
	m.Info.AcquiredInWindow = round3(m.Info.AcquiredInWindow)
	m.Info.SumOfSourceRates = math.Round(m.Info.SumOfSourceRates*10) / 10
	m.Info.AcquiredPerSec = math.Round(m.Info.AcquiredInWindow/overlap*10) / 10

	// The merged run's time origin: the earliest measured window.
	m.Base = runs[0].MeasureStart()
	for _, r := range runs[1:] {
		if s := r.MeasureStart(); s.Before(m.Base) {
			m.Base = s
		}
	}

	// The summary.
	label := opts.Label
	if label == "" {
		label = defaultMergeLabel(runs)
	}
	m.Info.Label = label
	raw, err := mergeSummaries(runs, m, label, notes)
	if err != nil {
		return nil, err
	}
	m.Raw = raw
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("results: merged summary: %w", err)
	}
	if m.Summary, err = ReadJSON(bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("results: merged summary: %w", err)
	}

	// The intervals, aligned on the wall clock.
	m.Intervals = mergeIntervals(runs, m.Base)
	if m.Info.Notes == nil {
		m.Info.Notes = []string{}
	}
	return m, nil
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

// mergeSummaries builds the merged summary.json.
func mergeSummaries(runs []*RunDir, m *Merged, label string, notes *[]string) (map[string]any, error) {
	raws := make([]map[string]any, len(runs))
	for i, r := range runs {
		raws[i] = r.Raw
	}
	var keys []string
	seen := map[string]bool{}
	for _, raw := range raws {
		ks := make([]string, 0, len(raw))
		for k := range raw {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	fields := jsonFields(reflect.TypeOf(Summary{}))
	out := map[string]any{}
	for _, k := range keys {
		var vals []any
		for _, raw := range raws {
			if v, ok := raw[k]; ok {
				vals = append(vals, v)
			}
		}
		switch k {
		case "label":
			out[k] = label
		case "config":
			out[k] = mergeConfig(vals, notes)
		case "started_at":
			var earliest time.Time
			for _, r := range runs {
				if earliest.IsZero() || r.Summary.StartedAt.Before(earliest) {
					earliest = r.Summary.StartedAt
				}
			}
			out[k] = earliest.UTC().Format(time.RFC3339Nano)
		case "warmup_s":
			// From the earliest start to the earliest measured window,
			// so that started_at + warmup_s is where intervals.hlog begins.
			earliest := runs[0].Summary.StartedAt
			for _, r := range runs[1:] {
				if r.Summary.StartedAt.Before(earliest) {
					earliest = r.Summary.StartedAt
				}
			}
			out[k] = round3(m.Base.Sub(earliest).Seconds())
		case "duration_s":
			out[k] = m.Info.OverlapS
		case "acquired_per_sec":
			out[k] = m.Info.AcquiredPerSec
		case "checked":
			all := true
			for _, r := range runs {
				all = all && r.Summary.Checked
			}
			out[k] = all
		case "masters":
			v, _ := mergeValue(fields[k], vals, k, notes)
			out[k] = v
			if !sameMasters(runs) {
				*notes = append(*notes, "the runs used different masters; a merged run should be one load on the same masters")
			}
		case "error_examples":
			ex := map[string]any{}
			for _, v := range vals {
				if mv, ok := v.(map[string]any); ok {
					for kk, vv := range mv {
						if _, dup := ex[kk]; !dup {
							ex[kk] = vv
						}
					}
				}
			}
			out[k] = ex
		case "violation_examples":
			var ex []any
			for i, raw := range raws {
				list, _ := raw[k].([]any)
				for _, e := range list {
					if em, ok := e.(map[string]any); ok && len(ex) < maxMergedExamples {
						c := map[string]any{"source": runs[i].Summary.Label}
						for kk, vv := range em {
							c[kk] = vv
						}
						ex = append(ex, c)
					}
				}
			}
			if ex == nil {
				ex = []any{}
			}
			out[k] = ex
		default:
			if isStats(fields[k], vals) {
				if h := m.statsHistogram(k); h != nil {
					out[k] = statsMap(StatsOf(h))
				} else {
					*notes = append(*notes, fmt.Sprintf("%s: left out: percentiles merge only from full histograms, and %s has none for it", k, HistogramsLog))
				}
				continue
			}
			if v, ok := mergeValue(fields[k], vals, k, notes); ok {
				out[k] = v
			}
		}
	}
	// Stats of tags the sources' summaries lack but the histograms have.
	for k := Kind(0); k < NumKinds; k++ {
		key := statsKey(k)
		if _, ok := out[key]; !ok {
			out[key] = statsMap(StatsOf(m.Full[k.String()]))
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

// statsKey is the summary.json field of kind k's statistics.
func statsKey(k Kind) string {
	if k == Hold {
		return "hold_us"
	}
	return k.String() + "_latency_us"
}

// statsHistogram finds the merged histogram behind a statistics field:
// "acquire_latency_us" is tag acquire, "hold_us" is hold,
// "handoff_latency_us" is handoff.
func (m *Merged) statsHistogram(field string) *hdrhistogram.Histogram {
	for _, suffix := range []string{"_latency_us", "_us"} {
		if tag, ok := strings.CutSuffix(field, suffix); ok {
			if h := m.Full[tag]; h != nil {
				return h
			}
		}
	}
	return nil
}

func statsMap(s Stats) map[string]any {
	return map[string]any{"count": s.Count, "p50": s.P50, "p90": s.P90, "p99": s.P99, "p999": s.P999, "max": s.Max, "mean": s.Mean}
}

// isStats tells a percentile object: by its Go type, or for fields this
// version does not know, by its keys.
func isStats(t reflect.Type, vals []any) bool {
	if t != nil {
		return t == reflect.TypeOf(Stats{})
	}
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
	return len(vals) > 0
}

func sameMasters(runs []*RunDir) bool {
	key := func(s []string) string {
		c := append([]string{}, s...)
		sort.Strings(c)
		return strings.Join(c, ",")
	}
	k0 := key(runs[0].Summary.Masters)
	for _, r := range runs[1:] {
		if key(r.Summary.Masters) != k0 {
			return false
		}
	}
	return true
}

// mergeConfig keeps settings the runs share, sums the load (workers,
// clients, rate), and writes settings that differ as "a,b".
func mergeConfig(vals []any, notes *[]string) map[string]any {
	out := map[string]any{}
	var keys []string
	seen := map[string]bool{}
	for _, v := range vals {
		mv, _ := v.(map[string]any)
		for k := range mv {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		var vs []any
		for _, v := range vals {
			if mv, ok := v.(map[string]any); ok {
				if x, ok := mv[k]; ok {
					vs = append(vs, x)
				}
			}
		}
		switch k {
		case "workers", "clients", "rate":
			sum := 0.0
			for _, x := range vs {
				sum += num(x)
			}
			out[k] = json.Number(formatNumber(sum))
			continue
		case "label", "start_at", "out":
			continue // per machine, or replaced by the merged label
		}
		if allEqual(vs) {
			out[k] = vs[0]
			continue
		}
		var parts []string
		for _, x := range vs {
			s := fmt.Sprint(x)
			if !contains(parts, s) {
				parts = append(parts, s)
			}
		}
		out[k] = strings.Join(parts, ",")
		*notes = append(*notes, fmt.Sprintf("config %s differs between runs: %s", k, strings.Join(parts, ", ")))
	}
	return out
}

// formatNumber writes a number without exponent or trailing zeros.
func formatNumber(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.6f", v), "0"), ".")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func allEqual(vs []any) bool {
	if len(vs) == 0 {
		return true
	}
	b0, _ := json.Marshal(vs[0])
	for _, v := range vs[1:] {
		b, _ := json.Marshal(v)
		if !bytes.Equal(b, b0) {
			return false
		}
	}
	return true
}

// jsonFields maps the JSON names of a struct's fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

var timeType = reflect.TypeOf(time.Time{})

// mergeValue merges one field's values; t is its Go type in Summary (nil
// when unknown). false means the field is left out (and noted).
func mergeValue(t reflect.Type, vals []any, path string, notes *[]string) (any, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if len(vals) == 0 {
		return nil, false
	}
	if t == timeType {
		return mergeStrings(vals), true
	}
	kind := reflect.Invalid
	if t != nil {
		kind = t.Kind()
	}
	switch {
	case kind >= reflect.Int && kind <= reflect.Uint64:
		return mergeIntegers(vals, path, notes)
	case kind == reflect.Float32 || kind == reflect.Float64:
		return mergeFloats(vals, path, notes)
	case kind == reflect.Bool:
		return anyTrue(vals), true
	case kind == reflect.String:
		return mergeStrings(vals), true
	case kind == reflect.Slice || kind == reflect.Array:
		return concatLists(vals), true
	case kind == reflect.Map:
		return mergeObjects(func(string) reflect.Type { return t.Elem() }, vals, path, notes), true
	case kind == reflect.Struct:
		fields := jsonFields(t)
		return mergeObjects(func(k string) reflect.Type { return fields[k] }, vals, path, notes), true
	}
	// Unknown to this version, or an interface: go by the values.
	switch vals[0].(type) {
	case json.Number, float64:
		return mergeIntegers(vals, path, notes)
	case bool:
		return anyTrue(vals), true
	case string:
		return mergeStrings(vals), true
	case []any:
		return concatLists(vals), true
	case map[string]any:
		if isStats(nil, vals) {
			*notes = append(*notes, fmt.Sprintf("%s: left out: percentiles merge only from full histograms", path))
			return nil, false
		}
		return mergeObjects(func(string) reflect.Type { return nil }, vals, path, notes), true
	}
	if allEqual(vals) {
		return vals[0], true
	}
	*notes = append(*notes, fmt.Sprintf("%s: left out: the runs' values differ and cannot be merged", path))
	return nil, false
}

// mergeIntegers sums counters. A field named min or max (or ending in
// _min or _max) is an extreme, not a count: it merges as the least or the
// greatest. Values that are not all whole numbers go to mergeFloats.
func mergeIntegers(vals []any, path string, notes *[]string) (any, bool) {
	ints := make([]int64, 0, len(vals))
	for _, v := range vals {
		n, ok := v.(json.Number)
		if !ok {
			return mergeFloats(vals, path, notes)
		}
		i, err := n.Int64()
		if err != nil {
			return mergeFloats(vals, path, notes)
		}
		ints = append(ints, i)
	}
	name := path[strings.LastIndex(path, ".")+1:]
	out := ints[0]
	for _, i := range ints[1:] {
		switch {
		case name == "backlog_max":
			out += i // the sum of the maxima: an upper bound of the combined backlog
		case name == "min" || strings.HasSuffix(name, "_min"):
			out = min(out, i)
		case name == "max" || strings.HasSuffix(name, "_max"):
			out = max(out, i)
		default:
			out += i
		}
	}
	return json.Number(fmt.Sprint(out)), true
}

func mergeFloats(vals []any, path string, notes *[]string) (any, bool) {
	if allEqual(vals) {
		return vals[0], true
	}
	*notes = append(*notes, fmt.Sprintf("%s: left out: the runs' values differ and a non-integer cannot be merged without the raw data", path))
	return nil, false
}

func anyTrue(vals []any) bool {
	for _, v := range vals {
		if b, ok := v.(bool); ok && b {
			return true
		}
	}
	return false
}

func mergeStrings(vals []any) string {
	var parts []string
	for _, v := range vals {
		s := fmt.Sprint(v)
		for _, p := range strings.Split(s, ",") {
			if p != "" && !contains(parts, p) {
				parts = append(parts, p)
			}
		}
	}
	return strings.Join(parts, ",")
}

func concatLists(vals []any) []any {
	out := []any{}
	var seen []string
	for _, v := range vals {
		list, _ := v.([]any)
		for _, e := range list {
			b, _ := json.Marshal(e)
			if contains(seen, string(b)) {
				continue
			}
			seen = append(seen, string(b))
			out = append(out, e)
		}
	}
	return out
}

func mergeObjects(typeOf func(string) reflect.Type, vals []any, path string, notes *[]string) map[string]any {
	out := map[string]any{}
	var keys []string
	seen := map[string]bool{}
	for _, v := range vals {
		mv, _ := v.(map[string]any)
		ks := make([]string, 0, len(mv))
		for k := range mv {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	for _, k := range keys {
		var vs []any
		for _, v := range vals {
			if mv, ok := v.(map[string]any); ok {
				if x, ok := mv[k]; ok {
					vs = append(vs, x)
				}
			}
		}
		if v, ok := mergeValue(typeOf(k), vs, path+"."+k, notes); ok {
			out[k] = v
		}
	}
	return out
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
