package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/masters"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/results"
)

// Timeouts of the run's own housekeeping.
const (
	// connectTimeout bounds building each engine client.
	connectTimeout = 5 * time.Second
	// releaseGrace is how long in-flight releases may finish after the run
	// stops, so that a stopped run leaves no locks behind.
	releaseGrace = 3 * time.Second
	// drainTimeout bounds the wait for workers to return after the stop.
	drainTimeout = 10 * time.Second
	// progressEvery is the interval of progress lines and interval logs.
	progressEvery = time.Second
	// cleanupTimeout bounds the removal of the run's keys from the
	// masters at the end.
	cleanupTimeout = 5 * time.Second
)

// Result is what a run produced: the summary, the histograms of the
// measured window and the run's seconds, ready for results.Run.WriteDir.
type Result = results.Run

// Run validates cfg, starts local masters if needed, drives the engine
// with cfg.Workers workers for the warm-up and the measured window, and
// returns what it measured.
//
// Cancelling ctx stops the run promptly: the result is then partial and
// Summary.Interrupted is set. Local masters are stopped before Run returns,
// whatever happens. Violations are reported in the summary, not as an
// error: the caller decides what they mean.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Label == "" {
		cfg.Label = DeriveLabel(cfg)
	}
	logf := logger(cfg.Log)
	for _, w := range cfg.Warnings() {
		logf("warning: %s", w)
	}
	progress := results.NewProgressWriter(cfg.Progress, cfg.ProgressInPlace)

	// The masters the engine votes on, the first ones of the run's: every
	// figure, probe, fault and clean-up is about those.
	site := runSite{masters: cfg.Masters, clusters: cfg.Clusters}
	var cluster *redisproc.Cluster
	if cfg.Engine.NeedsRedis() {
		switch {
		case cfg.givenVotes():
			v := cfg.givenVoted()
			site.masters, site.clusters = v.Masters, v.Clusters
			if cfg.sharedLocal && len(site.clusters) > 0 {
				site.shards = cfg.sharedShards
			}
		case cfg.ClusterShards > 0:
			clusters, err := startLocalClusters(ctx, cfg.voters(), cfg.ClusterShards)
			if err != nil {
				return nil, err
			}
			// Stopped on every return path, as the masters below.
			defer masters.StopClusters(clusters)
			site.clusters, site.shards, site.local = masters.Seeds(clusters), cfg.ClusterShards, true
			logf("started %d local Redis Clusters of %d shards: %s", len(clusters), cfg.ClusterShards, engines.FormatClusters(site.clusters))
		default:
			var err error
			if cluster, err = masters.Start(ctx, cfg.voters()); err != nil {
				return nil, err
			}
			// Stopped on every return path; the signal handler only
			// cancels ctx, which ends the run and lands here.
			defer cluster.Stop()
			site.masters, site.local = cluster.Addrs(), true
			logf("started %d local redis-server: %s", len(site.masters), strings.Join(site.masters, ","))
		}
		if err := site.probe(ctx, &cfg); err != nil {
			return nil, err
		}
	}
	rig, err := setUpFaults(ctx, cfg, site.masters, cluster, logf)
	if err != nil {
		return nil, err
	}
	if rig != nil && rig.proxies != nil {
		// Closed after the engine (deferred later, so run earlier).
		defer rig.proxies.Close()
	}
	site.dial = rig.dialAddrs(site.masters)

	var cl clients
	defer cl.close()
	if err := cl.connect(ctx, cfg, engines.Votes{Masters: site.dial, Clusters: site.clusters, Sentinels: cfg.Sentinels}); err != nil {
		return nil, err
	}
	if err := awaitQuorum(ctx, cfg, cl, progress, logf); err != nil {
		return nil, err
	}
	if err := awaitStartAt(ctx, cfg.StartAt, logf); err != nil {
		return nil, err
	}
	r := newRunner(cfg, cl)
	r.faults, r.progress, r.site = rig, progress, site
	if cfg.Engine.NeedsRedis() && len(site.dial) > 0 {
		r.pings = newMasterPings(cfg.conn(), site.dial, cfg.probeWithin())
		defer r.pings.close()
		r.pings.sample()
	}
	if cfg.Engine.NeedsRedis() && rig == nil {
		// Faults stop, slow and cut off masters: no reading of them.
		st, err := newServerStats(ctx, cfg.conn(), site)
		if err != nil {
			logf("warning: the nodes' CPU and commands are not recorded: %v", err)
		}
		defer st.close()
		r.server = st
	}
	out, err := r.run(ctx)
	if err != nil {
		return nil, err
	}
	// The masters this run started are stopped with what they hold; on
	// masters the user gave, the run's keys are removed once every
	// release has been answered, so that none outlives the run by a TTL.
	cl.close()
	if !site.local && cfg.Engine.NeedsRedis() {
		cleanupKeys(site.masters, cfg, logf)
		if len(site.clusters) > 0 && !cfg.sharedLocal {
			logf("keys under %q on the --clusters votes are left to expire (--ttl): the clean-up reaches plain masters only", cfg.KeyPrefix)
		}
	}
	return out, nil
}

