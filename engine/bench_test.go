package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// benchLocker uses the five masters started by TestMain, with a node
// timeout of a second (patient), so that a loaded machine's stalls
// are measured rather than failed; mutate may change it.
func benchLocker(b *testing.B, mutate func(*engine.Config)) *engine.Locker {
	b.Helper()
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved
	patient(&cfg)
	if mutate != nil {
		mutate(&cfg)
	}
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// runID keeps resource names unique across the repeated invocations of a
// benchmark function, so no run meets a previous run's keys.
var runID atomic.Int64

// cycleSerial runs b.N TryLock+Release cycles, one caller at a time.
func cycleSerial(b *testing.B, l *engine.Locker) {
	ctx := context.Background()
	prefix := "bench:" + strconv.FormatInt(runID.Add(1), 10) + ":"
	names := make([]string, 1024)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		le, err := l.TryLock(ctx, names[i&1023])
		if err != nil {
			b.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// cycleParallel runs the same cycles from parallelism × GOMAXPROCS
// goroutines on distinct resources.
func cycleParallel(b *testing.B, l *engine.Locker, parallelism int) {
	ctx := context.Background()
	prefix := "pbench:" + strconv.FormatInt(runID.Add(1), 10) + ":"
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// A ring of names per goroutine: re-locking the name just
		// released can meet that lease's deletes still on their way when
		// the masters are slow, which is not the cost measured here.
		g := prefix + strconv.FormatInt(seq.Add(1), 10) + ":"
		names := make([]string, 64)
		for i := range names {
			names[i] = g + strconv.Itoa(i)
		}
		for i := 0; pb.Next(); i++ {
			le, err := l.TryLock(ctx, names[i&63])
			if err != nil {
				b.Error(err)
				return
			}
			if err := le.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// One TryLock+Release cycle on 5 masters, one caller at a time: the
// latency floor (two round trips to the slowest of the quorum).
func BenchmarkTryLockRelease(b *testing.B) { cycleSerial(b, benchLocker(b, nil)) }

// BenchmarkTryLockReleaseObserved is BenchmarkTryLockRelease with an
// Observer whose hooks do nothing: what the engine adds to build and hand
// out the events. Compare the two with -benchmem: the observer must add
// no allocation per cycle (TestObserverEventsDoNotAllocate checks the
// events alone, without the network's noise).
func BenchmarkTryLockReleaseObserved(b *testing.B) {
	nop := &engine.Observer{
		Acquire: func(context.Context, engine.AcquireEvent) {},
		Release: func(context.Context, engine.ReleaseEvent) {},
		Lost:    func(engine.LostEvent) {},
	}
	cycleSerial(b, benchLocker(b, func(c *engine.Config) { c.Observer = nop }))
}

// The same cycle from 128 goroutines: throughput, where each master's
// worker batches concurrent lockers' commands.
func BenchmarkTryLockReleaseParallel(b *testing.B) {
	cycleParallel(b, benchLocker(b, nil), 64)
}

// Cycles with each master's queued script calls coalesced into one call,
// or sent one by one: from 256 goroutines, and from one (where nothing
// queues, so both send the same commands and must cost the same).
func BenchmarkTryLockReleaseCoalesce(b *testing.B) {
	for _, off := range []bool{false, true} {
		b.Run(fmt.Sprintf("parallel/DisableCoalesce=%v", off), func(b *testing.B) {
			cycleParallel(b, benchLocker(b, func(c *engine.Config) { c.Conn.DisableCoalesce = off }), 128)
		})
		b.Run(fmt.Sprintf("serial/DisableCoalesce=%v", off), func(b *testing.B) {
			cycleSerial(b, benchLocker(b, func(c *engine.Config) { c.Conn.DisableCoalesce = off }))
		})
	}
}

// Three resources held together: by one TryLockAll and its Release (two
// round trips, one script over the three keys on each master), and by
// three TryLocks in a row then their three Releases (six round trips).
// The first must beat the second by at least 2x, and cost at most one
// round trip more than BenchmarkTryLockRelease (one resource). Both give
// the masters a node timeout of a second, so that a loaded machine's
// stalls are measured rather than failed.
func BenchmarkTryLockAll3Release(b *testing.B) {
	l := benchLocker(b, patient)
	ctx := context.Background()
	sets := benchSets(1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		le, err := l.TryLockAll(ctx, sets[i&1023]...)
		if err != nil {
			b.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTryLock3SequentialRelease(b *testing.B) {
	l := benchLocker(b, patient)
	ctx := context.Background()
	sets := benchSets(1024)
	var held [3]*engine.Lease
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, r := range sets[i&1023] {
			le, err := l.TryLock(ctx, r)
			if err != nil {
				b.Fatal(err)
			}
			held[j] = le
		}
		for j := 2; j >= 0; j-- {
			if err := held[j].Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// The same two cycles from 16 × GOMAXPROCS goroutines, each on sets of
// its own: throughput, where the mutex's commands coalesce on each
// master and TryLockAll's script calls do not.
func BenchmarkTryLockAll3ReleaseParallel(b *testing.B) {
	parallel3(b, func(ctx context.Context, l *engine.Lease, set []string, locker *engine.Locker) error {
		le, err := locker.TryLockAll(ctx, set...)
		if err != nil {
			return err
		}
		return le.Release(ctx)
	})
}

func BenchmarkTryLock3SequentialReleaseParallel(b *testing.B) {
	parallel3(b, func(ctx context.Context, _ *engine.Lease, set []string, locker *engine.Locker) error {
		var held [3]*engine.Lease
		for j, r := range set {
			le, err := locker.TryLock(ctx, r)
			if err != nil {
				return err
			}
			held[j] = le
		}
		for j := 2; j >= 0; j-- {
			if err := held[j].Release(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

func parallel3(b *testing.B, cycle func(context.Context, *engine.Lease, []string, *engine.Locker) error) {
	l := benchLocker(b, patient)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		sets := benchSets(64)
		for i := 0; pb.Next(); i++ {
			if err := cycle(ctx, nil, sets[i&63], l); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// benchSets is n sets of three resource names, unique to this run.
func benchSets(n int) [][]string {
	prefix := "bench3:" + strconv.FormatInt(runID.Add(1), 10) + ":"
	sets := make([][]string, n)
	for i := range sets {
		s := prefix + strconv.Itoa(i) + ":"
		sets[i] = []string{s + "a", s + "b", s + "c"}
	}
	return sets
}

// benchPermits is the permit count of the semaphore benchmarks: a pool's
// size, small enough that a full attempt stays cheap.
const benchPermits = 8

// semaphores makes n semaphores of benchPermits permits under prefix,
// each used once: a handle's first attempt also checks the permit count
// on the masters (see Semaphore), which the warm-up leaves out of the
// timed cycles, as a long-lived handle would.
func semaphores(b *testing.B, l *engine.Locker, prefix string, n int) []*engine.Semaphore {
	out := make([]*engine.Semaphore, n)
	var wg sync.WaitGroup
	busy := make(chan struct{}, 64) // as many warm-ups at once as the masters take without timeouts
	for i := range out {
		s, err := l.Semaphore(prefix+strconv.Itoa(i), benchPermits)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = s
		busy <- struct{}{}
		wg.Go(func() {
			defer func() { <-busy }()
			le, err := s.TryAcquire(context.Background())
			if err == nil {
				err = le.Release(context.Background())
			}
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	return out
}

// semCycleSerial runs b.N TryAcquire+Release cycles on one semaphore,
// one caller at a time. One semaphore, not a ring as cycleSerial's locks:
// a permit's Release waits for every master, so the next acquire of the
// same semaphore never meets its deletes on their way, and a semaphore is
// made to be taken again and again.
func semCycleSerial(b *testing.B, l *engine.Locker) {
	ctx := context.Background()
	s := semaphores(b, l, "sbench:"+strconv.FormatInt(runID.Add(1), 10)+":", 1)[0]
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		le, err := s.TryAcquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// semCycleParallel runs the same cycles from parallelism × GOMAXPROCS
// goroutines, each on a ring of ring semaphores of its own: uncontended.
func semCycleParallel(b *testing.B, l *engine.Locker, parallelism, ring int) {
	ctx := context.Background()
	prefix := "psbench:" + strconv.FormatInt(runID.Add(1), 10) + ":"
	rings := make([][]*engine.Semaphore, parallelism*runtime.GOMAXPROCS(0))
	all := semaphores(b, l, prefix, ring*len(rings))
	for g := range rings {
		rings[g] = all[ring*g : ring*(g+1)]
	}
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		sems := rings[int(seq.Add(1)-1)%len(rings)]
		for i := 0; pb.Next(); i++ {
			le, err := sems[i%ring].TryAcquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := le.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// One permit taken and given back on 5 masters, one caller at a time:
// compare with BenchmarkTryLockRelease. Once its handle has checked the
// permit count, a permit with room costs the lock's SET NX (a probe of
// one slot) and a release script.
func BenchmarkSemaphoreAcquireRelease(b *testing.B) { semCycleSerial(b, benchLocker(b, nil)) }

// The same cycle from 256 goroutines, each on a semaphore of its own:
// compare with BenchmarkTryLockReleaseCoalesce/parallel/DisableCoalesce=false,
// the lock's cycle from as many. With semaphores=16384, each goroutine
// takes turns over 64 semaphores, as the lock's benchmark does over 64
// names: each semaphore in use keeps its permit count on every master
// (for 2 MaxTTL), and 16384 of those keys make every command on the
// masters dearer.
func BenchmarkSemaphoreAcquireReleaseParallel(b *testing.B) {
	for _, ring := range []int{1, 64} {
		b.Run(fmt.Sprintf("semaphores=%d", ring*128*runtime.GOMAXPROCS(0)), func(b *testing.B) {
			semCycleParallel(b, benchLocker(b, nil), 128, ring)
		})
	}
}

// The read/write lock's cycles beside the mutex's, uncontended: Lock and
// Release of a plain lock, RLock and Release, and Lock and Release of an
// RWMutex. Every iteration runs one cycle of each kind, in turn (the
// first kind rotating), each on a ring of 64 names of its own per
// caller, so that the three meet the same noise; the metrics are each
// kind's mean cycle and the ratios read/mutex and write/mutex. Serial: one
// caller, the latency (two round trips a cycle). Parallel: 64 ×
// GOMAXPROCS callers, the latency under load, where each master's
// commands batch and coalesce. Quote the medians of the ratios over
// -count runs. The masters get a node timeout of a second, so that a
// loaded machine's stalls are measured rather than failed.
func BenchmarkRWMutexCycle(b *testing.B) {
	l := benchLocker(b, patient)
	for _, mode := range []string{"serial", "parallel"} {
		b.Run(mode, func(b *testing.B) {
			callers := 1
			if mode == "parallel" {
				callers = 64 * runtime.GOMAXPROCS(0)
			}
			kinds := []string{"mutex", "read", "write"}
			cycles := make([][]func(int) error, len(kinds))
			for k, kind := range kinds {
				cycles[k] = rwCycles(b, l, kind, callers)
			}
			var spent [3]atomic.Int64
			var done [3]atomic.Int64
			var seq atomic.Int64
			caller := func(next func() bool) {
				g := int(seq.Add(1)-1) % callers
				for i := 0; next(); i++ {
					for j := range kinds {
						k := (i + j) % len(kinds)
						began := time.Now()
						if err := cycles[k][g](i & 63); err != nil {
							b.Error(err)
							return
						}
						spent[k].Add(int64(time.Since(began)))
						done[k].Add(1)
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			if mode == "serial" {
				n := 0
				caller(func() bool { n++; return n <= b.N })
			} else {
				b.SetParallelism(64)
				b.RunParallel(func(pb *testing.PB) { caller(pb.Next) })
			}
			b.StopTimer()
			var mean [3]float64
			for k, kind := range kinds {
				mean[k] = float64(spent[k].Load()) / float64(max(done[k].Load(), 1)) / 1e3
				b.ReportMetric(mean[k], kind+"-µs/cycle")
			}
			b.ReportMetric(mean[1]/mean[0], "read/mutex")
			b.ReportMetric(mean[2]/mean[0], "write/mutex")
		})
	}
}

// rwCycles makes n callers' cycles of kind ("mutex", "read" or "write"),
// each over a ring of 64 names of its own; a read/write lock's handles
// are used once first, so that the timed cycles skip the handle's first
// check (see Locker.RWMutex), as a long-lived handle does.
func rwCycles(b *testing.B, l *engine.Locker, kind string, n int) []func(int) error {
	ctx := context.Background()
	prefix := "rwbench:" + kind + ":" + strconv.FormatInt(runID.Add(1), 10) + ":"
	cycles := make([]func(int) error, n)
	for g := range cycles {
		names := make([]string, 64)
		ms := make([]*engine.RWMutex, 64)
		for i := range names {
			names[i] = prefix + strconv.Itoa(g) + ":" + strconv.Itoa(i)
			if kind == "mutex" {
				continue
			}
			m, err := l.RWMutex(names[i])
			if err != nil {
				b.Fatal(err)
			}
			ms[i] = m
		}
		take := func(i int) (*engine.Lease, error) { return l.Lock(ctx, names[i]) }
		switch kind {
		case "read":
			take = func(i int) (*engine.Lease, error) { return ms[i].RLock(ctx) }
		case "write":
			take = func(i int) (*engine.Lease, error) { return ms[i].Lock(ctx) }
		}
		cycles[g] = func(i int) error {
			le, err := take(i)
			if err != nil {
				return err
			}
			return le.Release(ctx)
		}
	}
	if kind != "mutex" {
		var wg sync.WaitGroup
		busy := make(chan struct{}, 64)
		for _, c := range cycles {
			busy <- struct{}{}
			wg.Go(func() {
				defer func() { <-busy }()
				for i := range 64 {
					if err := c(i); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	return cycles
}
