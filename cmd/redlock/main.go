// Command redlock runs commands under a Redlock lock: a distributed
// flock(1). See 'redlock exec --help'.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/redlock-bench/redlock/internal/version"
)

const usage = `redlock runs commands under a distributed lock (Redlock) held on
independent Redis masters.

Usage:
  redlock exec [flags] RESOURCE -- COMMAND [ARG...]   run COMMAND while holding RESOURCE
  redlock help                                        show this help
  redlock --version                                   the version, VCS revision and Go version

Run 'redlock exec --help' for its flags and exit statuses.
`

// Exit statuses of redlock's own outcomes. Everything else is the
// command's status. The sysexits(3) values sit above what commands
// usually return; lost follows timeout(1), which also reports with 124 a
// command it stopped, and 126/127 follow the shell.
const (
	exitUsage       = 64  // EX_USAGE: bad flags, arguments or environment
	exitUnavailable = 69  // EX_UNAVAILABLE: masters unreachable, no quorum
	exitSoftware    = 70  // EX_SOFTWARE: any other failure of redlock's own
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
	if wantsVersion(args) {
		fmt.Fprintln(stdout, version.Get().Line("redlock"))
		return 0
	}
	var err error
	switch args[0] {
	case "exec":
		err = execCommand(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		err = usageErrorf("unknown command %q (known: exec, help)", args[0])
	}
	return exitCode(err, stderr)
}

// wantsVersion reports whether --version comes before the "--" that
// starts the command, on any subcommand.
func wantsVersion(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--version" || (a == "version" && a == args[0]) {
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
