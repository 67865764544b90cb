package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// A continuous stream of readers does not keep a waiting writer out. The
// bound: a writer's intent reaches every master with its second attempt,
// a round trip after its first; from then on no new reader is admitted,
// so the writer waits only for the readers admitted before, the longest
// of their holds (stHold here), and then for a wake-up: the last one's
// release notifies it (a fallback, at most FallbackMax, covers a reader
// that expires instead). In virtual time the test allows stHold +
// FallbackMax + stTrips, the round trips of the attempts, releases and
// notification (simredis's latency is at most 20 ms a way).
const (
	stReaders = 4
	stHold    = 40 * time.Millisecond
	stTrips   = 100 * time.Millisecond
	stBound   = stHold + engine.DefaultFallbackMax + stTrips
)

// stResult is one run of the scenario: whether the writer acquired, how
// long it waited, and the reads granted while it waited.
type stResult struct {
	acquired    bool
	waited      time.Duration
	readsDuring int64
	err         error
}

// runStarvation runs stReaders readers, each holding the lock for
// reading hand over hand: every stHold it takes a new read lease
// (TryRLock) before it releases the one it holds, so that from the start
// a reader holds on every master at every moment, however the machine
// schedules them. A refused reader releases and waits (RLock) for its
// next turn. Once they run, a writer of another Locker calls Lock with a
// context of limit.
func runStarvation(t *testing.T, e *env, name string, limit time.Duration) stResult {
	t.Helper()
	cfg := func(c *engine.Config) { c.TTL, c.Fencing = 2*time.Second, false }
	readerL, writerL := e.locker(e.steady(cfg)), e.locker(e.steady(cfg))
	rm, wm := rwMutex(t, readerL, name), rwMutex(t, writerL, name)
	stop := make(chan struct{})
	var writing atomic.Bool
	var reads, all atomic.Int64
	var wg sync.WaitGroup
	read := func(le *engine.Lease) *engine.Lease {
		all.Add(1)
		if writing.Load() {
			reads.Add(1)
		}
		return le
	}
	for i := range stReaders {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * stHold / stReaders)
			var cur *engine.Lease
			defer func() {
				if cur != nil {
					cur.Release(context.Background())
				}
			}()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if cur != nil {
					next, err := rm.TryRLock(context.Background())
					cur.Release(context.Background())
					cur = nil
					if err == nil {
						cur = read(next)
						time.Sleep(stHold)
						continue
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), limit)
				le, err := rm.RLock(ctx)
				cancel()
				if err != nil {
					continue // the writer held it past the reader's patience
				}
				cur = read(le)
				time.Sleep(stHold)
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	eventually(t, 30*time.Second, "the stream running, each reader round twice", func() bool {
		return all.Load() >= 2*stReaders
	})
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	writing.Store(true)
	began := time.Now()
	le, err := wm.Lock(ctx)
	res := stResult{acquired: err == nil, waited: time.Since(began), readsDuring: reads.Load(), err: err}
	writing.Store(false)
	if err == nil {
		time.Sleep(stHold)
		le.Release(context.Background())
	}
	return res
}

// TestRWMutexWriterNotStarvedByReaders runs the scenario three times in
// virtual time, where the bound needs no slack for a loaded machine: each
// time the writer must acquire within it, while the readers kept reading
// until its intent was in.
func TestRWMutexWriterNotStarvedByReaders(t *testing.T) {
	simTest(t, 5, func(t *testing.T, e *env) {
		for run := range 3 {
			res := runStarvation(t, e, "stream-"+string(rune('a'+run)), 5*time.Second)
			t.Logf("run %d: writer acquired %v after %s; %d reads granted meanwhile", run, res.acquired, res.waited.Round(time.Millisecond), res.readsDuring)
			if !res.acquired {
				t.Fatalf("run %d: the writer did not acquire: %v", run, res.err)
			}
			if res.waited > stBound {
				t.Errorf("run %d: the writer waited %s, past the bound %s", run, res.waited.Round(time.Millisecond), stBound)
			}
		}
	})
}

// TestRWMutexWriterNotStarvedByReadersOnRealMasters runs the scenario on
// the pool's masters: the writer acquires while the stream goes on, by a
// deadline that only starvation reaches.
func TestRWMutexWriterNotStarvedByReadersOnRealMasters(t *testing.T) {
	t.Parallel()
	res := runStarvation(t, newEnv(t, 5), "stream", 30*time.Second)
	t.Logf("writer acquired %v after %s; %d reads granted meanwhile", res.acquired, res.waited.Round(time.Millisecond), res.readsDuring)
	if !res.acquired {
		t.Fatalf("the writer did not acquire: %v", res.err)
	}
}

// TestRWMutexWriterStarvedWithoutIntent is the control: with the intent
// ignored (mutation.RWIntentIgnored: masters admit new readers while a
// writer waits), the same stream keeps the writer out past the bound, and
// past several times it, while reads go on; in virtual time, where the
// stream runs as drawn whatever the machine's load.
func TestRWMutexWriterStarvedWithoutIntent(t *testing.T) {
	mutation.Require(t)
	defer mutation.RWIntentIgnored.Set(true)()
	simTest(t, 5, func(t *testing.T, e *env) {
		res := runStarvation(t, e, "stream", 3*stBound)
		t.Logf("writer acquired %v after %s; %d reads granted meanwhile", res.acquired, res.waited.Round(time.Millisecond), res.readsDuring)
		if res.acquired && res.waited <= stBound {
			t.Fatalf("the writer acquired within the bound (%s) with the intent ignored: the scenario cannot fail", res.waited.Round(time.Millisecond))
		}
		if res.readsDuring < 10 {
			t.Fatalf("only %d reads while the writer waited: the stream was not continuous", res.readsDuring)
		}
	})
}
