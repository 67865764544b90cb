package results

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// File names inside a run directory.
const (
	SummaryText    = "summary.txt"
	SummaryJSON    = "summary.json"
	IntervalsLog   = "intervals.hlog"
	HistogramsLog  = "histograms.hlog"
	hgrmFileSuffix = ".hgrm"
)

// HgrmFile is the name of the percentile distribution file of kind k,
// e.g. "acquire.hgrm".
func HgrmFile(k Kind) string { return k.String() + hgrmFileSuffix }

// Run is what one run leaves in its directory: its summary, the
// histograms of its measured window, and its seconds.
type Run struct {
	Summary    *Summary
	Histograms *Set
	// Intervals are the run's seconds, warm-up included, for
	// intervals.json.
	Intervals []Interval
}

// WriteDir writes the end-of-run files of a run directory into dir, which
// must exist: summary.txt, summary.json, intervals.json, the .hgrm file of
// every kind (wait.hgrm only when the run used mode wait or recorded
// waits, handoff.hgrm only when it recorded handoffs), and
// histograms.hlog, the full histograms of the measured window for
// merging. Each file is written through a temporary one (see WriteFile).
// The interval log is written while the run lasts and is not touched
// here. It is the one writer of a run directory, for run, sweep and
// compare alike.
func (r *Run) WriteDir(dir string) error {
	s, set := r.Summary, r.Histograms
	dw := &dirWriter{dir: dir}
	write := dw.write
	write(SummaryText, func(b *bytes.Buffer) error { return WriteText(b, s) })
	write(SummaryJSON, func(b *bytes.Buffer) error { return WriteJSON(b, s) })
	write(IntervalsJSON, func(b *bytes.Buffer) error { return WriteIntervals(b, r.Intervals) })
	for k := Kind(0); k < NumKinds; k++ {
		if k == Wait && s.Mode != "wait" && set[k].TotalCount() == 0 {
			continue
		}
		if k == Handoff && set[k].TotalCount() == 0 {
			continue
		}
		write(HgrmFile(k), func(b *bytes.Buffer) error { return WriteHgrm(b, set[k]) })
	}
	start := s.StartedAt.Add(time.Duration(s.WarmupS * float64(time.Second)))
	end := start.Add(time.Duration(s.DurationS * float64(time.Second)))
	write(HistogramsLog, func(b *bytes.Buffer) error {
		l, err := NewIntervalLog(b, start, "cumulative histograms of the measured window, one line per kind")
		if err != nil {
			return err
		}
		return WriteSet(l, set, start, end)
	})
	return errors.Join(dw.errs...)
}

// WriteRun writes a run directory for a summary with no per-second record
// (its intervals.json is empty): Run.WriteDir.
func WriteRun(dir string, s *Summary, set *Set) error {
	return (&Run{Summary: s, Histograms: set}).WriteDir(dir)
}

// WriteFile writes the file name in dir, filled in memory by fill, through
// a temporary file renamed into place, so that a reader (a report of a
// sweep still running, a second run) never sees half a file.
func WriteFile(dir, name string, fill func(*bytes.Buffer) error) error {
	var b bytes.Buffer
	if err := fill(&b); err != nil {
		return fmt.Errorf("results: %s: %w", name, err)
	}
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// dirWriter writes files into one directory, each filled in memory first,
// and keeps every error so that one bad file does not stop the others.
type dirWriter struct {
	dir  string
	errs []error
}

func (w *dirWriter) write(name string, fill func(*bytes.Buffer) error) {
	if err := WriteFile(w.dir, name, fill); err != nil {
		w.errs = append(w.errs, err)
	}
}
