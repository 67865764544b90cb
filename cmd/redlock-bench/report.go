package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/results"
)

// reportOptions are the flags of `redlock-bench report`.
type reportOptions struct {
	out   string
	slo   string
	title string
}

func newReportFlags(o *reportOptions) *pflag.FlagSet {
	fs := pflag.NewFlagSet("report", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.out, "out", "", "directory for report.html, capacity.md and charts/ (default: the first DIR)")
	fs.StringVar(&o.slo, "slo", "", "latency objective to check every run against, e.g. 'p99<5ms' (default: a sweep's own --slo)")
	fs.StringVar(&o.title, "title", "", "the report's heading (default \"redlock-bench report\")")
	return fs
}

const reportUsageHead = `Usage: redlock-bench report DIR... [--out DIR] [--slo OBJECTIVE]

Writes one self-contained report.html (no network needed to view it), the
same charts as SVG and PNG files in charts/, and capacity.md, from run,
sweep, compare or merged directories, or from a directory of runs. Each DIR
is recognised by the files in it: sweep.json, compare.json or summary.json.

Flags:
`

// reportCommand is `redlock-bench report`.
func reportCommand(_ context.Context, args []string, stdout, stderr io.Writer) error {
	var o reportOptions
	fs := newReportFlags(&o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, reportUsageHead+fs.FlagUsages())
			return nil
		}
		return &usageError{msg: err.Error()}
	}
	dirs := fs.Args()
	if len(dirs) == 0 {
		return usageErrorf("report: give at least one run, sweep or compare directory")
	}
	opts := results.ReportOptions{Title: o.title}
	if fs.Changed("slo") {
		slo, err := results.ParseSLO(o.slo)
		if err != nil {
			return usageErrorf("--slo: %v", err)
		}
		opts.SLO = &slo
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
			fmt.Fprintf(stderr, "redlock-bench: report: %s\n", n)
		}
	}
	fmt.Fprintf(stdout, "report:   %s\ncapacity: %s\ncharts:   %d files in %s\n",
		filepath.Join(out, results.ReportHTML), filepath.Join(out, results.CapacityFile), len(written)-2, filepath.Join(out, results.ChartsDir))
	return nil
}
