package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/results"
)

// compareOptions are the flags of `redlock-bench compare` that are its own.
// Every other flag is a flag of `run`, on the same flag set, so that a
// comparison takes the same workload flags as a run, with the same
// messages; --engine is replaced by --engines.
type compareOptions struct {
	engines string
	rounds  int
	limit   bool
	limitN  int
	out     string
	label   string

	run runOptions
}

// newCompareFlags is compare's own flags; parseCompareFlags adds run's.
func newCompareFlags(o *compareOptions) *pflag.FlagSet {
	fs := newFlagSet("compare")
	peers := func(l engines.Lock, clusters bool) string { return engines.JoinNames(engines.Peers(l, clusters)) }
	fs.StringVar(&o.engines, "engines", peers(engines.Lock{}, false),
		"engines to compare, in the order they run each round; ratios are against the first (known: "+engines.NamesHelp()+
			"; with --lock semaphore:P the default is "+peers(engines.Lock{Kind: engines.LockSemaphore}, false)+", as no baseline has a semaphore, with --lock rw:F "+
			peers(engines.Lock{Kind: engines.LockRW}, false)+", as no baseline has a read/write lock, and with --lock multi:K "+
			peers(engines.Lock{Kind: engines.LockMulti}, false)+"; on Redis Clusters, --clusters or --cluster-shards, "+
			peers(engines.Lock{}, true)+": ours on every cluster, ours and rueidislock on the first)")
	fs.IntVar(&o.rounds, "rounds", bench.DefaultCompareRounds, fmt.Sprintf("runs of each engine, alternating A B C A B C ...; the figures are their medians (%d to %d)", bench.MinCompareRounds, bench.MaxCompareRounds))
	fs.BoolVar(&o.limit, "limit", false, "also measure the masters' pipelined SET and EVALSHA ceiling with redis-benchmark -P 16, and each engine's share of it")
	fs.IntVar(&o.limitN, "limit-requests", bench.DefaultCeilingRequests, fmt.Sprintf("--limit: requests of each redis-benchmark test on each master, at most %d", bench.MaxCeilingRequests))
	fs.StringVar(&o.out, "out", "", "comparison directory, one run directory <round>-<engine> inside (default results/runs/<UTC timestamp>-compare-<label>)")
	fs.StringVar(&o.label, "label", "", "a name for the comparison; runs are <label>-<round>-<engine> (default: derived from the workload flags)")
	o.run.slo.register(fs, "an `OBJECTIVE` every run of the comparison must meet, as report --slo checks a comparison, else exit 3; repeat for several, as run's --slo: 'p99<5ms', 'errors<0.1%', 'throughput>=10000/s'")
	o.run.output.register(fs, "compare.json", "print a line per engine: its medians of throughput, p50 and p99, its errors, its throughput's ratio to the first engine (progress only on a terminal)")
	return fs
}

