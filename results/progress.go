package results

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Progress is what the once-a-second progress line shows.
type Progress struct {
	// Elapsed is the time since the measured window began, or since the
	// start during warm-up.
	Elapsed time.Duration
	// Total is the planned measured duration; zero when the run is bounded
	// by a number of operations instead.
	Total time.Duration
	// Warmup marks a line from the warm-up, whose figures are discarded.
	Warmup bool
	// AcquiredPerSec is the rate over the last interval.
	AcquiredPerSec float64
	// P99Us is the 99th percentile of acquire (or wait) latency so far.
	P99Us int64
	// Errors is the number of errors so far; Violations likewise.
	Errors     int64
	Violations int64
	// OpenLoop shows Backlog, the operations due but not yet started.
	OpenLoop bool
	Backlog  int64
	// Faults are the injected faults in effect during the interval, as
	// written in the schedule ("pause:1@300ms+300ms"); empty for none.
	Faults []string
}

// ProgressWriter prints Progress lines. On a terminal it rewrites one line
// in place; elsewhere (a file, a CI log) it writes one line per update, so
// that logs stay readable.
type ProgressWriter struct {
	w       io.Writer
	inPlace bool
	pending bool
}

// NewProgressWriter returns a writer to w; inPlace should be true only when
// w is a terminal.
func NewProgressWriter(w io.Writer, inPlace bool) *ProgressWriter {
	return &ProgressWriter{w: w, inPlace: inPlace}
}

// Update prints p.
func (pw *ProgressWriter) Update(p Progress) {
	if pw == nil || pw.w == nil {
		return
	}
	line := FormatProgress(p)
	if pw.inPlace {
		// \r returns to column 0 and ESC[K clears what a longer line left.
		fmt.Fprintf(pw.w, "\r%s\x1b[K", line)
		pw.pending = true
		return
	}
	fmt.Fprintln(pw.w, line)
}

// Done ends an in-place line, so that what follows starts on its own line.
func (pw *ProgressWriter) Done() {
	if pw != nil && pw.pending {
		fmt.Fprintln(pw.w)
		pw.pending = false
	}
}

// FormatProgress renders one progress line, without a line break.
func FormatProgress(p Progress) string {
	var when string
	switch {
	case p.Warmup:
		when = fmt.Sprintf("warm-up %4.0fs", p.Elapsed.Seconds())
	case p.Total > 0:
		when = fmt.Sprintf("%4.0fs/%.0fs", p.Elapsed.Seconds(), p.Total.Seconds())
	default:
		when = fmt.Sprintf("%4.0fs", p.Elapsed.Seconds())
	}
	s := fmt.Sprintf("[%s] acquired/s %9.0f  p99 %s  errors %d", when, p.AcquiredPerSec, FormatUs(p.P99Us), p.Errors)
	if p.Violations > 0 {
		s += fmt.Sprintf("  VIOLATIONS %d", p.Violations)
	}
	if p.OpenLoop {
		s += fmt.Sprintf("  backlog %d", p.Backlog)
	}
	if len(p.Faults) > 0 {
		s += "  faults " + strings.Join(p.Faults, ",")
	}
	return s
}

// FormatUs renders microseconds with a unit a person reads at a glance.
func FormatUs(us int64) string {
	switch {
	case us < 1000:
		return fmt.Sprintf("%dµs", us)
	case us < 1_000_000:
		return fmt.Sprintf("%.2fms", float64(us)/1e3)
	default:
		return fmt.Sprintf("%.2fs", float64(us)/1e6)
	}
}