// runSite is where a run's engine votes, as its summary records it.
type runSite struct {
	masters []string
	// dial are the addresses the engine dials: the fault proxies in front
	// of the masters, or the masters.
	dial []string
	// clusters are the votes that are Redis Clusters, after masters:
	// each cluster's seed addresses.
	clusters [][]string
	// shards is the number of shards of each local cluster; 0 when the
	// clusters are given (--clusters) or there are none.
	shards int
	// local: the run started the masters itself.
	local        bool
	redisVersion string
}

// probe settles the quarantine policy's default for the masters (observed
// for masters the run started empty, always for others) and reads their
// version.
func (s *runSite) probe(ctx context.Context, cfg *Config) error {
	cfg.Quarantine = cfg.Quarantine.For(s.local)
	v, err := masters.ProbeWithin(ctx, cfg.conn(), append(append([]string{}, s.masters...), masters.Flatten(s.clusters)...), cfg.probeWithin())
	s.redisVersion = v
	return err
}

// setUpFaults prepares the --fault schedule on the masters; nil without
// one.
func setUpFaults(ctx context.Context, cfg Config, masters []string, cluster *redisproc.Cluster, logf func(string, ...any)) (*faultRig, error) {
	if len(cfg.Faults) == 0 {
		return nil, nil
	}
	rig, err := newFaultRig(ctx, cfg.Faults, masters, cfg.conn(), cluster)
	if err != nil {
		return nil, err
	}
	if rig.proxies != nil {
		logf("engine dials fault proxies %s in front of the masters", strings.Join(rig.proxies.Addrs(), ","))
	}
	if end, run := cfg.Faults.End(), cfg.Warmup+cfg.Duration; cfg.Ops == 0 && end > run {
		logf("warning: the --fault schedule ends at %s, after the run (%s); faults still due are skipped", end, run)
	}
	return rig, nil
}

// clients are a run's lock clients.
type clients []*engines.Client

// connect opens cfg.Clients lock clients on the votes v (the dialled
// addresses), each within connectTimeout.
func (c *clients) connect(ctx context.Context, cfg Config, v engines.Votes) error {
	for i := 0; i < cfg.Clients; i++ {
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		e, err := engines.Open(cctx, cfg.Spec, v)
		cancel()
		if err != nil {
			return fmt.Errorf("%s client %d of %d: %w", cfg.Engine, i+1, cfg.Clients, err)
		}
		*c = append(*c, e)
	}
	return nil
}

// close closes every instance; a second close does nothing.
func (c *clients) close() {
	for _, e := range *c {
		e.Close()
	}
	*c = nil
}

// awaitStartAt waits until at (--start-at), unless it is zero.
func awaitStartAt(ctx context.Context, at time.Time, logf func(string, ...any)) error {
	if at.IsZero() {
		return nil
	}
	d := time.Until(at)
	logf("waiting %s, until %s, to start", d.Round(time.Millisecond), at.UTC().Format(time.RFC3339Nano))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for --start-at: %w", ctx.Err())
	}
}

// RunDir runs cfg (see Run) into the run directory dir, which must exist:
// the interval log while the run lasts, then every other file of a run
// directory (results.Run.WriteDir). When the run fails, RunDir returns its
// error and no Result, and dir may hold a partial interval log; when the
// run finished but a file could not be written, it returns the Result and
// the error.
func RunDir(ctx context.Context, cfg Config, dir string) (*Result, error) {
	return runDir(ctx, Run, cfg, dir, false)
}

