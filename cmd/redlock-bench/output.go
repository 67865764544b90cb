package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/results"
)

// outputFlags are how a command that measures prints its result: the
// whole text (the default), --json or -q.
type outputFlags struct {
	json  bool
	quiet bool
}

// register adds --json and -q/--quiet to fs; file names the JSON printed,
// quiet says what -q prints.
func (o *outputFlags) register(fs *pflag.FlagSet, file, quiet string) {
	fs.BoolVar(&o.json, "json", false, "print "+file+" on stdout, and nothing else (the rest goes to stderr)")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, quiet)
}

func (o *outputFlags) check() error {
	if o.json && o.quiet {
		return badFlag("quiet", "true", "cannot be combined with --json")
	}
	return nil
}

// shown is a result in the three forms outputFlags choose from.
type shown struct {
	json  func(io.Writer) error
	lines func() []string
	text  func(io.Writer) error
	// after follows the text's "results: DIR" line; empty for nothing.
	after string
}

// show prints r as the flags ask, and where the results are: after the
// text, or on stderr with --json, so that stdout is the JSON alone.
func (o *outputFlags) show(stdout, stderr io.Writer, dir string, r shown) error {
	switch {
	case o.json:
		if err := r.json(stdout); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "redlock-bench: results: %s\n", dir)
	case o.quiet:
		for _, l := range r.lines() {
			fmt.Fprintln(stdout, l)
		}
	default:
		if err := r.text(stdout); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nresults: %s\n%s", dir, r.after)
	}
	return nil
}

// sloFlags are the objectives of --slo, repeated, that a run (or every run
// of a comparison) must meet.
type sloFlags struct {
	texts      []string
	objectives []results.Objective
}

func (o *sloFlags) register(fs *pflag.FlagSet, usage string) {
	fs.StringArrayVar(&o.texts, "slo", nil, usage)
}

// parse reads the objectives and refuses one that a run of c cannot
// measure.
func (o *sloFlags) parse(c bench.Config) error {
	var err error
	if o.objectives, err = results.ParseObjectives(o.texts); err != nil {
		return usageErrorf("--slo: %v", err)
	}
	return measurable(c, o.objectives)
}

// missedObjectives prints each objective missed (by the runs of a
// comparison, or the inputs of a report) on stderr, and returns the SLO
// status, with msg, when there was any.
func missedObjectives(stderr io.Writer, prefix string, misses []string, msg string) error {
	for _, m := range misses {
		fmt.Fprintf(prefixWriter{w: stderr}, "%sSLO MISSED: %s\n", prefix, m)
	}
	if len(misses) == 0 {
		return nil
	}
	return &exitError{code: exitSLOMissed, msg: msg}
}

// figures are what a compact line (-q) says of a run, a sweep's step or
// an engine's medians.
type figures struct {
	name         string
	perSec       float64
	p50Us, p99Us float64
	errors       int64
	// kinds are the errors by kind, "no_quorum 20, timeout 4"; empty
	// when not known.
	kinds string
	lost  int64
	// unchecked: no safety check ran, so violations are unknown.
	unchecked         bool
	violations, stale int64
	// notes go in parentheses at the end.
	notes []string
	// degradedWhy follows a DEGRADED verdict: what may explain it.
	degradedWhy string
}

