package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/results"
)

// sweepOptions are the flags of `redlock-bench sweep` that are its own.
// Every other flag is a flag of `run`, on the same flag set, so that a
// sweep accepts exactly what a run does, with the same messages.
type sweepOptions struct {
	workers string
	rate    string
	slo     sloFlags
	out     string
	label   string

	run runOptions
}

// newSweepFlags is sweep's own flags; parseSweepFlags adds run's.
func newSweepFlags(o *sweepOptions) *pflag.FlagSet {
	fs := newFlagSet("sweep")
	fs.StringVar(&o.workers, "workers", "", "closed loop: the worker counts to sweep, e.g. 1,4,16,64,256,1024 or 1:1024:x4; a single number fixes the workers of a --rate sweep")
	fs.StringVar(&o.rate, "rate", "", "open loop: the arrival rates to sweep (acquisitions/s), e.g. 1000:50000:x2, 1000:10000:+1000 or 1000,5000,20000")
	o.slo.register(fs, "an `OBJECTIVE` every step is checked on, as run's --slo: report the highest throughput that meets every one, exit 3 if no step does; repeat for several: 'p99<5ms', 'errors<0.1%', 'release.p99<=2ms' (a latency bound on p50, p90, p99 or p999 of the acquisition is drawn on the charts)")
	fs.StringVar(&o.out, "out", "", "sweep directory, one run directory per step inside (default results/sweeps/<UTC timestamp>-<label>)")
	fs.StringVar(&o.label, "label", "", "a name for the sweep; steps are named <label>-w<N> or <label>-rate<R> (default: derived from the flags)")
	o.run.output.register(fs, "sweep.json", "print a line per step (throughput, p50, p99, errors), then the knee and the SLO's verdict (progress only on a terminal)")
	return fs
}

// parseSweepFlags turns the command line into a validated sweep. Every
// error is a *usageError naming the flag and the value.
func parseSweepFlags(args []string) (bench.SweepConfig, sweepOptions, error) {
	var sc bench.SweepConfig
	var o sweepOptions
	fs := newSweepFlags(&o)
	addRunFlags(fs, &o.run)
	if err := parseFlags(fs, args); err != nil {
		return sc, o, err
	}
	if err := noArgs(fs); err != nil {
		return sc, o, err
	}
	isList := func(s string) bool { return strings.ContainsAny(s, ",:") }
	var err error
	switch set := fs.Changed; {
	case set("workers") && set("rate") && isList(o.workers) && isList(o.rate):
		return sc, o, usageErrorf("--rate: sweep one of --workers and --rate, not both, got %q and %q", o.workers, o.rate)
	case set("workers") && isList(o.workers):
		sc.Param = bench.SweepWorkers
		if set("rate") {
			o.run.rate, err = strconv.ParseFloat(o.rate, 64)
			if err != nil {
				return sc, o, usageErrorf("--rate: want a number, got %q", o.rate)
			}
		}
	case set("rate") && isList(o.rate):
		sc.Param = bench.SweepRate
		if set("workers") {
			if o.run.workers, err = strconv.Atoi(o.workers); err != nil {
				return sc, o, usageErrorf("--workers: want an integer, got %q", o.workers)
			}
		}
	default:
		return sc, o, usageErrorf("sweep: give --workers or --rate a list of values, e.g. --workers 1,4,16,64,256,1024 or --rate 1000:50000:x2")
	}
	spec := o.workers
	if sc.Param == bench.SweepRate {
		spec = o.rate
	}
	if sc.Values, err = bench.ParseSweepValues(spec, sc.Param == bench.SweepWorkers); err != nil {
		return sc, o, usageErrorf("--%s: %v, got %q", sc.Param, err, spec)
	}
	if len(sc.Values) < 2 {
		return sc, o, usageErrorf("--%s: a sweep needs at least two values, got %q", sc.Param, spec)
	}
	if fs.Changed("label") {
		if err := bench.ValidateLabel(o.label); err != nil {
			return sc, o, usageErrorf("--label: %v, got %q", err, o.label)
		}
	}

	base, err := o.run.build(fs)
	if err != nil {
		return sc, o, err
	}
	if err := o.run.output.check(); err != nil {
		return sc, o, err
	}
	if err := o.slo.parse(base); err != nil {
		return sc, o, err
	}
	sc.Objectives = o.slo.objectives
	base.Label = o.label
	sc.Base = base
	sc.Label = o.label
	if sc.Label == "" {
		sc.Label = bench.DeriveSweepLabel(base, sc.Param)
	}
	return sc, o, asUsage(sc.Validate())
}

// sweepUsage is the help text: sweep's own flags, then run's, without the
// ones sweep replaces.
func sweepUsage() string {
	var b strings.Builder
	b.WriteString("Usage: redlock-bench sweep (--workers LIST | --rate LIST) [--slo OBJECTIVE]... [run flags]\n\n")
	b.WriteString("Runs one benchmark per value on the same masters (started once), finds the saturation\n")
	b.WriteString("knee and, with --slo, the highest throughput that meets every objective.\n\n")
	b.WriteString("LIST is 1,4,16,64 or START:END:xFACTOR (geometric) or START:END:+STEP (arithmetic);\n")
	fmt.Fprintf(&b, "END is always the last value; at most %d values.\n\nSweep flags:\n", bench.MaxSweepSteps)
	own := newSweepFlags(&sweepOptions{})
	b.WriteString(own.FlagUsages())
	b.WriteString("\nEvery flag of run, with the same meaning:\n")
	b.WriteString(runFlagUsages(func(name string) bool { return own.Lookup(name) != nil }))
	return b.String()
}

// sweepCommand is `redlock-bench sweep`.
func sweepCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sc, o, err := parseSweepFlags(args)
	if err != nil {
		return err
	}
	sess, err := openSession(stderr, sessionSpec{warning: o.run.authWarning, metricsAddr: o.run.metricsAddr,
		out: o.out, parent: sweepsDir, label: sc.Label, holds: []string{results.SweepJSON, results.SummaryJSON},
		quiet: o.run.output.quiet || o.run.output.json})
	if err != nil {
		return err
	}
	defer sess.close()
	if m := sess.metrics; m != nil {
		sc.Base.Observer = m.Observer
	}
	sc.Dir = sess.dir
	sc.Progress, sc.ProgressInPlace, sc.Log = sess.progress, sess.inPlace, sess.log

	sw, runErr := bench.RunSweep(ctx, sc)
	if runErr != nil && sw == nil {
		return sess.notStarted(ctx, "sweep", runErr)
	}
	err = o.run.output.show(stdout, stderr, sess.dir, shown{
		json:  func(w io.Writer) error { return results.WriteSweepJSON(w, sw) },
		lines: func() []string { return sweepLines(sw) },
		text:  func(w io.Writer) error { return results.WriteSweepText(w, sw) },
		after: "report:  redlock-bench report " + sess.dir + "\n",
	})
	if err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}

	var bad []string
	var violations int64
	for _, p := range sw.Points {
		if p.Violations > 0 {
			violations += p.Violations
			bad = append(bad, p.Dir)
		}
	}
	switch {
	case violations > 0:
		return violated(violations, "", sc.Base.Lock.String(), strings.Join(bad, ", "))
	case sw.Interrupted:
		return sess.interrupted()
	case (len(sw.Objectives) > 0 || sw.SLO != nil) && sw.SLOPoint == nil:
		return &exitError{code: exitSLOMissed, msg: results.SLOMiss(sw)}
	}
	return nil
}

// sweepsDir is where sweeps go without --out.
var sweepsDir = filepath.Join("results", "sweeps")
