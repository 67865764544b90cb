package bench

import (
	"bytes"
	"context"
	"math"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/multiplex/redistest"
	"github.com/redlock-bench/redlock/results"
)

// shortConfig is a run short enough for tests, with heavy contention: few
// resources, many workers, locks held for a while.
func shortConfig(engine string, masters []string) Config {
	c := DefaultConfig()
	c.Engine = engine
	c.Masters = masters
	c.Workers = 16
	c.Resources = 4
	c.Hold = Hold{D: 200 * time.Microsecond}
	c.Duration = time.Second
	c.Warmup = 200 * time.Millisecond
	c.TTL = 5 * time.Second
	// The test's masters were just started, empty: nothing to forget.
	c.Quarantine = "observed"
	return c
}

// noLeaks fails the test if goroutines started during it are still running
// shortly after it ends.
func noLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The oracle must be able to fail: the control engine grants everything, so
// under contention two workers hold one resource at once.
func TestNolockTripsTheOracle(t *testing.T) {
	noLeaks(t)
	res := run(t, shortConfig("nolock", nil))
	s := res.Summary
	if s.Violations == 0 || len(s.ViolationExamples) == 0 {
		t.Fatalf("nolock under contention: %d violations, examples %v; the oracle is blind", s.Violations, s.ViolationExamples)
	}
	if s.Acquired == 0 || s.Acquired != s.Attempts || s.Contended != 0 {
		t.Errorf("nolock grants everything: attempts %d acquired %d contended %d", s.Attempts, s.Acquired, s.Contended)
	}
	if len(s.Masters) != 0 || s.Machine.RedisVersion != "" {
		t.Errorf("nolock uses no Redis, yet masters %v version %q", s.Masters, s.Machine.RedisVersion)
	}
}

func TestCheckOffCountsNothing(t *testing.T) {
	cfg := shortConfig("nolock", nil)
	cfg.Check = false
	cfg.Duration = 200 * time.Millisecond
	if s := run(t, cfg).Summary; s.Violations != 0 || s.Checked {
		t.Errorf("check off: violations %d checked %v", s.Violations, s.Checked)
	}
}

func TestRedlockHoldsMutualExclusion(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 5)
	res := run(t, shortConfig("redlock", c.Addrs()))
	s := res.Summary
	if s.Violations != 0 {
		t.Fatalf("redlock: %d violations: %+v", s.Violations, s.ViolationExamples)
	}
	// Without contention the check would prove nothing.
	if s.Acquired == 0 || s.Contended == 0 {
		var b bytes.Buffer
		results.WriteText(&b, s)
		t.Fatalf("want acquisitions and contention, got acquired %d contended %d:\n%s", s.Acquired, s.Contended, b.String())
	}
	if s.AcquireLatencyUs.Count != s.Acquired || s.AcquireFailLatencyUs.Count != s.Attempts-s.Acquired {
		t.Errorf("histogram counts %d/%d do not match counters %d/%d",
			s.AcquireLatencyUs.Count, s.AcquireFailLatencyUs.Count, s.Acquired, s.Attempts-s.Acquired)
	}
	if s.HoldUs.P50 < 200 {
		t.Errorf("hold p50 %d µs, want >= 200 µs as configured", s.HoldUs.P50)
	}
	if s.Machine.RedisVersion == "" || len(s.Masters) != 5 || s.LocalMasters {
		t.Errorf("machine %+v masters %v local %v", s.Machine, s.Masters, s.LocalMasters)
	}
	// Healthy masters, but a loaded 2-core machine under -race: a rare
	// per-node timeout is the engine doing its job, not a harness fault.
	if e := s.ErrorTotal(); e*100 > s.Attempts {
		t.Errorf("errors on healthy masters: %v of %d attempts", s.Errors, s.Attempts)
	} else if e > 0 {
		t.Logf("errors on healthy masters: %v of %d attempts", s.Errors, s.Attempts)
	}
}