// parseCompareFlags turns the command line into a validated comparison.
// Every error is a *usageError naming the flag and the value.
func parseCompareFlags(args []string) (bench.CompareConfig, compareOptions, error) {
	var cc bench.CompareConfig
	var o compareOptions
	fs := newCompareFlags(&o)
	addRunFlags(fs, &o.run)
	// run's --engine stays, hidden, to say what compare takes instead.
	_ = fs.MarkHidden("engine")
	if err := parseFlags(fs, args); err != nil {
		return cc, o, err
	}
	if err := noArgs(fs); err != nil {
		return cc, o, err
	}
	if fs.Changed("engine") {
		return cc, o, usageErrorf("--engine: compare takes --engines, a comma-separated list, got %q", o.run.engine)
	}
	base, err := o.run.build(fs)
	if err != nil {
		return cc, o, err
	}
	if err := o.run.output.check(); err != nil {
		return cc, o, err
	}
	if err := o.run.slo.parse(base); err != nil {
		return cc, o, err
	}
	// Without --engines, the lock decides: no baseline has a semaphore or
	// a read/write lock.
	cc.Engines = engines.Peers(base.Lock, len(base.Clusters) > 0 || base.ClusterShards > 0)
	if fs.Changed("engines") {
		if cc.Engines, err = engines.ParseList(o.engines); err != nil {
			return cc, o, badFlag("engines", o.engines, err.Error())
		}
	}
	if o.run.metricsAddr != "" && !slices.ContainsFunc(cc.Engines, engines.Engine.IsRedlock) {
		return cc, o, badFlag("metrics-addr", o.run.metricsAddr, "needs the redlock engine among --engines (its metrics are the engine's)")
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
	return cc, o, asUsage(cc.Validate())
}

// compareUsage is the help text: compare's own flags, then run's, without
// the ones compare replaces.
func compareUsage() string {
	var b strings.Builder
	b.WriteString("Usage: redlock-bench compare [--engines A,B,...] [--rounds N] [--limit] [run flags]\n\n")
	b.WriteString("Runs each engine on the same workload and the same masters (started once), alternating\n")
	b.WriteString("A B C A B C ... for --rounds rounds, and reports the median of each figure per engine and\n")
	b.WriteString("its ratio to the first engine. Each run is a normal run directory inside --out, beside\n")
	b.WriteString("compare.txt and compare.json. An engine that votes on fewer masters (rueidislock and\n")
	b.WriteString("bsm-redislock on one; redlock@1, or any quorum engine as NAME@N) uses the first ones.\n\nCompare flags:\n")
	own := newCompareFlags(&compareOptions{})
	b.WriteString(own.FlagUsages())
	b.WriteString("\nEvery flag of run but --engine, with the same meaning:\n")
	b.WriteString(runFlagUsages(func(name string) bool { return name == "engine" || own.Lookup(name) != nil }))
	return b.String()
}

// compareCommand is `redlock-bench compare`.
func compareCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cc, o, err := parseCompareFlags(args)
	if err != nil {
		return err
	}
	sess, err := openSession(stderr, sessionSpec{warning: o.run.authWarning, metricsAddr: o.run.metricsAddr,
		out: o.out, parent: runsDir, label: "compare-" + cc.Label, holds: []string{results.CompareJSON, results.SummaryJSON},
		quiet: o.run.output.quiet || o.run.output.json})
	if err != nil {
		return err
	}
	defer sess.close()
	if m := sess.metrics; m != nil {
		cc.Base.Observer = m.Observer
	}
	cc.Dir = sess.dir
	cc.Progress, cc.ProgressInPlace, cc.Log = sess.progress, sess.inPlace, sess.log

	cmp, runErr := bench.RunCompare(ctx, cc)
	if cmp == nil {
		return sess.notStarted(ctx, "comparison", runErr)
	}
	err = o.run.output.show(stdout, stderr, sess.dir, shown{
		json:  func(w io.Writer) error { return results.WriteCompareJSON(w, cmp) },
		lines: func() []string { return compareLines(cmp) },
		text:  func(w io.Writer) error { return results.WriteCompareText(w, cmp) },
	})
	if err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	// Every verdict is printed; the status is the gravest.
	sloErr := compareObjectives(sess.dir, o.run.slo, stderr)
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
		return violated(violations, strings.Join(bad, ", "), cc.Base.Lock.String(), filepath.Join(sess.dir, results.CompareText))
	case cmp.Interrupted:
		return sess.interrupted()
	}
	return sloErr
}

// compareObjectives checks the objectives of --slo on every run of the
// comparison in dir, as report --slo does, and prints each miss.
func compareObjectives(dir string, slo sloFlags, stderr io.Writer) error {
	if len(slo.objectives) == 0 {
		return nil
	}
	in, err := results.LoadInput(dir)
	if err != nil {
		return err
	}
	return missedObjectives(stderr, "", results.CheckInput(in, slo.objectives),
		fmt.Sprintf("the comparison's runs do not meet every objective (%s)", strings.Join(slo.texts, ", ")))
}
