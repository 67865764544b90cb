package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/results"
)

// Swept parameters.
const (
	// SweepWorkers varies Config.Workers: a closed loop, measuring capacity.
	SweepWorkers = "workers"
	// SweepRate varies Config.Rate: an open loop, measuring latency at
	// each offered rate.
	SweepRate = "rate"
)

// stepOverhead is what a step costs beyond its warm-up and measured window
// (connecting, draining, writing files), for the first ETA.
const stepOverhead = 500 * time.Millisecond

// SweepConfig describes a sweep: a series of runs on the same masters that
// varies one parameter.
type SweepConfig struct {
	// Base is every step's configuration but the swept field. Its Label,
	// if set, prefixes the steps' labels; if empty, each step derives its
	// own. Its Progress, Log and IntervalLog writers are replaced per step
	// (IntervalLog goes to each step's intervals.hlog).
	Base Config
	// Param is SweepWorkers or SweepRate.
	Param string
	// Values are the swept values, in the order they run (ascending, from
	// ParseSweepValues).
	Values []float64
	// Objectives, when set, pick the highest throughput that meets every
	// one (--slo, repeated): any objective a run takes.
	Objectives []results.Objective
	// Dir is the sweep's directory, which must exist. Each step writes a
	// normal run directory inside it, and sweep.json and sweep.txt are
	// rewritten after every step, so that an interrupted sweep keeps what
	// it measured.
	Dir string
	// Label names the sweep (sweep.json); default: derived from Base.
	Label string
	// Config is what sweep.json records as the shared configuration;
	// default: Base.Flags() with the swept flag as the list of values.
	Config map[string]any
	// Progress receives the steps' progress lines, each prefixed with the
	// step and the sweep's ETA; nil for none.
	Progress io.Writer
	// ProgressInPlace rewrites the progress line in place (a terminal).
	ProgressInPlace bool
	// Log receives one line per step and informational lines; nil for none.
	Log io.Writer
}

// ErrSweepStep marks an error that ended a sweep during a step; the
// sweep.json written so far holds the steps before it.
var ErrSweepStep = errors.New("sweep step failed")

// DeriveSweepLabel names a sweep after its base configuration, without the
// swept field: "sweep-workers-redlock-r1000-try", "sweep-rate-redlock-w64-r1000-try".
func DeriveSweepLabel(base Config, param string) string {
	l := DeriveLabel(base)
	// DeriveLabel writes "<engine>-w<N>-r<R>...[-rate<R>]".
	if param == SweepWorkers {
		l = strings.Replace(l, fmt.Sprintf("-w%d-", base.Workers), "-", 1)
	}
	if param == SweepRate {
		if i := strings.LastIndex(l, "-rate"); i >= 0 {
			l = l[:i]
		}
	}
	return "sweep-" + param + "-" + l
}

// stepConfig is the configuration of step i.
func (sc *SweepConfig) stepConfig(i int) Config {
	c := sc.Base
	v := sc.Values[i]
	switch sc.Param {
	case SweepWorkers:
		c.Workers = int(v)
	case SweepRate:
		c.Rate = v
	}
	// Each step locks names of its own, so that a lock one step left
	// behind (a release cut short at the end) is not contention in the next.
	c.KeyPrefix = fmt.Sprintf("%ss%d:", sc.Base.KeyPrefix, i+1)
	if i > 0 {
		// --start-at lines up the first step across load machines; the
		// others follow it.
		c.StartAt = time.Time{}
	}
	if sc.Base.Label != "" {
		suffix := "w" + FormatSweepValue(v)
		if sc.Param == SweepRate {
			suffix = "rate" + FormatSweepValue(v)
		}
		c.Label = sc.Base.Label + "-" + suffix
	} else {
		c.Label = DeriveLabel(c)
	}
	return c
}

