package bench

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// newTimerFD opens a non-blocking timerfd on CLOCK_MONOTONIC (the clock of
// Go's monotonic readings), which os.NewFile registers with the runtime's
// poller: a Read parks the goroutine, not a thread.
func newTimerFD() (*os.File, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("timerfd_create", err)
	}
	return os.NewFile(uintptr(fd), "timerfd"), nil
}

// armTimerFD makes the timer fire once, d from now.
func armTimerFD(f *os.File, d time.Duration) error {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.TimerfdSettime(int(fd), 0, &spec, nil)
	}); err != nil {
		return err
	}
	if serr != nil {
		return os.NewSyscallError("timerfd_settime", serr)
	}
	return nil
}