func TestRedlockWaitMode(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 3)
	cfg := shortConfig("redlock", c.Addrs())
	cfg.Mode = ModeWait
	cfg.Resources = 2
	cfg.Workers = 8
	cfg.Hold = Hold{D: time.Millisecond}
	s := run(t, cfg).Summary
	if s.Violations != 0 {
		t.Fatalf("redlock wait: %d violations: %+v", s.Violations, s.ViolationExamples)
	}
	if s.WaitLatencyUs.Count == 0 || s.WaitLatencyUs.Count != s.Acquired || s.AcquireLatencyUs.Count != 0 {
		t.Errorf("mode wait: wait count %d acquire count %d acquired %d", s.WaitLatencyUs.Count, s.AcquireLatencyUs.Count, s.Acquired)
	}
	// Eight workers on two resources held 1ms each: most waited.
	if s.WaitLatencyUs.P90 < 1000 {
		t.Errorf("wait p90 = %d µs; workers should queue behind 1ms holds", s.WaitLatencyUs.P90)
	}
}

func TestLocalMastersAreStartedAndStopped(t *testing.T) {
	noLeaks(t)
	cfg := shortConfig("redlock", nil)
	cfg.LocalMasters = 3
	cfg.Duration = 300 * time.Millisecond
	cfg.Warmup = 0
	var log bytes.Buffer
	cfg.Log = &log
	s := run(t, cfg).Summary
	if len(s.Masters) != 3 || !s.LocalMasters {
		t.Fatalf("masters %v local %v", s.Masters, s.LocalMasters)
	}
	if !strings.Contains(log.String(), "started 3 local redis-server") {
		t.Errorf("log = %q", log.String())
	}
	for _, a := range s.Masters {
		if err := redistest.Ping(a, 200*time.Millisecond); err == nil {
			t.Errorf("local master %s still answers after the run", a)
		}
	}
}

func TestUnreachableMastersFailFastNamingThem(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	// A port that was free a moment ago and has nothing listening now.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	cfg := shortConfig("redlock", []string{c.Addrs()[0], dead})
	start := time.Now()
	_, err = Run(context.Background(), cfg)
	if err == nil {
		t.Fatal("want an error for an unreachable master")
	}
	if !strings.Contains(err.Error(), dead) || strings.Contains(err.Error(), c.Addrs()[0]+" (") {
		t.Errorf("error must name the unreachable master %s only: %v", dead, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s to fail", d)
	}
}

func TestInterruptGivesPartialResults(t *testing.T) {
	noLeaks(t)
	cfg := shortConfig("nolock", nil)
	cfg.Duration = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(700*time.Millisecond, cancel)
	start := time.Now()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stopping took %s", d)
	}
	s := res.Summary
	if !s.Interrupted || s.DurationS <= 0 || s.DurationS > 2 || s.Acquired == 0 {
		t.Errorf("interrupted %v duration %v acquired %d", s.Interrupted, s.DurationS, s.Acquired)
	}
}

func TestOpsBoundsTheRun(t *testing.T) {
	noLeaks(t)
	cfg := shortConfig("nolock", nil)
	cfg.Ops, cfg.Duration = 5000, 0
	cfg.Hold = Hold{}
	s := run(t, cfg).Summary
	if s.Attempts != 5000 || s.AcquireLatencyUs.Count != 5000 {
		t.Errorf("attempts = %d, acquire count %d, want exactly 5000", s.Attempts, s.AcquireLatencyUs.Count)
	}
	if s.Interrupted || s.DurationS <= 0 {
		t.Errorf("interrupted %v duration %v", s.Interrupted, s.DurationS)
	}
}

func TestOpenLoopKeepsTheRate(t *testing.T) {
	noLeaks(t)
	cfg := shortConfig("nolock", nil)
	cfg.Rate = 2000
	cfg.Warmup = 0
	cfg.Check = false
	cfg.Hold = Hold{}
	s := run(t, cfg).Summary
	if s.LoadModel != "open" {
		t.Errorf("load model %q", s.LoadModel)
	}
	if math.Abs(float64(s.Attempts)-2000) > 200 {
		t.Errorf("attempts = %d in 1s at 2000/s", s.Attempts)
	}
	if s.BacklogMax > 100 {
		t.Errorf("backlog max %d for an idle engine", s.BacklogMax)
	}
}

// A schedule the workers cannot keep: latency must include the time an
// operation waited for its turn, and the backlog must show.
func TestOpenLoopCountsQueueingDelay(t *testing.T) {
	noLeaks(t)
	cfg := shortConfig("nolock", nil)
	cfg.Workers = 1
	cfg.Resources = 1
	cfg.Rate = 2000                          // one every 500 µs...
	cfg.Hold = Hold{D: 2 * time.Millisecond} // ...but each takes 2 ms
	cfg.Warmup = 0
	s := run(t, cfg).Summary
	if s.AcquireLatencyUs.P99 < 100_000 {
		t.Errorf("acquire p99 = %d µs; a schedule 4x over capacity must show queueing delay", s.AcquireLatencyUs.P99)
	}
	if s.BacklogEnd < 500 {
		t.Errorf("backlog at end = %d, want about 1500", s.BacklogEnd)
	}
}

