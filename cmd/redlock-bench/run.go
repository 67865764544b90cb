package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/fault"
	"github.com/redlock-bench/redlock/cmd/internal/connflags"
	"github.com/redlock-bench/redlock/results"
)

// runOptions are the flags of `redlock-bench run`. The flag names are a
// contract: scripts and the Makefile use them. sweep and compare take them
// too, but those they replace with their own.
type runOptions struct {
	masters      string
	localMasters int
	clusters     string
	shards       int
	sentinels    []string
	engine       string
	workers      int
	clients      int
	resources    int
	distribution string
	lock         string
	mode         string
	waitTimeout  time.Duration
	hold         string
	ttl          time.Duration
	nodeTimeout  time.Duration
	duration     time.Duration
	ops          int64
	warmup       time.Duration
	rate         float64
	out          string
	label        string
	check        bool
	seed         uint64
	keyPrefix    string
	quarantine   string
	noWait       bool
	extend       bool
	fencing      bool
	gate         bool
	notify       bool
	coalesce     bool
	fault        string
	startAt      string
	cpuProfile   string
	metricsAddr  string
	conn         *connflags.Flags
	// authWarning is the connection flags' Warning, for the command to
	// print.
	authWarning string

	// output and slo are how run judges and prints its result: run's
	// own, and compare's (sweep has an --slo of its own).
	output outputFlags
	slo    sloFlags
}

