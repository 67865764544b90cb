package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
)

// BenchmarkLossNoticed measures how long an auto-extending lease goes on
// believing it holds the lock after its keys vanished on a quorum of the
// masters (3 of 5), changed by another client: the time from sending the
// change to Done closing, as ms/lost (the mean; max-ms the longest).
// Each lease is changed at a random moment of its extension period, as
// a loss strikes whenever it likes. TTL 1s: auto-extension every 333ms,
// the latest a lease can learn of a loss from its extensions.
//
//	del:      DEL of the key
//	set:      SET of another value over it
//	flushall: FLUSHALL (every key of the master)
//	expire:   PEXPIRE 1: the key expires on the masters a millisecond later
//
// The clock starts before the commands are sent, so a result includes
// up to one round trip to the masters.
func BenchmarkLossNoticed(b *testing.B) {
	change := map[string]func(c rueidis.Client, key string) rueidis.Completed{
		"del": func(c rueidis.Client, key string) rueidis.Completed { return c.B().Del().Key(key).Build() },
		"set": func(c rueidis.Client, key string) rueidis.Completed {
			return c.B().Set().Key(key).Value("stranger").Build()
		},
		"flushall": func(c rueidis.Client, key string) rueidis.Completed { return c.B().Flushall().Build() },
		"expire": func(c rueidis.Client, key string) rueidis.Completed {
			return c.B().Pexpire().Key(key).Milliseconds(1).Build()
		},
	}
	direct := directClients(b, exampleMasters)
	for _, name := range []string{"del", "set", "flushall", "expire"} {
		b.Run(name, func(b *testing.B) {
			l := benchLocker(b, func(c *engine.Config) {
				c.TTL = time.Second
				c.NodeTimeout = 0 // the TTL's own, under half of it
				c.AutoExtend = true
			})
			every := l.Config().ExtendEvery
			ctx := context.Background()
			prefix := "lost:" + strconv.FormatInt(runID.Add(1), 10) + ":"
			var took []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				le, err := l.TryLock(ctx, prefix+strconv.Itoa(i))
				for try := 0; err != nil && try < 10; try++ {
					// A loaded host can miss the node timeout.
					le, err = l.TryLock(ctx, prefix+strconv.Itoa(i))
				}
				if err != nil {
					b.Fatal(err)
				}
				done := le.Done()
				// Every master has the key, so that the change does not
				// overtake a SET still on its way to one of them.
				for try := 0; try < 1000 && heldOn(direct, prefix+strconv.Itoa(i), le.Value()) < len(direct); try++ {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(rand.N(every))
				began := time.Now()
				var wg sync.WaitGroup
				for _, c := range direct[:l.Quorum()] {
					wg.Go(func() {
						if err := c.Do(ctx, change[name](c, prefix+strconv.Itoa(i))).Error(); err != nil {
							b.Error(err)
						}
					})
				}
				select {
				case <-done:
					took = append(took, time.Since(began))
				case <-time.After(5 * l.Config().TTL):
					// An extension that reached a master within the
					// millisecond of a PEXPIRE 1 kept the key there.
					if name != "expire" || heldOn(direct, prefix+strconv.Itoa(i), le.Value()) < l.Quorum() {
						b.Fatalf("Done did not close within %s of the loss (Err %v)", 5*l.Config().TTL, le.Err())
					}
				}
				wg.Wait()
				le.Release(ctx)
			}
			b.StopTimer()
			reportLoss(b, took)
		})
	}
}

// BenchmarkTryLockReleaseWatched is BenchmarkTryLockRelease with the
// lease's Done used on every cycle, with and without the tracker that
// watches such a lease's keys (Config.DisableTracking): what the at-once
// loss notice costs a cycle, serial and from 128 goroutines. A lease
// nobody watches costs the tracker nothing (BenchmarkTryLockRelease).
func BenchmarkTryLockReleaseWatched(b *testing.B) {
	for _, off := range []bool{false, true} {
		b.Run(fmt.Sprintf("serial/DisableTracking=%v", off), func(b *testing.B) {
			l := benchLocker(b, func(c *engine.Config) { c.DisableTracking = off })
			ctx := context.Background()
			prefix := "watched:" + strconv.FormatInt(runID.Add(1), 10) + ":"
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				le, err := l.TryLock(ctx, prefix+strconv.Itoa(i&1023))
				if err != nil {
					b.Fatal(err)
				}
				le.Done()
				if err := le.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("parallel/DisableTracking=%v", off), func(b *testing.B) {
			l := benchLocker(b, func(c *engine.Config) { c.DisableTracking = off })
			ctx := context.Background()
			prefix := "pwatched:" + strconv.FormatInt(runID.Add(1), 10) + ":"
			var seq atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(64)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				g := prefix + strconv.FormatInt(seq.Add(1), 10) + ":"
				for i := 0; pb.Next(); i++ {
					le, err := l.TryLock(ctx, g+strconv.Itoa(i&63))
					if err != nil {
						b.Error(err)
						return
					}
					le.Done()
					if err := le.Release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// reportLoss reports the mean and the longest of the times to Done.
func reportLoss(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	var sum time.Duration
	for _, d := range took {
		sum += d
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(took))/1000, "ms/lost")
	b.ReportMetric(float64(slices.Max(took).Microseconds())/1000, "max-ms")
	b.ReportMetric(0, "ns/op") // a wait, not a cost: ms/lost says it
}

// heldOn counts the masters where key holds value.
func heldOn(direct []rueidis.Client, key, value string) int {
	n := 0
	for _, c := range direct {
		if v, _ := c.Do(context.Background(), c.B().Get().Key(key).Build()).ToString(); v == value || v == value+"+" {
			n++
		}
	}
	return n
}

// directClients is a client to each master, outside the engine.
func directClients(b *testing.B, addrs []string) []rueidis.Client {
	var out []rueidis.Client
	for _, a := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{a}, ForceSingleClient: true, DisableCache: true,
			ClientSetInfo: rueidis.DisableClientSetInfo,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		out = append(out, c)
	}
	return out
}