func TestIntervalLogHasOneIntervalPerSecond(t *testing.T) {
	noLeaks(t)
	cfg := shortConfig("nolock", nil)
	cfg.Duration = 2 * time.Second
	cfg.Warmup = 300 * time.Millisecond
	cfg.Hold = Hold{}
	var hlog, progress bytes.Buffer
	cfg.IntervalLog = &hlog
	cfg.Progress = &progress
	res := run(t, cfg)
	tagged, err := results.ReadIntervalLog(&hlog)
	if err != nil {
		t.Fatal(err)
	}
	var intervals int
	var acquired int64
	for _, tg := range tagged {
		if tg.Tag == "acquire" {
			intervals++
			acquired += tg.Histogram.TotalCount()
		}
	}
	if intervals < 2 || intervals > 3 {
		t.Errorf("%d acquire intervals in a 2s run", intervals)
	}
	if acquired != res.Summary.Acquired {
		t.Errorf("intervals hold %d acquisitions, the summary %d", acquired, res.Summary.Acquired)
	}
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "warm-up") || !strings.Contains(lines[len(lines)-1], "acquired/s") {
		t.Errorf("progress lines:\n%s", progress.String())
	}
}

func TestZipfPrefersLowResources(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Distribution = Distribution{Zipf: true, S: 1.5}
	r := newRunner(cfg, nil)
	w := &worker{r: r}
	w.rng = newRand(1, 0)
	w.zipf = newZipf(w.rng, cfg)
	counts := make([]int, cfg.Resources)
	for i := 0; i < 100000; i++ {
		counts[w.pick()]++
	}
	if counts[0] < counts[1] || counts[1] < counts[10] || counts[0] < 30000 {
		t.Errorf("zipf:1.5 counts: [0]=%d [1]=%d [10]=%d", counts[0], counts[1], counts[10])
	}
	single := DefaultConfig()
	single.Resources = 1
	single.Distribution = cfg.Distribution
	w1 := &worker{r: newRunner(single, nil), rng: newRand(1, 0)}
	w1.zipf = newZipf(w1.rng, single)
	if got := w1.pick(); got != 0 {
		t.Errorf("one resource: picked %d", got)
	}
}

func TestHoldTimes(t *testing.T) {
	for _, h := range []Hold{
		{D: time.Millisecond},
		{Kind: HoldExp, D: time.Millisecond},
		{Kind: HoldUniform, Min: time.Millisecond, Max: 3 * time.Millisecond},
	} {
		cfg := DefaultConfig()
		cfg.Hold = h
		w := &worker{r: newRunner(cfg, nil), rng: newRand(1, 0)}
		var sum time.Duration
		const n = 20000
		for i := 0; i < n; i++ {
			d := w.holdTime()
			if d < 0 || (h.Kind == HoldUniform && (d < h.Min || d > h.Max)) || d > maxExpFactor*time.Millisecond {
				t.Fatalf("%s: drew %s", h, d)
			}
			sum += d
		}
		mean := sum / n
		want := h.D
		if h.Kind == HoldUniform {
			want = (h.Min + h.Max) / 2
		}
		if mean < want*95/100 || mean > want*105/100 {
			t.Errorf("%s: mean %s, want about %s", h, mean, want)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{
		"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n": "7.0.15",
		"# Server\r\nredis_version:7.2.4\r\nvalkey_version:8.0.1\r\n":   "valkey 8.0.1",
		"# Server\r\n": "unknown",
	} {
		if got := parseVersion(in); got != want {
			t.Errorf("parseVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkNolockRun measures the harness itself: the control engine costs
// next to nothing, so this is the ceiling on what any engine can show.
func BenchmarkNolockRun(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Engine = "nolock"
	cfg.Warmup = 0
	cfg.Ops, cfg.Duration = int64(b.N), 0
	b.ReportAllocs()
	b.ResetTimer()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.Summary.AcquiredPerSec, "acq/s")
}