// Validate checks the sweep and every step's configuration, naming the
// flag and value at fault.
func (sc *SweepConfig) Validate() error {
	switch sc.Param {
	case SweepWorkers, SweepRate:
	default:
		return &ConfigError{Flag: "param", Value: sc.Param, Reason: "must be workers or rate"}
	}
	if len(sc.Values) < 2 {
		return &ConfigError{Flag: sc.Param, Value: fmt.Sprint(sc.Values), Reason: "a sweep needs at least two values"}
	}
	if len(sc.Values) > MaxSweepSteps {
		return &ConfigError{Flag: sc.Param, Value: fmt.Sprint(len(sc.Values)), Reason: fmt.Sprintf("at most %d values", MaxSweepSteps)}
	}
	for i := range sc.Values {
		c := sc.stepConfig(i)
		if err := c.Validate(); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, results.ParamValue(sc.Param, sc.Values[i]), err)
		}
	}
	if len(sc.Base.Faults) > 0 && !sc.Base.givenVotes() {
		// Faults on local masters need their processes, which Run owns
		// only when it starts them itself; a sweep starts them once.
		return &ConfigError{Flag: "fault", Value: sc.Base.Faults.String(),
			Reason: "a sweep cannot inject faults into the local masters it shares between steps; give --masters, or run the faulted load with run"}
	}
	return nil
}

// RunSweep runs every step of the sweep in order, on the same masters:
// with no Base.Masters, the local masters are started once for the whole
// sweep and stopped before it returns. It writes each step's run directory
// and, after every step, sweep.json and sweep.txt, then returns the sweep
// with its knee and SLO point.
//
// Cancelling ctx stops the current step (kept, marked interrupted) and the
// sweep. An error from a step ends the sweep with ErrSweepStep; what ran
// before it is kept. Violations and an unmet SLO are in the result, not
// errors: the caller decides what they mean.
func RunSweep(ctx context.Context, sc SweepConfig) (*results.Sweep, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if sc.Dir == "" {
		return nil, errors.New("SweepConfig.Dir is empty")
	}
	logf := logger(sc.Log)
	local := false
	if sc.Base.Engine.NeedsRedis() && !sc.Base.givenVotes() {
		cluster, err := shareLocalMasters(ctx, &sc.Base, "sweep", logf)
		if err != nil {
			return nil, err
		}
		defer cluster.Stop()
		local = true
	}
	sw := sc.newSweep(local)
	if err := writeSweep(sc.Dir, sw); err != nil {
		return nil, err
	}
	eta := &sweepETA{steps: len(sc.Values), planned: plannedStep(sc.Base)}
	for i := range sc.Values {
		if ctx.Err() != nil {
			sw.Interrupted = true
			break
		}
		s, err := sc.runStep(ctx, sw, i, eta, local, logf)
		if err != nil || s == nil {
			return sw, err
		}
		if sw.Interrupted {
			break
		}
	}
	if len(sw.Points) < len(sc.Values) {
		sw.Interrupted = true
	}
	sw.Analyze()
	return sw, writeSweep(sc.Dir, sw)
}

// newSweep makes the sweep, with no step yet.
func (sc *SweepConfig) newSweep(local bool) *results.Sweep {
	base := sc.Base
	sw := &results.Sweep{
		Kind:         "sweep",
		Label:        sc.Label,
		Param:        sc.Param,
		Values:       append([]float64{}, sc.Values...),
		Engine:       base.Engine.String(),
		Mode:         string(base.Mode),
		LoadModel:    "closed",
		Latency:      sc.primary().String(),
		Config:       sc.Config,
		Masters:      append([]string{}, base.Masters...),
		LocalMasters: local,
		StartedAt:    time.Now().UTC(),
	}
	sw.SetObjectives(sc.Objectives)
	if sw.Label == "" {
		sw.Label = DeriveSweepLabel(base, sc.Param)
	}
	if sc.Param == SweepRate || base.Rate > 0 {
		sw.LoadModel = "open"
	}
	if sw.Config == nil {
		sw.Config = base.Flags().Map()
		list := make([]string, len(sc.Values))
		for i, v := range sc.Values {
			list[i] = FormatSweepValue(v)
		}
		sw.Config[sc.Param] = strings.Join(list, ",")
		sw.Config["label"] = sw.Label
	}
	if len(sw.Objectives) > 0 {
		sw.Analyze() // so that an empty sweep.json already says so
	}
	return sw
}

// primary is the latency the sweep plots: acquire, or wait in mode wait.
func (sc *SweepConfig) primary() results.Kind {
	if sc.Base.Mode == ModeWait {
		return results.Wait
	}
	return results.Acquire
}

