package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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

	masters := cfg.Masters
	local := false
	var redisVersion string
	var cluster *redisproc.Cluster
	if needsRedis(cfg.Engine) {
		if len(masters) == 0 {
			var err error
			cluster, err = startLocalMasters(ctx, cfg.LocalMasters)
			if err != nil {
				return nil, err
			}
			// Stopped on every return path; the signal handler only
			// cancels ctx, which ends the run and lands here.
			defer cluster.Stop()
			masters, local = cluster.Addrs(), true
			logf("started %d local redis-server: %s", len(masters), strings.Join(masters, ","))
		}
		if cfg.Quarantine == "" {
			cfg.Quarantine = "always"
			if local {
				cfg.Quarantine = "observed"
			}
		}
		v, err := probeMasters(ctx, masters)
		if err != nil {
			return nil, err
		}
		redisVersion = v
	}

	var rig *faultRig
	if len(cfg.Faults) > 0 {
		var err error
		if rig, err = newFaultRig(ctx, cfg.Faults, masters, cluster); err != nil {
			return nil, err
		}
		if rig.proxies != nil {
			// Closed after the engine (deferred later, so run earlier).
			defer rig.proxies.Close()
			logf("engine dials fault proxies %s in front of the masters", strings.Join(rig.proxies.Addrs(), ","))
		}
		if end, run := cfg.Faults.End(), cfg.Warmup+cfg.Duration; cfg.Ops == 0 && end > run {
			logf("warning: the --fault schedule ends at %s, after the run (%s); faults still due are skipped", end, run)
		}
	}
	dial := rig.dialAddrs(masters)

	engines := make([]Engine, 0, cfg.Clients)
	closeEngines := func() {
		for _, e := range engines {
			e.Close()
		}
		engines = nil
	}
	defer func() { closeEngines() }()
	for i := 0; i < cfg.Clients; i++ {
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		e, err := newEngine(cctx, cfg.Engine, dial, cfg)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("bench: %s client %d of %d: %w", cfg.Engine, i+1, cfg.Clients, err)
		}
		engines = append(engines, e)
	}
	if err := awaitQuorum(ctx, cfg, engines, progress, logf); err != nil {
		return nil, err
	}

	if !cfg.StartAt.IsZero() {
		d := time.Until(cfg.StartAt)
		logf("waiting %s, until %s, to start", d.Round(time.Millisecond), cfg.StartAt.UTC().Format(time.RFC3339Nano))
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("bench: waiting for --start-at: %w", ctx.Err())
			}
		}
	}

	r := newRunner(cfg, engines)
	r.faults = rig
	r.progress = progress
	out, err := r.run(ctx)
	if err != nil {
		return nil, err
	}
	s := out.Summary
	s.Masters = append([]string{}, masters...)
	s.LocalMasters = local
	s.Machine.RedisVersion = redisVersion
	if nr, ok := engines[0].(nodeReporter); ok {
		s.Nodes = nr.Nodes()
		for i := range s.Nodes {
			if i < len(masters) && dial[i] != masters[i] {
				s.Nodes[i].Addr, s.Nodes[i].Via = masters[i], dial[i]
			}
		}
	}
	// The masters this run started are stopped with what they hold; on
	// masters the user gave, the run's keys are removed once every
	// release has been answered, so that none outlives the run by a TTL.
	closeEngines()
	if !local && needsRedis(cfg.Engine) {
		cleanupKeys(masters, cfg, logf)
	}
	return out, nil
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
		return nil, fmt.Errorf("bench: %w", err)
	}
	w := bufio.NewWriter(f)
	cfg.IntervalLog = w
	res, runErr := runFn(ctx, cfg)
	flushErr := w.Flush()
	closeErr := f.Close()
	if runErr != nil {
		return nil, runErr
	}
	if err := errors.Join(flushErr, closeErr); err != nil {
		return res, fmt.Errorf("bench: write interval log: %w", err)
	}
	res.Summary.LocalMasters = res.Summary.LocalMasters || (sharedLocal && len(res.Summary.Masters) > 0)
	return res, res.WriteDir(dir)
}