// runDir is RunDir with runFn in place of Run. sharedLocal says that the
// caller (a sweep, a comparison) started the masters cfg names.
func runDir(ctx context.Context, runFn func(context.Context, Config) (*Result, error), cfg Config, dir string, sharedLocal bool) (*Result, error) {
	f, err := os.Create(filepath.Join(dir, results.IntervalsLog))
	if err != nil {
		return nil, fmt.Errorf("%w", err)
	}
	w := bufio.NewWriter(f)
	cfg.IntervalLog = w
	cfg.sharedLocal = sharedLocal
	res, runErr := runFn(ctx, cfg)
	flushErr := w.Flush()
	closeErr := f.Close()
	if runErr != nil {
		return nil, runErr
	}
	if err := errors.Join(flushErr, closeErr); err != nil {
		return res, fmt.Errorf("write interval log: %w", err)
	}
	return res, res.WriteDir(dir)
}

// runNewDir makes dir and runs into it (runDir); a run that fails before
// it measured anything leaves no directory.
func runNewDir(ctx context.Context, runFn func(context.Context, Config) (*Result, error), cfg Config, dir string, sharedLocal bool) (*Result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w", err)
	}
	res, err := runDir(ctx, runFn, cfg, dir, sharedLocal)
	if res == nil && err != nil {
		os.RemoveAll(dir)
	}
	return res, err
}

// cleanupKeys removes the keys under the run's prefix from the masters
// (bounded by cleanupTimeout, even after an interruption), and says how
// many it removed. Runs lined up with --start-at may share their keys
// with runs on other machines that are still going: theirs are left.
func cleanupKeys(addrs []string, cfg Config, logf func(string, ...any)) {
	if !cfg.StartAt.IsZero() {
		logf("keys under %q left on the masters: with --start-at, runs on other machines may still hold them", cfg.KeyPrefix)
		return
	}
	if cfg.KeyPrefix == "" {
		logf("keys left on the masters: with an empty --key-prefix the run cannot tell its keys from others")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	n, err := masters.DeletePrefixed(ctx, cfg.conn(), addrs, engine.KeyPrefixes("", cfg.KeyPrefix)...)
	switch {
	case err != nil:
		logf("warning: removing the run's keys (%q*) from the masters: removed %d, then: %v", cfg.KeyPrefix, n, err)
	case n > 0:
		logf("removed %d keys under %q left on the masters", n, cfg.KeyPrefix)
	}
}

// logger writes a line to w, or nothing when w is nil.
func logger(w io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", a...)
		}
	}
}

// machine describes this process's host.
func machine() results.Machine {
	host, _ := os.Hostname()
	return results.Machine{
		Hostname:   host,
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion:  runtime.Version(),
	}
}

