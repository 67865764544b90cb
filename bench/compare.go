package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/masters"
	"github.com/redlock-bench/redlock/results"
)

// A comparison runs several engines on one workload, on the same masters,
// alternating them run by run (A B C A B C ...). These machines are small
// and noisy: two runs of the same engine a minute apart differ by tens of
// percent, so comparing one run of A with one run of B measures the noise.
// Alternating spreads the drift over every engine alike, and the median of
// each engine's runs discards the odd run disturbed by something else.

// Defaults of CompareConfig.
const (
	// DefaultCompareRounds is how many runs each engine gets by default.
	DefaultCompareRounds = 3
	// MinCompareRounds is the fewest rounds with a meaningful median.
	MinCompareRounds = 3
	// DefaultCeilingRequests is the number of requests of each
	// redis-benchmark test on each master (--limit).
	DefaultCeilingRequests = 200000
)

// CompareConfig describes a comparison. Every run is Base with its own
// Engine, Label and KeyPrefix.
type CompareConfig struct {
	// Base is the workload of every run. Its Engine is ignored. With no
	// Masters, LocalMasters are started once for the whole comparison.
	// Its Progress, Log and IntervalLog are replaced per run.
	Base Config
	// Engines run in this order in every round (--engines); the first is
	// the reference of the ratios. Default engines.Peers of the lock.
	Engines []engines.Engine
	// Rounds is how many times each engine runs (--rounds). Default 3, at
	// least MinCompareRounds.
	Rounds int
	// Limit also measures the masters' pipelined ceiling with
	// redis-benchmark after the rounds (--limit). Default false.
	Limit bool
	// CeilingRequests is the size of each redis-benchmark test on each
	// master. Default DefaultCeilingRequests.
	CeilingRequests int
	// Dir is the comparison's directory, which must exist. Each run writes
	// a normal run directory <round>-<engine> inside it; compare.json and
	// compare.txt are rewritten after every run, so that an interrupted
	// comparison keeps what it measured.
	Dir string
	// Label names the comparison; the runs are <label>-<round>-<engine>.
	// Default: DeriveCompareLabel(Base).
	Label string
	// Progress receives the runs' progress lines, each prefixed with the
	// round and the engine; nil for none.
	Progress io.Writer
	// ProgressInPlace rewrites the progress line in place (a terminal).
	ProgressInPlace bool
	// Log receives one line per run and informational lines; nil for none.
	Log io.Writer

	// run runs one engine's run; nil means Run. Tests replace it.
	run func(context.Context, Config) (*Result, error)
}

// DeriveCompareLabel names a comparison after its workload, without the
// engine: "w256-r100000-try".
func DeriveCompareLabel(base Config) string {
	return strings.TrimPrefix(DeriveLabel(base), labelSafe(base.Engine.String())+"-")
}

func (cc *CompareConfig) fill() {
	if len(cc.Engines) == 0 {
		cc.Engines = engines.Peers(cc.Base.Lock, cc.Base.clusterVotes())
	}
	if cc.Rounds == 0 {
		cc.Rounds = DefaultCompareRounds
	}
	if cc.CeilingRequests == 0 {
		cc.CeilingRequests = DefaultCeilingRequests
	}
	if cc.Label == "" {
		cc.Label = DeriveCompareLabel(cc.Base)
	}
}

// Validate checks the comparison and the configuration of every run,
// naming the flag and the value at fault. It fills the defaults first.
// Dir is checked by RunCompare, so that bad flags are refused before a
// directory is made.
func (cc *CompareConfig) Validate() error {
	cc.fill()
	list := engines.JoinNames(cc.Engines)
	if _, err := engines.ParseList(list); err != nil {
		return cfgErr("engines", list, "%v", err)
	}
	for _, e := range cc.Engines {
		if n, have := e.FixedVoters(), cc.Base.masterCount(); n > have {
			return cfgErr("engines", list, "%s votes on the first %d masters, and the comparison has %d", e, n, have)
		}
	}
	if cc.Rounds < MinCompareRounds {
		return cfgErr("rounds", cc.Rounds, "must be >= %d: a median of fewer runs is one noisy run", MinCompareRounds)
	}
	if cc.Rounds > MaxCompareRounds {
		return cfgErr("rounds", cc.Rounds, "must be at most %d", MaxCompareRounds)
	}
	if err := ValidateLabel(cc.Label); err != nil {
		return cfgErr("label", cc.Label, "%v", err)
	}
	if cc.CeilingRequests < 0 {
		return fmt.Errorf("CompareConfig.CeilingRequests must be > 0, got %d", cc.CeilingRequests)
	}
	if cc.CeilingRequests > MaxCeilingRequests {
		return cfgErr("limit-requests", cc.CeilingRequests, "must be at most %d", MaxCeilingRequests)
	}
	if cc.Limit && cc.Base.clusterVotes() {
		return cfgErr("limit", true, "measures plain masters only, and the votes are Redis Clusters (--clusters, --cluster-shards)")
	}
	if cc.Limit && !cc.usesRedis() {
		return cfgErr("limit", true, "needs Redis masters, and none of --engines %s uses them", list)
	}
	if b := cc.Base; cc.Limit && (b.Conn.TLS != nil || b.Conn.Username != "" || b.Conn.Password != "") {
		return cfgErr("limit", true, "is not available with --user, --pass or --tls: redis-benchmark would need them on its command line")
	}
	for i, e := range cc.Engines {
		c := cc.runConfig(1, i)
		if err := c.Validate(); err != nil {
			return fmt.Errorf("%s: %w", e, err)
		}
	}
	return nil
}