// newRunFlags is run's workload flags, without the output flags: what
// sweep and compare take as they are.
func newRunFlags(o *runOptions) *pflag.FlagSet {
	d := bench.DefaultConfig()
	fs := newFlagSet("run")
	fs.StringVar(&o.masters, "masters", "", "Redis masters, host:port,host:port,... (default: start --local-masters locally)")
	fs.IntVar(&o.localMasters, "local-masters", d.LocalMasters, "with no --masters: start this many redis-server on free 127.0.0.1 ports, stopped at exit")
	fs.StringVar(&o.clusters, "clusters", "", "votes that are Redis Clusters, after --masters, one per cluster, \"/\" between them, each some of its nodes: host:port,host:port/host:port,... (redlock)")
	fs.StringArrayVar(&o.sentinels, "sentinel", nil, "a vote that is a master Redis Sentinel manages, after --masters and --clusters: MASTER@HOST:PORT,HOST:PORT (its name as the sentinels monitor it, then some of them); repeat for more (redlock)")
	fs.IntVar(&o.shards, "cluster-shards", 0, fmt.Sprintf("with --local-masters N: start N local Redis Clusters of this many shards (1..%d), one vote each, instead of N redis-server (redlock)", bench.MaxClusterShards))
	fs.StringVar(&o.engine, "engine", d.Engine.String(), "lock engine (nolock grants everything without Redis: a control for the oracle): "+engines.NamesHelp())
	fs.IntVar(&o.workers, "workers", d.Workers, fmt.Sprintf("concurrent workers (goroutines), at most %d", bench.MaxWorkers))
	fs.IntVar(&o.clients, "clients", d.Clients, fmt.Sprintf("independent engine instances with their own connections, shared round-robin by the workers, at most %d", bench.MaxClients))
	fs.IntVar(&o.resources, "resources", d.Resources, fmt.Sprintf("number of distinct lock names, at most %d", bench.MaxResources))
	fs.StringVar(&o.distribution, "distribution", d.Distribution.String(), "which resource each operation locks: uniform, or zipf:S (S > 1) for hot keys")
	fs.StringVar(&o.lock, "lock", d.Lock.String(), "what each operation takes: mutex; semaphore:P, a permit of the resource's semaphore of P permits (redlock); multi:K, one lease on K distinct resources drawn by --distribution (K mutexes one after another for an engine without one, and for "+engines.RedlockSequential.String()+"); rw:F, the resource's read/write lock, each operation a read with probability F (redlock; "+engines.RedlockMutex.String()+" takes every operation on its mutex)")
	fs.StringVar(&o.mode, "mode", string(d.Mode), "try (one attempt) or wait (Lock until acquired or --wait-timeout)")
	fs.DurationVar(&o.waitTimeout, "wait-timeout", d.WaitTimeout, "mode wait: give up on a Lock after this long")
	fs.StringVar(&o.hold, "hold", d.Hold.String(), "time held before release: 0, a duration, exp:MEAN or uniform:MIN-MAX")
	fs.DurationVar(&o.ttl, "ttl", d.TTL, "lock TTL")
	fs.DurationVar(&o.nodeTimeout, "node-timeout", d.NodeTimeout, "how long an attempt waits for the masters' answers before it counts the silent ones as failed (no_quorum, release errors); 0: the engine's default, TTL/100 but at least min(50ms, TTL/10) for redlock, 20ms for rueidislock (redlock, rueidislock)")
	fs.DurationVar(&o.duration, "duration", d.Duration, fmt.Sprintf("measured duration, after the warm-up (or use --ops); every duration is at most %s", bench.MaxTime))
	fs.Int64Var(&o.ops, "ops", 0, fmt.Sprintf("measure this many acquire attempts instead of a duration, at most %d", bench.MaxOps))
	fs.DurationVar(&o.warmup, "warmup", d.Warmup, "warm-up before the measured window, excluded from the results")
	fs.Float64Var(&o.rate, "rate", 0, fmt.Sprintf("0: closed loop; R > 0: open loop at R acquisitions/s (at most %d), latency from the intended start", bench.MaxRate))
	fs.StringVar(&o.out, "out", "", "results directory (default results/runs/<UTC timestamp>-<label>)")
	fs.StringVar(&o.label, "label", "", "a name for the run (default: derived from the flags)")
	fs.BoolVar(&o.check, "check", d.Check, "run the safety oracle (--check=false to turn it off)")
	fs.Uint64Var(&o.seed, "seed", d.Seed, "seed of the workers' random choices")
	fs.StringVar(&o.keyPrefix, "key-prefix", d.KeyPrefix, fmt.Sprintf("prefix of every lock name, at most %d bytes", bench.MaxKeyPrefix))
	fs.StringVar(&o.quarantine, "quarantine", "", "engine restart quarantine: off, observed or always (default: observed for local masters, always for --masters)")
	fs.BoolVar(&o.noWait, "no-wait-quarantine", d.NoWaitQuarantine, "when the engine keeps too many masters out of the vote for a quorum (young or restarted: see --quarantine), stop with an error instead of waiting before the warm-up")
	fs.BoolVar(&o.extend, "extend", d.Extend, "auto-extend leases every TTL/3 while held, so that --hold may exceed --ttl (redlock)")
	fs.BoolVar(&o.fencing, "fencing", d.Fencing, "fencing tokens; the oracle also checks they increase per resource (redlock)")
	fs.BoolVar(&o.gate, "gate", !d.DisableGate, "in-process gate: a client's workers queue locally for a resource (--gate=false to compare; redlock)")
	fs.BoolVar(&o.notify, "notify", !d.DisableNotify, "release notifications wake waiters (--notify=false: jittered polling only; redlock)")
	fs.BoolVar(&o.coalesce, "coalesce", true, "send a master's queued script calls of one kind as one call over many keys (--coalesce=false is --engine "+engines.RedlockPerCommand.String()+")")
	fs.StringVar(&o.fault, "fault", "", fmt.Sprintf("faults to inject, ACTION:NODE[=ARG]@AT[+FOR],... (at most %d) with AT from the start of the run: kill:2@5s, restart:2@6s, pause:3@10s+4s, slow:1=20ms@0s+10s, cut:4@15s+5s (local masters only), stall:0@3s+2s (also --masters)", bench.MaxFaults))
	fs.StringVar(&o.startAt, "start-at", "", "wait until this RFC 3339 time (e.g. 2025-01-02T15:04:05Z) before the warm-up, to line up runs on several machines")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", metricsAddrUsage)
	_ = fs.MarkHidden("cpuprofile")
	o.conn = connflags.Register(fs)
	addVersionFlag(fs)
	return fs
}

