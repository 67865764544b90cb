package bench

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/results"
)

// shortConfig is a run short enough for tests, with heavy contention: few
// resources, many workers, locks held for a while.
func shortConfig(engine string, masters []string) Config {
	c := DefaultConfig()
	c.Engine = engines.MustParse(engine)
	c.Masters = masters
	c.Workers = 16
	c.Resources = 4
	c.Hold = Hold{D: 200 * time.Microsecond}
	c.Duration = time.Second
	c.Warmup = 200 * time.Millisecond
	c.TTL = 5 * time.Second
	// The test's masters were just started, empty: nothing to forget.
	c.Quarantine = engines.QuarantineObserved
	// A live master answers the probe however loaded the machine; the
	// product's 2 s bound is TestProbeNamesAMasterThatDoesNotAnswer's.
	c.probeTimeout = time.Minute
	if c.Engine.Base == engines.Rueidislock {
		// rueidislock gives up a key attempt after 20 ms by default, as
		// the bench runs it: beside other work a healthy master can take
		// longer to answer, and the baseline would then acquire nothing.
		// The tests check the adapter and the oracle, not that deadline.
		c.NodeTimeout = 200 * time.Millisecond
	}
	return c
}

// byCount makes cfg's run end after ops measured attempts, not after a
// time: on a loaded machine a short window may see no acquisition, no
// contention, no overlap of the control's holds.
func byCount(cfg *Config, ops int64) {
	cfg.Ops, cfg.Duration = ops, 0
}

// loadProof makes cfg's run one that a loaded machine cannot fail by
// being slow: it ends after 2000 attempts (byCount), and its TTL is a
// minute, which sets the engine's node timeout to 600 ms
// (TTL/DefaultNodeTimeoutDivisor): only a stall of that length counts a
// healthy master as timed out. In mode wait a Lock gives up after a
// minute, not the default 5 s: with 16 workers queued on a few resources
// a loaded machine makes the turns come slowly, but they come.
func loadProof(cfg *Config) {
	byCount(cfg, 2000)
	cfg.TTL = time.Minute
	cfg.WaitTimeout = time.Minute
}

// noLeaks fails the test if goroutines started during it are still running
// after it ends. The wait outlasts rueidis's cluster client, which closes
// the connections a topology refresh replaced 5 s later, in a goroutine of
// its own that its Close does not wait for, on however loaded a machine;
// it ends as soon as they have.
func noLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second)
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
	cfg := shortConfig("nolock", nil)
	byCount(&cfg, 2000)
	res := run(t, cfg)
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
	cfg := shortConfig("redlock", c.Addrs())
	loadProof(&cfg)
	res := run(t, cfg)
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
	loadProof(&cfg)
	byCount(&cfg, 500)
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

// An unreachable master fails the run at the pre-flight probe, named
// alone, before any engine client dials it. Fast is shown by the path, not
// a clock: the error is the probe's, so no client waited out its connect
// timeout, and its cause is the refusal, so the probe did not wait out
// its own.
func TestUnreachableMastersFailFastNamingThem(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	dead := redistest.DeadAddr(t)
	cfg := shortConfig("redlock", []string{c.Addrs()[0], dead})
	_, err := Run(context.Background(), cfg)
	if err == nil {
		t.Fatal("want an error for an unreachable master")
	}
	if want := "1 of 2 masters unreachable: " + dead + " (connect: connection refused)"; err.Error() != want {
		t.Errorf("error %q, want %q: the probe's, naming the unreachable master only, refused at once", err, want)
	}
}