// runner owns the workers, the recorder and the oracle of one run.
type runner struct {
	cfg     Config
	clients []*engines.Client
	names   []string
	// shared: an operation that reads holds its resource shared.
	shared  bool
	rec     *recorder
	oracle  *oracle // nil when the check is off
	primary results.Kind
	// perWorker counts each worker's measured acquisitions, for fairness.
	perWorker []workerCount
	// faults injects the --fault schedule; nil without one.
	faults *faultRig
	// sleeper times holds and open-loop starts; nil where the system has
	// no high-resolution timer, or when nothing sleeps.
	sleeper *sleeper
	// progress receives the once-a-second line; nil for none.
	progress *results.ProgressWriter

	start time.Time
	// perOp is the open loop's time between arrivals, as a float so that
	// high rates keep their precision; 0 in a closed loop.
	perOpNs float64
	opsCap  int64

	stopped   atomic.Bool
	measuring atomic.Bool
	tickets   atomic.Int64
	// opsTaken counts measured operations claimed under --ops, opsDone
	// those recorded; the run ends when opsDone reaches opsCap, so that
	// no claimed operation is cut short.
	opsTaken  atomic.Int64
	opsDone   atomic.Int64
	done      chan struct{}
	limitHit  chan struct{}
	limitOnce sync.Once

	// errExamples keeps the first message of each error kind, of the
	// measured window's operations and of the warm-up's apart, so that a
	// kind no counter counted is not shown as if it were; only the first
	// failures of a kind pay for formatting one.
	errExamples, warmupErrExamples [numErrKinds]atomic.Pointer[string]

	// opCtx ends acquires when the run stops. It does not derive from the
	// caller's ctx: the stop must come from the collector, which first
	// marks the run stopped, so that aborted calls are not counted as
	// errors.
	opCtx     context.Context
	cancelOps context.CancelFunc
	// relCtx lets releases outlive the stop by releaseGrace.
	relCtx        context.Context
	cancelRelease context.CancelFunc

	wg sync.WaitGroup

	// site is where the engine votes, for the summary.
	site runSite
	// server reads the nodes' counters over the measured window (nil: not
	// read); serverOut is what it read.
	server    *serverStats
	serverOut *results.ServerStats
	// cpu reads the process's and the host's CPU over the measured window.
	cpu cpuWindow
	// pings samples each master's round trip once an interval (nil: no
	// masters).
	pings *masterPings

	// The collector's state, touched by the run's goroutine only.
	// measured: the measured window has begun, at measureStart; with no
	// --ops it ends at measureEnd. tick is the start of the interval
	// being collected; stopAt when the run stopped.
	measured                 bool
	warmEnd, measureStart    time.Time
	measureEnd, tick, stopAt time.Time
	interrupted              bool
	// backlogMax and backlogEnd are the open loop's operations due but
	// not started: the most at an interval's end, and at the stop.
	backlogMax, backlogEnd int64
	hlog                   *results.IntervalLog
	logKinds               []results.Kind
	logErr                 error
	intervals              []results.Interval
	subsPeak               int
	violationsShown        int64
}

func newRunner(cfg Config, clients []*engines.Client) *runner {
	names := make([]string, cfg.Resources)
	for i := range names {
		names[i] = cfg.KeyPrefix + strconv.Itoa(i)
	}
	r := &runner{
		cfg:       cfg,
		clients:   clients,
		names:     names,
		shared:    cfg.Lock.Shared(cfg.Engine),
		rec:       newRecorder(shardCount(cfg.Workers), cfg.Workers),
		perWorker: make([]workerCount, cfg.Workers),
		primary:   results.Acquire,
		opsCap:    cfg.Ops,
		done:      make(chan struct{}),
		limitHit:  make(chan struct{}),
	}
	if cfg.Mode == ModeWait {
		r.primary = results.Wait
	}
	if cfg.Rate > 0 {
		r.perOpNs = 1e9 / cfg.Rate
	}
	r.opCtx, r.cancelOps = context.WithCancel(context.Background())
	r.relCtx, r.cancelRelease = context.WithCancel(context.Background())
	return r
}

func (r *runner) stop() {
	if r.stopped.Swap(true) {
		return
	}
	close(r.done)
	r.cancelOps()
}

func (r *runner) limitReached() { r.limitOnce.Do(func() { close(r.limitHit) }) }

// noteError keeps the first message of each error kind, of an operation
// of the measured window or of the warm-up.
func (r *runner) noteError(kind errKind, err error, measured bool) {
	ex := &r.errExamples
	if !measured {
		ex = &r.warmupErrExamples
	}
	if kind < numErrKinds && ex[kind].Load() == nil {
		msg := err.Error()
		ex[kind].CompareAndSwap(nil, &msg)
	}
}