// runFlagSet is every flag of run: the workload's, then how the result is
// judged and printed.
func runFlagSet(o *runOptions) *pflag.FlagSet {
	fs := newRunFlags(o)
	o.slo.register(fs, "an `OBJECTIVE` the run must meet, else exit 3; repeat for several: 'p99<5ms', 'release.p99<=2ms', 'errors<0.1%', 'throughput>=10000/s', 'violations<1' (latency p50, p90, p99, p999, max, mean)")
	o.output.register(fs, "summary.json", "print one line: throughput, p50 and p99, the errors by kind, the violations, and DEGRADED (errors, leases lost) or UNSAFE (violations) (progress only on a terminal)")
	return fs
}

// addRunFlags adds run's flags to fs, in run's order, but those fs has
// already: the command's own, which replace run's. Their values go to o.
func addRunFlags(fs *pflag.FlagSet, o *runOptions) {
	newRunFlags(o).VisitAll(func(f *pflag.Flag) {
		if fs.Lookup(f.Name) == nil {
			fs.AddFlag(f)
		}
	})
}

// runUsage is run's help.
func runUsage() string {
	return "Usage: redlock-bench run [flags]\n\nFlags:\n" + runFlagSet(&runOptions{}).FlagUsages()
}

// runFlagUsages is the help text of run's flags but those skip names, for
// the commands that take run's flags and replace some of them.
func runFlagUsages(skip func(name string) bool) string {
	var ro runOptions
	shown := newFlagSet("run")
	newRunFlags(&ro).VisitAll(func(f *pflag.Flag) {
		if !skip(f.Name) {
			shown.AddFlag(f)
		}
	})
	return shown.FlagUsages()
}

// parseRunFlags turns run's command line into a validated bench.Config.
// Every error is a *usageError naming the flag and the value.
func parseRunFlags(args []string) (bench.Config, runOptions, error) {
	var o runOptions
	fs := runFlagSet(&o)
	if err := parseFlags(fs, args); err != nil {
		return bench.Config{}, o, err
	}
	if err := noArgs(fs); err != nil {
		return bench.Config{}, o, err
	}
	c, err := o.build(fs)
	if err != nil {
		return c, o, err
	}
	if err := o.output.check(); err != nil {
		return c, o, err
	}
	return c, o, o.slo.parse(c)
}

// build turns run's flags, parsed on fs (run's, or a sweep's or a
// comparison's, which hold them), into a validated bench.Config.
func (o *runOptions) build(fs *pflag.FlagSet) (bench.Config, error) {
	c := o.config()
	if err := o.parseValues(fs, &c); err != nil {
		return c, err
	}
	// The engine features exist in the redlock engine only; asking another
	// engine for them is a mistake, not a no-op.
	if !o.coalesce {
		if c.Engine != (engines.Engine{Base: engines.Redlock}) {
			return c, badFlag("coalesce", "false", "applies to --engine redlock only, not "+c.Engine.String())
		}
		c.Engine.Base = engines.RedlockPerCommand
	}
	if !c.Engine.IsRedlock() {
		if o.metricsAddr != "" {
			return c, badFlag("metrics-addr", o.metricsAddr, "applies to --engine redlock only (its metrics are the engine's), not "+c.Engine.String())
		}
		for _, f := range []string{"extend", "fencing", "gate", "notify"} {
			if fs.Changed(f) {
				return c, badFlag(f, fs.Lookup(f).Value.String(), "applies to --engine redlock only, not "+c.Engine.String())
			}
		}
	}
	if err := c.Validate(); err != nil {
		return c, asUsage(err)
	}
	if c.Label == "" {
		c.Label = bench.DeriveLabel(c)
	}
	return c, nil
}

// measurable refuses an objective that a run of c cannot measure, as k6
// refuses a threshold on a metric that does not exist: else the run would
// go its whole length only to miss it for want of evidence.
func measurable(c bench.Config, objs []results.Objective) error {
	for _, o := range objs {
		var why string
		switch {
		case o.Metric == "violations" && !c.Check:
			why = "violations are counted by the safety check (--check=false turned it off)"
		case o.Latency == results.Wait.String() && c.Mode != bench.ModeWait:
			why = "mode try measures no wait latency (--mode wait does)"
		case o.Latency == results.Handoff.String() && c.Mode != bench.ModeWait:
			why = "hand-offs are measured in mode wait only (--mode wait)"
		case o.Latency == results.Handoff.String() && !c.Check:
			why = "hand-offs are measured by the safety check (--check=false turned it off)"
		case o.Latency == results.Acquire.String() && c.Mode == bench.ModeWait:
			why = "mode wait measures the wait latency, not acquire (wait." + o.Metric + ", or " + o.Metric + " alone, is the acquisition latency)"
		}
		if why != "" {
			return badFlag("slo", o.Text, why)
		}
	}
	return nil
}

