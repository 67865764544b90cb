package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// BenchmarkFenceCounterFootprint takes b.N fenced TryLock+Release cycles,
// each on a name of its own, on five fresh masters, and reports what the
// names leave on a master: keys and bytes of used_memory per name at the
// end of the run (end-keys/name, end-B/name), and once the counters had
// time to expire (left-keys/name, left-B/name), with how long that took
// (expiry-s). A service that fences per-order or per-user ids makes such
// names without end. Run it with -benchtime=100000x (or 1000000x).
func BenchmarkFenceCounterFootprint(b *testing.B) {
	c := redistest.StartT(b, 5)
	addrs := c.Addrs()
	cfg := engine.DefaultConfig(addrs...)
	cfg.Quarantine = engine.QuarantineObserved
	cfg.Fencing = true
	// A node timeout a loaded two-core host meets, and a MaxTTL short
	// enough for the counters' expiry to be seen within the benchmark.
	cfg.TTL, cfg.MaxTTL, cfg.NodeTimeout = 4*time.Second, 4*time.Second, 1500*time.Millisecond
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	keys0, mem0 := masterFootprint(b, addrs[0])
	prefix := "order:" + strconv.FormatInt(runID.Add(1), 10) + ":"
	var seq, failed atomic.Int64
	ctx := context.Background()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := prefix + strconv.FormatInt(seq.Add(1), 10)
			// What a name leaves is measured, not the cycle: a cycle
			// that a loaded host timed out is counted, and the run goes
			// on.
			le, err := l.TryLock(ctx, name)
			if err != nil {
				failed.Add(1)
				continue
			}
			le.Release(ctx)
		}
	})
	b.StopTimer()
	n := float64(b.N)
	if f := failed.Load(); f > int64(b.N)/100 {
		b.Fatalf("%d of %d TryLocks failed", f, b.N)
	}
	keys, mem := masterFootprint(b, addrs[0])
	b.ReportMetric(float64(keys-keys0)/n, "end-keys/name")
	b.ReportMetric(float64(mem-mem0)/n, "end-B/name")
	// Wait for the masters to expire what they will (Redis expires keys
	// in the background, a sample at a time): until the keys are back to
	// what they were, or 4 MaxTTL and a minute have passed, which a
	// counter that expires does not need.
	began := time.Now()
	for keys > keys0 && time.Since(began) < 4*cfg.MaxTTL+time.Minute {
		time.Sleep(100 * time.Millisecond) // polling DBSIZE, the event waited for
		keys, mem = masterFootprint(b, addrs[0])
	}
	b.ReportMetric(time.Since(began).Seconds(), "expiry-s")
	b.ReportMetric(float64(keys-keys0)/n, "left-keys/name")
	b.ReportMetric(float64(mem-mem0)/n, "left-B/name")
}

// masterFootprint is the master's DBSIZE and INFO memory's used_memory.
func masterFootprint(b *testing.B, addr string) (keys, usedMemory int64) {
	b.Helper()
	line, err := redistest.Do(addr, 5*time.Second, "DBSIZE")
	if err != nil {
		b.Fatal(err)
	}
	if keys, err = strconv.ParseInt(strings.TrimPrefix(line, ":"), 10, 64); err != nil {
		b.Fatalf("DBSIZE: %q", line)
	}
	info, err := redistest.Info(addr, "memory")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			usedMemory, err = strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatalf("used_memory: %q", v)
			}
		}
	}
	return keys, usedMemory
}

// BenchmarkTryLockReleaseFenced is BenchmarkTryLockRelease with fencing:
// the acquire's script reads the counter, and the fence round raises it
// (and sets its expiry) on every master, a round trip more.
func BenchmarkTryLockReleaseFenced(b *testing.B) {
	cycleSerial(b, benchLocker(b, func(c *engine.Config) { c.Fencing = true }))
}

// fenceSim is five simulated masters, in virtual time, each with its own
// clock offset, and fenced Lockers on them (TTL and MaxTTL 1s).
type fenceSim struct {
	t     *testing.T
	n     *simredis.Network
	ms    []*simredis.Master
	addrs []string
}

