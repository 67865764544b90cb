package sim

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"
)

var (
	flagSeeds    = flag.Int("sim.seeds", 3, "TestSimulation: how many seeds to run, from -sim.first")
	flagFirst    = flag.Uint64("sim.first", 1, "TestSimulation: the first seed")
	flagSeed     = flag.Int64("sim.seed", -1, "TestSimulation: replay this one seed")
	flagDuration = flag.Duration("sim.duration", 20*time.Second, "virtual time the workers run per seed")
	flagRepeat   = flag.Int("sim.repeat", 0, "TestDeterminism: runs of each seed (0 skips the test)")
	flagClients  = flag.Int("sim.clients", 0, "Lockers per seed (0: Config's default)")
	flagWorkers  = flag.Int("sim.workers", 0, "workers per Locker (0: Config's default)")
	flagControl  = flag.String("sim.control", "", "TestSimulation: break mutual exclusion on purpose (split-prefix), to see a failure's report")
	flagUnguard  = flag.Bool("sim.unguarded", false, "TestSimulation: let workers Release and Extend during auto-extensions (Config.UnguardedLeaseOps)")
	flagFaults   = flag.Bool("sim.faults", false, "TestSimulation: inject faults, one master at a time (a first nemesis, see oneAtATime)")
	flagStall    = flag.Duration("sim.stall", 2*time.Minute, "wall time after which a seed that has not finished is reported as stalled")
)

// simConfig is the workload of TestSimulation for one seed.
func simConfig(t *testing.T, seed uint64) Config {
	cfg := Config{Seed: seed, Duration: *flagDuration, Clients: *flagClients, Workers: *flagWorkers, UnguardedLeaseOps: *flagUnguard}
	switch *flagControl {
	case "":
	case "split-prefix":
		cfg.Control = SplitPrefix
	default:
		t.Fatalf("-sim.control=%q: want split-prefix or nothing", *flagControl)
	}
	if *flagFaults {
		cfg.Faults = oneAtATime
	}
	return cfg
}

// oneAtATime is a first nemesis, within the model: every 0.5-2s of
// virtual time it faults one master for 0.1-2s (a pause, a partition
// that hangs or refuses, a restart with amnesia, its connections broken
// with commands in flight delivered late or never, slowness, or its
// clock running 1% fast or slow), then heals it. One master of five at a
// time keeps a quorum.
func oneAtATime(ctx context.Context, rng *rand.Rand, masters []*Master) {
	uniform := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	for {
		if !sleep(ctx, uniform(500*time.Millisecond, 2*time.Second)) {
			return
		}
		m := masters[rng.IntN(len(masters))]
		hold := uniform(100*time.Millisecond, 2*time.Second)
		lat := m.latency()
		switch rng.IntN(8) {
		case 0:
			m.Pause()
		case 1:
			m.Partition(Hang)
		case 2:
			m.Partition(Refuse)
		case 3:
			m.Restart()
		case 4:
			m.BreakConnections(uniform(0, 100*time.Millisecond))
		case 5:
			m.BreakConnections(-1)
		case 6:
			m.SetLatency(Latency{Min: 5 * time.Millisecond, Jitter: 100 * time.Millisecond})
		case 7:
			m.SetRate(1 + (rng.Float64()-0.5)*0.02)
		}
		sleep(ctx, hold)
		m.Heal(lat)
	}
}

// runSeed runs cfg in a bubble of its own, with crypto/rand seeded too
// (lease values), and returns the result.
func runSeed(t *testing.T, cfg Config) *Result {
	t.Helper()
	cryptotest.SetGlobalRandom(t, cfg.Seed)
	stall := time.AfterFunc(*flagStall, func() { stalled(cfg.Seed) })
	defer stall.Stop()
	var res *Result
	synctest.Test(t, func(t *testing.T) {
		var err error
		res, err = Run(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v", cfg.Seed, err)
		}
	})
	return res
}

// stalled ends the test binary when a seed's bubble has stopped: virtual
// time advances only once every goroutine in the bubble is durably
// blocked, and a goroutine waiting for a sync.Mutex is not, so a mutex
// held across a wait for virtual time stops the clock for good. It prints
// the bubble's goroutines that are not durably blocked: the culprits.
func stalled(seed uint64) {
	buf := make([]byte, 64<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var culprits []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		if strings.Contains(head, "synctest bubble") && !strings.Contains(head, "durable") {
			culprits = append(culprits, g)
		}
	}
	fmt.Fprintf(os.Stderr, "seed %d stalled: no progress for %s; the bubble's goroutines that are not durably blocked:\n\n%s\n",
		seed, *flagStall, strings.Join(culprits, "\n\n"))
	os.Exit(3)
}

