package bench

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// MaxSweepSteps bounds the number of values a sweep may take, so that a
// typo such as 1:1000000:+1 fails at once instead of running for days.
const MaxSweepSteps = 100

// maxSweepGenerated bounds the values a range may generate before integer
// rounding merges neighbours (1:64:x1.01 generates 419 and keeps 64).
const maxSweepGenerated = 100 * MaxSweepSteps

// errSweepSyntax explains the forms ParseSweepValues accepts.
var errSweepSyntax = errors.New("want a list (1,4,16,64), START:END:xFACTOR (1:1024:x4, geometric) or START:END:+STEP (1000:5000:+1000, arithmetic)")

// ParseSweepValues parses the values of a swept flag:
//
//   - a comma-separated list, "1,4,16,64" (sorted; duplicates rejected);
//   - "START:END:xFACTOR", geometric: START, START×FACTOR, ... while ≤ END;
//   - "START:END:+STEP", arithmetic: START, START+STEP, ... while ≤ END.
//
// In both ranges END is the last value even when the steps do not land on
// it, so that the sweep reaches the load asked for. With integer set (for
// --workers) values are rounded to whole numbers and duplicates that the
// rounding makes are dropped. Every value must be > 0, and there may be at
// most MaxSweepSteps.
func ParseSweepValues(s string, integer bool) ([]float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errSweepSyntax
	}
	var vals []float64
	if strings.Contains(s, ":") {
		parts := strings.Split(s, ":")
		if len(parts) != 3 || len(parts[2]) < 2 {
			return nil, errSweepSyntax
		}
		start, err1 := parseSweepNumber(parts[0])
		end, err2 := parseSweepNumber(parts[1])
		by, err3 := parseSweepNumber(parts[2][1:])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("%v: %w", err, errSweepSyntax)
		}
		if end < start {
			return nil, fmt.Errorf("END %g is below START %g", end, start)
		}
		switch parts[2][0] {
		case 'x', 'X', '*':
			if by <= 1 {
				return nil, fmt.Errorf("FACTOR must be > 1, got %g", by)
			}
			for v := start; v <= end*(1+1e-9); v *= by {
				vals = append(vals, v)
				if len(vals) > maxSweepGenerated {
					return nil, fmt.Errorf("more than %d values; use a larger step", MaxSweepSteps)
				}
			}
		case '+':
			for i := 0; ; i++ {
				v := start + float64(i)*by
				if v > end*(1+1e-9) {
					break
				}
				vals = append(vals, v)
				if len(vals) > maxSweepGenerated {
					return nil, fmt.Errorf("more than %d values; use a larger step", MaxSweepSteps)
				}
			}
		default:
			return nil, fmt.Errorf("step %q must start with x (geometric) or + (arithmetic): %w", parts[2], errSweepSyntax)
		}
		if last := vals[len(vals)-1]; last < end*(1-1e-9) {
			vals = append(vals, end)
		} else {
			vals[len(vals)-1] = end // exactly END, whatever the rounding
		}
	} else {
		for _, f := range strings.Split(s, ",") {
			v, err := parseSweepNumber(f)
			if err != nil {
				return nil, fmt.Errorf("%v: %w", err, errSweepSyntax)
			}
			vals = append(vals, v)
		}
		sort.Float64s(vals)
		for i := 1; i < len(vals); i++ {
			if vals[i] == vals[i-1] {
				return nil, fmt.Errorf("value %g is listed twice", vals[i])
			}
		}
	}
	if integer {
		out := vals[:0]
		for _, v := range vals {
			r := math.Round(v)
			if r < 1 {
				return nil, fmt.Errorf("value %g rounds to %g; each must be a whole number >= 1", v, r)
			}
			if len(out) == 0 || out[len(out)-1] != r {
				out = append(out, r)
			}
		}
		vals = out
	} else {
		for i, v := range vals {
			// Six significant digits: 1000:5000:x1.1 gives 1331, not 1331.0000000000005.
			vals[i], _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
		}
	}
	if len(vals) > MaxSweepSteps {
		return nil, fmt.Errorf("more than %d values; use a larger step", MaxSweepSteps)
	}
	return vals, nil
}

// parseSweepNumber reads one positive, finite number.
func parseSweepNumber(s string) (float64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v <= 0 || v > 1e12 {
		return 0, fmt.Errorf("%q must be > 0 (and at most 1e12)", s)
	}
	return v, nil
}

// FormatSweepValue writes a value as it would be typed: 64, 2500, 1331.5.
func FormatSweepValue(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