// Cancelling a run stops it at once with the partial results. In virtual
// time, where the run's clock is exact: the run is cancelled at its first
// measured progress line, a second into a window of an hour, and stopping
// may wait for a hold in flight at most (it cuts them short); a run that
// waited for the window's end, its release grace or its drain timeout
// would show it here, however fast or slow the machine.
func TestInterruptGivesPartialResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := shortConfig("nolock", nil)
		cfg.runtimeTimers = true
		// Few operations a virtual second: each costs real time.
		cfg.Workers, cfg.Hold = 2, Hold{D: 10 * time.Millisecond}
		cfg.Duration = time.Hour
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var stopped time.Time
		cfg.Progress = writerFunc(func(p []byte) {
			if stopped.IsZero() && measuredLine.Match(p) {
				stopped = time.Now()
				cancel()
			}
		})
		start := time.Now()
		res, err := Run(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if stopped.IsZero() {
			t.Fatal("the run ended without a measured progress line")
		}
		if d := time.Since(stopped); d > cfg.Hold.D {
			t.Errorf("stopping took %s, more than the %s hold in flight", d, cfg.Hold.D)
		}
		s := res.Summary
		// The window ran from the warm-up's end to the cancel.
		if want := stopped.Sub(start) - cfg.Warmup; !s.Interrupted || s.DurationS != want.Seconds() || s.Acquired == 0 {
			t.Errorf("interrupted %v duration %vs acquired %d; want interrupted, %vs, acquisitions", s.Interrupted, s.DurationS, s.Acquired, want.Seconds())
		}
	})
}

// measuredLine matches a progress line of the measured window that counted
// acquisitions.
var measuredLine = regexp.MustCompile(`\[[^\]/]*/[^\]]*\] last [^:]*: acquired/s [1-9]`)

// writerFunc is an io.Writer that hands each write to f.
type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
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

// An open-loop run takes its attempts at the schedule's times, not the
// workers' pace: it makes exactly the operations asked for, and the last
// of them was not begun before it was due, so the run lasts at least the
// schedule's span. How close to the schedule the workers keep is the
// machine's speed, which the benchmarks measure, not a test; the schedule
// itself is TestOpenLoopSchedule's, in virtual time.
func TestOpenLoopKeepsTheRate(t *testing.T) {
	noLeaks(t)
	cfg := shortConfig("nolock", nil)
	cfg.Rate = 2000
	cfg.Warmup = 0
	cfg.Check = false
	cfg.Hold = Hold{}
	byCount(&cfg, 400)
	s := run(t, cfg).Summary
	if s.LoadModel != "open" {
		t.Errorf("load model %q", s.LoadModel)
	}
	if s.Attempts != cfg.Ops {
		t.Errorf("%d attempts, want the %d asked for", s.Attempts, cfg.Ops)
	}
	// A closed loop of 400 attempts without holds would be over in a
	// few milliseconds on an idle machine; the schedule's 400th is due
	// 199.5 ms after the start.
	if span := float64(cfg.Ops-1) / cfg.Rate; s.DurationS < span {
		t.Errorf("%d attempts in %.4fs at %.0f/s: the last was due at %.4fs; the run went ahead of its schedule", s.Attempts, s.DurationS, cfg.Rate, span)
	}
	if s.BacklogEnd < 0 || s.BacklogMax < s.BacklogEnd {
		t.Errorf("backlog at most %d, %d at the end", s.BacklogMax, s.BacklogEnd)
	}
	t.Logf("%d attempts in %.3fs, backlog at most %d, %d at the end", s.Attempts, s.DurationS, s.BacklogMax, s.BacklogEnd)
}

