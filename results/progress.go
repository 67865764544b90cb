package results

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Progress is one interval's figures for the once-a-second progress line.
// Every figure is the interval's, so that a bad second shows as one; only
// the violations also give their running total.
type Progress struct {
	// Elapsed is the time since the measured window began, or since the
	// start during warm-up; Total the planned window (0 when the run is
	// bounded by a number of operations).
	Elapsed, Total time.Duration
	// Warmup marks a line from the warm-up, whose figures are discarded.
	Warmup bool
	// Interval is the span the figures cover.
	Interval time.Duration
	// Acquired, P99Us (acquire, or wait in mode wait) and Errors are the
	// interval's.
	Acquired, P99Us, Errors int64
	// NewViolations are the interval's, Violations the run's so far.
	Violations, NewViolations int64
	// OpenLoop shows Backlog, the operations due but not started now.
	OpenLoop bool
	Backlog  int64
	// Faults are the injected faults in effect during the interval, as
	// written in the schedule ("pause:1@300ms+300ms"); empty for none.
	Faults []string
}

// String renders the line, without a line break, e.g.
// "[   3s/10s] last 1s: acquired/s 8412  p99 1.50ms  errors 0".
func (p Progress) String() string {
	var when string
	switch {
	case p.Warmup:
		when = fmt.Sprintf("warm-up %4.0fs", p.Elapsed.Seconds())
	case p.Total > 0:
		when = fmt.Sprintf("%4.0fs/%.0fs", p.Elapsed.Seconds(), p.Total.Seconds())
	default:
		when = fmt.Sprintf("%4.0fs", p.Elapsed.Seconds())
	}
	rate := 0.0
	if p.Interval > 0 {
		rate = float64(p.Acquired) / p.Interval.Seconds()
	}
	p99 := "-"
	if p.P99Us > 0 || p.Acquired > 0 {
		p99 = FormatUs(p.P99Us)
	}
	s := fmt.Sprintf("[%s] last %s: acquired/s %.0f  p99 %s  errors %d", when, p.Interval.Round(100*time.Millisecond), rate, p99, p.Errors)
	if p.Violations > 0 {
		s += fmt.Sprintf("  VIOLATIONS %d (%d in all)", p.NewViolations, p.Violations)
	}
	if p.OpenLoop {
		s += fmt.Sprintf("  backlog now %d", p.Backlog)
	}
	if len(p.Faults) > 0 {
		s += "  faults " + strings.Join(p.Faults, ",")
	}
	return s
}

// ProgressWriter prints progress lines. On a terminal it rewrites one line
// in place; elsewhere (a file, a CI log) it writes one line per update, so
// that logs stay readable. A nil *ProgressWriter prints nothing.
type ProgressWriter struct {
	w       io.Writer
	inPlace bool
	pending bool
}

// NewProgressWriter returns a writer to w, or nil when w is nil; inPlace
// should be true only when w is a terminal.
func NewProgressWriter(w io.Writer, inPlace bool) *ProgressWriter {
	if w == nil {
		return nil
	}
	return &ProgressWriter{w: w, inPlace: inPlace}
}

// Line prints s as the current progress line.
func (pw *ProgressWriter) Line(s string) {
	if pw == nil {
		return
	}
	if pw.inPlace {
		// \r returns to column 0 and ESC[K clears what a longer line left.
		fmt.Fprintf(pw.w, "\r%s\x1b[K", s)
		pw.pending = true
		return
	}
	fmt.Fprintln(pw.w, s)
}

// Done ends an in-place line, so that what follows starts on its own line.
func (pw *ProgressWriter) Done() {
	if pw != nil && pw.pending {
		fmt.Fprintln(pw.w)
		pw.pending = false
	}
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
