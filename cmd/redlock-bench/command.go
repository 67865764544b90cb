package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/results"
)

// The frame every command shares, so that each states only what differs:
// main finds the command and answers its help; parseFlags reads its flags
// and words every bad one alike; a session (for the commands that drive
// load) prints the connection warning, serves --metrics-addr, makes the
// results directory and hands out the progress and log writers; and its
// notStarted and interrupted turn an early end or Ctrl-C into the status.

// newFlagSet is a command's empty flag set: errors are returned, never
// printed (exitCode prints them as one line), and the flags are listed in
// the order they are added.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args into fs. A bad flag or value is a usage error in
// the one shape of every bad value: `--workers: want an integer, got
// "many"`.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return flagValueError(fs, err)
	}
	return nil
}

// noArgs refuses the positional arguments of a command that takes flags
// only.
func noArgs(fs *pflag.FlagSet) error {
	if fs.NArg() > 0 {
		return usageErrorf("%s: unexpected argument %q (flags only)", fs.Name(), fs.Arg(0))
	}
	return nil
}

// flagValueError restates pflag's error, `invalid argument "x" for
// "--workers" flag: strconv...`, in the same shape as every other bad
// value.
func flagValueError(fs *pflag.FlagSet, err error) error {
	msg := err.Error()
	valueErr := regexp.MustCompile(`^invalid argument "(.*)" for "(?:-\w, )?(--[\w-]+)" flag: (?:[\w.]+: )?(?:parsing "[^"]*": )?(.*)$`)
	if m := valueErr.FindStringSubmatch(msg); m != nil {
		want := m[3]
		if f := fs.Lookup(strings.TrimPrefix(m[2], "--")); f != nil {
			want = "want " + typeName(f.Value.Type())
		}
		msg = fmt.Sprintf("%s: %s, got %q", m[2], want, m[1])
	}
	return &usageError{msg: msg}
}

// typeName says in words what a flag of pflag type t accepts.
func typeName(t string) string {
	switch t {
	case "int", "int64", "uint64":
		return "an integer"
	case "float64":
		return "a number"
	case "duration":
		return "a duration such as 500ms or 10s"
	case "bool":
		return "true or false"
	}
	return "a " + t
}

// badFlag is the usage error of a flag's bad value.
func badFlag(flag, value, reason string) error {
	return &usageError{msg: (&bench.ConfigError{Flag: flag, Value: value, Reason: reason}).Error()}
}

// asUsage makes a configuration's refusal (a *bench.ConfigError, or any
// error of a Validate) bad input.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{msg: err.Error()}
}

// sessionSpec is what differs between the sessions of the commands that
// drive load.
type sessionSpec struct {
	// warning is the connection flags' warning (a password on the
	// command line), printed once; empty for none.
	warning string
	// metricsAddr is --metrics-addr; empty for no metrics server.
	metricsAddr string
	// out is --out; empty for parent/<UTC timestamp>-<label>.
	out, parent, label string
	// holds are the result files an --out directory must not hold
	// already: it would mix two results.
	holds []string
	// quiet shows progress on a terminal only (-q, --json).
	quiet bool
}

// session is what a command that drives load holds while it works: the
// results directory, the metrics server, and where progress and
// informational lines go.
type session struct {
	dir     string
	created bool // dir is new: an early end removes it
	// metrics serves --metrics-addr; nil without it. Its Observer goes
	// into the engine's configuration.
	metrics *bench.MetricsServer
	// progress receives the once-a-second line, rewritten in place when
	// inPlace (a terminal); nil for none.
	progress io.Writer
	inPlace  bool
	// log receives informational lines, each prefixed with the command.
	log io.Writer
}

