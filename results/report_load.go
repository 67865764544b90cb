package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// CompareJSON is the file that marks a directory holding a comparison of
// engines (written by `redlock-bench compare`).
const CompareJSON = "compare.json"

// RunDir is one run directory read back: its summary, typed and raw, and
// whichever histogram files it has.
type RunDir struct {
	// Dir is the directory as given.
	Dir string
	// Summary is summary.json as this version knows it.
	Summary *Summary
	// Raw is summary.json with every field, including those this version
	// does not know (numbers as json.Number), so that nothing is lost
	// when runs are merged.
	Raw map[string]any
	// Full are the full histograms of the measured window, from
	// histograms.hlog; nil when the file is missing.
	Full []Tagged
	// Intervals are the per-second histograms, from intervals.hlog; nil
	// when the file is missing. Their StartTimeMs and EndTimeMs are
	// absolute (milliseconds since the epoch).
	Intervals []Tagged
	// PerSecond are the run's seconds from intervals.json, warm-up
	// included (errors, no_quorum errors, the masters' round trips); nil
	// when the file is missing (runs written before it) or unreadable.
	PerSecond []Interval
	// Hgrm are the percentile distributions of the .hgrm files, by tag,
	// read only when histograms.hlog is missing.
	Hgrm map[string]*Hgrm
	// Notes say what was missing or could not be read.
	Notes []string

	// intervalsBase is the BaseTime of intervals.hlog: when the measured
	// window really began (the summary records the planned warm-up).
	intervalsBase time.Time
}

// logBaseTime reads the BaseTime header of an interval log; zero if absent.
func logBaseTime(b []byte) time.Time {
	for _, line := range strings.SplitN(string(b[:min(len(b), 4096)]), "\n", 32) {
		rest, ok := strings.CutPrefix(line, "#[BaseTime: ")
		if !ok {
			continue
		}
		f, _, _ := strings.Cut(rest, " ")
		secs, err := strconv.ParseFloat(f, 64)
		if err != nil || secs <= 0 {
			return time.Time{}
		}
		return time.UnixMilli(int64(math.Round(secs * 1000)))
	}
	return time.Time{}
}

// LoadRunDir reads a run directory. summary.json is required; the
// histogram files are read when present, and what is missing is noted.
func LoadRunDir(dir string) (*RunDir, error) {
	b, err := os.ReadFile(filepath.Join(dir, SummaryJSON))
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	r := &RunDir{Dir: dir}
	if r.Summary, err = ReadJSON(bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("results: %s: %w", filepath.Join(dir, SummaryJSON), err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&r.Raw); err != nil {
		return nil, fmt.Errorf("results: %s: %w", filepath.Join(dir, SummaryJSON), err)
	}
	if f, err := os.Open(filepath.Join(dir, HistogramsLog)); err == nil {
		r.Full, err = ReadIntervalLog(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("results: %s: %w", filepath.Join(dir, HistogramsLog), err)
		}
	} else {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: no %s; percentiles come from the .hgrm files", dir, HistogramsLog))
		r.Hgrm = map[string]*Hgrm{}
		matches, _ := filepath.Glob(filepath.Join(dir, "*"+hgrmFileSuffix))
		for _, m := range matches {
			f, err := os.Open(m)
			if err != nil {
				continue
			}
			g, err := ParseHgrm(f)
			f.Close()
			if err != nil {
				r.Notes = append(r.Notes, fmt.Sprintf("%s: %v", m, err))
				continue
			}
			r.Hgrm[strings.TrimSuffix(filepath.Base(m), hgrmFileSuffix)] = g
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, IntervalsLog)); err == nil {
		r.Intervals, err = ReadIntervalLog(bytes.NewReader(b))
		if err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: %v; no time series", filepath.Join(dir, IntervalsLog), err))
			r.Intervals = nil
		}
		r.intervalsBase = logBaseTime(b)
	} else {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: no %s; no time series", dir, IntervalsLog))
	}
	if f, err := os.Open(filepath.Join(dir, IntervalsJSON)); err == nil {
		r.PerSecond, err = ReadIntervals(f)
		f.Close()
		if err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: %v; no errors over time", filepath.Join(dir, IntervalsJSON), err))
		}
	}
	return r, nil
}

