package bench

import (
	"sync"
	"testing"
	"time"
)

func TestOracle(t *testing.T) {
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		name string
		run  func(o *oracle)
		want int64
	}{
		{"one after the other", func(o *oracle) {
			o.acquire(0, 1, at(0), at(100))
			o.release(0, 1, at(10))
			o.acquire(0, 2, at(11), at(111))
			o.release(0, 2, at(20))
		}, 0},
		{"second begins while first holds", func(o *oracle) {
			o.acquire(0, 1, at(0), at(100))
			o.acquire(0, 2, at(5), at(105))
		}, 1},
		{"first expired before second began", func(o *oracle) {
			o.acquire(0, 1, at(0), at(100))
			o.acquire(0, 2, at(101), at(201))
			o.release(0, 1, at(150)) // released late: it lost its lease at 100
			o.acquire(0, 3, at(202), at(300))
		}, 0},
		{"second registered after the first was already gone, but began before it ended", func(o *oracle) {
			o.acquire(0, 1, at(0), at(100))
			o.release(0, 1, at(50))
			o.acquire(0, 2, at(40), at(140)) // began at 40, while 1 held until 50
		}, 1},
		{"other resources do not interfere", func(o *oracle) {
			o.acquire(0, 1, at(0), at(100))
			o.acquire(1, 2, at(5), at(105))
			o.acquire(2, 3, at(6), at(106))
		}, 0},
		{"three holders at once are three pairs", func(o *oracle) {
			o.acquire(0, 1, at(0), at(100))
			o.acquire(0, 2, at(1), at(100))
			o.acquire(0, 3, at(2), at(100))
		}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOracle(base, []string{"r0", "r1", "r2"})
			c.run(o)
			n, ex := o.violations()
			if n != c.want {
				t.Fatalf("violations = %d, want %d (%+v)", n, c.want, ex)
			}
			if n > 0 && (len(ex) == 0 || ex[0].Resource != "r0") {
				t.Errorf("examples = %+v", ex)
			}
		})
	}
}

func TestOracleKeepsFewExamples(t *testing.T) {
	base := time.Now()
	o := newOracle(base, []string{"r"})
	for i := 0; i < 100; i++ {
		o.acquire(0, i, base.Add(time.Duration(i)), base.Add(time.Hour))
	}
	n, ex := o.violations()
	if n != 100*99/2 || len(ex) != maxExamples {
		t.Errorf("count %d examples %d, want %d and %d", n, len(ex), 100*99/2, maxExamples)
	}
}

func TestOracleConcurrentDisjointResources(t *testing.T) {
	names := make([]string, 8)
	o := newOracle(time.Now(), names)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				now := time.Now()
				o.acquire(w, w, now, now.Add(time.Second))
				o.release(w, w, time.Now())
			}
		}()
	}
	wg.Wait()
	if n, _ := o.violations(); n != 0 {
		t.Errorf("%d violations with one worker per resource", n)
	}
}

func BenchmarkOracle(b *testing.B) {
	names := make([]string, 1000)
	o := newOracle(time.Now(), names)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			now := time.Now()
			r := i % len(names)
			o.acquire(r, 0, now, now.Add(time.Second))
			o.release(r, 0, now)
			i += 7
		}
	})
}
