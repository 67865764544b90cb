package bench

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

const clockMonotonic = 1 // CLOCK_MONOTONIC, the clock of Go's monotonic readings

// newTimerFD opens a non-blocking timerfd, which os.NewFile registers with
// the runtime's poller: a Read parks the goroutine, not a thread.
func newTimerFD() (*os.File, error) {
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return nil, os.NewSyscallError("timerfd_create", errno)
	}
	return os.NewFile(fd, "timerfd"), nil
}

// armTimerFD makes the timer fire once, d from now.
func armTimerFD(f *os.File, d time.Duration) error {
	spec := struct{ interval, value syscall.Timespec }{value: syscall.NsecToTimespec(int64(d))}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	}); err != nil {
		return err
	}
	if errno != 0 {
		return os.NewSyscallError("timerfd_settime", errno)
	}
	return nil
}