// config is the configuration of the flags that need no parsing.
func (o *runOptions) config() bench.Config {
	c := bench.DefaultConfig()
	c.LocalMasters = o.localMasters
	c.ClusterShards = o.shards
	c.Workers = o.workers
	c.Clients = o.clients
	c.Resources = o.resources
	c.WaitTimeout = o.waitTimeout
	c.TTL = o.ttl
	c.NodeTimeout = o.nodeTimeout
	c.Duration = o.duration
	c.Warmup = o.warmup
	c.Rate = o.rate
	c.Check = o.check
	c.Label = o.label
	c.Seed = o.seed
	c.KeyPrefix = o.keyPrefix
	c.NoWaitQuarantine = o.noWait
	c.Extend = o.extend
	c.Fencing = o.fencing
	c.DisableGate = !o.gate
	c.DisableNotify = !o.notify
	return c
}

// parseValues parses into c the flags whose values have a syntax of their
// own, and those that exclude each other.
func (o *runOptions) parseValues(fs *pflag.FlagSet, c *bench.Config) error {
	e, err := engines.Parse(o.engine)
	if err != nil {
		return badFlag("engine", o.engine, err.Error())
	}
	c.Engine = e
	if fs.Changed("quarantine") {
		if c.Quarantine, err = engines.ParseQuarantine(o.quarantine); err != nil {
			return badFlag("quarantine", o.quarantine, err.Error())
		}
	}
	if fs.Changed("masters") {
		m, err := engines.ParseMasters(o.masters)
		if err != nil {
			return badFlag("masters", o.masters, err.Error())
		}
		if fs.Changed("local-masters") {
			return badFlag("local-masters", strconv.Itoa(o.localMasters), "cannot be combined with --masters")
		}
		c.Masters = m
	}
	if fs.Changed("clusters") {
		cl, err := engines.ParseClusters(o.clusters)
		if err != nil {
			return badFlag("clusters", o.clusters, err.Error())
		}
		if fs.Changed("local-masters") {
			return badFlag("local-masters", strconv.Itoa(o.localMasters), "cannot be combined with --clusters")
		}
		c.Clusters = cl
	}
	for _, s := range o.sentinels {
		v, err := bench.ParseSentinel(s)
		if err != nil {
			return badFlag("sentinel", s, err.Error())
		}
		if fs.Changed("local-masters") {
			return badFlag("local-masters", strconv.Itoa(o.localMasters), "cannot be combined with --sentinel: give the other votes with --masters or --clusters")
		}
		c.Sentinels = append(c.Sentinels, v)
	}
	conn, err := o.conn.Settings(fs.Changed("masters") || fs.Changed("clusters") || fs.Changed("sentinel"))
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	c.Conn = engines.Conn{Username: conn.Username, Password: conn.Password, TLS: conn.TLS}
	o.authWarning = o.conn.Warning()
	if err := checkMetricsAddr(o.metricsAddr); err != nil {
		return err
	}
	if fs.Changed("ops") {
		if o.ops <= 0 {
			return badFlag("ops", strconv.FormatInt(o.ops, 10), "must be > 0")
		}
		if fs.Changed("duration") {
			return badFlag("duration", o.duration.String(), "cannot be combined with --ops")
		}
		c.Ops = o.ops
	}
	if c.Distribution, err = bench.ParseDistribution(o.distribution); err != nil {
		return badFlag("distribution", o.distribution, err.Error())
	}
	if c.Lock, err = engines.ParseLock(o.lock); err != nil {
		return badFlag("lock", o.lock, err.Error())
	}
	if c.Mode, err = bench.ParseMode(o.mode); err != nil {
		return badFlag("mode", o.mode, err.Error())
	}
	if c.Hold, err = bench.ParseHold(o.hold); err != nil {
		return badFlag("hold", o.hold, err.Error())
	}
	if fs.Changed("fault") {
		if c.Faults, err = fault.Parse(o.fault); err != nil {
			var ie *fault.ItemError
			if errors.As(err, &ie) {
				return badFlag("fault", o.fault, fmt.Sprintf("item %d %q: %s", ie.Pos, ie.Item, ie.Msg))
			}
			return badFlag("fault", o.fault, err.Error())
		}
	}
	if fs.Changed("start-at") {
		if c.StartAt, err = bench.ParseStartAt(o.startAt); err != nil {
			return badFlag("start-at", o.startAt, err.Error())
		}
	}
	return nil
}

