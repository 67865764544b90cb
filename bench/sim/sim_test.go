package sim

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/internal/simredis"
)

var (
	flagSeeds       = flag.Int("sim.seeds", 3, "TestSimulation: how many seeds to run, from -sim.first (without it or -sim.first, the short fixed set -sim.list)")
	flagList        = flag.String("sim.list", "1,2,3,12,15", "TestSimulation: the seeds run when none of -sim.seed, -sim.seeds, -sim.first, -sim.budget is given: one of each nemesis profile (restarts, none, all, clients, network)")
	flagClusterList = flag.String("sim.clusterlist", "1,3", "TestSimulation: the seeds the short fixed set also runs with three of the five votes clusters of two shards (restarts and failovers of one shard, every kind)")
	flagFirst       = flag.Uint64("sim.first", 1, "TestSimulation: the first seed")
	flagStride      = flag.Uint64("sim.stride", 1, "TestSimulation: run every stride-th seed from -sim.first (parallel processes take one residue each)")
	flagSeed        = flag.Int64("sim.seed", -1, "TestSimulation: replay this one seed")
	flagBudget      = flag.Duration("sim.budget", 0, "TestSimulation: run seeds from -sim.first until this much wall time has passed (instead of -sim.seeds)")
	flagDuration    = flag.Duration("sim.duration", 0, "virtual time the workers run per seed (0: Config's default)")
	flagRepeat      = flag.Int("sim.repeat", 0, "TestDeterminism: runs of each seed (0 skips the test)")
	flagClients     = flag.Int("sim.clients", 0, "Lockers per seed (0: Config's default)")
	flagWorkers     = flag.Int("sim.workers", 0, "workers per Locker (0: Config's default)")
	flagResources   = flag.Int("sim.resources", 0, "resources per seed (0: Config's default)")
	flagNemesis     = flag.Bool("sim.nemesis", true, "draw a fault schedule from each seed (in the model)")
	flagIdle        = flag.String("sim.idle", "", "clients (c1) and workers (c2/w0) that do nothing, separated by commas (a shrunk case's)")
	flagKeep        = flag.String("sim.keep", "", "keep only these faults of the drawn schedule, by index (a shrunk case's schedule); \"none\" keeps none")
	flagControl     = flag.String("sim.control", "", "TestSimulation: break mutual exclusion on purpose (split-prefix), to see a failure's report")
	flagMutation    = flag.String("sim.mutation", "", "TestSimulation: undo one engine fix (an internal/mutation switch's name) for the checkers to find")
	flagRW          = flag.Bool("sim.rw", true, "the workers take read/write locks (false: the workload before they did, which cases hunted then replay)")
	flagClusters    = flag.Int("sim.clusters", 0, "votes that are Redis Clusters (the last ones of the five)")
	flagShards      = flag.Int("sim.shards", 0, "shards per cluster vote (0: Config's default, 2)")
	flagReplicas    = flag.Bool("sim.replicas", true, "each cluster shard has a replica (failovers need one)")
	flagShrink      = flag.Bool("sim.shrink", true, "TestSimulation: shrink a failing seed to a small case that still fails")
	flagProcs       = flag.Int("sim.procs", 1, "GOMAXPROCS while a seed runs (1 replays more often)")
	flagStall       = flag.Duration("sim.stall", 2*time.Minute, "wall time after which a seed that has not finished is reported as stalled")
	flagSummary     = flag.Bool("sim.summary", false, "TestSimulation: print one SIM line with the totals (for make sim)")
	flagDriftQuorum = flag.Bool("sim.driftquorum", true, "the schedule runs a quorum of masters' clocks fast at the DriftFactor now and then (past it with -sim.outofmodel)")
	flagExpiry      = flag.String("sim.expiry", "auto", "the fencing counters expire during the run (names rest, a quorum of clocks steps back): on, off, or auto (every fourth seed, those ≡ 3 mod 4)")
	flagExpiryList  = flag.String("sim.expirylist", "2", "TestSimulation: the seeds the short fixed set also runs with -sim.expiry=on")
	flagRemote      = flag.Bool("sim.remote", true, "holders ask RemoteValidity of their leases now and then")
	flagMismatch    = flag.Bool("sim.mismatch", true, "the last client's handle of semaphore s0 counts one permit more than the others'")
	flagOutOfModel  = flag.Bool("sim.outofmodel", false, "add the faults outside the model to the schedule (a clock jumping forward past the TTL; with -sim.driftquorum, a quorum of clocks fast past the DriftFactor): violations are expected")
)