// line is "redlock: 31234.5 acquisitions/s, p50=0.18 ms p99=0.57 ms, 0
// errors, 0 violations", as redis-benchmark -q prints a test, with the
// errors by kind, and a verdict when something went wrong: DEGRADED for
// errors or leases lost (the figures include failed operations), UNSAFE
// for overlapping holders or stale fencing tokens.
func (f figures) line() string {
	ms := func(us float64) string { return strconv.FormatFloat(us/1e3, 'f', 2, 64) }
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %.1f acquisitions/s, p50=%s ms p99=%s ms, %d errors", f.name, f.perSec, ms(f.p50Us), ms(f.p99Us), f.errors)
	if f.kinds != "" {
		fmt.Fprintf(&b, " (%s)", f.kinds)
	}
	if f.lost > 0 {
		fmt.Fprintf(&b, ", %d leases lost", f.lost)
	}
	switch {
	case f.unchecked:
		b.WriteString(", safety unchecked (--check=false)")
	case f.violations > 0:
		fmt.Fprintf(&b, ", %d VIOLATIONS", f.violations)
	default:
		b.WriteString(", 0 violations")
	}
	if f.stale > 0 {
		fmt.Fprintf(&b, ", %d STALE TOKENS", f.stale)
	}
	if len(f.notes) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(f.notes, "; "))
	}
	switch {
	case f.violations > 0 || f.stale > 0:
		b.WriteString(": UNSAFE")
	case f.errors > 0 || f.lost > 0:
		b.WriteString(": DEGRADED")
		if f.degradedWhy != "" {
			b.WriteString(", " + f.degradedWhy)
		}
	}
	return b.String()
}

// errorKinds are a summary's errors by kind, "no_quorum 20, timeout 4",
// the kinds that occurred only.
func errorKinds(s *results.Summary) string {
	var kinds []string
	for _, k := range results.ErrorKinds() {
		if n := s.Errors[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
	}
	return strings.Join(kinds, ", ")
}

// unchecked reports whether a sweep's or comparison's configuration turned
// the safety check off.
func unchecked(config map[string]any) bool { return config["check"] == false }

// sweepLines are sweep -q's lines: one per step, then the knee and the
// SLO's verdict.
func sweepLines(sw *results.Sweep) []string {
	var out []string
	for _, p := range sw.Points {
		f := figures{name: fmt.Sprintf("step %d, %s", p.Index+1, results.ParamValue(sw.Param, p.Value)), perSec: p.AcquiredPerSec,
			p50Us: float64(p.LatencyUs.P50), p99Us: float64(p.LatencyUs.P99), errors: p.Errors, violations: p.Violations,
			unchecked: unchecked(sw.Config)}
		if sw.Knee.Found && p.Index == sw.Knee.Index {
			f.notes = append(f.notes, "knee")
		}
		if sw.SLOPoint != nil && p.Index == sw.SLOPoint.Index {
			f.notes = append(f.notes, "best within the SLO")
		}
		if p.Interrupted {
			f.notes = append(f.notes, "interrupted")
		}
		out = append(out, f.line())
	}
	if sw.Knee.Found {
		out = append(out, fmt.Sprintf("knee: %s, %.1f acquisitions/s, p99 %s", results.ParamValue(sw.Param, sw.Knee.Value),
			sw.Knee.AcquiredPerSec, results.FormatUs(sw.Knee.P99Us)))
	} else {
		out = append(out, "knee: not found: "+sw.Knee.Reason)
	}
	if sw.SLO != nil && sw.SLOPoint != nil {
		sp := sw.SLOPoint
		out = append(out, fmt.Sprintf("slo %s: met up to %.1f acquisitions/s, at %s", sw.SLO.Text, sp.AcquiredPerSec, results.ParamValue(sw.Param, sp.Value)))
	} else if sw.SLO != nil {
		out = append(out, "slo "+sw.SLO.Text+": "+results.SLOMiss(sw))
	}
	return out
}

// compareLines are compare -q's lines: one per engine, of its medians.
func compareLines(c *results.Comparison) []string {
	var out []string
	for _, r := range c.Results {
		m := r.Median
		if m == nil {
			out = append(out, r.Engine+": no complete run")
			continue
		}
		f := figures{name: engineLock(r.Engine, c.Lock), perSec: m.AcquiredPerSec, p50Us: m.AcquireP50Us, p99Us: m.AcquireP99Us,
			errors: int64(m.Errors), violations: r.Violations, unchecked: unchecked(c.Config),
			notes: []string{fmt.Sprintf("median of %d runs", r.Runs)}}
		if r.Ratio != nil && r.Ratio.AcquiredPerSec != nil {
			f.notes = append(f.notes, fmt.Sprintf("throughput x%.2f of %s", *r.Ratio.AcquiredPerSec, c.Engines[0]))
		}
		out = append(out, f.line())
	}
	return out
}
