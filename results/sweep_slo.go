package results

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// SLO is a latency objective on one percentile, such as "p99<5ms": the
// 99th percentile must stay below 5 ms. Its JSON form is part of
// sweep.json. It is made from an Objective (Objective.SLO), whose parser
// reads every --slo.
type SLO struct {
	// Percentile names the percentile: "p50", "p90", "p99" or "p999".
	Percentile string `json:"percentile"`
	// LimitUs is the limit in microseconds.
	LimitUs float64 `json:"limit_us"`
	// Inclusive is true for "<=": a value equal to the limit meets it.
	Inclusive bool `json:"inclusive"`
	// Text is the objective as String writes it, e.g. "p99<5ms".
	Text string `json:"text"`
}

// sloPercentiles are the percentiles an SLO may name, each a field of Stats.
var sloPercentiles = []string{"p50", "p90", "p99", "p999"}

// parseLimitUs reads "5ms", "800us", "800µs", "1.5s" as microseconds.
func parseLimitUs(s string) (float64, error) {
	var num string
	var scale float64
	switch {
	case strings.HasSuffix(s, "µs"):
		num, scale = strings.TrimSuffix(s, "µs"), 1
	case strings.HasSuffix(s, "μs"): // Greek mu, as some keyboards type it
		num, scale = strings.TrimSuffix(s, "μs"), 1
	case strings.HasSuffix(s, "us"):
		num, scale = strings.TrimSuffix(s, "us"), 1
	case strings.HasSuffix(s, "ms"):
		num, scale = strings.TrimSuffix(s, "ms"), 1e3
	case strings.HasSuffix(s, "s"):
		num, scale = strings.TrimSuffix(s, "s"), 1e6
	default:
		num := strings.TrimRightFunc(s, unicode.IsLetter)
		if unit := s[len(num):]; unit != "" && num != "" {
			return 0, fmt.Errorf("limit %q: unknown unit %q (µs, us, ms or s)", s, unit)
		}
		return 0, fmt.Errorf("limit %q has no unit", s)
	}
	num = strings.TrimSpace(num)
	// Only plain decimals: no signs, exponents, hex, Inf or NaN.
	if num == "" || strings.Trim(num, "0123456789.") != "" || strings.Count(num, ".") > 1 || num == "." {
		return 0, fmt.Errorf("limit %q is not a plain positive number", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("limit %q is not a number", s)
	}
	us := v * scale
	if !(us >= float64(LowestUs)) || us > float64(HighestUs) || math.IsInf(us, 0) {
		return 0, fmt.Errorf("limit %q must be from 1µs (the histograms' resolution) to 1h", s)
	}
	return us, nil
}

// String writes the objective so that ParseObjective reads it back
// unchanged, in the largest unit that keeps the limit exact: "p99<5ms".
func (o SLO) String() string {
	op := "<"
	if o.Inclusive {
		op = "<="
	}
	return o.Percentile + op + FormatLimitUs(o.LimitUs)
}

// FormatLimitUs writes a limit in microseconds with the largest unit that
// keeps it exact: 5000 is "5ms", 1500000 "1.5s", 250 "250µs".
func FormatLimitUs(us float64) string {
	for _, u := range []struct {
		name  string
		scale float64
	}{{"s", 1e6}, {"ms", 1e3}} {
		if us < u.scale {
			continue
		}
		t := strconv.FormatFloat(us/u.scale, 'f', -1, 64)
		if back, err := strconv.ParseFloat(t, 64); err == nil && back*u.scale == us && len(t) <= 8 {
			return t + u.name
		}
	}
	return strconv.FormatFloat(us, 'f', -1, 64) + "µs"
}

// Value picks the objective's percentile out of st, in microseconds.
func (o SLO) Value(st Stats) int64 {
	switch o.Percentile {
	case "p50":
		return st.P50
	case "p90":
		return st.P90
	case "p99":
		return st.P99
	case "p999":
		return st.P999
	}
	return 0
}

// Met reports whether st meets the objective. An empty histogram meets
// nothing: no measurement is no evidence.
func (o SLO) Met(st Stats) bool {
	if st.Count == 0 {
		return false
	}
	v := float64(o.Value(st))
	if o.Inclusive {
		return v <= o.LimitUs
	}
	return v < o.LimitUs
}

// Quantile is the objective's percentile as a fraction: 0.99 for p99.
func (o SLO) Quantile() float64 {
	switch o.Percentile {
	case "p50":
		return 0.5
	case "p90":
		return 0.9
	case "p99":
		return 0.99
	case "p999":
		return 0.999
	}
	return 0
}
