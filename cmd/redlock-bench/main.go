package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/internal/version"
)

const usage = `redlock-bench drives a distributed lock under load and measures it.

Usage:
  redlock-bench run [flags]      run one benchmark and write its results
  redlock-bench scenario NAME    run a failure-mode scenario and judge it ('scenario list' names them)
  redlock-bench sweep [flags]    runs at rising --workers or --rate on the same masters: knee, SLO
  redlock-bench compare [flags]  engines alternating on one workload and the same masters: medians, ratios
  redlock-bench chaos [flags]    a seeded nemesis soak: faults in or out of Redlock's model, every hold checked
  redlock-bench report DIR...    report.html, charts and capacity.md from run, sweep or compare dirs
  redlock-bench merge DIR...     combine runs taken at once on several load machines into one run
  redlock-bench version          print the tool's version, VCS revision and Go version
  redlock-bench help [COMMAND]   show this help, or COMMAND's (as COMMAND --help)

Every command also takes --version, which prints the version and exits, and
-h/--help. Run 'redlock-bench run --help' for the flags of a run.

Exit status: 0 success; 1 a failure, including safety violations and a run that
measured nothing; 2 bad input (a flag, a value, a command); 3 a service-level
objective (--slo) missed; 130 interrupted (Ctrl-C, SIGTERM).
`

// Exit statuses besides 0, 1 (a failure or a safety violation) and 2 (a
// usageError). Scripts and CI depend on them.
const (
	// exitSLOMissed is the status of a run, sweep or report whose results
	// miss an objective given with --slo: distinct from a failure, so that
	// a build can tell "too slow" from "broken".
	exitSLOMissed = 3
	// exitInterrupted is the status of a command stopped by a signal.
	exitInterrupted = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, restore the default handling: the run stops
	// gracefully on the first Ctrl-C, and a second one kills at once.
	go func() { <-ctx.Done(); stop() }()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// subcommand is one command of redlock-bench: its help, and what it does. Only main exits:
// a command returns an error, which exitCode turns into the status.
type subcommand struct {
	name  string
	usage func() string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands are the subcommands, in the order the usage lists them.
func commands() []subcommand {
	return []subcommand{
		{"run", runUsage, runCommand},
		{"scenario", scenarioUsage, scenarioCommand},
		{"sweep", sweepUsage, sweepCommand},
		{"compare", compareUsage, compareCommand},
		{"chaos", chaosUsage, chaosCommand},
		{"report", reportUsage, reportCommand},
		{"merge", mergeUsage, mergeCommand},
		{"version", func() string { return versionUsage }, versionCommand},
	}
}

func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

func lookup(name string) (subcommand, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return subcommand{}, false
}

// run dispatches to a subcommand and returns the exit status. It answers
// --version and every command's help itself, before the command parses
// anything.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if wantsVersion(args) && !wantsHelp(args) {
		printVersion(stdout)
		return 0
	}
	name, rest := args[0], args[1:]
	if isHelp(name) {
		// "help X" is X's help, as with go and git; "help", "help help"
		// and "help --help" are this usage.
		if len(rest) == 0 || isHelp(rest[0]) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		c, ok := lookup(rest[0])
		if !ok {
			return exitCode(usageErrorf("help: unknown command %q (known: %s)", rest[0], strings.Join(commandNames(), ", ")), stderr)
		}
		fmt.Fprint(stdout, c.usage())
		return 0
	}
	c, ok := lookup(name)
	if !ok {
		return exitCode(usageErrorf("unknown command %q (known: %s, help)", name, strings.Join(commandNames(), ", ")), stderr)
	}
	if wantsHelp(rest) {
		fmt.Fprint(stdout, c.usage())
		return 0
	}
	return exitCode(c.run(ctx, rest, stdout, stderr), stderr)
}

// wantsVersion reports whether --version is among the arguments of any
// command, before a "--" that ends the flags.
func wantsVersion(args []string) bool {
	return hasFlag(args, func(a string) bool { return a == "--version" || a == "-version" })
}

// wantsHelp reports whether -h or --help is among the arguments, before a
// "--": help wins over --version.
func wantsHelp(args []string) bool { return hasFlag(args, isHelp) }

func isHelp(a string) bool { return a == "-h" || a == "--help" || a == "help" }

func hasFlag(args []string, is func(string) bool) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a != "help" && is(a) {
			return true
		}
	}
	return false
}

// addVersionFlag lists --version in a command's flags, so that every
// command's help says what run decides before any command parses: the
// flag prints the version and exits, wherever it stands.
func addVersionFlag(fs *pflag.FlagSet) {
	fs.Bool("version", false, "print the tool's version and exit")
}

func printVersion(stdout io.Writer) {
	fmt.Fprintln(stdout, version.Get().Line("redlock-bench"))
}

const versionUsage = `Usage: redlock-bench version

Prints the tool's version, its VCS revision and the Go version it was built
with, on one line. Every command also takes --version, which does the same.
`

// versionCommand is `redlock-bench version`. It takes no arguments.
func versionCommand(_ context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) > 0 {
		return usageErrorf("version: takes no arguments, got %q", args[0])
	}
	printVersion(stdout)
	return nil
}

// usageError is bad input: a flag, a value or a command. Status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...)}
}

// exitError carries a specific status, with a message (which may be empty).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// exitCode prints err as one line and maps it to a status.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	code := 1
	var ue *usageError
	var ee *exitError
	switch {
	case errors.As(err, &ue):
		code = 2
	case errors.As(err, &ee):
		code = ee.code
	}
	if msg := oneLine(err.Error()); msg != "" {
		fmt.Fprintf(stderr, "redlock-bench: %s\n", msg)
	}
	return code
}

// oneLine joins the lines of msg with "; ", so that an error made of
// several (errors.Join, an engine error that spans lines) is still the one
// line a script reads, and drops the package prefixes inside it.
func oneLine(msg string) string {
	lines := strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	lines = slices.DeleteFunc(lines, func(l string) bool { return l == "" })
	msg = strings.Join(lines, "; ")
	// A package's prefix inside the message says nothing the reader
	// needs ("merge: X is not a run directory: results: open ...").
	for _, pkg := range []string{"results: ", "bench: ", "fault: "} {
		msg = strings.ReplaceAll(msg, ": "+pkg, ": ")
	}
	return msg
}
