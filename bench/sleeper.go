package bench

import (
	"os"
	"sync"
	"time"
)

// sleeper wakes goroutines at their deadlines from one kernel
// high-resolution timer (a timerfd on Linux). The Go runtime's timers are
// late by up to a millisecond whenever its threads are idle, because it
// waits in epoll with a timeout in whole milliseconds: a --hold 1ms took
// 1.36ms at the median, which made the workload a third longer than asked
// for and its open-loop starts late. An fd in the runtime's poller wakes
// it as soon as the timer fires.
type sleeper struct {
	f  *os.File
	wg sync.WaitGroup

	mu   sync.Mutex
	q    []sleepEntry // binary min-heap by at
	next time.Time    // what the timer is armed for; zero when disarmed
}

type sleepEntry struct {
	at time.Time
	c  chan struct{}
}

// newSleeper returns nil where there is no high-resolution timer; callers
// fall back to the runtime's timers.
func newSleeper() *sleeper {
	f, err := newTimerFD()
	if err != nil {
		return nil
	}
	s := &sleeper{f: f}
	s.wg.Add(1)
	go s.loop()
	return s
}

// sleep waits until d has passed, and returns true; or until stop closes,
// and returns false. c is the caller's own channel, with room for one
// signal, reused from one sleep to the next; a sleep cut short by stop may
// leave a signal in it, so it must not be used again after that.
func (s *sleeper) sleep(d time.Duration, c chan struct{}, stop <-chan struct{}) bool {
	at := time.Now().Add(d)
	s.mu.Lock()
	s.push(sleepEntry{at: at, c: c})
	if s.next.IsZero() || at.Before(s.next) {
		s.arm(at)
	}
	s.mu.Unlock()
	select {
	case <-c:
		return true
	case <-stop:
		return false
	}
}

func (s *sleeper) loop() {
	defer s.wg.Done()
	var buf [8]byte
	for {
		if _, err := s.f.Read(buf[:]); err != nil {
			return // closed
		}
		s.mu.Lock()
		now := time.Now()
		// Never early: an entry is due only by the same clock it was set by.
		for len(s.q) > 0 && !s.q[0].at.After(now) {
			select {
			case s.pop().c <- struct{}{}:
			default:
			}
		}
		s.next = time.Time{}
		if len(s.q) > 0 {
			s.arm(s.q[0].at)
		}
		s.mu.Unlock()
	}
}

// arm sets the timer to fire at at. The caller holds s.mu.
func (s *sleeper) arm(at time.Time) {
	d := time.Until(at)
	if d < time.Microsecond {
		d = time.Microsecond // zero would disarm it
	}
	if err := armTimerFD(s.f, d); err != nil {
		// Cannot happen with a valid fd and duration; wake everyone
		// rather than leave them asleep.
		for len(s.q) > 0 {
			select {
			case s.pop().c <- struct{}{}:
			default:
			}
		}
		return
	}
	s.next = at
}

// close stops the sleeper; sleeps still pending never end by themselves.
func (s *sleeper) close() {
	if s == nil {
		return
	}
	s.f.Close()
	s.wg.Wait()
}

func (s *sleeper) push(e sleepEntry) {
	s.q = append(s.q, e)
	for i := len(s.q) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.q[i].at.Before(s.q[p].at) {
			break
		}
		s.q[i], s.q[p] = s.q[p], s.q[i]
		i = p
	}
}

func (s *sleeper) pop() sleepEntry {
	top := s.q[0]
	last := len(s.q) - 1
	s.q[0] = s.q[last]
	s.q[last] = sleepEntry{}
	s.q = s.q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && s.q[l].at.Before(s.q[m].at) {
			m = l
		}
		if r < last && s.q[r].at.Before(s.q[m].at) {
			m = r
		}
		if m == i {
			break
		}
		s.q[i], s.q[m] = s.q[m], s.q[i]
		i = m
	}
	return top
}