// PrimaryTag is the histogram that counts successful acquisitions:
// "wait" in mode wait, "acquire" otherwise.
func (r *RunDir) PrimaryTag() string {
	if r.Summary.Mode == "wait" {
		return Wait.String()
	}
	return Acquire.String()
}

// MeasureStart is when the measured window began: the interval log's base
// time, exact to the millisecond, or else the start plus the warm-up.
func (r *RunDir) MeasureStart() time.Time {
	if !r.intervalsBase.IsZero() {
		return r.intervalsBase
	}
	return r.Summary.StartedAt.Add(time.Duration(r.Summary.WarmupS * float64(time.Second)))
}

// Start is when the run started, warm-up included: the origin of its
// --fault schedule and of the faults' applied_s.
func (r *RunDir) Start() time.Time {
	if !r.Summary.StartedAt.IsZero() {
		return r.Summary.StartedAt
	}
	return r.MeasureStart().Add(-time.Duration(r.Summary.WarmupS * float64(time.Second)))
}

// MeasureEnd is when the measured window ended.
func (r *RunDir) MeasureEnd() time.Time {
	return r.MeasureStart().Add(time.Duration(r.Summary.DurationS * float64(time.Second)))
}

// Histogram returns the full histogram of tag, all its lines merged, or
// nil when histograms.hlog is missing or has no such tag.
func (r *RunDir) Histogram(tag string) *hdrhistogram.Histogram {
	var h *hdrhistogram.Histogram
	for _, t := range r.Full {
		if t.Tag != tag {
			continue
		}
		if h == nil {
			h = NewHistogram()
		}
		h.Merge(t.Histogram)
	}
	return h
}

// Name is how reports name the run: its label, and its engine when the
// label does not say it.
func (r *RunDir) Name() string {
	s := r.Summary
	if s.Label == "" {
		return filepath.Base(r.Dir)
	}
	if s.Engine != "" && !strings.Contains(s.Label, s.Engine) {
		return s.Engine + " " + s.Label
	}
	return s.Label
}

// Fault is one injected fault as the charts mark it: when it was in effect,
// in seconds since the run started (warm-up included), the clock its
// --fault schedule is written in.
type Fault struct {
	Name   string
	Action string
	Node   int
	FromS  float64
	ToS    float64
	// Error says what failed applying or lifting it; a kill that failed
	// took no master down.
	Error string
}

// Faults reads the summary's "faults" field, if the run had any. Times
// come from applied_at (wall clock) when present, against Start; otherwise
// from applied_s and ended_s, seconds since the run started.
func (r *RunDir) Faults() []Fault {
	raw, ok := r.Raw["faults"].([]any)
	if !ok {
		return nil
	}
	var out []Fault
	for _, e := range raw {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		f := Fault{Name: str(m["fault"]), Action: str(m["action"]), Node: int(num(m["node"])), Error: str(m["error"])}
		applied, ended := num(m["applied_s"]), num(m["ended_s"])
		if applied == 0 && ended == 0 {
			applied = num(m["at_s"])
			ended = applied + num(m["for_s"])
		}
		if ended < applied {
			ended = applied
		}
		from := applied
		if at, err := time.Parse(time.RFC3339Nano, str(m["applied_at"])); err == nil && !at.IsZero() {
			from = at.Sub(r.Start()).Seconds()
		}
		f.FromS, f.ToS = from, from+(ended-applied)
		if f.Name == "" {
			f.Name = f.Action
		}
		out = append(out, f)
	}
	return out
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func num(v any) float64 {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		if err == nil && !math.IsNaN(f) {
			return f
		}
	case float64:
		return n
	}
	return 0
}

// Input is one directory given to the report: a run, a sweep, a compare, or
// a directory of runs.
type Input struct {
	// Kind is "run", "sweep", "compare" or "runs" (a directory holding run
	// directories, such as results/runs).
	Kind string
	// Dir is the directory as given.
	Dir string
	// Title names the input in the report.
	Title string
	// Runs are the run directories it holds, in order (one for a run).
	Runs []*RunDir
	// Sweep is sweep.json, for a sweep.
	Sweep *Sweep
	// Comparison is compare.json, for a compare; nil if it could not be
	// read, in which case the runs are the run directories below.
	Comparison *Comparison
	// Notes say what was missing.
	Notes []string
}