// runCommand is `redlock-bench run`.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, o, err := parseRunFlags(args)
	if err != nil {
		return err
	}
	sess, err := openSession(stderr, sessionSpec{warning: o.authWarning, metricsAddr: o.metricsAddr,
		out: o.out, parent: runsDir, label: cfg.Label, holds: []string{results.SummaryJSON}, quiet: o.output.quiet || o.output.json})
	if err != nil {
		return err
	}
	defer sess.close()
	if m := sess.metrics; m != nil {
		cfg.Observer = m.Observer
	}
	cfg.Progress, cfg.ProgressInPlace, cfg.Log = sess.progress, sess.inPlace, sess.log

	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return sess.notStarted(ctx, "run", err)
	}
	res, err := bench.RunDir(ctx, cfg, sess.dir)
	profErr := stopProfile()
	if res == nil {
		return sess.notStarted(ctx, "run", err)
	}
	if err != nil {
		return err
	}
	if profErr != nil {
		return fmt.Errorf("write CPU profile: %w", profErr)
	}
	s := res.Summary
	err = o.output.show(stdout, stderr, sess.dir, shown{
		json:  func(w io.Writer) error { return results.WriteJSON(w, s) },
		lines: func() []string { return []string{quietLine(s)} },
		text:  func(w io.Writer) error { return results.WriteText(w, s) },
	})
	if err != nil {
		return err
	}

	// Every verdict is printed; the status is the gravest: violations,
	// then an interruption, then a run that measured nothing, then a
	// missed objective.
	sloErr := checkObjectives(s, o.slo.objectives, stderr)
	summary := filepath.Join(sess.dir, results.SummaryText)
	switch {
	case s.Violations > 0:
		return violated(s.Violations, "", s.LockKind(), summary)
	case s.StaleTokens > 0:
		return &exitError{code: 1, msg: fmt.Sprintf("%d stale fencing tokens: a holder's token was not above the previous holder's (see %s)",
			s.StaleTokens, summary)}
	case s.Interrupted:
		return sess.interrupted()
	}
	if reason := measuredNothing(s); reason != "" {
		return &exitError{code: 1, msg: fmt.Sprintf("%s (see %s)", reason, summary)}
	}
	return sloErr
}

// checkObjectives prints one line per objective on stderr and returns the
// SLO status when any was missed.
func checkObjectives(s *results.Summary, objs []results.Objective, stderr io.Writer) error {
	missed := 0
	for _, r := range results.CheckObjectives(s, objs) {
		verdict := "SLO met:    "
		if !r.Met {
			verdict = "SLO MISSED: "
			missed++
		}
		fmt.Fprintf(prefixWriter{w: stderr}, "%s%s\n", verdict, r.Why)
	}
	if missed > 0 {
		return &exitError{code: exitSLOMissed, msg: fmt.Sprintf("%d of %d objectives missed", missed, len(objs))}
	}
	return nil
}

// quietLine is run's one line of -q (see figures.line), which make bench
// shows for each run.
func quietLine(s *results.Summary) string {
	st := s.AcquireLatencyUs
	if s.Mode == "wait" {
		st = s.WaitLatencyUs
	}
	f := figures{name: engineLock(s.Engine, s.LockKind()), perSec: s.AcquiredPerSec, p50Us: float64(st.P50), p99Us: float64(st.P99),
		errors: s.ErrorTotal(), kinds: errorKinds(s), lost: s.LostLeases, unchecked: !s.Checked, violations: s.Violations, stale: s.StaleTokens,
		degradedWhy: s.SaturationNote()}
	if s.Interrupted {
		f.notes = append(f.notes, "interrupted")
	}
	return f.line()
}

