//go:build !linux

package main

import "syscall"

// commandAttr puts COMMAND in its own process group, so that the stop
// signals reach its children. Only Linux has a parent-death signal.
func commandAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
