package engine

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Config.Wait.Rand makes Lock's random delays reproducible: two Lockers seeded
// alike draw the same delays, and the delays stay within their bounds.
func TestConfigRandSeedsTheDelays(t *testing.T) {
	draw := func(seed uint64) []time.Duration {
		l := &Locker{cfg: Config{Wait: WaitOptions{Rand: rand.New(rand.NewPCG(seed, 0))}}}
		var ds []time.Duration
		for range 50 {
			d := l.jitter(5*time.Millisecond, 50*time.Millisecond)
			if d < 5*time.Millisecond || d >= 50*time.Millisecond {
				t.Fatalf("delay %s outside [5ms, 50ms)", d)
			}
			ds = append(ds, d)
		}
		return ds
	}
	a, b, c := draw(7), draw(7), draw(8)
	same := func(x, y []time.Duration) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Fatal("two Lockers seeded alike drew different delays")
	}
	if same(a, c) {
		t.Fatal("different seeds drew the same 50 delays")
	}
}
