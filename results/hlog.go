package results

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// IntervalLog writes an HdrHistogram interval log (.hlog, format 1.3).
// Each line holds one tagged histogram, V2-compressed and base64-encoded,
// so a reader recovers the exact counts. The library's own writer reports
// the per-interval max as if values were nanoseconds; ours are
// microseconds, so the line is written here, with the max in milliseconds.
type IntervalLog struct {
	w    io.Writer
	base time.Time
	err  error
}

// NewIntervalLog writes the log header. Interval start times are written as
// seconds since base, which is also recorded as the log's StartTime and
// BaseTime. comment lines (without '#') are written after the header.
func NewIntervalLog(w io.Writer, base time.Time, comments ...string) (*IntervalLog, error) {
	l := &IntervalLog{w: w, base: base}
	ms := base.UnixMilli()
	l.printf("#[Histogram log format version %s]\n", hdrhistogram.HISTOGRAM_LOG_FORMAT_VERSION)
	l.printf("#[StartTime: %.3f (seconds since epoch), %s]\n", float64(ms)/1000, base.UTC().Format(time.RFC3339Nano))
	l.printf("#[BaseTime: %.3f (seconds since epoch)]\n", float64(ms)/1000)
	l.printf("#[Values are microseconds; Interval_Max is in milliseconds]\n")
	for _, c := range comments {
		for _, line := range strings.Split(c, "\n") {
			l.printf("#[%s]\n", line)
		}
	}
	l.printf("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n")
	return l, l.err
}

// Write appends the histogram h, covering [start, end), under tag.
func (l *IntervalLog) Write(tag string, start, end time.Time, h *hdrhistogram.Histogram) error {
	if l.err != nil {
		return l.err
	}
	if tag == "" || strings.ContainsAny(tag, ", \r\n") {
		return fmt.Errorf("results: hlog tag %q must be non-empty, without commas, spaces or line breaks", tag)
	}
	payload, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return fmt.Errorf("results: encode histogram %s: %w", tag, err)
	}
	s := start.Sub(l.base).Seconds()
	d := end.Sub(start).Seconds()
	var maxMs float64
	if h.TotalCount() > 0 {
		maxMs = float64(h.Max()) / HgrmScale
	}
	l.printf("Tag=%s,%.3f,%.3f,%.3f,%s\n", tag, s, d, maxMs, payload)
	return l.err
}

func (l *IntervalLog) printf(format string, a ...any) {
	if l.err == nil {
		_, l.err = fmt.Fprintf(l.w, format, a...)
	}
}

// Tagged is one histogram read back from an interval log.
type Tagged struct {
	Tag       string
	Histogram *hdrhistogram.Histogram
}

// ReadIntervalLog reads every histogram of an interval log, in order.
func ReadIntervalLog(r io.Reader) ([]Tagged, error) {
	lr := hdrhistogram.NewHistogramLogReader(r)
	var out []Tagged
	for {
		h, err := lr.NextIntervalHistogram()
		if err != nil {
			return out, fmt.Errorf("results: read hlog: %w", err)
		}
		if h == nil {
			return out, nil
		}
		out = append(out, Tagged{Tag: h.Tag(), Histogram: h})
	}
}

// WriteSet writes the non-nil histograms of set that are in use, one line
// per kind, each covering [start, end). It is how the cumulative histograms
// of a run are kept (histograms.hlog) so that runs can be merged later.
func WriteSet(l *IntervalLog, set *Set, start, end time.Time) error {
	for k := Kind(0); k < NumKinds; k++ {
		if err := l.Write(k.String(), start, end, set[k]); err != nil {
			return err
		}
	}
	return nil
}

// ReadSet reads histograms.hlog back into a Set, merging lines of the same
// kind. Unknown tags are an error: they mean a newer writer.
func ReadSet(r io.Reader) (*Set, error) {
	tagged, err := ReadIntervalLog(r)
	if err != nil {
		return nil, err
	}
	set := NewSet()
	for _, t := range tagged {
		k, ok := ParseKind(t.Tag)
		if !ok {
			return nil, fmt.Errorf("results: unknown histogram tag %q", t.Tag)
		}
		if t.Histogram.LowestTrackableValue() != LowestUs || t.Histogram.SignificantFigures() != SigFigs {
			return nil, errors.New("results: histogram geometry differs from this version's; cannot merge losslessly")
		}
		if dropped := set[k].Merge(t.Histogram); dropped > 0 {
			return nil, fmt.Errorf("results: %d values of %s are out of range", dropped, t.Tag)
		}
	}
	return set, nil
}