// run drives the workers and, on this goroutine, the collector: once a
// second it swaps the shards' intervals out, logs them and prints progress.
// Then it stops the workers and builds the result.
func (r *runner) run(ctx context.Context) (*Result, error) {
	r.start = time.Now()
	if r.cfg.Check {
		r.oracle = newOracle(r.start, r.names, r.cfg.Lock)
	}
	if r.faults != nil {
		r.faults.start(r.start)
	}
	if (!r.cfg.Hold.Zero() || r.cfg.Rate > 0) && !r.cfg.runtimeTimers {
		r.sleeper = newSleeper()
		defer r.sleeper.close()
	}
	r.warmEnd, r.tick = r.start.Add(r.cfg.Warmup), r.start
	r.logKinds = r.loggedKinds()
	if r.cfg.Warmup == 0 {
		// Before the workers start: their first operations are the
		// window's too, not a warm-up of no length that no count keeps.
		r.beginMeasuring(r.start)
	}
	r.startWorkers()
	r.collect(ctx)

	r.stopAt = time.Now()
	r.endServerStats()
	r.cpu.end(r.serverOut)
	r.backlogEnd = r.backlog(r.stopAt)
	r.stop()
	release := time.AfterFunc(releaseGrace, r.cancelRelease)
	defer release.Stop()
	defer r.cancelRelease()
	if !r.drain() && r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "warning: workers did not stop within %s; results may miss their last operations\n", drainTimeout)
	}
	// Lift every fault still in effect; the engine closes after this.
	var faultLog []results.FaultEvent
	if r.faults != nil {
		faultLog = r.faults.stop()
	}
	r.collectLast()
	r.progress.Done()
	if n := r.oracle.incomplete(); n > 0 && r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "warning: %d holds registered so late that the oracle checked them without some of the holds of their semaphore that ended meanwhile; it may have missed a violation among them\n", n)
	}
	if r.logErr != nil {
		return nil, fmt.Errorf("write interval log: %w", r.logErr)
	}
	return &Result{Summary: r.summary(faultLog), Histograms: r.rec.total.hist, Intervals: r.intervals}, nil
}

// startWorkers starts cfg.Workers workers, sharing the engine instances
// and the recorder's shards round-robin.
func (r *runner) startWorkers() {
	nshards := len(r.rec.shards)
	r.wg.Add(r.cfg.Workers)
	k := r.cfg.Lock.Size()
	for i := 0; i < r.cfg.Workers; i++ {
		w := &worker{
			id:       i,
			r:        r,
			c:        r.clients[i%len(r.clients)],
			sh:       &r.rec.shards[i%nshards],
			buf:      &r.rec.buffers[i],
			rng:      newRand(r.cfg.Seed, i),
			set:      make([]int, k),
			setNames: make([]string, k),
		}
		w.zipf = newZipf(w.rng, r.cfg)
		go w.loop()
	}
}

// collect is the collector's loop, until the measured window ends, --ops
// is reached or ctx is cancelled: each interval is swapped out of the
// shards and reported, and a measured one is also kept and logged.
func (r *runner) collect(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Reset(time.Until(r.nextTick()))
		select {
		case <-ctx.Done():
			r.interrupted = true
			return
		case <-r.limitHit:
			return
		case <-timer.C:
		}
		now := time.Now()
		if r.measured && r.cfg.Ops == 0 && !now.Before(r.measureEnd) {
			// The last interval is collected once the workers have
			// stopped, so that it ends exactly when the window does.
			return
		}
		iv := r.rec.collect(r.measured)
		if !r.measured {
			r.report(iv, now, true)
			r.tick = now
			if !now.Before(r.warmEnd) {
				r.beginMeasuring(now)
			}
			continue
		}
		r.rec.commit()
		r.logInterval(iv, r.tick, now)
		if r.perOpNs > 0 {
			r.backlogMax = max(r.backlogMax, r.backlog(now))
		}
		r.report(iv, now, false)
		r.tick = now
	}
}

// nextTick is when the collector next wakes: a second after the last
// interval, or earlier at the end of the warm-up or the measured window.
func (r *runner) nextTick() time.Time {
	next := r.tick.Add(progressEvery)
	switch {
	case !r.measured:
		return minTime(next, r.warmEnd)
	case r.cfg.Ops == 0:
		return minTime(next, r.measureEnd)
	}
	return next
}

// collectLast collects the interval the stop ended. Operations that ended
// after stopAt were not recorded: this interval is [tick, stopAt].
func (r *runner) collectLast() {
	iv := r.rec.collect(r.measured)
	if !r.measured {
		r.report(iv, r.stopAt, true)
		return
	}
	r.rec.commit()
	r.logInterval(iv, r.tick, r.stopAt)
	r.backlogMax = max(r.backlogMax, r.backlogEnd)
	r.report(iv, r.stopAt, false)
}