// runConfig is the configuration of engine i's run in round (from 1).
func (cc *CompareConfig) runConfig(round, i int) Config {
	c := cc.Base
	c.Engine = cc.Engines[i]
	c.Label = fmt.Sprintf("%s-%d-%s", cc.Label, round, labelSafe(c.Engine.String()))
	// Each run locks names of its own, so that a key another run left
	// behind (a late SET that outlived its release, a release cut short at
	// the end) is not contention in this one. The prefix has the same
	// length for every engine of a round.
	c.KeyPrefix = fmt.Sprintf("%sc%d-%d:", cc.Base.KeyPrefix, round, i+1)
	return c
}

// RunCompare runs every engine Rounds times, alternating, on the same
// masters: with no Base.Masters, the local masters are started once and
// stopped before it returns. Each run is written to its own directory, and
// compare.json and compare.txt after every run; with Limit, the masters'
// ceiling is measured after the last round.
//
// Cancelling ctx stops the current run (kept, marked interrupted, left out
// of the medians) and the comparison, which is then written as it stands.
// An error from a run ends the comparison with that error; the runs before
// it are kept. Violations are in the result, not errors.
func RunCompare(ctx context.Context, cc CompareConfig) (*results.Comparison, error) {
	if err := cc.Validate(); err != nil {
		return nil, err
	}
	if cc.Dir == "" {
		return nil, errors.New("CompareConfig.Dir is empty")
	}
	c := &comparer{cc: &cc, runFn: cc.run, logf: logger(cc.Log)}
	if c.runFn == nil {
		c.runFn = Run
	}
	var benchmark string
	if cc.Limit {
		var err error
		if benchmark, err = findRedisBenchmark(); err != nil {
			return nil, err
		}
	}
	switch {
	case !cc.usesRedis() || cc.Base.givenVotes():
	case cc.Base.ClusterShards > 0:
		clusters, err := shareLocalClusters(ctx, &cc.Base, "comparison", c.logf)
		if err != nil {
			return nil, err
		}
		defer masters.StopClusters(clusters)
		c.local = true
	default:
		cluster, err := shareLocalMasters(ctx, &cc.Base, "comparison", c.logf)
		if err != nil {
			return nil, err
		}
		defer cluster.Stop()
		c.local = true
	}
	c.start()
	if err := writeComparison(cc.Dir, c.cmp); err != nil {
		return nil, err
	}
	if goOn, err := c.rounds(ctx); !goOn {
		return c.cmp, err
	}
	limitErr := c.measureLimit(ctx, benchmark)
	c.cmp.Analyze()
	return c.cmp, errors.Join(limitErr, writeComparison(cc.Dir, c.cmp))
}

// usesRedis reports whether any of the engines compared needs masters.
func (cc *CompareConfig) usesRedis() bool {
	for _, e := range cc.Engines {
		if e.NeedsRedis() {
			return true
		}
	}
	return false
}

// comparer runs one comparison.
type comparer struct {
	cc    *CompareConfig
	runFn func(context.Context, Config) (*Result, error)
	// local: the comparison started the masters it shares.
	local bool
	logf  func(string, ...any)
	cmp   *results.Comparison
	// latency is the kind the comparison ranks by: acquire, or wait in
	// mode wait.
	latency results.Kind
}

// start makes the comparison, with no run yet.
func (c *comparer) start() {
	cc, base := c.cc, &c.cc.Base
	c.latency = results.Acquire
	if base.Mode == ModeWait {
		c.latency = results.Wait
	}
	names := make([]string, len(cc.Engines))
	for i, e := range cc.Engines {
		names[i] = e.String()
	}
	notes := engines.PeerNotes(base.Lock, cc.Engines)
	if base.clusterVotes() && len(base.Masters) == 0 {
		notes = append(notes, engines.ClusterNotes(cc.Engines, base.masterCount())...)
	}
	cmp := &results.Comparison{
		Kind:         "compare",
		Label:        cc.Label,
		Engines:      names,
		Rounds:       cc.Rounds,
		Lock:         base.Lock.String(),
		Notes:        notes,
		Mode:         string(base.Mode),
		LoadModel:    "closed",
		Latency:      c.latency.String(),
		Config:       base.Flags().Map(),
		LocalMasters: c.local,
		StartedAt:    time.Now().UTC(),
	}
	if cc.usesRedis() {
		cmp.Masters = append([]string{}, base.Masters...)
		cmp.Clusters, cmp.ClusterShards = base.Clusters, base.sharedShards
	}
	if base.Rate > 0 {
		cmp.LoadModel = "open"
	}
	cmp.Config["engine"] = engines.JoinNames(cc.Engines)
	cmp.Config["label"] = cc.Label
	cmp.Config["rounds"] = cc.Rounds
	cmp.Config["limit"] = cc.Limit
	delete(cmp.Config, "key_prefix") // each run has its own; see its summary
	cmp.Analyze()
	c.cmp = cmp
}

