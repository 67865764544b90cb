package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// commandAttr puts COMMAND in its own process group, so that the stop
// signals reach its children; the parent-death signal stops it if redlock
// is killed with SIGKILL, instead of letting it run on unlocked.
func commandAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// startedIgnoring reports whether SIGTSTP (or another signal the Go
// runtime leaves at its inherited disposition until Notify) is ignored;
// signal.Ignored knows only of SIGHUP and SIGINT.
func startedIgnoring(sig syscall.Signal) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && mask&(1<<(sig-1)) != 0
		}
	}
	return false
}