// simConfig is the workload of TestSimulation for one seed, from the
// flags.
func simConfig(t testing.TB, seed uint64) Config {
	cfg := Config{Seed: seed, Duration: *flagDuration, Clients: *flagClients, Workers: *flagWorkers,
		Resources: *flagResources, Nemesis: *flagNemesis, Mutation: *flagMutation, NoRW: !*flagRW,
		Clusters: *flagClusters, Shards: *flagShards, NoReplicas: !*flagReplicas,
		DriftQuorum: *flagDriftQuorum, RemoteValidity: *flagRemote, PermitMismatch: *flagMismatch, OutOfModel: *flagOutOfModel}
	switch *flagExpiry {
	case "on":
		cfg.Expiry = true
	case "off":
	case "auto":
		cfg.Expiry = seed%4 == 3
	default:
		t.Fatalf("-sim.expiry=%q: want on, off or auto", *flagExpiry)
	}
	switch *flagControl {
	case "":
	case "split-prefix":
		cfg.Control = SplitPrefix
	default:
		t.Fatalf("-sim.control=%q: want split-prefix or nothing", *flagControl)
	}
	if *flagIdle != "" {
		cfg.Idle = strings.Split(*flagIdle, ",")
	}
	switch *flagKeep {
	case "":
	case "none":
		cfg.Keep = []int{}
	default:
		for _, f := range strings.Split(*flagKeep, ",") {
			i, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("-sim.keep=%q: want fault indices separated by commas, or none", *flagKeep)
			}
			cfg.Keep = append(cfg.Keep, i)
		}
	}
	cfg.fill()
	return cfg
}

// runSeed runs cfg in a bubble of its own, with crypto/rand seeded too
// (lease values) and GOMAXPROCS at -sim.procs, and returns the result.
func runSeed(t testing.TB, cfg Config) *Result {
	t.Helper()
	cryptotest.SetGlobalRandom(t.(*testing.T), cfg.Seed)
	if *flagProcs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*flagProcs))
	}
	stall := time.AfterFunc(*flagStall, func() { stalled(cfg.Seed) })
	defer stall.Stop()
	var res *Result
	synctest.Test(t.(*testing.T), func(t *testing.T) {
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

// TestSimulation runs the workload for -sim.seeds seeds (or the one
// -sim.seed, or as many as -sim.budget allows), and fails on any
// checker's violation: it prints the failure's report, then shrinks it
// and prints the shrunk case's replay command.
func TestSimulation(t *testing.T) {
	var virtual, wall time.Duration
	seeds, ops, violations, joins := 0, 0, 0, 0
	began := time.Now()
	ranged := false
	flag.Visit(func(f *flag.Flag) { ranged = ranged || f.Name == "sim.seeds" || f.Name == "sim.first" })
	var list []uint64
	for _, f := range strings.Split(*flagList, ",") {
		if n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64); err == nil {
			list = append(list, n)
		}
	}
	// The fixed set also runs a few seeds with cluster votes (unless the
	// flags make every seed's votes clusters already).
	var clusterList []uint64
	if *flagClusters == 0 {
		for _, f := range strings.Split(*flagClusterList, ",") {
			if n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64); err == nil {
				clusterList = append(clusterList, n)
			}
		}
	}
	// And a few with the fencing counters expiring.
	var expiryList []uint64
	if *flagExpiry == "auto" {
		for _, f := range strings.Split(*flagExpiryList, ",") {
			if n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64); err == nil {
				expiryList = append(expiryList, n)
			}
		}
	}
	next := func(i int) (seed uint64, clustered, expiry, ok bool) {
		switch {
		case *flagSeed >= 0:
			return uint64(*flagSeed), false, false, i == 0
		case *flagBudget > 0:
			return *flagFirst + uint64(i)**flagStride, false, false, time.Since(began) < *flagBudget
		case !ranged:
			if i < len(list) {
				return list[i], false, false, true
			}
			if i -= len(list); i < len(clusterList) {
				return clusterList[i], true, false, true
			}
			if i -= len(clusterList); i < len(expiryList) {
				return expiryList[i], false, true, true
			}
			return 0, false, false, false
		}
		return *flagFirst + uint64(i)**flagStride, false, false, i < *flagSeeds
	}
	for i := 0; ; i++ {
		seed, clustered, expiry, ok := next(i)
		if !ok {
			break
		}
		name := fmt.Sprintf("seed=%d", seed)
		if clustered {
			name += ",clusters=3"
		}
		if expiry {
			name += ",expiry"
		}
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			cfg := simConfig(t, seed)
			if clustered {
				cfg.Clusters, cfg.Shards = 3, 2
			}
			if expiry {
				cfg.Expiry = true
			}
			res := runSeed(t, cfg)
			if res == nil {
				return
			}
			took := time.Since(start)
			seeds++
			virtual, wall, ops, violations = virtual+res.Virtual, wall+took, ops+res.Ops, violations+len(res.Violations)
			joins += res.Coverage.RWJoins
			t.Logf("seed %d: %d ops, %d leases, %d faults (%s), %s virtual in %s (%.0fx), history %016x",
				seed, res.Ops, len(res.History.Grants()), len(res.Faults), Profile(seed), res.Virtual.Round(time.Millisecond), took.Round(time.Millisecond),
				float64(res.Virtual)/float64(took), res.History.Hash())
			if testing.Verbose() {
				t.Logf("seed %d: %s", seed, res.History.Tally())
				t.Logf("seed %d: %s", seed, res.Coverage)
			}
			if len(res.Violations) > 0 {
				t.Error(Report(res))
				if *flagShrink {
					shrinkAndReport(t, res)
				}
			}
		})
	}
	if wall > 0 {
		t.Logf("%d seeds, %d ops checked, %d violations, %s virtual in %s wall (%.1fx)",
			seeds, ops, violations, virtual.Round(time.Millisecond), wall.Round(time.Millisecond), float64(virtual)/float64(wall))
	}
	if *flagSummary {
		fmt.Printf("SIM seeds=%d virtual_ms=%d wall_ms=%d ops=%d violations=%d rw_joins=%d\n",
			seeds, virtual.Milliseconds(), wall.Milliseconds(), ops, violations, joins)
	}
}

