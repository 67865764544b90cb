package bench

import (
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
)

func TestSleeperNeverWakesEarly(t *testing.T) {
	s := newSleeper()
	if s == nil {
		t.Skip("no high-resolution timer on this system")
	}
	defer s.close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			c := make(chan struct{}, 1)
			for i := 0; i < 50; i++ {
				// Deadlines that interleave across goroutines, so that
				// later sleeps often arrive with an earlier deadline.
				d := time.Duration(rng.IntN(2000)) * time.Microsecond
				t0 := time.Now()
				if !s.sleep(d, c, stop) {
					t.Error("sleep reported a stop that never came")
					return
				}
				if got := time.Since(t0); got < d {
					t.Errorf("sleep(%v) woke after %v", d, got)
				}
			}
		}()
	}
	wg.Wait()
}

func TestSleeperStops(t *testing.T) {
	s := newSleeper()
	if s == nil {
		t.Skip("no high-resolution timer on this system")
	}
	stop := make(chan struct{})
	res := make(chan bool)
	for i := 0; i < 3; i++ {
		go func() { res <- s.sleep(time.Hour, make(chan struct{}, 1), stop) }()
	}
	close(stop)
	for i := 0; i < 3; i++ {
		select {
		case woke := <-res:
			if woke {
				t.Fatal("an hour's sleep reported it ran to its end")
			}
		case <-time.After(time.Minute): // a hang guard
			t.Fatal("sleep did not return when stopped")
		}
	}
	done := make(chan struct{})
	go func() { s.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("close did not end the sleeper's goroutine")
	}
}

// BenchmarkHoldSleep measures how late a 1ms sleep ends with the runtime's
// timers and with the sleeper, ten sleepers at a time as in a hot-key run
// (-bench HoldSleep; the late-µs metric is the mean overshoot).
func BenchmarkHoldSleep(b *testing.B) {
	const d = time.Millisecond
	run := func(b *testing.B, sleep func(c chan struct{}, t *time.Timer)) {
		var mu sync.Mutex
		var late time.Duration
		b.SetParallelism(5) // 10 goroutines on 2 CPUs
		b.RunParallel(func(pb *testing.PB) {
			c, t := make(chan struct{}, 1), time.NewTimer(time.Hour)
			var mine time.Duration
			for pb.Next() {
				t0 := time.Now()
				sleep(c, t)
				mine += time.Since(t0) - d
			}
			mu.Lock()
			late += mine
			mu.Unlock()
		})
		b.ReportMetric(float64(late.Microseconds())/float64(b.N), "late-µs/op")
	}
	b.Run("timer", func(b *testing.B) {
		run(b, func(_ chan struct{}, t *time.Timer) { t.Reset(d); <-t.C })
	})
	b.Run("sleeper", func(b *testing.B) {
		s := newSleeper()
		if s == nil {
			b.Skip("no high-resolution timer on this system")
		}
		defer s.close()
		stop := make(chan struct{})
		run(b, func(c chan struct{}, _ *time.Timer) { s.sleep(d, c, stop) })
	})
}

// TestSleepQueueOrder checks the heap without the clock: entries come out by
// deadline, whatever order they went in and however pushes and pops mix.
func TestSleepQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	base := time.Now()
	var q sleepQueue
	var want []time.Time // what is in q, kept sorted
	for i := 0; i < 2000; i++ {
		if len(want) == 0 || rng.IntN(3) > 0 {
			at := base.Add(time.Duration(rng.IntN(1000)) * time.Microsecond)
			q.push(sleepEntry{at: at})
			j := sort.Search(len(want), func(k int) bool { return want[k].After(at) })
			want = slices.Insert(want, j, at)
			continue
		}
		got := q.pop()
		if !got.at.Equal(want[0]) {
			t.Fatalf("step %d: pop gave %v, want the earliest %v", i, got.at.Sub(base), want[0].Sub(base))
		}
		want = want[1:]
		if len(q) != len(want) {
			t.Fatalf("step %d: %d entries left, want %d", i, len(q), len(want))
		}
	}
}
