package bench

import (
	"container/heap"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// simulateHotKeys models the hot-key workload with a perfect lock: workers
// in a closed loop each pick one of resources uniformly, queue FIFO behind
// whoever holds it, hold it for hold, and hand it to the next in line after
// overhead. It returns acquisitions/s and the wait's median and p99.
func simulateHotKeys(workers, resources int, hold, overhead time.Duration, events int, seed uint64) (perSec float64, p50, p99 time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 1))
	queues := make([][]time.Duration, resources) // arrival times of the waiting
	busy := make([]bool, resources)
	var ends endHeap
	var waits []time.Duration
	arrive := func(now time.Duration) {
		r := rng.IntN(resources)
		if !busy[r] {
			busy[r] = true
			waits = append(waits, 0)
			heap.Push(&ends, end{now + hold, r})
			return
		}
		queues[r] = append(queues[r], now)
	}
	for range workers {
		arrive(0)
	}
	var now time.Duration
	for range events {
		e := heap.Pop(&ends).(end)
		now = e.at
		if q := queues[e.r]; len(q) > 0 {
			start := now + overhead
			waits = append(waits, start-q[0])
			queues[e.r] = q[1:]
			heap.Push(&ends, end{start + hold, e.r})
		} else {
			busy[e.r] = false
		}
		arrive(now) // the releasing worker comes back at once
	}
	waits = waits[len(waits)/20:] // past the start, when every queue was short
	slices.Sort(waits)
	return float64(events) / now.Seconds(), waits[len(waits)/2], waits[len(waits)*99/100]
}

type end struct {
	at time.Duration
	r  int
}

type endHeap []end

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(end)) }
func (h *endHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// TestHotKeysWaitFloor is the queueing floor of the hot-key workload
// (--resources 10 --workers 64 --mode wait --hold 1ms), which the README
// quotes: even a lock with no overhead at all cannot bring the wait p99
// much under 25ms, because random choices make some queues long. Run it
// with -v to see the table.
func TestHotKeysWaitFloor(t *testing.T) {
	type row struct{ hold, overhead time.Duration }
	p99s := map[row][]time.Duration{}
	for _, r := range []row{{time.Millisecond, 0}, {1050 * time.Microsecond, 0}, {1050 * time.Microsecond, 25 * time.Microsecond}} {
		for seed := uint64(1); seed <= 3; seed++ {
			perSec, p50, p99 := simulateHotKeys(64, 10, r.hold, r.overhead, 200000, seed)
			t.Logf("hold %v, hand-off %v, seed %d: %.0f/s, wait p50 %v, p99 %v", r.hold, r.overhead, seed, perSec, p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond))
			p99s[r] = append(p99s[r], p99)
			// Little's law: 54 workers wait on average, so the mean wait
			// is 54/throughput; the throughput cannot pass 10/hold.
			if max := 10 / r.hold.Seconds(); perSec > max {
				t.Errorf("%.0f/s is more than 10 resources can give at %v a hold (%.0f/s)", perSec, r.hold, max)
			}
		}
	}
	for _, p99 := range p99s[row{time.Millisecond, 0}] {
		if p99 < 20*time.Millisecond || p99 > 30*time.Millisecond {
			t.Errorf("perfect lock, 1ms holds: wait p99 %v, outside the 20-30ms the README's reasoning rests on", p99)
		}
	}
}