func newFenceSim(t *testing.T, offsets ...time.Duration) *fenceSim {
	s := &fenceSim{t: t, n: simredis.NewNetwork(1)}
	for i, off := range offsets {
		m := simredis.NewMaster(s.n, 1, i, fmt.Sprintf("master%d:6379", i),
			simredis.MasterOptions{Uptime: time.Hour, Offset: off, Latency: simredis.Latency{Min: time.Millisecond}})
		t.Cleanup(m.Close)
		s.ms, s.addrs = append(s.ms, m), append(s.addrs, m.Addr)
	}
	return s
}

func (s *fenceSim) locker(name string) *engine.Locker {
	cfg := engine.DefaultConfig(s.addrs...)
	cfg.TTL = time.Second
	cfg.Fencing = true
	cfg.DisableTracking = true // the simulated masters have no CLIENT TRACKING
	cfg.Conn.DialContext = s.n.Dialer(name)
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { l.Close() })
	return l
}

// counters returns master m's fencing counters that exist now, each
// with its value and its deadline on the master's clock (from the key
// log: the last change of the key set it).
func (s *fenceSim) counters(m int) map[string]fenceCounter {
	out := make(map[string]fenceCounter)
	for _, kv := range s.ms[m].Keys() {
		k, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, fenceKeyPrefix) {
			continue
		}
		n, err := strconv.ParseInt(strings.Trim(v, `"`), 10, 64)
		if err != nil {
			s.t.Fatalf("master%d: counter %q holds %s", m, k, v)
		}
		out[k] = fenceCounter{value: n}
	}
	for _, r := range s.ms[m].KeyLog() {
		if c, ok := out[r.Key]; ok {
			c.deadline = r.ExpireAt
			out[r.Key] = c
		}
	}
	return out
}

type fenceCounter struct {
	value    int64
	deadline time.Time // zero: none
}

// fenceKeyPrefix starts every fencing counter's key (engine/keys.go).
const fenceKeyPrefix = "\xffredlock:fence:"

// fencedKinds take and release a fenced lease of each kind on name, and
// return its token.
var fencedKinds = []struct {
	name string
	take func(ctx context.Context, l *engine.Locker, name string) (*engine.Lease, error)
}{
	{"lock", func(ctx context.Context, l *engine.Locker, name string) (*engine.Lease, error) {
		return l.TryLock(ctx, name)
	}},
	{"lockall", func(ctx context.Context, l *engine.Locker, name string) (*engine.Lease, error) {
		return l.TryLockAll(ctx, name+":a", name+":b")
	}},
	{"semaphore", func(ctx context.Context, l *engine.Locker, name string) (*engine.Lease, error) {
		s, err := l.Semaphore(name, 2)
		if err != nil {
			return nil, err
		}
		return s.TryAcquire(ctx)
	}},
	{"rw-writer", func(ctx context.Context, l *engine.Locker, name string) (*engine.Lease, error) {
		m, err := l.RWMutex(name)
		if err != nil {
			return nil, err
		}
		return m.TryLock(ctx)
	}},
}

