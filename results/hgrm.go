package results

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// HgrmTicks is the number of reporting ticks per half distance to 100%,
// as in HdrHistogram's own tools.
const HgrmTicks = 5

// HgrmScale converts recorded microseconds to the milliseconds that .hgrm
// readers (the HdrHistogram plotter, wrk2) expect in the Value column.
const HgrmScale = 1000.0

// WriteHgrm writes h as the standard HdrHistogram percentile distribution
// text, with values in milliseconds.
func WriteHgrm(w io.Writer, h *hdrhistogram.Histogram) error {
	_, err := h.PercentilesPrint(w, HgrmTicks, HgrmScale)
	return err
}

// HgrmLine is one row of a percentile distribution.
type HgrmLine struct {
	// Value is in the file's unit (milliseconds for files we write).
	Value      float64
	Percentile float64 // 0..1
	TotalCount int64
}

// Hgrm is a parsed percentile distribution.
type Hgrm struct {
	Lines      []HgrmLine
	Mean       float64
	StdDev     float64
	Max        float64
	TotalCount int64
}

// ValueAt returns the value of the first line at or above quantile q
// (0..1), and false if there is none. For a quantile that is one of the
// file's ticks (0.5, 0.9, ...) this is exact; between ticks it is the value
// of the next tick up.
func (g *Hgrm) ValueAt(q float64) (float64, bool) {
	for _, l := range g.Lines {
		if l.Percentile >= q {
			return l.Value, true
		}
	}
	return 0, false
}

// ParseHgrm reads the text WriteHgrm (or any HdrHistogram tool) writes.
func ParseHgrm(r io.Reader) (*Hgrm, error) {
	g := &Hgrm{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "", strings.HasPrefix(line, "Value"):
			continue
		case strings.HasPrefix(line, "#[Mean"):
			if _, err := fmt.Sscanf(line, "#[Mean = %f, StdDeviation = %f]", &g.Mean, &g.StdDev); err != nil {
				return nil, fmt.Errorf("results: hgrm line %d: %q: %w", n, line, err)
			}
		case strings.HasPrefix(line, "#[Max"):
			if _, err := fmt.Sscanf(line, "#[Max = %f, Total count = %d]", &g.Max, &g.TotalCount); err != nil {
				return nil, fmt.Errorf("results: hgrm line %d: %q: %w", n, line, err)
			}
		case strings.HasPrefix(line, "#"):
			continue
		default:
			f := strings.Fields(line)
			if len(f) != 4 {
				return nil, fmt.Errorf("results: hgrm line %d: want 4 columns, got %q", n, line)
			}
			v, err1 := strconv.ParseFloat(f[0], 64)
			p, err2 := strconv.ParseFloat(f[1], 64)
			c, err3 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil || err3 != nil {
				return nil, fmt.Errorf("results: hgrm line %d: bad number in %q", n, line)
			}
			g.Lines = append(g.Lines, HgrmLine{Value: v, Percentile: p, TotalCount: c})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("results: read hgrm: %w", err)
	}
	return g, nil
}