// runNewDir makes dir and runs into it (runDir); a run that fails before
// it measured anything leaves no directory.
func runNewDir(ctx context.Context, runFn func(context.Context, Config) (*Result, error), cfg Config, dir string, sharedLocal bool) (*Result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
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
func cleanupKeys(masters []string, cfg Config, logf func(string, ...any)) {
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
	n, err := deletePrefixed(ctx, masters, cfg.KeyPrefix)
	switch {
	case err != nil:
		logf("warning: removing the run's keys (%q*) from the masters: removed %d, then: %v", cfg.KeyPrefix, n, err)
	case n > 0:
		logf("removed %d keys under %q left on the masters", n, cfg.KeyPrefix)
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
	engines []Engine
	names   []string
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

	// errExamples keeps the first message of each error kind; only the
	// first failures of a kind pay for formatting one.
	errExamples [numErrKinds]atomic.Pointer[string]

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
}

func newRunner(cfg Config, engines []Engine) *runner {
	names := make([]string, cfg.Resources)
	for i := range names {
		names[i] = cfg.KeyPrefix + strconv.Itoa(i)
	}
	r := &runner{
		cfg:       cfg,
		engines:   engines,
		names:     names,
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

// noteError keeps the first message of each error kind.
func (r *runner) noteError(kind errKind, err error) {
	if kind < numErrKinds && r.errExamples[kind].Load() == nil {
		msg := err.Error()
		r.errExamples[kind].CompareAndSwap(nil, &msg)
	}
}

// run drives the workers and, on this goroutine, the collector: once a
// second it swaps the shards' intervals out, logs them and prints progress.
func (r *runner) run(ctx context.Context) (*Result, error) {
	cfg := &r.cfg
	progress := r.progress
	var violationsShown int64

	r.start = time.Now()
	started := time.Now().UTC()
	if cfg.Check {
		r.oracle = newOracle(r.start, r.names)
	}
	if r.faults != nil {
		r.faults.start(r.start)
	}
	var (
		intervals []results.Interval
		subsPeak  int
	)
	subscriptions := func() int {
		n := 0
		for _, e := range r.engines {
			if sc, ok := e.(subscriptionCounter); ok {
				n += sc.Subscriptions()
			}
		}
		return n
	}

	var hlog *results.IntervalLog
	startLog := func(at time.Time) error {
		if cfg.IntervalLog == nil {
			return nil
		}
		var err error
		hlog, err = results.NewIntervalLog(cfg.IntervalLog, at,
			fmt.Sprintf("redlock-bench %s label=%s mode=%s, one line per kind per interval", cfg.Engine, cfg.Label, cfg.Mode))
		return err
	}

	if !cfg.Hold.Zero() || cfg.Rate > 0 {
		r.sleeper = newSleeper()
		defer r.sleeper.close()
	}
	nshards := len(r.rec.shards)
	r.wg.Add(cfg.Workers)
	for i := 0; i < cfg.Workers; i++ {
		w := &worker{
			id:  i,
			r:   r,
			eng: r.engines[i%len(r.engines)],
			sh:  &r.rec.shards[i%nshards],
			buf: &r.rec.buffers[i],
			rng: newRand(cfg.Seed, i),
		}
		w.zipf = newZipf(w.rng, *cfg)
		go w.loop()
	}

	var (
		measured     = cfg.Warmup == 0
		measureStart time.Time
		end          time.Time
		tick         = r.start
		interrupted  bool
		backlogMax   int64
		logErr       error
	)
	warmEnd := r.start.Add(cfg.Warmup)
	beginMeasuring := func(at time.Time) {
		measured = true
		measureStart, tick = at, at
		end = at.Add(cfg.Duration)
		r.rec.collect(true) // discards the warm-up's tail
		r.measuring.Store(true)
		if err := startLog(at); err != nil && logErr == nil {
			logErr = err
		}
	}
	if measured {
		beginMeasuring(r.start)
	}
	kinds := r.loggedKinds()
	logInterval := func(iv *interval, from, to time.Time) {
		if hlog == nil || logErr != nil {
			return
		}
		for _, k := range kinds {
			if err := hlog.Write(k.String(), from, to, iv.hist[k]); err != nil {
				logErr = err
				return
			}
		}
	}
	backlog := func(now time.Time) int64 {
		if r.perOpNs == 0 {
			return 0
		}
		due := int64(float64(now.Sub(r.start).Nanoseconds()) / r.perOpNs)
		return max(0, due-r.tickets.Load())
	}
	report := func(iv *interval, now time.Time, warm bool) {
		fromS, toS := tick.Sub(r.start).Seconds(), now.Sub(r.start).Seconds()
		active := r.faults.active(fromS, toS)
		subs := subscriptions()
		if !warm {
			subsPeak = max(subsPeak, subs)
		}
		rec := results.Interval{
			TS: math.Round(fromS*1e3) / 1e3, LengthS: math.Round((toS-fromS)*1e3) / 1e3, Warmup: warm,
			Acquired: iv.c.acquired, P99Us: iv.hist[r.primary].ValueAtPercentile(99),
			Contended: iv.c.contended, Errors: iv.c.errorTotal(), LostLeases: iv.c.lost,
			Subscriptions: subs, FaultsActive: active,
		}
		if toS > fromS {
			rec.AcquiredPerS = math.Round(float64(iv.c.acquired)/(toS-fromS)*10) / 10
		}
		if r.oracle != nil {
			rec.Violations = r.oracle.count.Load()
		}
		intervals = append(intervals, rec)
		if progress == nil {
			return
		}
		p := results.Progress{Warmup: warm, Interval: now.Sub(tick), OpenLoop: r.perOpNs > 0, Backlog: backlog(now), Faults: active,
			Acquired: iv.c.acquired, P99Us: iv.hist[r.primary].ValueAtPercentile(99), Errors: iv.c.errorTotal()}
		if warm {
			p.Elapsed = now.Sub(r.start)
		} else {
			p.Elapsed = now.Sub(measureStart)
			if cfg.Ops == 0 {
				p.Total = cfg.Duration
			}
		}
		if r.oracle != nil {
			p.Violations = r.oracle.count.Load()
			p.NewViolations = p.Violations - violationsShown
			violationsShown = p.Violations
		}
		progress.Line(p.String())
	}

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
loop:
	for {
		var next time.Time
		if !measured {
			next = minTime(tick.Add(progressEvery), warmEnd)
		} else {
			next = tick.Add(progressEvery)
			if cfg.Ops == 0 {
				next = minTime(next, end)
			}
		}
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			interrupted = true
			break loop
		case <-r.limitHit:
			break loop
		case <-timer.C:
		}
		now := time.Now()
		if measured && cfg.Ops == 0 && !now.Before(end) {
			// The last interval is collected once the workers have
			// stopped, so that it ends exactly when the window does.
			break
		}
		iv := r.rec.collect(measured)
		if !measured {
			report(iv, now, true)
			tick = now
			if !now.Before(warmEnd) {
				beginMeasuring(now)
			}
			continue
		}
		r.rec.commit()
		logInterval(iv, tick, now)
		if r.perOpNs > 0 {
			backlogMax = max(backlogMax, backlog(now))
		}
		report(iv, now, false)
		tick = now
	}

	stopAt := time.Now()
	backlogEnd := backlog(stopAt)
	r.stop()
	release := time.AfterFunc(releaseGrace, r.cancelRelease)
	defer release.Stop()
	defer r.cancelRelease()
	if !r.drain() && cfg.Log != nil {
		fmt.Fprintf(cfg.Log, "warning: workers did not stop within %s; results may miss their last operations\n", drainTimeout)
	}
	// Lift every fault still in effect; the engine closes after this.
	var faultLog []results.FaultEvent
	if r.faults != nil {
		faultLog = r.faults.stop()
	}
	// Operations that ended after stopAt were not recorded: this interval
	// is [tick, stopAt].
	iv := r.rec.collect(measured)
	var window time.Duration
	if measured {
		r.rec.commit()
		logInterval(iv, tick, stopAt)
		window = stopAt.Sub(measureStart)
		backlogMax = max(backlogMax, backlogEnd)
		report(iv, stopAt, false)
	} else {
		report(iv, stopAt, true)
	}
	progress.Done()
	if logErr != nil {
		return nil, fmt.Errorf("bench: write interval log: %w", logErr)
	}

	tot := r.rec.total
	s := &results.Summary{
		Engine:      cfg.Engine,
		Label:       cfg.Label,
		Config:      cfg.Flags(),
		Machine:     machine(),
		StartedAt:   started,
		WarmupS:     cfg.Warmup.Seconds(),
		DurationS:   window.Seconds(),
		Interrupted: interrupted,
		Mode:        string(cfg.Mode),
		LoadModel:   "closed",
		Attempts:    tot.c.attempts,
		Acquired:    tot.c.acquired,
		Contended:   tot.c.contended,
		LostLeases:  tot.c.lost,
		Errors:      map[string]int64{},
		Checked:     cfg.Check,

		Extensions:          tot.c.extensions,
		WokenByNotification: tot.c.notified,
		FallbackRetries:     tot.c.fallbacks,
		BackoffRetries:      tot.c.backoffs,
		Gated:               tot.c.gated,
		SubscriptionsPeak:   subsPeak,
		Faults:              faultLog,
	}
	counts := make([]int64, len(r.perWorker))
	for i := range r.perWorker {
		counts[i] = r.perWorker[i].n.Load()
	}
	s.Fairness = results.FairnessOf(counts)
	if !measured {
		// Stopped during the warm-up: nothing was measured.
		s.WarmupS = stopAt.Sub(r.start).Seconds()
	}
	if r.perOpNs > 0 {
		s.LoadModel = "open"
		s.BacklogMax, s.BacklogEnd = backlogMax, backlogEnd
	}
	s.ErrorExamples = map[string]string{}
	for i, k := range results.ErrorKinds() {
		s.Errors[k] = tot.c.errors[i]
		if m := r.errExamples[i].Load(); m != nil {
			s.ErrorExamples[k] = *m
		}
	}
	if window > 0 {
		s.AcquiredPerSec = math.Round(float64(s.Acquired)/window.Seconds()*10) / 10
	}
	if r.oracle != nil {
		s.Violations, s.ViolationExamples = r.oracle.violations()
		s.TokensChecked, s.StaleTokens, s.StaleTokenExamples = r.oracle.staleTokens()
	}
	s.SetLatencies(tot.hist)
	return &Result{Summary: s, Histograms: tot.hist, Intervals: intervals}, nil
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
func awaitQuorum(ctx context.Context, cfg Config, engines []Engine, progress *results.ProgressWriter, logf func(string, ...any)) error {
	announced := false
	for {
		w := quorumWait(engines, time.Now())
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
				return fmt.Errorf("bench: %s; not waiting (--no-wait-quarantine)", msg)
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
			return fmt.Errorf("bench: waiting for the masters' quarantine to end: %w", ctx.Err())
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
func quorumWait(engines []Engine, now time.Time) quorumWaitInfo {
	var w quorumWaitInfo
	for _, e := range engines {
		nr, ok := e.(nodeReporter)
		if !ok {
			continue
		}
		nodes := nr.Nodes()
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
