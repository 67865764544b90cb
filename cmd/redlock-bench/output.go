package main

import (
	"fmt"
	"io"

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
