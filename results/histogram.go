package results

import (
	"math"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram geometry shared by every run. Keeping it fixed is what makes
// histograms from different runs and machines mergeable without loss.
const (
	// LowestUs is the lowest discernible value, in microseconds.
	LowestUs int64 = 1
	// HighestUs is the highest trackable value, one hour in microseconds.
	// Longer values are recorded as HighestUs rather than dropped.
	HighestUs int64 = 3_600_000_000
	// SigFigs is the number of significant decimal digits kept.
	SigFigs = 3
)

// NewHistogram returns an empty histogram with the shared geometry.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(LowestUs, HighestUs, SigFigs)
}

// Kind names one of the histograms a run keeps apart.
type Kind int

// The histograms of a run. Their String values are the tags used in .hlog
// files and the base names of .hgrm files.
const (
	// Acquire is the latency of successful acquire attempts (mode try).
	Acquire Kind = iota
	// AcquireFail is the latency of failed acquire attempts: refused because
	// held, errors, and waits that timed out.
	AcquireFail
	// Wait is the time from asking for a lock to holding it (mode wait).
	Wait
	// Release is the latency of Release calls.
	Release
	// Hold is the time a lock was actually held before release began.
	Hold
	// Handoff is the time from one holder's release to the next holder's
	// acquisition of the same resource, when the next holder was already
	// waiting for it (mode wait). Added after the others, so that the tags
	// and indices of older kinds never change.
	Handoff
	// NumKinds is the number of kinds; it is not a kind.
	NumKinds
)

// String returns the tag of the kind, e.g. "acquire_fail".
func (k Kind) String() string {
	switch k {
	case Acquire:
		return "acquire"
	case AcquireFail:
		return "acquire_fail"
	case Wait:
		return "wait"
	case Release:
		return "release"
	case Hold:
		return "hold"
	case Handoff:
		return "handoff"
	}
	return "unknown"
}

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, bool) {
	for k := Kind(0); k < NumKinds; k++ {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// Set holds one histogram per Kind. It is not safe for concurrent use: the
// recorder guards each Set with its own mutex.
type Set [NumKinds]*hdrhistogram.Histogram

// NewSet returns a Set of empty histograms.
func NewSet() *Set {
	var s Set
	for i := range s {
		s[i] = NewHistogram()
	}
	return &s
}

// Record adds one duration to the histogram of kind k. Negative durations
// count as zero and durations past HighestUs as HighestUs, so that no sample
// is ever silently dropped.
func (s *Set) Record(k Kind, d time.Duration) {
	s.RecordUs(k, int64(d/time.Microsecond))
}

// RecordUs adds one value in microseconds, clamped like Record.
func (s *Set) RecordUs(k Kind, us int64) {
	if us < 0 {
		us = 0
	} else if us > HighestUs {
		us = HighestUs
	}
	// Cannot fail: the value is within the trackable range.
	_ = s[k].RecordValue(us)
}

// Merge adds every count of o into s. Both use the shared geometry, so
// nothing is dropped.
func (s *Set) Merge(o *Set) {
	for i := range s {
		s[i].Merge(o[i])
	}
}

// Reset empties every histogram, keeping the memory for reuse.
func (s *Set) Reset() {
	for _, h := range s {
		h.Reset()
	}
}

// Stats are the percentiles of one histogram, in microseconds. The JSON
// names are part of summary.json.
type Stats struct {
	Count int64   `json:"count"`
	P50   int64   `json:"p50"`
	P90   int64   `json:"p90"`
	P99   int64   `json:"p99"`
	P999  int64   `json:"p999"`
	Max   int64   `json:"max"`
	Mean  float64 `json:"mean"`
}

// StatsOf computes Stats from a histogram. An empty histogram gives zeros.
func StatsOf(h *hdrhistogram.Histogram) Stats {
	if h == nil || h.TotalCount() == 0 {
		return Stats{}
	}
	v := h.ValueAtPercentilesSlice([]float64{50, 90, 99, 99.9})
	return Stats{
		Count: h.TotalCount(),
		P50:   v[0],
		P90:   v[1],
		P99:   v[2],
		P999:  v[3],
		Max:   h.Max(),
		// Three decimals (nanoseconds) is all the precision there is.
		Mean: math.Round(h.Mean()*1000) / 1000,
	}
}
