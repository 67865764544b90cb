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

// WriteRun writes the end-of-run files into dir, which must exist:
// summary.txt, summary.json, the .hgrm file of every kind (wait.hgrm only
// when the run used mode wait or recorded waits, handoff.hgrm only when it
// recorded handoffs), and histograms.hlog, the
// full histograms of the measured window for merging. The interval log is
// written while the run lasts and is not touched here.
func WriteRun(dir string, s *Summary, set *Set) error {
	dw := &dirWriter{dir: dir}
	write := dw.write
	write(SummaryText, func(b *bytes.Buffer) error { return WriteText(b, s) })
	write(SummaryJSON, func(b *bytes.Buffer) error { return WriteJSON(b, s) })
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

// dirWriter writes files into one directory, each filled in memory first,
// and keeps every error so that one bad file does not stop the others.
type dirWriter struct {
	dir  string
	errs []error
}

func (w *dirWriter) write(name string, fill func(*bytes.Buffer) error) {
	var b bytes.Buffer
	if err := fill(&b); err != nil {
		w.errs = append(w.errs, fmt.Errorf("results: %s: %w", name, err))
		return
	}
	if err := os.WriteFile(filepath.Join(w.dir, name), b.Bytes(), 0o644); err != nil {
		w.errs = append(w.errs, fmt.Errorf("results: %w", err))
	}
}