// beginMeasuring ends the warm-up at at: what the shards hold of it is
// discarded, and the interval log starts.
func (r *runner) beginMeasuring(at time.Time) {
	r.measured = true
	r.measureStart, r.tick = at, at
	r.measureEnd = at.Add(r.cfg.Duration)
	r.rec.collect(true) // discards the warm-up's tail
	r.measuring.Store(true)
	r.cpu.begin()
	if r.server != nil {
		r.server.begin(context.Background())
	}
	if r.cfg.IntervalLog == nil {
		return
	}
	var err error
	r.hlog, err = results.NewIntervalLog(r.cfg.IntervalLog, at,
		fmt.Sprintf("redlock-bench %s label=%s mode=%s, one line per kind per interval", r.cfg.Engine, r.cfg.Label, r.cfg.Mode))
	if err != nil && r.logErr == nil {
		r.logErr = err
	}
}

// logInterval writes the measured interval [from, to] to the interval
// log; the first error stops the log and is returned by run.
func (r *runner) logInterval(iv *interval, from, to time.Time) {
	if r.hlog == nil || r.logErr != nil {
		return
	}
	for _, k := range r.logKinds {
		if err := r.hlog.Write(k.String(), from, to, iv.hist[k]); err != nil {
			r.logErr = err
			return
		}
	}
}

// backlog is the open loop's operations due by now but not started; 0 in
// a closed loop.
func (r *runner) backlog(now time.Time) int64 {
	if r.perOpNs == 0 {
		return 0
	}
	due := int64(float64(now.Sub(r.start).Nanoseconds()) / r.perOpNs)
	return max(0, due-r.tickets.Load())
}

// subscriptions counts the release subscriptions the clients hold.
func (r *runner) subscriptions() int {
	n := 0
	for _, c := range r.clients {
		n += c.Subscriptions()
	}
	return n
}

// report keeps the interval [tick, now] for intervals.json and shows it on
// the progress line.
func (r *runner) report(iv *interval, now time.Time, warm bool) {
	fromS, toS := r.tick.Sub(r.start).Seconds(), now.Sub(r.start).Seconds()
	active := r.faults.active(fromS, toS)
	subs := r.subscriptions()
	if !warm {
		r.subsPeak = max(r.subsPeak, subs)
	}
	rec := results.Interval{
		TS: math.Round(fromS*1e3) / 1e3, LengthS: math.Round((toS-fromS)*1e3) / 1e3, Warmup: warm,
		Acquired: iv.c.acquired, P99Us: iv.hist[r.primary].ValueAtPercentile(99),
		Contended: iv.c.contended, Errors: iv.c.errorTotal(), NoQuorum: iv.c.errors[errNoQuorum], LostLeases: iv.c.lost,
		Subscriptions: subs, FaultsActive: active, MasterRTTUs: r.pings.take(),
	}
	r.pings.sample()
	if toS > fromS {
		rec.AcquiredPerS = math.Round(float64(iv.c.acquired)/(toS-fromS)*10) / 10
	}
	if r.oracle != nil {
		rec.Violations = r.oracle.count.Load()
	}
	r.intervals = append(r.intervals, rec)
	r.showProgress(iv, now, warm, active)
}

// showProgress prints the progress line of the interval [tick, now].
func (r *runner) showProgress(iv *interval, now time.Time, warm bool, active []string) {
	if r.progress == nil {
		return
	}
	p := results.Progress{Warmup: warm, Interval: now.Sub(r.tick), OpenLoop: r.perOpNs > 0, Backlog: r.backlog(now), Faults: active,
		Acquired: iv.c.acquired, P99Us: iv.hist[r.primary].ValueAtPercentile(99), Errors: iv.c.errorTotal()}
	if warm {
		p.Elapsed = now.Sub(r.start)
	} else {
		p.Elapsed = now.Sub(r.measureStart)
		if r.cfg.Ops == 0 {
			p.Total = r.cfg.Duration
		}
	}
	if r.oracle != nil {
		p.Violations = r.oracle.count.Load()
		p.NewViolations = p.Violations - r.violationsShown
		r.violationsShown = p.Violations
	}
	r.progress.Line(p.String())
}

