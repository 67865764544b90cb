package bench

import (
	"container/heap"
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
	q    sleepQueue
	next time.Time // what the timer is armed for; zero when disarmed
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
	s.q.push(sleepEntry{at: at, c: c})
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
			case s.q.pop().c <- struct{}{}:
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
			case s.q.pop().c <- struct{}{}:
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

// sleepQueue is a min-heap of entries by deadline, kept by container/heap.
type sleepQueue []sleepEntry

func (q sleepQueue) Len() int           { return len(q) }
func (q sleepQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q sleepQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *sleepQueue) Push(x any)        { *q = append(*q, x.(sleepEntry)) }
func (q *sleepQueue) Pop() any          { e := (*q)[len(*q)-1]; *q = (*q)[:len(*q)-1]; return e }

// push and pop do what heap.Push and heap.Pop do (Push and Pop above only
// complete heap.Interface) without boxing the entry in an interface, which
// cost two allocations per sleep; heap.Fix does the sifting.
func (q *sleepQueue) push(e sleepEntry) {
	*q = append(*q, e)
	heap.Fix(q, len(*q)-1)
}

func (q *sleepQueue) pop() sleepEntry {
	n := len(*q) - 1
	q.Swap(0, n)
	e := (*q)[n]
	(*q)[n] = sleepEntry{} // let the channel be collected
	*q = (*q)[:n]
	if n > 0 {
		heap.Fix(q, 0)
	}
	return e
}