// engineLock names an engine and, unless it is the mutex, the lock it
// took: "redlock semaphore:8".
func engineLock(engine, lock string) string {
	if lock == "" || lock == "mutex" {
		return engine
	}
	return engine + " " + lock
}

// measuredNothing says, in one line, why a finished run measured no lock
// service: it acquired nothing, or half or more of its attempts were
// errors. Empty for a run that measured what it was asked to.
func measuredNothing(s *results.Summary) string {
	what, top := measuredNothingWhy(s)
	if what == "" {
		return ""
	}
	if h := whatToChange(s, top); h != "" {
		what += "; " + h
	}
	return what
}

// measuredNothingWhy is measuredNothing's reason, without what to change,
// and the commonest error kind ("" for none).
func measuredNothingWhy(s *results.Summary) (what, top string) {
	errs := s.ErrorTotal()
	switch {
	case s.Attempts == 0:
		return "the run made no attempt in its measured window", ""
	case s.Acquired == 0 && errs == 0:
		return fmt.Sprintf("the run acquired nothing in %d attempts: all %d were refused (contended)", s.Attempts, s.Contended), ""
	case s.Acquired == 0:
		what = fmt.Sprintf("the run acquired nothing in %d attempts", s.Attempts)
		if s.Contended > 0 {
			what += fmt.Sprintf(": %d were refused (contended)", s.Contended)
		}
	case errs*2 >= s.Attempts:
		what = fmt.Sprintf("%d of the run's %d attempts were errors", errs, s.Attempts)
	default:
		return "", ""
	}
	// The most frequent kind, with the first message seen of it.
	n := int64(0)
	for _, k := range results.ErrorKinds() {
		if s.Errors[k] > n {
			top, n = k, s.Errors[k]
		}
	}
	sep := ": "
	if s.Acquired == 0 && s.Contended > 0 {
		sep = ", "
	}
	what += fmt.Sprintf("%s%d errors, most %s (%d)", sep, errs, top, n)
	if ex := s.ErrorExamples[top]; ex != "" {
		what += ": " + ex
	}
	return what, top
}

// whatToChange says which flags would let a run that measured nothing
// measure: fewer workers where they outnumber what the CPUs serve, more
// resources where they outnumber those, a longer node timeout where the
// masters were silent past it. "" when none applies.
func whatToChange(s *results.Summary, top string) string {
	cfg := s.RunConfig()
	var hints []string
	cpus := s.Machine.CPUs
	if p := s.Machine.GOMAXPROCS; p > 0 && (cpus == 0 || p < cpus) {
		cpus = p
	}
	if cpus > 0 && cfg.Workers > bench.WorkersPerCPU*cpus {
		hints = append(hints, fmt.Sprintf("%d workers on %d CPUs wait for a CPU longer than an attempt may take: try --workers %d or fewer (sweep --workers finds the most this machine serves)",
			cfg.Workers, cpus, bench.WorkersPerCPU*cpus))
	}
	if s.Attempts > 0 && s.Contended*2 >= s.Attempts && cfg.Resources > 0 && cfg.Workers > cfg.Resources {
		hints = append(hints, fmt.Sprintf("%d workers share %d resources, so most attempts find the lock held: raise --resources or lower --workers", cfg.Workers, cfg.Resources))
	}
	if (top == "no_quorum" || top == "timeout" || top == "release") && s.NodeTimeoutMs > 0 && len(hints) == 0 {
		hints = append(hints, fmt.Sprintf("the masters were silent past the node timeout (%s ms): lower the load or raise --node-timeout",
			strconv.FormatFloat(s.NodeTimeoutMs, 'f', -1, 64)))
	}
	return strings.Join(hints, "; ")
}

// startCPUProfile starts a CPU profile into path (--cpuprofile) and
// returns the function that stops it; with no path it does nothing.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, usageErrorf("--cpuprofile: %v, got %s", err, path)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