// summary is the one builder of the run's summary: the configuration, the
// measured window's totals and latencies, the oracle's findings, and the
// masters the engine voted on, as its first client saw them.
func (r *runner) summary(faultLog []results.FaultEvent) *results.Summary {
	cfg, tot := &r.cfg, r.rec.total
	s := &results.Summary{
		Engine:        cfg.Engine.String(),
		Lock:          cfg.Lock.String(),
		Label:         cfg.Label,
		Config:        cfg.Flags(),
		Machine:       machine(),
		StartedAt:     r.start.UTC(),
		WarmupS:       cfg.Warmup.Seconds(),
		Interrupted:   r.interrupted,
		Mode:          string(cfg.Mode),
		LoadModel:     "closed",
		Masters:       append([]string{}, r.site.masters...),
		LocalMasters:  r.site.local || (cfg.sharedLocal && len(r.site.masters)+len(r.site.clusters) > 0),
		Clusters:      r.site.clusters,
		ClusterShards: r.site.shards,
		Nodes:         r.nodes(),
		Server:        r.serverOut,
		Attempts:      tot.c.attempts,
		Acquired:      tot.c.acquired,
		Contended:     tot.c.contended,
		LostLeases:    tot.c.lost,
		Checked:       cfg.Check,

		Extensions:          tot.c.extensions,
		WokenByNotification: tot.c.notified,
		FallbackRetries:     tot.c.fallbacks,
		BackoffRetries:      tot.c.backoffs,
		Gated:               tot.c.gated,
		SubscriptionsPeak:   r.subsPeak,
		Faults:              faultLog,
	}
	s.Machine.RedisVersion = r.site.redisVersion
	s.CPU = r.cpu.cpu(s.Acquired, s.Machine)
	if len(r.clients) > 0 {
		s.NodeTimeoutMs = float64(r.clients[0].NodeTimeout().Microseconds()) / 1e3
	}
	if r.measured {
		s.DurationS = r.stopAt.Sub(r.measureStart).Seconds()
	} else {
		// Stopped during the warm-up: nothing was measured.
		s.WarmupS = r.stopAt.Sub(r.start).Seconds()
	}
	counts := make([]int64, len(r.perWorker))
	for i := range r.perWorker {
		counts[i] = r.perWorker[i].n.Load()
	}
	s.Fairness = results.FairnessOf(counts)
	if n := len(r.clients); n > 1 {
		perClient := make([]int64, n)
		for i, c := range counts {
			perClient[i%n] += c // worker i uses engine i%n
		}
		s.Fairness.JainClients = results.FairnessOf(perClient).Jain
	}
	if r.perOpNs > 0 {
		s.LoadModel = "open"
		s.BacklogMax, s.BacklogEnd = r.backlogMax, r.backlogEnd
	}
	s.Errors, s.ErrorExamples = map[string]int64{}, map[string]string{}
	for i, k := range results.ErrorKinds() {
		s.Errors[k] = tot.c.errors[i]
		if m := r.errExamples[i].Load(); m != nil && s.Errors[k] > 0 {
			s.ErrorExamples[k] = *m
		}
		if m := r.warmupErrExamples[i].Load(); m != nil {
			if s.WarmupErrorExamples == nil {
				s.WarmupErrorExamples = map[string]string{}
			}
			s.WarmupErrorExamples[k] = *m
		}
	}
	if s.DurationS > 0 {
		s.AcquiredPerSec = math.Round(float64(s.Acquired)/s.DurationS*10) / 10
	}
	if r.oracle != nil {
		s.Violations, s.ViolationExamples = r.oracle.violations()
		s.TokensChecked, s.StaleTokens, s.StaleTokenExamples = r.oracle.staleTokens()
	}
	s.SetLatencies(tot.hist)
	return s
}

// nodes are the masters as the first client saw them (nil for an engine
// that does not report them), each by the address the run was given, with
// the fault proxy the engine dialled in front of it.
func (r *runner) nodes() []results.Node {
	if len(r.clients) == 0 {
		return nil
	}
	nodes := r.clients[0].Nodes()
	m, dial := r.site.masters, r.site.dial
	for i := range nodes {
		if i < len(m) && i < len(dial) && dial[i] != m[i] {
			nodes[i].Addr, nodes[i].Via = m[i], dial[i]
		}
	}
	return nodes
}