// openSession prints the warning, starts the metrics server and makes the
// directory, in that order, so that a taken port leaves no directory
// behind. The caller must close the session.
func openSession(stderr io.Writer, spec sessionSpec) (*session, error) {
	warn(stderr, spec.warning)
	s := &session{progress: stderr, inPlace: isTerminal(stderr), log: prefixWriter{w: stderr}}
	if spec.quiet && !s.inPlace {
		s.progress = nil // one line was asked for; a terminal still sees the work move
	}
	if spec.metricsAddr != "" {
		m, err := bench.StartMetrics(spec.metricsAddr)
		if err != nil {
			return nil, err
		}
		s.metrics = m
		fmt.Fprintf(s.log, "serving metrics at http://%s%s\n", m.Addr, bench.MetricsPath)
	}
	var err error
	if s.dir, s.created, err = makeOutDir(spec.out, spec.parent, spec.label, time.Now(), spec.holds...); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// close stops the metrics server, once the command's work is over.
func (s *session) close() {
	if s.metrics == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.metrics.Close(ctx); err != nil {
		fmt.Fprintf(s.log, "metrics server: %v\n", err)
	}
	s.metrics = nil
}

// notStarted is the error of work that produced nothing (what: "run",
// "sweep", ...): its directory goes, an interruption exits 130, and a bad
// configuration is a usage error.
func (s *session) notStarted(ctx context.Context, what string, err error) error {
	if s.created {
		os.RemoveAll(s.dir) // nothing worth keeping
	}
	if ctx.Err() != nil {
		return &exitError{code: exitInterrupted, msg: fmt.Sprintf("interrupted before the %s started: %v", what, err)}
	}
	var ce *bench.ConfigError
	if errors.As(err, &ce) {
		return &usageError{msg: ce.Error()}
	}
	return err
}

// interrupted is the error of work cut short, whose partial results are in
// the session's directory.
func (s *session) interrupted() error {
	return &exitError{code: exitInterrupted, msg: "interrupted: partial results in " + s.dir}
}

// violated is the error of results in which the oracle found the lock's
// rule broken (two holders of one resource overlapped; more holders of a
// semaphore than permits; a writer beside another holder): n violations, by whom (the engines of a
// comparison; empty for one run), with lock (--lock), to be seen in where.
func violated(n int64, whom, lock, where string) error {
	if whom != "" {
		whom = " (" + whom + ")"
	}
	what := "two holders of one resource overlapped"
	if strings.HasPrefix(lock, "semaphore:") || strings.HasPrefix(lock, "rw:") {
		what = results.BrokenRule(lock)
	}
	return &exitError{code: 1, msg: fmt.Sprintf("%d safety violations%s: %s (see %s)", n, whom, what, where)}
}

// makeRunDir creates a run's results directory (see makeOutDir): without
// --out, results/runs/<UTC timestamp>-<label>. An explicit --out may exist
// but must not already hold a run.
func makeRunDir(out, label string, now time.Time) (dir string, created bool, err error) {
	return makeOutDir(out, runsDir, label, now, results.SummaryJSON)
}

// runsDir is where runs, comparisons and soaks go without --out.
var runsDir = filepath.Join("results", "runs")

// makeOutDir creates --out, refusing one that already holds any of the
// given result files, or else parent/<UTC timestamp>-<label>, with a
// numeric suffix if two start in the same second. created reports whether
// the directory is new, so that a failed command can remove what it made.
func makeOutDir(out, parent, label string, now time.Time, holds ...string) (dir string, created bool, err error) {
	if out != "" {
		for _, f := range holds {
			if _, err := os.Stat(filepath.Join(out, f)); err == nil {
				what := strings.TrimSuffix(f, ".json")
				if f == results.SummaryJSON {
					what = "run"
				}
				return "", false, usageErrorf("--out: directory already holds a %s, got %s", what, out)
			}
		}
		_, statErr := os.Stat(out)
		if err := os.MkdirAll(out, 0o755); err != nil {
			return "", false, usageErrorf("--out: cannot create the directory (%v), got %s", err, out)
		}
		return out, os.IsNotExist(statErr), nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", false, fmt.Errorf("create %s: %w", parent, err)
	}
	base := filepath.Join(parent, now.UTC().Format("20060102T150405Z")+"-"+label)
	dir = base
	for i := 2; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, true, nil
		}
		if !os.IsExist(err) || i > 100 {
			return "", false, fmt.Errorf("create %s: %w", dir, err)
		}
		dir = fmt.Sprintf("%s-%d", base, i)
	}
}

// isTerminal reports whether w is a terminal, where the progress line can
// be rewritten in place. A character device is not enough: /dev/null is
// one, and a run sent there must not write carriage returns.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// warn prints a warning line on stderr, if there is one.
func warn(stderr io.Writer, warning string) {
	if warning != "" {
		fmt.Fprintln(prefixWriter{w: stderr}, warning)
	}
}

// prefixWriter prefixes each informational line with the command's name.
// Each Write is one line: line breaks inside it (an error of several) are
// joined as exitCode joins them.
type prefixWriter struct{ w io.Writer }

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := fmt.Fprintf(p.w, "redlock-bench: %s\n", oneLine(string(b))); err != nil {
		return 0, err
	}
	return len(b), nil
}
