//go:build unix

package bench

import "syscall"

// processCPU is this process's CPU time so far, user + system, in
// seconds; 0 when it cannot be read.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