// Every kind's fence round leaves counters that expire MaxTTL after the
// instant their master's own clock reads their value (as µs; the
// deadline in ms, rounded up): on masters whose clocks differ, the
// deadlines differ by as much. Once every master's clock has passed
// them, no counter is left, and the next token of the name is larger all
// the same: the masters' clocks stand for the counters.
func TestFenceCounterExpiresMaxTTLPastItsValue(t *testing.T) {
	for _, k := range fencedKinds {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms := []time.Duration{0, 30 * time.Millisecond, -30 * time.Millisecond, 10 * time.Millisecond, -10 * time.Millisecond}
				s := newFenceSim(t, ms...)
				l := s.locker("c0")
				ctx := context.Background()
				le, err := k.take(ctx, l, "order:1")
				if err != nil {
					t.Fatal(err)
				}
				token := le.Token()
				le.Release(ctx)
				maxTTL := l.Config().MaxTTL
				want := time.UnixMilli(token/1000 + 1 + maxTTL.Milliseconds())
				for m := range s.ms {
					cs := s.counters(m)
					if len(cs) == 0 {
						t.Fatalf("master%d keeps no counter after the fence round", m)
					}
					for key, c := range cs {
						if c.value != token || !c.deadline.Equal(want) {
							t.Errorf("master%d: %q = %d until %s, want %d until %s (MaxTTL past the token on the master's clock)",
								m, key, c.value, c.deadline.Format(time.StampMicro), token, want.Format(time.StampMicro))
						}
					}
				}
				// The latest master's clock passes the deadline 30ms after
				// the earliest's: a millisecond before, the counter is
				// still there; after, no master keeps one.
				time.Sleep(time.Until(want.Add(-ms[1] - time.Millisecond)))
				if len(s.counters(1)) == 0 {
					t.Error("master1's counter expired before its clock passed its deadline")
				}
				time.Sleep(time.Until(want.Add(-ms[2] + time.Millisecond)))
				for m := range s.ms {
					if cs := s.counters(m); len(cs) > 0 {
						t.Errorf("master%d still keeps %v once its clock passed the deadline", m, cs)
					}
				}
				le, err = k.take(ctx, l, "order:1")
				if err != nil {
					t.Fatal(err)
				}
				defer le.Release(ctx)
				if le.Token() <= token {
					t.Errorf("token %d after the counters expired, not above the last one, %d", le.Token(), token)
				}
			})
		})
	}
}

// tokensAcrossAStepBack hands out a token of r, waits, steps every
// master's clock back by 0.9 MaxTTL (within the clock assumption of
// fencing: never back by MaxTTL or more), and returns the token before
// and the one after. With wait past MaxTTL the counters expired before
// the step.
func tokensAcrossAStepBack(t *testing.T, wait time.Duration) (before, after int64) {
	s := newFenceSim(t, 0, 0, 0, 0, 0)
	l := s.locker("c0")
	ctx := context.Background()
	le, err := l.TryLock(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	before = le.Token()
	le.Release(ctx)
	maxTTL := l.Config().MaxTTL
	time.Sleep(wait)
	for m := range s.ms {
		if cs := s.counters(m); wait > maxTTL && len(cs) > 0 {
			t.Fatalf("master%d keeps %v past MaxTTL", m, cs)
		}
		s.ms[m].JumpClock(-maxTTL * 9 / 10)
	}
	le, err = l.TryLock(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(ctx)
	return before, le.Token()
}

// Tokens increase across every master's clock stepping back by 0.9
// MaxTTL: soon after a token, its counters still stand for it; once
// they expired, MaxTTL past it, the clocks stepped back still read past
// it.
func TestFenceTokensIncreaseAcrossAStepBack(t *testing.T) {
	for _, wait := range []time.Duration{10 * time.Millisecond, time.Second + 10*time.Millisecond} {
		t.Run(fmt.Sprintf("after=%s", wait), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				before, after := tokensAcrossAStepBack(t, wait)
				if after <= before {
					t.Fatalf("token %d after the clocks stepped back by 0.9 MaxTTL, %s after the last, not above it, %d", after, wait, before)
				}
			})
		})
	}
}

// The control: a counter that expires as soon as its master's clock
// reaches its value (mutation.FenceCounterExpiresEarly) leaves no margin
// for a clock that steps back: the clocks stepped back 10ms after a
// token read below it, and the next token is smaller.
func TestFenceCounterExpiresEarlyControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.FenceCounterExpiresEarly.Set(true)()
	synctest.Test(t, func(t *testing.T) {
		before, after := tokensAcrossAStepBack(t, 10*time.Millisecond)
		if after > before {
			t.Fatalf("token %d after %d with the counters' margin off: the check cannot fail", after, before)
		}
		t.Logf("caught: token %d after %d", after, before)
	})
}