// The open loop's schedule, in virtual time where it is exact: the
// operation of ticket n is due at start + n/rate, its latency counts from
// then, a worker does not begin it before, and the backlog is the
// operations due but not yet begun.
func TestOpenLoopSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Engine = engines.MustParse("nolock")
		cfg.Rate = 2000 // one every 500 µs
		r := newRunner(cfg, nil)
		r.start = time.Now()
		w := &worker{r: r, rng: newRand(1, 0), set: make([]int, 1), setNames: make([]string, 1)}
		const every = 500 * time.Microsecond
		for n := range 10 {
			o, ok := w.begin()
			due := r.start.Add(time.Duration(n) * every)
			if !ok || !o.t0.Equal(due) || !time.Now().Equal(due) {
				t.Fatalf("operation %d: ok %v, due at +%s, begun at +%s; want both at +%s",
					n, ok, o.t0.Sub(r.start), time.Since(r.start), due.Sub(r.start))
			}
		}
		// Ten tickets taken, the last due at +4.5ms. The backlog counts
		// the schedule's whole intervals elapsed (so not the operation
		// due at the start) less the tickets taken: none on schedule,
		// 20 - 10 at +10.2ms.
		if got := r.backlog(r.start.Add(4500 * time.Microsecond)); got != 0 {
			t.Errorf("backlog on schedule: %d, want 0", got)
		}
		if got := r.backlog(r.start.Add(10200 * time.Microsecond)); got != 10 {
			t.Errorf("backlog at +10.2ms: %d, want 20 intervals less 10 tickets, 10", got)
		}
		// A worker late for its ticket begins at once, its latency counted
		// from when the operation was due.
		time.Sleep(3 * time.Millisecond)
		o, _ := w.begin()
		if due := r.start.Add(10 * every); !o.t0.Equal(due) || !o.asked.Equal(due) {
			t.Errorf("late operation: due at +%s, asked at +%s; want both at +%s", o.t0.Sub(r.start), o.asked.Sub(r.start), due.Sub(r.start))
		}
	})
}

// A schedule the workers cannot keep: latency must include the time an
// operation waited for its turn, and the backlog must show. In virtual
// time, where the run is exactly the schedule and the holds: the n-th of
// 500 operations is due at n·0.5 ms and begun at n·2 ms, so its latency is
// n·1.5 ms (the p99 about 740 ms), and at the stop, 1 s in, 2000 are due
// and 500 begun.
func TestOpenLoopCountsQueueingDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := shortConfig("nolock", nil)
		cfg.runtimeTimers = true
		cfg.Workers = 1
		cfg.Resources = 1
		cfg.Rate = 2000                          // one every 500 µs...
		cfg.Hold = Hold{D: 2 * time.Millisecond} // ...but each takes 2 ms
		cfg.Warmup = 0
		byCount(&cfg, 500)
		s := run(t, cfg).Summary
		if s.Attempts != cfg.Ops {
			t.Fatalf("%d attempts, want the %d asked for", s.Attempts, cfg.Ops)
		}
		if s.AcquireLatencyUs.P99 < 100_000 {
			t.Errorf("acquire p99 = %d µs; a schedule 4x over capacity must show queueing delay", s.AcquireLatencyUs.P99)
		}
		if s.BacklogEnd < 500 {
			t.Errorf("backlog at end = %d, want about 1500", s.BacklogEnd)
		}
		t.Logf("%d attempts in %.3fs, acquire p99 %d µs, backlog at most %d, %d at the end",
			s.Attempts, s.DurationS, s.AcquireLatencyUs.P99, s.BacklogMax, s.BacklogEnd)
	})
}

