package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/results"
)

// sweepOptions are the flags of `redlock-bench sweep` that are its own.
// Every other flag is a flag of `run` and is parsed by parseRunFlags, so
// that a sweep accepts exactly what a run does, with the same messages.
type sweepOptions struct {
	workers string
	rate    string
	slo     string
	out     string
	label   string

	metricsAddr string // --metrics-addr
	authWarning string // runOptions.authWarning
}

// sweepFlagNames are the flags sweep takes out of the command line before
// the rest goes to run's parser. Each takes a value.
var sweepFlagNames = []string{"workers", "rate", "slo", "out", "label"}

func newSweepFlags(o *sweepOptions) *pflag.FlagSet {
	fs := pflag.NewFlagSet("sweep", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.workers, "workers", "", "closed loop: the worker counts to sweep, e.g. 1,4,16,64,256,1024 or 1:1024:x4; a single number fixes the workers of a --rate sweep")
	fs.StringVar(&o.rate, "rate", "", "open loop: the arrival rates to sweep (acquisitions/s), e.g. 1000:50000:x2, 1000:10000:+1000 or 1000,5000,20000")
	fs.StringVar(&o.slo, "slo", "", "latency objective, e.g. 'p99<5ms' (p50, p90, p99, p999; µs, us, ms, s): report the highest throughput that meets it, exit 3 if none does")
	fs.StringVar(&o.out, "out", "", "sweep directory, one run directory per step inside (default results/sweeps/<UTC timestamp>-<label>)")
	fs.StringVar(&o.label, "label", "", "a name for the sweep; steps are named <label>-w<N> or <label>-rate<R> (default: derived from the flags)")
	return fs
}

// splitSweepArgs takes sweep's own flags out of args and returns the rest,
// for run's parser. It accepts --flag value and --flag=value.
func splitSweepArgs(args []string) (sweepOptions, map[string]bool, []string, error) {
	var o sweepOptions
	set := map[string]bool{}
	fs := newSweepFlags(&o)
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !isSweepFlag(name) {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return o, nil, nil, usageErrorf("flag needs an argument: --%s", name)
			}
			i++
			value = args[i]
		}
		if err := fs.Set(name, value); err != nil {
			return o, nil, nil, usageErrorf("--%s: %v, got %q", name, err, value)
		}
		set[name] = true
	}
	return o, set, rest, nil
}

func isSweepFlag(name string) bool {
	for _, n := range sweepFlagNames {
		if n == name {
			return true
		}
	}
	return false
}

// parseSweepFlags turns the command line into a validated sweep. Every
// error is a *usageError naming the flag and the value.
func parseSweepFlags(args []string) (bench.SweepConfig, sweepOptions, error) {
	var sc bench.SweepConfig
	for _, a := range args {
		if a == "-h" || a == "--help" {
			return sc, sweepOptions{}, pflag.ErrHelp
		}
	}
	o, set, rest, err := splitSweepArgs(args)
	if err != nil {
		return sc, o, err
	}
	isList := func(s string) bool { return strings.ContainsAny(s, ",:") }
	switch {
	case set["workers"] && set["rate"] && isList(o.workers) && isList(o.rate):
		return sc, o, usageErrorf("--rate: sweep one of --workers and --rate, not both, got %q and %q", o.workers, o.rate)
	case set["workers"] && isList(o.workers):
		sc.Param = bench.SweepWorkers
		if set["rate"] {
			rest = append(rest, "--rate="+o.rate)
		}
	case set["rate"] && isList(o.rate):
		sc.Param = bench.SweepRate
		if set["workers"] {
			rest = append(rest, "--workers="+o.workers)
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
	if set["slo"] {
		slo, err := results.ParseSLO(o.slo)
		if err != nil {
			return sc, o, usageErrorf("--slo: %v", err)
		}
		sc.SLO = &slo
	}
	if set["label"] {
		if err := bench.ValidateLabel(o.label); err != nil {
			return sc, o, usageErrorf("--label: %v, got %q", err, o.label)
		}
	}

	base, ro, err := parseRunFlags(rest)
	o.metricsAddr, o.authWarning = ro.metricsAddr, ro.authWarning
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			ue.msg = strings.Replace(ue.msg, "run: unexpected argument", "sweep: unexpected argument", 1)
		}
		return sc, o, err
	}
	base.Label = o.label
	sc.Base = base
	sc.Label = o.label
	if sc.Label == "" {
		sc.Label = bench.DeriveSweepLabel(base, sc.Param)
	}
	if err := sc.Validate(); err != nil {
		return sc, o, &usageError{msg: err.Error()}
	}
	return sc, o, nil
}

// sweepUsage is the help text: sweep's own flags, then run's, without the
// ones sweep replaces.
func sweepUsage() string {
	var b strings.Builder
	b.WriteString("Usage: redlock-bench sweep (--workers LIST | --rate LIST) [--slo OBJECTIVE] [run flags]\n\n")
	b.WriteString("Runs one benchmark per value on the same masters (started once), finds the saturation\n")
	b.WriteString("knee and, with --slo, the highest throughput that meets the objective.\n\n")
	b.WriteString("LIST is 1,4,16,64 or START:END:xFACTOR (geometric) or START:END:+STEP (arithmetic);\n")
	b.WriteString("END is always the last value.\n\nSweep flags:\n")
	b.WriteString(newSweepFlags(&sweepOptions{}).FlagUsages())
	b.WriteString("\nEvery flag of run, with the same meaning:\n")
	b.WriteString(runFlagUsages(isSweepFlag))
	return b.String()
}

// sweepCommand is `redlock-bench sweep`.
func sweepCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sc, o, err := parseSweepFlags(args)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprint(stdout, sweepUsage())
		return nil
	}
	if err != nil {
		return err
	}
	warn(stderr, o.authWarning)
	stopMetrics, err := serveMetrics(o.metricsAddr, &sc.Base.Observer, stderr)
	if err != nil {
		return err
	}
	defer stopMetrics()
	dir, created, err := makeSweepDir(o.out, sc.Label, time.Now())
	if err != nil {
		return err
	}
	sc.Dir = dir
	sc.Progress = stderr
	sc.ProgressInPlace = isTerminal(stderr)
	sc.Log = prefixWriter{w: stderr}

	sw, runErr := bench.RunSweep(ctx, sc)
	if runErr != nil && sw == nil {
		return notStarted(ctx, "sweep", dir, created, runErr)
	}
	if err := results.WriteSweepText(stdout, sw); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nresults: %s\nreport:  redlock-bench report %s\n", dir, dir)
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
		return &exitError{code: 1, msg: fmt.Sprintf("%d safety violations: two holders of one resource overlapped (see %s)",
			violations, strings.Join(bad, ", "))}
	case sw.Interrupted:
		return interrupted(dir)
	case sw.SLO != nil && sw.SLOPoint == nil:
		return &exitError{code: exitSLOMissed, msg: results.SLOMiss(sw)}
	}
	return nil
}

// makeSweepDir creates the sweep directory. Without --out it is
// results/sweeps/<UTC timestamp>-<label>, with a numeric suffix if two
// sweeps start in the same second. An explicit --out may exist but must not
// already hold a sweep or a run.
func makeSweepDir(out, label string, now time.Time) (dir string, created bool, err error) {
	return makeOutDir(out, filepath.Join("results", "sweeps"), label, now, results.SweepJSON, results.SummaryJSON)
}