// rounds runs every engine Rounds times, alternating. goOn is false when
// the comparison ends here: a run failed (err), or ctx was cancelled
// before a run measured anything (no error); the comparison is then
// written as it stands.
func (c *comparer) rounds(ctx context.Context) (goOn bool, err error) {
	for round := 1; round <= c.cc.Rounds; round++ {
		for i := range c.cc.Engines {
			if ctx.Err() != nil {
				c.cmp.Interrupted = true
				return true, nil
			}
			s, err := c.runOne(ctx, round, i)
			switch {
			case err != nil:
				return false, err
			case s == nil:
				return false, nil
			case s.Interrupted:
				return true, nil
			}
		}
	}
	return true, nil
}

// runOne runs engine i in round into its own run directory, adds the run
// to the comparison and rewrites it. On a failed run it returns no
// summary, and the run's error unless ctx was cancelled.
func (c *comparer) runOne(ctx context.Context, round, i int) (*results.Summary, error) {
	cc, cmp := c.cc, c.cmp
	eng := cc.Engines[i].String()
	cfg := cc.runConfig(round, i)
	name := fmt.Sprintf("%d-%s", round, labelSafe(eng))
	n := (round-1)*len(cc.Engines) + i + 1
	c.logf("run %d/%d: round %d/%d, %s: %s", n, cc.Rounds*len(cc.Engines), round, cc.Rounds, eng, filepath.Join(cc.Dir, name))
	if cc.Progress != nil {
		cfg.Progress = &prefixLines{w: cc.Progress, prefix: fmt.Sprintf("round %d/%d %s | ", round, cc.Rounds, eng)}
		cfg.ProgressInPlace = cc.ProgressInPlace
	}
	cfg.Log = cc.Log
	res, err := runNewDir(ctx, c.runFn, cfg, filepath.Join(cc.Dir, name), c.local)
	if err != nil {
		cmp.Interrupted = ctx.Err() != nil
		cmp.Analyze()
		if werr := writeComparison(cc.Dir, cmp); werr != nil {
			err = errors.Join(err, werr)
		}
		if ctx.Err() != nil {
			return nil, nil // interrupted before the run measured anything
		}
		return nil, fmt.Errorf("compare: round %d, %s: %w", round, eng, err)
	}
	s := res.Summary
	if cmp.Machine.CPUs == 0 || (cmp.Machine.RedisVersion == "" && s.Machine.RedisVersion != "") {
		cmp.Machine = s.Machine
	}
	cmp.Runs = append(cmp.Runs, results.CompareRunOf(round, eng, name, s, c.latency))
	cmp.Interrupted = s.Interrupted
	cmp.Analyze()
	return s, writeComparison(cc.Dir, cmp)
}

// measureLimit measures the masters' pipelined ceiling (--limit), unless
// the comparison was interrupted; an interruption during it is not an
// error.
func (c *comparer) measureLimit(ctx context.Context, benchmark string) error {
	if !c.cc.Limit || c.cmp.Interrupted {
		return nil
	}
	c.logf("measuring the masters' ceiling: %s on each master at once", ceilingTool)
	var err error
	c.cmp.Ceiling, err = measureCeiling(ctx, benchmark, c.cmp.Masters, c.cc.CeilingRequests, c.cc.Base.KeyPrefix+"limit:")
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		c.cmp.Interrupted = true
		return nil
	}
	return fmt.Errorf("compare --limit: %w", err)
}

// writeComparison writes compare.json and compare.txt.
func writeComparison(dir string, c *results.Comparison) error {
	return errors.Join(
		results.WriteFile(dir, results.CompareJSON, func(b *bytes.Buffer) error { return results.WriteCompareJSON(b, c) }),
		results.WriteFile(dir, results.CompareText, func(b *bytes.Buffer) error { return results.WriteCompareText(b, c) }))
}

// prefixLines prefixes each progress line with the run's place in the
// comparison. The progress writer sends each line in one Write, starting
// with "\r" when it rewrites the line in place.
type prefixLines struct {
	w      io.Writer
	prefix string
}

func (p *prefixLines) Write(b []byte) (int, error) {
	var err error
	if rest, ok := bytes.CutPrefix(b, []byte("\r")); ok {
		_, err = fmt.Fprintf(p.w, "\r%s%s", p.prefix, rest)
	} else {
		_, err = fmt.Fprintf(p.w, "%s%s", p.prefix, b)
	}
	if err != nil {
		return 0, err
	}
	return len(b), nil
}