// loggedKinds are the histograms written to the interval log: wait and
// handoff only in mode wait, acquire (successful tries) only in mode try.
func (r *runner) loggedKinds() []results.Kind {
	if r.cfg.Mode == ModeWait {
		return []results.Kind{results.Wait, results.AcquireFail, results.Release, results.Hold, results.Handoff}
	}
	return []results.Kind{results.Acquire, results.AcquireFail, results.Release, results.Hold}
}

// drain waits for the workers to return, up to drainTimeout.
func (r *runner) drain() bool {
	ok := make(chan struct{})
	go func() { r.wg.Wait(); close(ok) }()
	select {
	case <-ok:
		return true
	case <-time.After(drainTimeout):
		return false
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// awaitQuorum holds the run back while the engine keeps so many masters
// out of the vote (quarantined: young when first seen, or restarted) that
// no quorum can form: a measured window then would count nothing but
// errors. It says why and until when, then waits with a line that counts
// down, or, with cfg.NoWaitQuarantine, fails at once.
func awaitQuorum(ctx context.Context, cfg Config, cl clients, progress *results.ProgressWriter, logf func(string, ...any)) error {
	announced := false
	for {
		w := quorumWait(cl, time.Now())
		if w.readyAt.IsZero() {
			if announced {
				progress.Done()
				logf("quarantine over: a quorum of masters votes; starting the run")
			}
			return nil
		}
		left := time.Until(w.readyAt)
		if !announced {
			announced = true
			msg := fmt.Sprintf("quorum in quarantine until %s (%s from now): %s",
				w.readyAt.UTC().Format("15:04:05.000Z"), left.Round(100*time.Millisecond), w.why(cfg))
			if cfg.NoWaitQuarantine {
				return fmt.Errorf("%s; not waiting (--no-wait-quarantine)", msg)
			}
			logf("%s; waiting before the warm-up (--no-wait-quarantine to stop instead)", msg)
		}
		progress.Line(fmt.Sprintf("[quarantine] %s left before a quorum of masters votes", left.Round(time.Second)))
		t := time.NewTimer(min(left, time.Second))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			progress.Done()
			return fmt.Errorf("waiting for the masters' quarantine to end: %w", ctx.Err())
		}
	}
}

// quorumWaitInfo says when every client can form a quorum, and why it
// cannot now.
type quorumWaitInfo struct {
	readyAt time.Time // zero: now
	masters int
	// young and restarted count the quarantined masters of the client
	// that waits longest: never seen restarting (quarantined for their
	// uptime), and seen restarting (a run_id change).
	young, restarted int
}

// quorumWait reads each client's view of the masters. A client can vote
// once a quorum is up; while too few are, it can once enough quarantined
// ones come out. Masters that are down are not waited for: that is not
// the quarantine's doing.
func quorumWait(cl clients, now time.Time) quorumWaitInfo {
	var w quorumWaitInfo
	for _, c := range cl {
		nodes := c.Nodes()
		if nodes == nil {
			continue
		}
		quorum, up := len(nodes)/2+1, 0
		var until []time.Time
		young, restarted := 0, 0
		for _, n := range nodes {
			switch {
			case n.State == "quarantined" && n.QuarantinedUntil.After(now):
				until = append(until, n.QuarantinedUntil)
				if n.Restarts > 0 {
					restarted++
				} else {
					young++
				}
			case n.State == "up":
				up++
			}
		}
		need := quorum - up
		if need <= 0 || need > len(until) {
			continue
		}
		sort.Slice(until, func(i, j int) bool { return until[i].Before(until[j]) })
		if at := until[need-1]; at.After(w.readyAt) {
			w = quorumWaitInfo{readyAt: at, masters: len(nodes), young: young, restarted: restarted}
		}
	}
	return w
}

// why explains a quarantine in the user's terms.
func (w quorumWaitInfo) why(cfg Config) string {
	var parts []string
	if w.young > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d masters have been up for less than the TTL (%s); none of them was seen restarting, but "+
			"with --quarantine always (the default for --masters) a master that young may have restarted and forgotten locks, "+
			"so its votes count only once it is a TTL old (use --quarantine observed for masters you know were started empty)",
			w.young, w.masters, cfg.TTL))
	}
	if w.restarted > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d masters restarted (their run_id changed) and are kept out of the vote for a TTL (%s)",
			w.restarted, w.masters, cfg.TTL))
	}
	return strings.Join(parts, "; ")
}
