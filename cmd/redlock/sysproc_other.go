//go:build !linux

package main

import (
	"os/signal"
	"syscall"
)

// commandAttr puts COMMAND in its own process group, so that the stop
// signals reach its children. Only Linux has a parent-death signal.
func commandAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// startedIgnoring is signal.Ignored, which misses an inherited ignored
// SIGTSTP; only Linux tells it (/proc/self/status).
func startedIgnoring(sig syscall.Signal) bool { return signal.Ignored(sig) }
