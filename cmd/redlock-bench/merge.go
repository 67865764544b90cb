package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/results"
)

// mergeOptions are the flags of `redlock-bench merge`.
type mergeOptions struct {
	out   string
	label string
}

func newMergeFlags(o *mergeOptions) *pflag.FlagSet {
	fs := newFlagSet("merge")
	fs.StringVar(&o.out, "out", "", "directory of the merged run (default results/runs/<UTC timestamp>-<label>)")
	fs.StringVar(&o.label, "label", "", "a name for the merged run (default merged-<the runs' common label prefix>)")
	addVersionFlag(fs)
	return fs
}

const mergeUsageHead = `Usage: redlock-bench merge RUN_DIR RUN_DIR... [--out DIR] [--label NAME]

Combines runs taken at the same time on several load machines, against the
same masters, into one run directory: histograms merged count by count from
histograms.hlog (never averaged), counters and violations summed, throughput
recomputed from the acquisitions inside the runs' common window.

Flags:
`

// mergeUsage is merge's help.
func mergeUsage() string { return mergeUsageHead + newMergeFlags(&mergeOptions{}).FlagUsages() }

// mergeCommand is `redlock-bench merge`.
func mergeCommand(_ context.Context, args []string, stdout, stderr io.Writer) error {
	var o mergeOptions
	fs := newMergeFlags(&o)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dirs := fs.Args()
	if len(dirs) < 2 {
		return usageErrorf("merge: give at least two run directories, got %d", len(dirs))
	}
	if fs.Changed("label") {
		if err := bench.ValidateLabel(o.label); err != nil {
			return usageErrorf("--label: %v, got %q", err, o.label)
		}
	}
	runs := make([]*results.RunDir, 0, len(dirs))
	for _, d := range dirs {
		r, err := results.LoadRunDir(d)
		if err != nil {
			return fmt.Errorf("merge: %s is not a run directory: %w", d, err)
		}
		runs = append(runs, r)
	}
	m, err := results.Merge(runs, results.MergeOptions{Label: o.label})
	if err != nil {
		return err
	}
	dir, _, err := makeRunDir(o.out, m.Info.Label, time.Now())
	if err != nil {
		return err
	}
	if err := results.WriteMerged(dir, m); err != nil {
		return err
	}
	for _, n := range m.Info.Notes {
		fmt.Fprintf(prefixWriter{w: stderr}, "merge: %s\n", n)
	}
	if err := results.WriteText(stdout, m.Summary); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nmerged %d runs over a common window of %.2f s: %.1f acquisitions/s (the runs on their own: %.1f/s in sum)\nresults: %s\n",
		len(runs), m.Info.OverlapS, m.Info.AcquiredPerSec, m.Info.SumOfSourceRates, dir)
	if v := m.Summary.Violations; v > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d safety violations in the merged runs (see %s)", v, filepath.Join(dir, results.SummaryText))}
	}
	return nil
}
