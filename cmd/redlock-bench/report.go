package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/results"
)

// reportOptions are the flags of `redlock-bench report`.
type reportOptions struct {
	out   string
	slo   []string
	title string
}

func newReportFlags(o *reportOptions) *pflag.FlagSet {
	fs := newFlagSet("report")
	fs.StringVar(&o.out, "out", "", "directory for report.html, capacity.md and charts/ (default: the first DIR)")
	fs.StringArrayVar(&o.slo, "slo", nil, "an `OBJECTIVE` every run must meet, else exit 3 (a sweep: one of its steps); repeat for several, as run's --slo: 'p99<5ms', 'errors<0.1%', 'throughput>=10000/s'. The first percentile bound, such as p99<5ms, is also the report's SLO (default: a sweep's own --slo)")
	fs.StringVar(&o.title, "title", "", "the report's heading (default \"redlock-bench report\")")
	addVersionFlag(fs)
	return fs
}

const reportUsageHead = `Usage: redlock-bench report DIR... [--out DIR] [--slo OBJECTIVE]...

Writes one self-contained report.html (no network needed to view it), the
same charts as SVG and PNG files in charts/, and capacity.md, from run,
sweep, compare or merged directories, or from a directory of runs. Each DIR
is recognised by the files in it: sweep.json, compare.json or summary.json.

Flags:
`

// reportUsage is report's help.
func reportUsage() string { return reportUsageHead + newReportFlags(&reportOptions{}).FlagUsages() }

// reportCommand is `redlock-bench report`.
func reportCommand(_ context.Context, args []string, stdout, stderr io.Writer) error {
	var o reportOptions
	fs := newReportFlags(&o)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dirs := fs.Args()
	if len(dirs) == 0 {
		return usageErrorf("report: give at least one run, sweep or compare directory")
	}
	opts := results.ReportOptions{Title: o.title}
	objs, err := results.ParseObjectives(o.slo)
	if err != nil {
		return usageErrorf("--slo: %v", err)
	}
	for _, obj := range objs {
		if slo, ok := obj.SLO(); ok {
			opts.SLO = &slo
			break
		}
	}
	var inputs []*results.Input
	for _, d := range dirs {
		in, err := results.LoadInput(d)
		if err != nil {
			return usageErrorf("report: %v", err)
		}
		inputs = append(inputs, in)
	}
	out := o.out
	if out == "" {
		out = dirs[0]
	}
	written, err := results.WriteReport(out, inputs, opts)
	if err != nil {
		return err
	}
	for _, in := range inputs {
		for _, n := range in.Notes {
			fmt.Fprintf(prefixWriter{w: stderr}, "report: %s\n", n)
		}
	}
	fmt.Fprintf(stdout, "report:   %s\ncapacity: %s\ncharts:   %d files in %s\n",
		filepath.Join(out, results.ReportHTML), filepath.Join(out, results.CapacityFile), len(written)-2, filepath.Join(out, results.ChartsDir))
	var misses []string
	for _, in := range inputs {
		misses = append(misses, results.CheckInput(in, objs)...)
	}
	return missedObjectives(stderr, "report: ", misses,
		fmt.Sprintf("report: the results do not meet every objective (%s)", strings.Join(o.slo, ", ")))
}