// LoadInput reads a directory and tells what it is by the files present:
// sweep.json (a sweep), compare.json (a compare), summary.json (a run), or
// none of these but run directories below it (a set of runs).
func LoadInput(dir string) (*Input, error) {
	in := &Input{Dir: dir, Title: filepath.Base(filepath.Clean(dir))}
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("results: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("results: %s is not a directory", dir)
	}
	switch {
	case exists(SweepJSON):
		in.Kind = "sweep"
		b, err := os.ReadFile(filepath.Join(dir, SweepJSON))
		if err != nil {
			return nil, fmt.Errorf("results: %w", err)
		}
		if in.Sweep, err = ReadSweepJSON(bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("results: %s: %w", filepath.Join(dir, SweepJSON), err)
		}
		in.Title = "sweep " + in.Sweep.Label
		for _, p := range in.Sweep.Points {
			r, err := LoadRunDir(filepath.Join(dir, p.Dir))
			if err != nil {
				in.Notes = append(in.Notes, fmt.Sprintf("step %d: %v", p.Index+1, err))
				continue
			}
			in.Runs = append(in.Runs, r)
		}
	case exists(CompareJSON):
		in.Kind = "compare"
		b, err := os.ReadFile(filepath.Join(dir, CompareJSON))
		if err != nil {
			return nil, fmt.Errorf("results: %w", err)
		}
		in.Title = "compare " + in.Title
		cmp, err := ReadCompareJSON(bytes.NewReader(b))
		if err != nil || len(cmp.Runs) == 0 {
			if err != nil {
				in.Notes = append(in.Notes, fmt.Sprintf("%s: %v; using the run directories below it", filepath.Join(dir, CompareJSON), err))
			}
			if cmp != nil && cmp.Label != "" {
				in.Title = "compare " + cmp.Label
			}
			if err := in.loadRunsBelow(); err != nil {
				return nil, err
			}
			break
		}
		in.Comparison = cmp
		if cmp.Label != "" {
			in.Title = "compare " + cmp.Label
		}
		for _, cr := range cmp.Runs {
			r, err := LoadRunDir(filepath.Join(dir, cr.Dir))
			if err != nil {
				in.Notes = append(in.Notes, fmt.Sprintf("round %d %s: %v", cr.Round, cr.Engine, err))
				continue
			}
			in.Runs = append(in.Runs, r)
		}
	case exists(SummaryJSON):
		in.Kind = "run"
		r, err := LoadRunDir(dir)
		if err != nil {
			return nil, err
		}
		in.Runs = []*RunDir{r}
		in.Title = r.Name()
		if _, err := os.Stat(filepath.Join(dir, MergeJSON)); err == nil {
			in.Title = "merged " + in.Title
		}
	default:
		in.Kind = "runs"
		if err := in.loadRunsBelow(); err != nil {
			return nil, err
		}
	}
	if len(in.Runs) == 0 {
		return nil, fmt.Errorf("results: %s holds no run: want a directory with %s, %s or %s, or run directories below it",
			dir, SummaryJSON, SweepJSON, CompareJSON)
	}
	for _, r := range in.Runs {
		in.Notes = append(in.Notes, r.Notes...)
	}
	return in, nil
}

// loadRunsBelow finds the run directories (with summary.json) up to two
// levels below the input's directory, in name order.
func (in *Input) loadRunsBelow() error {
	root := filepath.Clean(in.Dir)
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable corners are skipped
		}
		if !d.IsDir() || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if strings.Count(rel, string(filepath.Separator)) >= 2 {
			return fs.SkipDir
		}
		if _, err := os.Stat(filepath.Join(p, SummaryJSON)); err == nil {
			dirs = append(dirs, p)
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	sort.Strings(dirs)
	var errs []error
	for _, d := range dirs {
		r, err := LoadRunDir(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		in.Runs = append(in.Runs, r)
	}
	if len(in.Runs) == 0 && len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, e := range errs {
		in.Notes = append(in.Notes, e.Error())
	}
	return nil
}