// runStep runs step i into its own run directory, adds its point to the
// sweep and rewrites sweep.json and sweep.txt. On a failed step it
// returns no summary, and an ErrSweepStep error unless ctx was cancelled.
func (sc *SweepConfig) runStep(ctx context.Context, sw *results.Sweep, i int, eta *sweepETA, local bool, logf func(string, ...any)) (*results.Summary, error) {
	cfg := sc.stepConfig(i)
	name := fmt.Sprintf("%02d-%s", i+1, cfg.Label)
	dir := filepath.Join(sc.Dir, name)
	stepName := fmt.Sprintf("step %d/%d %s=%s", i+1, len(sc.Values), sc.Param, FormatSweepValue(sc.Values[i]))
	eta.begin(i)
	logf("%s (sweep ETA %s): %s", stepName, eta.remaining(), dir)
	if sc.Progress != nil {
		cfg.Progress = &stepProgress{w: sc.Progress, prefix: func() string {
			return fmt.Sprintf("%s, ETA %s | ", stepName, eta.remaining())
		}}
		cfg.ProgressInPlace = sc.ProgressInPlace
	}
	cfg.Log = sc.Log
	res, err := runNewDir(ctx, Run, cfg, dir, local)
	eta.end()
	if err != nil {
		sw.Interrupted = ctx.Err() != nil
		sw.Analyze()
		if werr := writeSweep(sc.Dir, sw); werr != nil {
			err = errors.Join(err, werr)
		}
		if ctx.Err() != nil {
			return nil, nil // interrupted before the step measured anything
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrSweepStep, stepName, err)
	}
	s := res.Summary
	if sw.Machine.Hostname == "" && sw.Machine.CPUs == 0 {
		sw.Machine = s.Machine
	}
	p := results.PointFromSummary(i, sc.Values[i], name, s, sc.primary())
	sw.CheckStep(&p, s)
	sw.Points = append(sw.Points, p)
	if s.Interrupted {
		sw.Interrupted = true
	}
	sw.Analyze()
	return s, writeSweep(sc.Dir, sw)
}

// writeSweep writes sweep.json and sweep.txt.
func writeSweep(dir string, sw *results.Sweep) error {
	return errors.Join(
		results.WriteFile(dir, results.SweepJSON, func(b *bytes.Buffer) error { return results.WriteSweepJSON(b, sw) }),
		results.WriteFile(dir, results.SweepText, func(b *bytes.Buffer) error { return results.WriteSweepText(b, sw) }))
}

// plannedStep is how long a step should take, or 0 when bounded by --ops.
func plannedStep(c Config) time.Duration {
	if c.Ops > 0 {
		return 0
	}
	return c.Warmup + c.Duration + stepOverhead
}

// sweepETA estimates the time left in a sweep: the steps still to run at
// the average of those done so far (or, before the first ends, the planned
// length of a step), plus what is left of the current step.
type sweepETA struct {
	mu        sync.Mutex
	steps     int
	planned   time.Duration
	done      int
	spent     time.Duration
	current   int
	stepStart time.Time
}

func (e *sweepETA) begin(i int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.current, e.stepStart = i, time.Now()
}

func (e *sweepETA) end() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.done++
	e.spent += time.Since(e.stepStart)
}

// remaining renders the estimate, e.g. "1m05s", or "unknown" for a sweep
// bounded by --ops before its first step ends.
func (e *sweepETA) remaining() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	per := e.planned
	if e.done > 0 {
		per = e.spent / time.Duration(e.done)
	}
	if per <= 0 {
		return "unknown"
	}
	left := time.Duration(e.steps-e.current-1) * per
	if cur := per - time.Since(e.stepStart); cur > 0 {
		left += cur
	}
	return left.Round(time.Second).String()
}

// stepProgress prefixes each progress line with the step and the ETA. The
// progress writer sends each line in one Write, starting with "\r" when it
// rewrites the line in place.
type stepProgress struct {
	w      io.Writer
	prefix func() string
}

func (p *stepProgress) Write(b []byte) (int, error) {
	pre := p.prefix()
	var err error
	if rest, ok := bytes.CutPrefix(b, []byte("\r")); ok {
		_, err = fmt.Fprintf(p.w, "\r%s%s", pre, rest)
	} else {
		_, err = fmt.Fprintf(p.w, "%s%s", pre, b)
	}
	if err != nil {
		return 0, err
	}
	return len(b), nil
}