// Replay is the go test command that runs cfg again.
func Replay(cfg Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "go test -tags redlock_faults ./bench/sim -run 'TestSimulation$' -v -sim.seed=%d -sim.duration=%s -sim.clients=%d -sim.workers=%d -sim.resources=%d",
		cfg.Seed, cfg.Duration, cfg.Clients, cfg.Workers, cfg.Resources)
	if !cfg.Nemesis {
		b.WriteString(" -sim.nemesis=false")
	}
	if cfg.Keep != nil {
		if len(cfg.Keep) == 0 {
			b.WriteString(" -sim.keep=none")
		} else {
			var ks []string
			for _, k := range cfg.Keep {
				ks = append(ks, strconv.Itoa(k))
			}
			b.WriteString(" -sim.keep=" + strings.Join(ks, ","))
		}
	}
	if len(cfg.Idle) > 0 {
		b.WriteString(" -sim.idle=" + strings.Join(cfg.Idle, ","))
	}
	if cfg.Control == SplitPrefix {
		b.WriteString(" -sim.control=split-prefix")
	}
	if cfg.Clusters > 0 {
		fmt.Fprintf(&b, " -sim.clusters=%d -sim.shards=%d", cfg.Clusters, cfg.Shards)
		if cfg.NoReplicas {
			b.WriteString(" -sim.replicas=false")
		}
	}
	if cfg.Mutation != "" {
		b.WriteString(" -sim.mutation=" + cfg.Mutation)
	}
	if cfg.NoRW {
		b.WriteString(" -sim.rw=false")
	}
	if !cfg.DriftQuorum {
		b.WriteString(" -sim.driftquorum=false")
	}
	if cfg.Expiry {
		b.WriteString(" -sim.expiry=on")
	} else {
		b.WriteString(" -sim.expiry=off")
	}
	if !cfg.RemoteValidity {
		b.WriteString(" -sim.remote=false")
	}
	if !cfg.PermitMismatch {
		b.WriteString(" -sim.mismatch=false")
	}
	if cfg.OutOfModel {
		b.WriteString(" -sim.outofmodel")
	}
	return b.String()
}