// A lease held far past MaxTTL keeps its counters: each extension moves
// their deadlines past the keys' new TTL, so that Inspect (and an
// operator's Unlock by token) still finds the holder's token. Once the
// lease is released they expire as before, MaxTTL past the last TTL.
func TestFenceCounterLivesWhileItsLeaseIsHeld(t *testing.T) {
	for _, k := range fencedKinds {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newFenceSim(t, 0, 30*time.Millisecond, -30*time.Millisecond, 10*time.Millisecond, -10*time.Millisecond)
				l := s.locker("c0")
				ctx := context.Background()
				le, err := k.take(ctx, l, "order:1")
				if err != nil {
					t.Fatal(err)
				}
				token := le.Token()
				maxTTL := l.Config().MaxTTL
				// Five MaxTTLs, extended every third of the TTL.
				for range 15 {
					time.Sleep(time.Second / 3)
					if err := le.Extend(ctx, time.Second); err != nil {
						t.Fatalf("extend: %v", err)
					}
				}
				for m := range s.ms {
					cs := s.counters(m)
					if len(cs) == 0 {
						t.Errorf("master%d keeps no counter for a lease held %s past MaxTTL", m, 5*maxTTL)
					}
					for key, c := range cs {
						if c.value != token {
							t.Errorf("master%d: %q = %d, want the holder's token %d", m, key, c.value, token)
						}
					}
				}
				name := "order:1"
				if k.name == "lockall" {
					name += ":a"
				}
				in, err := l.Inspect(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if len(in.Holders) != 1 || in.Holders[0].Token != token {
					t.Errorf("inspect %s: holders %+v, want one with token %d", name, in.Holders, token)
				}
				le.Release(ctx)
				time.Sleep(time.Second + maxTTL + 50*time.Millisecond)
				for m := range s.ms {
					if cs := s.counters(m); len(cs) > 0 {
						t.Errorf("master%d still keeps %v MaxTTL past the lease's last TTL", m, cs)
					}
				}
			})
		})
	}
}

// On real masters, an extension moves every fencing counter of the lease
// past its key's new TTL. The test waits until every master's clock reads
// past the token's instant before it extends, so that without the
// counters' move the keys would outlive them.
func TestFenceCounterOutlivesAnExtendedKey(t *testing.T) {
	for _, k := range fencedKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 3)
			l := e.locker(func(c *engine.Config) { c.Fencing = true; patient(c) })
			ctx := context.Background()
			le, err := k.take(ctx, l, "held")
			if err != nil {
				t.Fatal(err)
			}
			defer le.Release(ctx)
			// The key's new TTL must end later than the counter's first
			// deadline, MaxTTL past the token (µs, rounded up to a ms).
			eventually(t, time.Minute, "every master's clock 2 ms past the token", func() bool {
				for i := range e.addrs {
					c := e.direct[i]
					tm, err := c.Do(ctx, c.B().Time().Build()).AsStrSlice()
					if err != nil || len(tm) != 2 {
						return false
					}
					sec, _ := strconv.ParseInt(tm[0], 10, 64)
					us, _ := strconv.ParseInt(tm[1], 10, 64)
					if sec*1_000_000+us <= le.Token()+2000 {
						return false
					}
				}
				return true
			})
			if err := le.Extend(ctx, l.Config().MaxTTL); err != nil {
				t.Fatal(err)
			}
			for i := range e.addrs {
				counters := e.scan(i, fenceKeyPrefix+"*"+e.prefix+"*held*")
				if len(counters) == 0 {
					t.Fatalf("master%d: no fencing counter for %s", i, e.prefix+"held")
				}
				for _, f := range counters {
					key := strings.TrimPrefix(f, fenceKeyPrefix)
					if fp, kp := e.pttl(i, f), e.pttl(i, key); fp <= kp {
						t.Errorf("master%d: counter %q lives %d ms, its key %q %d ms", i, f, fp, key, kp)
					}
				}
			}
		})
	}
}
