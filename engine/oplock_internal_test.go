package engine

import (
	"sync"
	"testing"
	"time"
)

// opLock excludes (the counter is not atomic: -race sees any overlap),
// loses no wake-up (every goroutine gets through), and stays usable after
// every contention pattern.
func TestOpLockExcludesAndWakesEveryWaiter(t *testing.T) {
	var o opLock
	var inside, total int
	var wg sync.WaitGroup
	const goroutines, rounds = 16, 500
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				o.Lock()
				inside++
				if inside != 1 {
					t.Errorf("%d holders at once", inside)
				}
				total++
				if (g+i)%7 == 0 {
					time.Sleep(time.Microsecond) // let waiters pile up
				}
				inside--
				o.Unlock()
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(time.Minute):
		t.Fatal("goroutines still blocked after a minute: a lost wake-up")
	}
	if total != goroutines*rounds {
		t.Fatalf("%d critical sections, want %d", total, goroutines*rounds)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held || o.waiters != 0 {
		t.Fatalf("after every Unlock: held %v, %d waiters", o.held, o.waiters)
	}
}
