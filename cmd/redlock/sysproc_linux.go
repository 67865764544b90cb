package main

import "syscall"

// commandAttr puts COMMAND in its own process group, so that the stop
// signals reach its children; the parent-death signal stops it if redlock
// is killed with SIGKILL, instead of letting it run on unlocked.
func commandAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