// report fails t with each violation, the replay command and the history
// around the first violation.
func report(t *testing.T, res *Result) {
	t.Helper()
	if len(res.Violations) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d violations\n", res.Config.Seed, len(res.Violations))
	for i, v := range res.Violations {
		if i == 5 {
			fmt.Fprintf(&b, "... and %d more\n", len(res.Violations)-i)
			break
		}
		b.WriteString(v.String())
		b.WriteByte('\n')
	}
	first := res.Violations[0]
	from := max(0, min(first.A.Called, first.B.Called)-res.Config.TTL)
	fmt.Fprintf(&b, "history from %s to the first violation at %s (the last 60 events):\n", fmtDur(from), fmtDur(first.At))
	b.WriteString(FormatEvents(res.History.Window(from, first.At, 60)))
	fmt.Fprintf(&b, "the events of lease#%d and lease#%d:\n", first.A.ID, first.B.ID)
	var own []Event
	for _, e := range res.History.Events() {
		if e.Grant == first.A.ID || e.Grant == first.B.ID {
			own = append(own, e)
		}
	}
	b.WriteString(FormatEvents(own))
	control := ""
	if res.Config.Control == SplitPrefix {
		control = " -sim.control=split-prefix"
	}
	if res.Config.Faults != nil {
		control += " -sim.faults"
	}
	if res.Config.UnguardedLeaseOps {
		control += " -sim.unguarded"
	}
	fmt.Fprintf(&b, "replay: go test ./bench/sim -run 'TestSimulation$' -v -sim.seed=%d -sim.duration=%s -sim.clients=%d -sim.workers=%d%s",
		res.Config.Seed, res.Config.Duration, res.Config.Clients, res.Config.Workers, control)
	t.Error(b.String())
}

// TestSimulation runs the workload for -sim.seeds seeds (or the one
// -sim.seed), and fails on any checker's violation.
func TestSimulation(t *testing.T) {
	seeds := make([]uint64, 0, *flagSeeds)
	if *flagSeed >= 0 {
		seeds = append(seeds, uint64(*flagSeed))
	} else {
		for i := range *flagSeeds {
			seeds = append(seeds, *flagFirst+uint64(i))
		}
	}
	var virtual, wall time.Duration
	ops, violations := 0, 0
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			began := time.Now()
			res := runSeed(t, simConfig(t, seed))
			if res == nil {
				return
			}
			took := time.Since(began)
			virtual, wall, ops, violations = virtual+res.Virtual, wall+took, ops+res.Ops, violations+len(res.Violations)
			t.Logf("seed %d: %d ops, %d leases, %s virtual in %s (%.0fx), history %016x",
				seed, res.Ops, len(res.History.Grants()), res.Virtual.Round(time.Millisecond), took.Round(time.Millisecond),
				float64(res.Virtual)/float64(took), res.History.Hash())
			t.Logf("seed %d: %s", seed, res.History.Tally())
			t.Logf("seed %d: %s", seed, res.Coverage)
			if len(res.Leftovers) > 0 {
				t.Logf("seed %d: keys left on the masters after close: %q", seed, res.Leftovers)
			}
			report(t, res)
		})
	}
	if wall > 0 {
		t.Logf("%d seeds, %d ops checked, %d violations, %s virtual in %s wall (%.0fx)",
			len(seeds), ops, violations, virtual.Round(time.Millisecond), wall.Round(time.Millisecond), float64(virtual)/float64(wall))
	}
}

// TestDeterminism measures how often a seed replays: it runs each of
// -sim.seeds seeds -sim.repeat times and logs, per seed, how many of the
// later runs had the first run's history hash, and how long (in virtual
// time) each agreed with the first run before their event logs differed.
// It fails only if a run found a violation. Skipped unless -sim.repeat is
// set.
func TestDeterminism(t *testing.T) {
	if *flagRepeat <= 1 {
		t.Skip("set -sim.repeat to 2 or more to measure")
	}
	same, total := 0, 0
	var agreed []time.Duration
	for i := range *flagSeeds {
		seed := *flagFirst + uint64(i)
		distinct := make(map[uint64]bool)
		var first []Event
		var firstHash uint64
		replayed := 0
		for r := range *flagRepeat {
			t.Run(fmt.Sprintf("seed=%d/run=%d", seed, r), func(t *testing.T) {
				res := runSeed(t, simConfig(t, seed))
				if res == nil {
					return
				}
				report(t, res)
				h := res.History.Hash()
				distinct[h] = true
				ev := res.History.Events()
				if r == 0 {
					first, firstHash = ev, h
					return
				}
				if h == firstHash {
					replayed++
				}
				agreed = append(agreed, divergence(first, ev))
			})
		}
		same, total = same+replayed, total+*flagRepeat-1
		t.Logf("seed %d: %d of %d runs replayed the first run's history; %d distinct histories", seed, replayed, *flagRepeat-1, len(distinct))
	}
	slices.Sort(agreed)
	t.Logf("over %d seeds: %d of %d runs replayed their seed's first run", *flagSeeds, same, total)
	if len(agreed) > 0 {
		t.Logf("virtual time a run agreed with its seed's first run: min %s, median %s, max %s (of %s)",
			agreed[0], agreed[len(agreed)/2], agreed[len(agreed)-1], *flagDuration)
	}
}

// divergence is the virtual instant of the first event where two
// canonical event logs differ (the later log's end if one is a prefix).
func divergence(a, b []Event) time.Duration {
	for i := range min(len(a), len(b)) {
		x, y := a[i], b[i]
		x.Grant, y.Grant = 0, 0 // lease numbers follow the order of grants
		if x != y {
			return min(x.At, y.At)
		}
	}
	if len(a) == len(b) {
		return *flagDuration
	}
	return min(a[len(a)-1].At, b[len(b)-1].At)
}
