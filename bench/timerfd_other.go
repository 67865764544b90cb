//go:build !linux

package bench

import (
	"errors"
	"os"
	"time"
)

func newTimerFD() (*os.File, error) { return nil, errors.New("no timerfd on this system") }

func armTimerFD(*os.File, time.Duration) error { return errors.New("no timerfd on this system") }
