package engine_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
)

// BenchmarkCycleCPU is the CPU one acquire-and-release costs, by lock
// kind, uncontended (but joined), from 64 × GOMAXPROCS callers (each master's commands
// batch and coalesce, as under load): client-µs/op is this process's CPU
// (user + sys, the benchmark's own loop included), masters-µs/op the five
// masters' (INFO cpu, used_cpu_user + used_cpu_sys), total-µs/op their
// sum. On two shared cores throughput is CPU, so a kind's total against
// mutex's says how far it can scale beside the mutex; the CPU figures
// hold on a loaded machine better than ns/op does. Kinds: mutex (TryLock),
// read and write (an RWMutex's TryRLock and TryLock), semaphore (a permit
// of a semaphore of 8), multi3 (TryLockAll of three names),
// sequential3 (three TryLocks, then their Releases) and joined (a
// TryRLock that joins the entry another reader of the Locker holds
// throughout, auto-extended: its intent check and a local release). Compare kinds within
// one run, over -count runs: the machine's noise moves them together.
func BenchmarkCycleCPU(b *testing.B) {
	l := benchLocker(b, nil)
	lj := benchLocker(b, func(c *engine.Config) { c.AutoExtend = true })
	direct := directClients(b, exampleMasters)
	for _, kind := range []string{"mutex", "read", "write", "semaphore", "multi3", "sequential3", "joined"} {
		b.Run(kind, func(b *testing.B) {
			callers := 64 * runtime.GOMAXPROCS(0)
			kl := l
			if kind == "joined" {
				kl = lj
			}
			cycles := kindCycles(b, kl, kind, callers)
			var seq atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(64)
			client0, masters0 := processCPU(b), mastersCPU(b, direct)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := cycles[int(seq.Add(1)-1)%len(cycles)]
				for i := 0; pb.Next(); i++ {
					if err := c(i & 63); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			client, masters := processCPU(b)-client0, mastersCPU(b, direct)-masters0
			n := float64(b.N)
			b.ReportMetric(client*1e6/n, "client-µs/op")
			b.ReportMetric(masters*1e6/n, "masters-µs/op")
			b.ReportMetric((client+masters)*1e6/n, "total-µs/op")
		})
	}
}

// kindCycles makes n callers' cycles of kind (see BenchmarkCycleCPU),
// each over a ring of 64 names of its own; handles are used once first,
// so that the timed cycles skip a handle's first checks, as a long-lived
// handle does.
func kindCycles(b *testing.B, l *engine.Locker, kind string, n int) []func(int) error {
	ctx := context.Background()
	prefix := "cpubench:" + kind + ":" + strconv.FormatInt(runID.Add(1), 10) + ":"
	cycles := make([]func(int) error, n)
	for g := range cycles {
		names := make([]string, 64)
		for i := range names {
			names[i] = prefix + strconv.Itoa(g) + ":" + strconv.Itoa(i)
		}
		var take func(int) (*engine.Lease, error)
		switch kind {
		case "mutex":
			take = func(i int) (*engine.Lease, error) { return l.TryLock(ctx, names[i]) }
		case "read", "write", "joined":
			ms := make([]*engine.RWMutex, 64)
			for i := range ms {
				m, err := l.RWMutex(names[i])
				if err != nil {
					b.Fatal(err)
				}
				ms[i] = m
				if kind == "joined" {
					holder, err := m.TryRLock(ctx)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { holder.Release(ctx) })
				}
			}
			take = func(i int) (*engine.Lease, error) { return ms[i].TryRLock(ctx) }
			if kind == "write" {
				take = func(i int) (*engine.Lease, error) { return ms[i].TryLock(ctx) }
			}
		case "semaphore":
			ss := make([]*engine.Semaphore, 64)
			for i := range ss {
				s, err := l.Semaphore(names[i], benchPermits)
				if err != nil {
					b.Fatal(err)
				}
				ss[i] = s
			}
			take = func(i int) (*engine.Lease, error) { return ss[i].TryAcquire(ctx) }
		case "multi3":
			take = func(i int) (*engine.Lease, error) {
				return l.TryLockAll(ctx, names[i], names[(i+1)&63]+":b", names[(i+2)&63]+":c")
			}
		case "sequential3":
			cycles[g] = func(i int) error {
				var held [3]*engine.Lease
				for j, r := range []string{names[i], names[(i+1)&63] + ":b", names[(i+2)&63] + ":c"} {
					le, err := l.TryLock(ctx, r)
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
			}
			continue
		default:
			b.Fatalf("unknown kind %q", kind)
		}
		cycles[g] = func(i int) error {
			le, err := take(i)
			if err != nil {
				return err
			}
			return le.Release(ctx)
		}
	}
	var wg sync.WaitGroup
	busy := make(chan struct{}, 64) // as many warm-ups at once as the masters take without timeouts
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
	return cycles
}

// processCPU is this process's CPU time so far (user + sys), in seconds.
func processCPU(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// mastersCPU is the masters' CPU time so far (used_cpu_user +
// used_cpu_sys of each), in seconds.
func mastersCPU(b *testing.B, cls []rueidis.Client) float64 {
	var s float64
	for _, cl := range cls {
		txt, err := cl.Do(context.Background(), cl.B().Info().Section("cpu").Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(txt, "\n") {
			line = strings.TrimSpace(line)
			for _, p := range []string{"used_cpu_sys:", "used_cpu_user:"} {
				if v, ok := strings.CutPrefix(line, p); ok {
					f, _ := strconv.ParseFloat(v, 64)
					s += f
				}
			}
		}
	}
	return s
}