// The interval log has one interval a second of the measured window,
// tiling it, and together they hold every acquisition the summary counts.
// In virtual time, where the collector wakes on the second: on a real
// clock it wakes late on a loaded machine, and the intervals with it.
func TestIntervalLogHasOneIntervalPerSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := shortConfig("nolock", nil)
		cfg.runtimeTimers = true
		cfg.Duration = 2 * time.Second
		cfg.Warmup = 300 * time.Millisecond
		// A hold lets the virtual clock move (a worker that never blocks
		// would stop it); few workers keep the virtual seconds cheap.
		cfg.Workers, cfg.Hold = 2, Hold{D: 10 * time.Millisecond}
		var hlog, progress bytes.Buffer
		cfg.IntervalLog = &hlog
		cfg.Progress = &progress
		start := time.Now()
		res := run(t, cfg)
		tagged, err := results.ReadIntervalLog(&hlog)
		if err != nil {
			t.Fatal(err)
		}
		var ivs []interface {
			StartTimeMs() int64
			EndTimeMs() int64
		}
		var acquired int64
		for _, tg := range tagged {
			if tg.Tag == "acquire" {
				ivs = append(ivs, tg.Histogram)
				acquired += tg.Histogram.TotalCount()
			}
		}
		// The window starts when the warm-up ends and lasts two seconds.
		from := start.Add(cfg.Warmup).UnixMilli()
		var spans []string
		for _, h := range ivs {
			spans = append(spans, fmt.Sprintf("%d-%d", h.StartTimeMs()-from, h.EndTimeMs()-from))
		}
		if want := "[0-1000 1000-2000]"; fmt.Sprint(spans) != want {
			t.Errorf("acquire intervals %v ms into the window, want %s", spans, want)
		}
		if res.Summary.DurationS != cfg.Duration.Seconds() {
			t.Errorf("measured window %vs, want %s", res.Summary.DurationS, cfg.Duration)
		}
		if acquired == 0 || acquired != res.Summary.Acquired {
			t.Errorf("intervals hold %d acquisitions, the summary %d", acquired, res.Summary.Acquired)
		}
		// A line for the warm-up, then one a measured second.
		lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
		if len(lines) != 3 || !strings.Contains(lines[0], "warm-up") || !measuredLine.MatchString(lines[1]) || !measuredLine.MatchString(lines[2]) {
			t.Errorf("progress lines:\n%s", progress.String())
		}
	})
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

