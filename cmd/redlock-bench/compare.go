package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/results"
)

// compareOptions are the flags of `redlock-bench compare` that are its own.
// Every other flag is a flag of `run`, parsed by parseRunFlags, so that a
// comparison takes the same workload flags as a run, with the same
// messages; --engine is replaced by --engines.
type compareOptions struct {
	engines string
	rounds  int
	limit   bool
	limitN  int
	out     string
	label   string

	metricsAddr string // --metrics-addr
	authWarning string // runOptions.authWarning
}

func newCompareFlags(o *compareOptions) *pflag.FlagSet {
	fs := pflag.NewFlagSet("compare", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.engines, "engines", strings.Join(bench.DefaultCompareEngines(), ","),
		"engines to compare, in the order they run each round; ratios are against the first (known: "+strings.Join(bench.EngineNames(), ", ")+")")
	fs.IntVar(&o.rounds, "rounds", bench.DefaultCompareRounds, "runs of each engine, alternating A B C A B C ...; the figures are their medians (at least 3)")
	fs.BoolVar(&o.limit, "limit", false, "also measure the masters' pipelined SET and EVALSHA ceiling with redis-benchmark -P 16, and each engine's share of it")
	fs.IntVar(&o.limitN, "limit-requests", bench.DefaultCeilingRequests, "--limit: requests of each redis-benchmark test on each master")
	fs.StringVar(&o.out, "out", "", "comparison directory, one run directory <round>-<engine> inside (default results/runs/<UTC timestamp>-compare-<label>)")
	fs.StringVar(&o.label, "label", "", "a name for the comparison; runs are <label>-<round>-<engine> (default: derived from the workload flags)")
	return fs
}

// splitCompareArgs takes compare's own flags out of args and returns the
// rest, for run's parser. It accepts --flag value and --flag=value, and a
// bare --limit.
func splitCompareArgs(args []string) (compareOptions, []string, error) {
	o := compareOptions{}
	fs := newCompareFlags(&o)
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		f := fs.Lookup(name)
		if !strings.HasPrefix(a, "--") || f == nil {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if f.NoOptDefVal != "" { // a bool: --limit alone means true
				value = f.NoOptDefVal
			} else if i+1 >= len(args) {
				return o, nil, usageErrorf("flag needs an argument: --%s", name)
			} else {
				i++
				value = args[i]
			}
		}
		if err := fs.Set(name, value); err != nil {
			return o, nil, usageErrorf("--%s: want %s, got %q", name, typeName(f.Value.Type()), value)
		}
	}
	return o, rest, nil
}

// parseCompareFlags turns the command line into a validated comparison.
// Every error is a *usageError naming the flag and the value.
func parseCompareFlags(args []string) (bench.CompareConfig, compareOptions, error) {
	var cc bench.CompareConfig
	for _, a := range args {
		if a == "-h" || a == "--help" {
			return cc, compareOptions{}, pflag.ErrHelp
		}
	}
	o, rest, err := splitCompareArgs(args)
	if err != nil {
		return cc, o, err
	}
	for i, a := range rest {
		if name, value, hasValue := strings.Cut(a, "="); name == "--engine" {
			if !hasValue && i+1 < len(rest) {
				value = rest[i+1]
			}
			return cc, o, usageErrorf("--engine: compare takes --engines, a comma-separated list, got %q", value)
		}
	}
	base, ro, err := parseRunFlags(rest)
	o.metricsAddr, o.authWarning = ro.metricsAddr, ro.authWarning
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			ue.msg = strings.Replace(ue.msg, "run: unexpected argument", "compare: unexpected argument", 1)
		}
		return cc, o, err
	}
	if cc.Engines, err = bench.ParseEngines(o.engines); err != nil {
		return cc, o, &usageError{msg: (&bench.ConfigError{Flag: "engines", Value: o.engines, Reason: err.Error()}).Error()}
	}
	if o.metricsAddr != "" && !slices.ContainsFunc(cc.Engines, bench.IsRedlock) {
		return cc, o, &usageError{msg: (&bench.ConfigError{Flag: "metrics-addr", Value: o.metricsAddr,
			Reason: "needs the redlock engine among --engines (its metrics are the engine's)"}).Error()}
	}
	base.Label = "" // each run is labelled <label>-<round>-<engine>
	cc.Base = base
	cc.Rounds = o.rounds
	cc.Limit = o.limit
	if o.limitN <= 0 {
		return cc, o, usageErrorf("--limit-requests: must be > 0, got %d", o.limitN)
	}
	cc.CeilingRequests = o.limitN
	cc.Label = o.label
	if err := cc.Validate(); err != nil {
		return cc, o, &usageError{msg: err.Error()}
	}
	return cc, o, nil
}

// compareUsage is the help text: compare's own flags, then run's, without
// the ones compare replaces.
func compareUsage() string {
	var b strings.Builder
	b.WriteString("Usage: redlock-bench compare [--engines A,B,...] [--rounds N] [--limit] [run flags]\n\n")
	b.WriteString("Runs each engine on the same workload and the same masters (started once), alternating\n")
	b.WriteString("A B C A B C ... for --rounds rounds, and reports the median of each figure per engine and\n")
	b.WriteString("its ratio to the first engine. Each run is a normal run directory inside --out, beside\n")
	b.WriteString("compare.txt and compare.json.\n\nCompare flags:\n")
	b.WriteString(newCompareFlags(&compareOptions{}).FlagUsages())
	b.WriteString("\nEvery flag of run but --engine, with the same meaning:\n")
	own := newCompareFlags(&compareOptions{})
	b.WriteString(runFlagUsages(func(name string) bool { return name == "engine" || own.Lookup(name) != nil }))
	return b.String()
}

// compareCommand is `redlock-bench compare`.
func compareCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cc, o, err := parseCompareFlags(args)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprint(stdout, compareUsage())
		return nil
	}
	if err != nil {
		return err
	}
	warn(stderr, o.authWarning)
	stopMetrics, err := serveMetrics(o.metricsAddr, &cc.Base.Observer, stderr)
	if err != nil {
		return err
	}
	defer stopMetrics()
	dir, created, err := makeOutDir(o.out, filepath.Join("results", "runs"), "compare-"+cc.Label, time.Now(), results.CompareJSON, results.SummaryJSON)
	if err != nil {
		return err
	}
	cc.Dir = dir
	cc.Progress = stderr
	cc.ProgressInPlace = isTerminal(stderr)
	cc.Log = prefixWriter{w: stderr}

	cmp, runErr := bench.RunCompare(ctx, cc)
	if cmp == nil {
		return notStarted(ctx, "comparison", dir, created, runErr)
	}
	if err := results.WriteCompareText(stdout, cmp); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nresults: %s\n", dir)
	if runErr != nil {
		return runErr
	}
	var bad []string
	var violations int64
	for _, r := range cmp.Results {
		if r.Violations > 0 {
			violations += r.Violations
			bad = append(bad, r.Engine)
		}
	}
	switch {
	case violations > 0:
		return &exitError{code: 1, msg: fmt.Sprintf("%d safety violations (%s): two holders of one resource overlapped (see %s)",
			violations, strings.Join(bad, ", "), filepath.Join(dir, results.CompareText))}
	case cmp.Interrupted:
		return interrupted(dir)
	}
	return nil
}
