// Command redlock runs commands under a Redlock lock, a distributed
// flock(1), and shows and clears the locks on the masters. See 'redlock
// help'.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/redlock-bench/redlock/internal/version"
)

const usage = `redlock runs commands under a distributed lock (Redlock) held on
independent Redis masters, and shows and clears those locks.

Usage:
  redlock exec [flags] RESOURCE -- COMMAND [ARG...]   run COMMAND while holding RESOURCE
                                                      (a lock, --permits P, --shared, --exclusive)
  redlock status [flags] RESOURCE...                  who holds each RESOURCE, until when, who waits
  redlock list [flags] [--prefix P]                   the names held on the masters
  redlock unlock [flags] RESOURCE --value V           release RESOURCE for its holder V
  redlock help [COMMAND]                              this help, or COMMAND's
  redlock version                                     the version, VCS revision and Go version
                                                      (also --version, alone or among exec's flags)

Run 'redlock help COMMAND' ('redlock help exec', or 'redlock exec --help')
for a command's flags and exit statuses.
`

// Exit statuses of redlock's own outcomes. Everything else is the
// command's status. The sysexits(3) values sit above what commands
// usually return; lost follows timeout(1), which also reports with 124 a
// command it stopped, and 126/127 follow the shell.
const (
	exitUsage       = 64  // EX_USAGE: bad flags, arguments or environment
	exitUnavailable = 69  // EX_UNAVAILABLE: masters unreachable, no quorum
	exitSoftware    = 70  // EX_SOFTWARE: any other failure of redlock's own
	exitNoHolder    = 66  // EX_NOINPUT: unlock: no such holder
	exitNotAcquired = 75  // EX_TEMPFAIL: the resource is held by another
	exitConfig      = 78  // EX_CONFIG: masters or key unusable as configured
	exitLost        = 124 // the lock was lost, and the command stopped
	exitCannotRun   = 126 // COMMAND found but could not be started
	exitNotFound    = 127 // COMMAND not found
)

func main() {
	// With SIGPIPE caught, a write to a closed stderr fails instead of
	// killing redlock with its lock held and COMMAND running; COMMAND
	// starts with the default action, as every caught signal.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "exec":
		// --version among exec's flags wins over the rest, as --help
		// does, so that a script can check the version with its usual
		// flags.
		if execWantsVersion(args[1:]) {
			fmt.Fprintln(stdout, version.Get().Line("redlock"))
			return 0
		}
		err = execCommand(args[1:], stdout, stderr)
	case "status":
		err = statusCommand(args[1:], stdout, stderr)
	case "list":
		err = listCommand(args[1:], stdout, stderr)
	case "unlock":
		err = unlockCommand(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		err = help(args[1:], stdout)
	case "version", "--version":
		if len(args) > 1 {
			err = usageErrorf("%s takes no arguments, got %s", args[0], quoteAll(args[1:]))
			break
		}
		fmt.Fprintln(stdout, version.Get().Line("redlock"))
	default:
		err = usageErrorf("unknown command %q (known: exec, status, list, unlock, help, version)", args[0])
	}
	return exitCode(err, stderr)
}

// help prints the help on topic (none, "help" or a command).
func help(topic []string, stdout io.Writer) error {
	switch {
	case len(topic) > 1:
		return usageErrorf("help takes one topic, got %s (see 'redlock help')", quoteAll(topic))
	case len(topic) == 0 || topic[0] == "help":
		fmt.Fprint(stdout, usage)
		return nil
	case topic[0] == "exec":
		_, err := parseExec([]string{"--help"}, stdout)
		return err
	case topic[0] == "status":
		_, err := parseStatus([]string{"--help"}, stdout)
		return err
	case topic[0] == "list":
		_, err := parseList([]string{"--help"}, stdout)
		return err
	case topic[0] == "unlock":
		_, err := parseUnlock([]string{"--help"}, stdout)
		return err
	}
	return usageErrorf("unknown help topic %q (known: exec, status, list, unlock)", topic[0])
}

// quoteAll quotes each argument, so that one with a space or a line
// break reads as one.
func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}

// execWantsVersion reports whether --version is among exec's arguments,
// before the "--" that starts the command.
func execWantsVersion(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--version" {
			return true
		}
	}
	return false
}

// statusError is an outcome with its exit status and a message, which may
// be empty (the command's own status says it all).
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

func usageErrorf(format string, a ...any) error {
	return &statusError{code: exitUsage, msg: fmt.Sprintf(format, a...)}
}

func statusErrorf(code int, format string, a ...any) error {
	return &statusError{code: code, msg: fmt.Sprintf(format, a...)}
}

// exitCode prints err as one line and maps it to a status.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	code := exitSoftware
	var se *statusError
	if errors.As(err, &se) {
		code = se.code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "redlock: %s\n", msg)
	}
	return code
}