// Report is a failing run's report: its violations, the fault schedule,
// the history of the failing window, and the replay command.
func Report(res *Result) string {
	var b strings.Builder
	cfg := res.Config
	fmt.Fprintf(&b, "seed %d: %d violations\n", cfg.Seed, len(res.Violations))
	for i, v := range res.Violations {
		if i == 5 {
			fmt.Fprintf(&b, "... and %d more\n", len(res.Violations)-i)
			break
		}
		b.WriteString(v.String())
		b.WriteByte('\n')
	}
	first := res.Violations[0]
	from := max(0, first.At-2*cfg.TTL)
	for _, g := range first.Leases {
		from = max(0, min(from, g.Called-cfg.TTL))
	}
	to := first.At
	fmt.Fprintf(&b, "fault schedule (%d faults):\n", len(res.Faults))
	for _, f := range res.History.Faults() {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "history from %s to the first violation at %s", fmtDur(from), fmtDur(to))
	if first.Resource != "" {
		fmt.Fprintf(&b, ", resource %s", first.Resource)
	}
	b.WriteString(" (the last 60 events):\n")
	var window []Event
	for _, e := range res.History.Window(from, to, 1<<30) {
		if first.Resource == "" || e.on(first.Resource) {
			window = append(window, e)
		}
	}
	if len(window) > 60 {
		window = window[len(window)-60:]
	}
	b.WriteString(FormatEvents(window))
	if first.Resource != "" {
		fmt.Fprintf(&b, "the masters' changes of %s's keys and queue in that window (the last 60):\n", first.Resource)
		var recs []simredis.KeyRecord
		slots := semPrefix + "{" + first.Resource + "}:"
		for _, log := range res.keyLogs {
			for _, r := range log {
				if (r.Key == first.Resource || r.Key == queuePrefix+first.Resource || strings.HasPrefix(r.Key, slots)) && r.At >= from && r.At <= to {
					recs = append(recs, r)
				}
			}
		}
		slices.SortStableFunc(recs, func(a, b simredis.KeyRecord) int { return int(a.At - b.At) })
		if len(recs) > 60 {
			recs = recs[len(recs)-60:]
		}
		for _, r := range recs {
			b.WriteString(r.String())
			b.WriteByte('\n')
		}
	}
	fmt.Fprintf(&b, "replay: %s", Replay(cfg))
	return b.String()
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
	var dur time.Duration
	for i := range *flagSeeds {
		seed := *flagFirst + uint64(i)
		distinct := make(map[uint64]bool)
		var first []Event
		var firstHash uint64
		replayed := 0
		for r := range *flagRepeat {
			t.Run(fmt.Sprintf("seed=%d/run=%d", seed, r), func(t *testing.T) {
				cfg := simConfig(t, seed)
				dur = cfg.Duration
				res := runSeed(t, cfg)
				if res == nil {
					return
				}
				if len(res.Violations) > 0 {
					t.Error(Report(res))
				}
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
				agreed = append(agreed, divergence(first, ev, dur))
			})
		}
		same, total = same+replayed, total+*flagRepeat-1
		t.Logf("seed %d: %d of %d runs replayed the first run's history; %d distinct histories", seed, replayed, *flagRepeat-1, len(distinct))
	}
	slices.Sort(agreed)
	t.Logf("over %d seeds: %d of %d runs replayed their seed's first run", *flagSeeds, same, total)
	if len(agreed) > 0 {
		t.Logf("virtual time a run agreed with its seed's first run: min %s, median %s, max %s (of %s)",
			agreed[0], agreed[len(agreed)/2], agreed[len(agreed)-1], dur)
	}
}

// divergence is the virtual instant of the first event where two
// canonical event logs differ (the later log's end if one is a prefix).
func divergence(a, b []Event, dur time.Duration) time.Duration {
	for i := range min(len(a), len(b)) {
		x, y := a[i], b[i]
		if x.At != y.At || x.Client != y.Client || x.Worker != y.Worker || x.Op != y.Op || x.Resource != y.Resource || x.Result != y.Result {
			return min(x.At, y.At)
		}
	}
	if len(a) == len(b) {
		return dur
	}
	return min(a[len(a)-1].At, b[len(b)-1].At)
}
