package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/scenario"
)

// scenarioOptions are the flags of `redlock-bench scenario`.
type scenarioOptions struct {
	lock       string
	out        string
	quarantine string
	fencing    bool
	short      bool
	names      bool
	output     outputFlags
}

func newScenarioFlags(o *scenarioOptions) *pflag.FlagSet {
	fs := newFlagSet("scenario")
	fs.StringVar(&o.out, "out", "", "directory for scenario.json and scenario.txt (default results/runs/<UTC timestamp>-scenario-<name>)")
	fs.StringVar(&o.quarantine, "quarantine", "", "restart-amnesia, failover, cluster-failover, sentinel-failover: the restart quarantine under test, off, observed or always (default always, the engine's)")
	fs.BoolVar(&o.fencing, "fencing", false, "paused-holder, clock-jump: fencing tokens on, so that the stale holder's writes are rejected")
	fs.BoolVar(&o.short, "short", false, "shorten every phase (same verdicts, noisier figures)")
	fs.BoolVar(&o.names, "names", false, "list: print the names only, one per line")
	o.output.register(fs, "scenario.json", "print one line: the verdict (verdict: NAME: PASS)")
	// --lock is refused by name, rather than as an unknown flag: the
	// scenarios script the mutex's failure modes, and run and chaos take it.
	fs.StringVar(&o.lock, "lock", "", "")
	_ = fs.MarkHidden("lock")
	addVersionFlag(fs)
	return fs
}

const scenarioUsageHead = `Usage:
  redlock-bench scenario list [--names]
  redlock-bench scenario NAME [--out DIR] [--quarantine off|observed|always] [--fencing] [--short] [--json | -q]

Runs a scripted, self-checking reproduction of a Redlock failure mode on
masters it starts itself, prints the verdict and writes scenario.json and
scenario.txt. Exit status 0 when the observed outcome is the expected one,
1 when it is not or the scenario could not run, 2 for bad input.

Flags:
`

// scenarioUsage is scenario's help.
func scenarioUsage() string {
	return scenarioUsageHead + newScenarioFlags(&scenarioOptions{}).FlagUsages()
}

// scenarioCommand is `redlock-bench scenario`.
func scenarioCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o scenarioOptions
	fs := newScenarioFlags(&o)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("scenario: want one scenario name or list, got %d arguments (see redlock-bench scenario --help)", fs.NArg())
	}
	if fs.Changed("lock") {
		return usageErrorf("--lock: the scenarios reproduce the mutex's failure modes and take no --lock (run, sweep, compare and chaos do), got %s", o.lock)
	}
	name := fs.Arg(0)
	if name == "list" {
		return listScenarios(stdout, o.names)
	}
	if o.names {
		return usageErrorf("--names: applies to scenario list only")
	}
	if err := o.output.check(); err != nil {
		return err
	}
	if !knownScenario(name) {
		return usageErrorf("scenario: unknown scenario %q (known: %s)", name, strings.Join(scenarioNames(), ", "))
	}
	opts := scenario.Options{Fencing: o.fencing, Short: o.short}
	if fs.Changed("quarantine") {
		q, err := engines.ParseQuarantine(o.quarantine)
		if err != nil {
			return usageErrorf("--quarantine: %v, got %s", err, o.quarantine)
		}
		opts.Quarantine = q.Policy()
	}
	sess, err := openSession(stderr, sessionSpec{out: o.out, parent: runsDir, label: "scenario-" + name, holds: []string{"scenario.json"},
		quiet: o.output.quiet || o.output.json})
	if err != nil {
		return err
	}
	defer sess.close()
	opts.Out, opts.Log = sess.dir, sess.log

	r, runErr := scenario.Run(ctx, name, opts)
	verdict := "FAIL"
	if r != nil {
		verdict = r.Verdict()
	} else if ctx.Err() != nil {
		verdict = "INTERRUPTED"
	}
	verdictLine := fmt.Sprintf("verdict: %s: %s", name, verdict)
	switch {
	case r != nil:
		err := o.output.show(stdout, stderr, sess.dir, shown{
			json:  r.WriteJSON,
			lines: func() []string { return []string{verdictLine} },
			text:  r.WriteText,
			after: verdictLine + "\n",
		})
		if err != nil {
			return err
		}
	case !o.output.json:
		fmt.Fprintln(stdout, verdictLine)
	}
	switch {
	case runErr != nil && r == nil:
		return sess.notStarted(ctx, "scenario", runErr)
	case runErr != nil && ctx.Err() != nil:
		return &exitError{code: exitInterrupted, msg: fmt.Sprintf("interrupted: %v", runErr)}
	case runErr != nil:
		return runErr
	case !r.Passed:
		return &exitError{code: 1, msg: fmt.Sprintf("scenario %s: the observed outcome is not the expected one (see %s)",
			name, filepath.Join(sess.dir, "scenario.txt"))}
	}
	return nil
}

// listScenarios prints every scenario, what it does and what it expects,
// with the variants whose expectation differs; or just the names.
func listScenarios(w io.Writer, namesOnly bool) error {
	var b strings.Builder
	for i, s := range scenario.List() {
		if namesOnly {
			b.WriteString(s.Name + "\n")
			continue
		}
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s\n", s.Name)
		fmt.Fprintf(&b, "  does    %s\n", s.Summary)
		fmt.Fprintf(&b, "  expects %s\n", s.Expected(scenario.Options{}))
		for _, opt := range s.Options {
			switch opt {
			case "Quarantine":
				for _, q := range []engines.Quarantine{engines.QuarantineObserved, engines.QuarantineOff} {
					fmt.Fprintf(&b, "  with --quarantine %s: %s\n", q, s.Expected(scenario.Options{Quarantine: q.Policy()}))
				}
			case "Fencing":
				fmt.Fprintf(&b, "  with --fencing: %s\n", s.Expected(scenario.Options{Fencing: true}))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func scenarioNames() []string {
	var names []string
	for _, s := range scenario.List() {
		names = append(names, s.Name)
	}
	return names
}

func knownScenario(name string) bool {
	for _, n := range scenarioNames() {
		if n == name {
			return true
		}
	}
	return false
}