// BenchmarkNolockRun measures the harness itself: the control engine costs
// next to nothing, so this is the ceiling on what any engine can show.
func BenchmarkNolockRun(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Engine = engines.MustParse("nolock")
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

// Fresh masters under the default quarantine for --masters (always): every
// one is younger than the TTL, so none votes yet. The run must say so, as
// young masters and not restarts, wait it out visibly, and only then
// measure: before, it measured a window of no_quorum errors.
func TestFreshMastersQuarantineIsWaitedOut(t *testing.T) {
	noLeaks(t)
	begun := time.Now()
	c := redistest.StartT(t, 5)
	cfg := shortConfig("redlock", c.Addrs())
	cfg.Quarantine = engines.QuarantineAlways
	// Young means younger than the TTL when the run asks: a TTL of the
	// time the start took (seconds on a loaded machine, which made fixed
	// 2 s masters old before the run began) and 5 s more for the run to
	// ask, which is also how long an idle machine waits here.
	cfg.TTL = time.Since(begun).Truncate(time.Second) + 5*time.Second
	cfg.Workers, cfg.Resources, cfg.Hold = 4, 64, Hold{}
	cfg.Warmup = 0
	// Once the wait ends, three masters may vote and a quorum needs all
	// three: with the default node timeout (50 ms here) one slow answer
	// on a loaded machine fails the attempt. A quarter of the TTL lets
	// the run measure the quarantine's effect, not the machine's speed.
	cfg.NodeTimeout = cfg.TTL / 4
	byCount(&cfg, 300)
	var log, progress bytes.Buffer
	cfg.Log, cfg.Progress = &log, &progress
	start := time.Now()
	s := run(t, cfg).Summary
	// A hang, not a slow machine: the wait is the TTL at most.
	if d := time.Since(start); d > cfg.TTL+time.Minute {
		t.Errorf("the run took %s with a %s quarantine", d, cfg.TTL)
	}
	for _, want := range []string{"quorum in quarantine until", "none of them was seen restarting", "quarantine over"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	// All 5 were started for the test, but on a loaded machine the first
	// may be older than the TTL by the time the run asks: a quorum or more.
	if !regexp.MustCompile(`[3-5] of 5 masters have been up for less than the TTL \(` + regexp.QuoteMeta(cfg.TTL.String()) + `\)`).MatchString(log.String()) {
		t.Errorf("log does not say how many masters are too young:\n%s", log.String())
	}
	if strings.Contains(log.String(), "run_id changed") {
		t.Errorf("log blames restarts that never happened:\n%s", log.String())
	}
	if !strings.Contains(progress.String(), "[quarantine] ") || !strings.Contains(progress.String(), " left before a quorum") {
		t.Errorf("no countdown line:\n%s", progress.String())
	}
	// No attempt failed for want of voters: a no_quorum the quarantine
	// caused has no vote that failed; one a stalled master caused has
	// (with three voters, every such attempt had one).
	var failedVotes int64
	for _, n := range s.Nodes {
		failedVotes += n.TimedOut + n.Failed
	}
	if s.Acquired == 0 || s.Errors["no_quorum"] > failedVotes {
		t.Errorf("after the wait: acquired %d, errors %v, %d votes timed out or failed (%v)", s.Acquired, s.Errors, failedVotes, s.ErrorExamples)
	}
	// The wait ends when a quorum votes; a master started a little later
	// may still sit out the rest of its own quarantine.
	up := 0
	for _, n := range s.Nodes {
		if n.Restarts != 0 {
			t.Errorf("node %s: restarts %d", n.Addr, n.Restarts)
		}
		if n.State == "up" {
			up++
		}
	}
	if up < len(s.Nodes)/2+1 {
		t.Errorf("only %d of %d masters up after the wait: %+v", up, len(s.Nodes), s.Nodes)
	}
}

// --no-wait-quarantine: the same masters stop the run at once, with the
// reason and the time the quarantine ends. At once is shown by the path:
// the refusal is the one awaitQuorum gives before its first wait. The TTL
// is an hour so that the masters are young however long they took to
// start, and so is the node timeout (a hundredth of it) that reads their
// uptime.
func TestNoWaitQuarantineStopsTheRun(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 3)
	cfg := shortConfig("redlock", c.Addrs())
	cfg.Quarantine = engines.QuarantineAlways
	cfg.TTL = time.Hour
	cfg.NoWaitQuarantine = true
	// A wait would draw its countdown line first: that line ends it, so
	// that the test fails at once rather than after the hour.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var progress bytes.Buffer
	cfg.Progress = writerFunc(func(p []byte) {
		progress.Write(p)
		cancel()
	})
	_, err := Run(ctx, cfg)
	if err == nil {
		t.Fatal("a run on quarantined masters started")
	}
	for _, want := range []string{"quorum in quarantine until", "3 of 3 masters have been up for less than the TTL (1h0m0s)", "; not waiting (--no-wait-quarantine)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if progress.Len() != 0 {
		t.Errorf("the run waited before refusing:\n%s", progress.String())
	}
}

// The progress line's figures are the interval's, as intervals.json has
// them, not running totals, and the line says so. The run is stopped once
// three measured intervals have been shown, however long they took: a
// single one would be its own running total.
func TestProgressFiguresArePerInterval(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 3)
	cfg := shortConfig("redlock", c.Addrs())
	// A node timeout of 600 ms, as loadProof's: errors are figures here.
	cfg.TTL = time.Minute
	cfg.Duration, cfg.Warmup = time.Hour, 0
	cfg.Hold = Hold{Kind: HoldUniform, Min: 0, Max: 2 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var progress bytes.Buffer
	shown := 0
	cfg.Progress = writerFunc(func(p []byte) {
		progress.Write(p)
		if shown += bytes.Count(p, []byte("] last ")); shown == 3 {
			cancel()
		}
	})
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if shown < 3 {
		t.Fatalf("the run ended after %d progress lines:\n%s", shown, progress.String())
	}
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	if len(lines) != len(res.Intervals) {
		t.Fatalf("%d progress lines, %d intervals:\n%s", len(lines), len(res.Intervals), progress.String())
	}
	answered := make([]bool, 3)
	for i, l := range lines {
		iv := res.Intervals[i]
		if !strings.Contains(l, "] last ") {
			t.Errorf("line %d does not say its span: %q", i, l)
		}
		// An interval that acquired nothing (a loaded machine can stall
		// a whole second) has no p99 to show.
		p99 := "-"
		if iv.P99Us > 0 || iv.Acquired > 0 {
			p99 = results.FormatUs(iv.P99Us)
		}
		if want := fmt.Sprintf("p99 %s  errors %d", p99, iv.Errors); !strings.Contains(l, want) {
			t.Errorf("line %d %q: want the interval's %q", i, l, want)
		}
		// Each master's PING round trip, once an interval.
		if len(iv.MasterRTTUs) != 3 {
			t.Fatalf("interval %d: master round trips %v, want one per master", i, iv.MasterRTTUs)
		}
		for m, rtt := range iv.MasterRTTUs {
			answered[m] = answered[m] || rtt > 0
		}
	}
	if !answered[0] || !answered[1] || !answered[2] {
		t.Errorf("masters answered a PING in some interval: %v, want all", answered)
	}
}

func TestProgressLineFormat(t *testing.T) {
	p := results.Progress{Elapsed: 3 * time.Second, Total: 10 * time.Second, Interval: time.Second,
		Acquired: 8412, P99Us: 1200, Errors: 2, Violations: 5, NewViolations: 1, OpenLoop: true, Backlog: 7}
	want := "[   3s/10s] last 1s: acquired/s 8412  p99 1.20ms  errors 2  VIOLATIONS 1 (5 in all)  backlog now 7"
	if got := p.String(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	p = results.Progress{Warmup: true, Elapsed: time.Second, Interval: 400 * time.Millisecond, Acquired: 40}
	if got, want := p.String(), "[warm-up    1s] last 400ms: acquired/s 100  p99 0µs  errors 0"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// A run on masters it did not start removes the keys under its prefix at
// the end, even when interrupted, and leaves every other key alone, glob
// characters in the prefix included.
func TestRunRemovesItsKeysFromGivenMasters(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 3)
	cfg := shortConfig("redlock", c.Addrs())
	cfg.KeyPrefix = "t*x:"
	cfg.TTL = time.Hour
	cfg.Hold = Hold{D: 50 * time.Millisecond}
	cfg.Duration = time.Hour
	var log bytes.Buffer
	cfg.Log = &log
	// Interrupted once the run has measured acquisitions, however long
	// the machine took to get there.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.Progress = writerFunc(func(p []byte) {
		if measuredLine.Match(p) {
			cancel()
		}
	})
	for _, a := range c.Addrs() {
		for _, kv := range [][2]string{{"t*x:left-by-an-earlier-run", "v"}, {"tAx:1", "other"}, {"other", "other"}} {
			if _, err := redistest.Do(a, 10*time.Second, "SET", kv[0], kv[1], "PX", "3600000"); err != nil {
				t.Fatal(err)
			}
		}
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if !s.Interrupted {
		t.Fatal("not interrupted")
	}
	for _, a := range c.Addrs() {
		for key, want := range map[string]string{"t*x:left-by-an-earlier-run": ":0", "tAx:1": ":1", "other": ":1"} {
			got, err := redistest.Do(a, 10*time.Second, "EXISTS", key)
			if err != nil || got != want {
				t.Errorf("%s EXISTS %s = %q, %v; want %s", a, key, got, err, want)
			}
		}
		n, _ := redistest.Do(a, 10*time.Second, "EVAL", "return #redis.call('KEYS', ARGV[1])", "0", `t\*x:*`)
		if n != ":0" {
			t.Errorf("%s: %s keys left under the prefix", a, n)
		}
	}
	if !strings.Contains(log.String(), `keys under "t*x:" left on the masters`) || !strings.Contains(log.String(), "removed ") {
		t.Errorf("log does not say what was removed:\n%s", log.String())
	}
}
