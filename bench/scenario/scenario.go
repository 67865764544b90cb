package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/bench/fault"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

// Options choose the variant of a scenario. The zero value runs every
// scenario in full with the engine's defaults.
type Options struct {
	// Out is the directory for scenario.json and scenario.txt; it is
	// created. Empty writes nothing (the caller may call Result.Write).
	Out string
	// Quarantine is the restart policy under test in restart-amnesia,
	// failover, cluster-failover and sentinel-failover:
	// QuarantineOff expects a double grant, QuarantineObserved and
	// QuarantineAlways expect none. Zero selects QuarantineAlways, the
	// engine's default. Other scenarios set their own policy.
	Quarantine engine.QuarantinePolicy
	// Fencing turns on fencing tokens in paused-holder, where the fenced
	// resource then rejects the stale holder's late write. Default: off.
	Fencing bool
	// Short shortens every phase (and TTL where it sets the pace), for
	// go test. The verdicts are the same; the figures are noisier.
	Short bool
	// Log receives one line per step as the scenario runs. May be nil.
	Log io.Writer
}

func (o Options) quarantine() engine.QuarantinePolicy {
	if o.Quarantine == 0 {
		return engine.QuarantineAlways
	}
	return o.Quarantine
}

// Info describes a scenario for `redlock-bench scenario list`.
type Info struct {
	Name string `json:"name"`
	// Summary is what the scenario does, in one sentence.
	Summary string `json:"summary"`
	// Options names the Options fields that change the expected outcome.
	Options []string `json:"options,omitempty"`
	expect  func(Options) string
}

// Expected is the outcome the scenario expects with o, in words. It is
// what Result.Expected holds after a run with o.
func (i Info) Expected(o Options) string {
	if i.expect == nil { // an Info not from List
		return ""
	}
	return i.expect(o)
}

// scenario is one entry of the static table: its description and its
// driver, which runs the script and judges what it saw.
type scenario struct {
	Info
	run func(ctx context.Context, e *env) (outcome, error)
}

// outcome is what a driver hands back: its figures (the observation the
// judge read, JSON-friendly) and the judge's verdict.
type outcome struct {
	figures    any
	passed     bool
	observed   string
	violations int
}

// table is the static scenario list, in the order List gives it.
var table = []scenario{
	{Info{Name: "restart-amnesia", Options: []string{"Quarantine"}, expect: expectRestartAmnesia,
		Summary: "a holder locks exactly a quorum; one of its masters restarts without persistence; a second client then asks for the resource"}, runRestartAmnesia},
	{Info{Name: "minority-down", expect: expectMinorityDown,
		Summary: "2 of 5 masters are killed mid-run and later restarted; throughput and latency before, during and after"}, runMinorityDown},
	{Info{Name: "majority-down", expect: expectMajorityDown,
		Summary: "3 of 5 masters are killed mid-run and later restarted; how acquires fail, and how long locking is unavailable"}, runMajorityDown},
	{Info{Name: "slow-node", expect: expectSlowNode,
		Summary: "one master answers 50 ms late; acquire latency against all-fast masters, alternating"}, runSlowNode},
	{Info{Name: "paused-holder", Options: []string{"Fencing"}, expect: expectPausedHolder,
		Summary: "a holder stalls past its TTL (as in a GC pause), another client takes over, and the stale holder then writes"}, runPausedHolder},
	{Info{Name: "partition", expect: expectPartition,
		Summary: "a client is cut off from 3 of 5 masters while holding an auto-extended lease, then healed"}, runPartition},
	{Info{Name: "oom-node", expect: expectOOMNode,
		Summary: "masters answer every write with an OOM error (maxmemory 1, noeviction): first one, then a majority"}, runOOMNode},
	{Info{Name: "failover", Options: []string{"Quarantine"}, expect: expectFailover,
		Summary: "a master acknowledges a lock, dies, and is replaced by a copy without it: a promoted asynchronous replica (single master), then an empty server (one of 5 Redlock masters)"}, runFailover},
	{Info{Name: "clock-jump", Options: []string{"Fencing"}, expect: expectClockJump,
		Summary: "the clock of one master in the holder's exact quorum jumps forward past the TTL, so its key expires early; a second client then asks for the resource"}, runClockJump},
	{Info{Name: "cluster-failover", Options: []string{"Quarantine"}, expect: expectClusterFailover,
		Summary: "3 Redis Cluster votes with replicas; the holder's shard fails over to a replica that never got its lock, and a second client then asks for the resource"}, runClusterFailover},
	{Info{Name: "sentinel-failover", Options: []string{"Quarantine"}, expect: expectSentinelFailover,
		Summary: "2 masters and a vote that Redis Sentinel manages; the holder sits on exactly a quorum including it, the sentinels fail over to a replica that never got its lock, and a second client then asks for the resource"}, runSentinelFailover},
}

// List returns every scenario, in a fixed order.
func List() []Info {
	out := make([]Info, len(table))
	for i, s := range table {
		out[i] = s.Info
	}
	return out
}

// ErrUnknown reports a scenario name that is not in List.
var ErrUnknown = errors.New("scenario: unknown scenario")

func lookup(name string) (scenario, error) {
	names := make([]string, len(table))
	for i, s := range table {
		if s.Name == name {
			return s, nil
		}
		names[i] = s.Name
	}
	return scenario{}, fmt.Errorf("%w %q (known: %s)", ErrUnknown, name, strings.Join(names, ", "))
}

// Run runs the named scenario and judges it. It starts its own masters and
// proxies and stops them before it returns, on every path, including ctx
// ending. With o.Out set it writes scenario.json and scenario.txt there.
//
// A wrong verdict is not an error: it is a Result with Passed false. The
// error is for a scenario that could not run to its end (no redis-server,
// ctx ended, a master that would not start, the output not written); the
// Result is then still returned, with Passed false and Error set, and
// written to o.Out when possible.
func Run(ctx context.Context, name string, o Options) (*Result, error) {
	r, _, err := run(ctx, name, o)
	return r, err
}

// run is Run, also returning the env so that tests can check what the run
// left behind (the proxies' addresses).
func run(ctx context.Context, name string, o Options) (*Result, *env, error) {
	sc, err := lookup(name)
	if err != nil {
		return nil, nil, err
	}
	e := &env{o: o, name: name, start: time.Now()}
	r := &Result{
		Name:     name,
		Expected: sc.Expected(o),
		Options:  RunOptions{Quarantine: o.quarantine().String(), Fencing: o.Fencing, Short: o.Short},
		Started:  e.start.UTC(),
		Machine:  machine(),
	}
	e.logf("%s: expected: %s", name, r.Expected)
	out, err := sc.run(ctx, e)
	r.DurationS = time.Since(e.start).Seconds()
	r.Timeline = e.timeline()
	r.Machine.Redis = e.redisVersion
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		err = fmt.Errorf("scenario %s: %w", name, err)
		r.Error = err.Error()
		r.Observed = "did not run to its end: " + err.Error()
		r.Figures = out.figures
		r.Interrupted = ctx.Err() != nil
	} else {
		r.Figures, r.Passed, r.Observed, r.Violations = out.figures, out.passed, out.observed, out.violations
	}
	e.logf("%s: %s: %s", name, r.Verdict(), r.Observed)
	if o.Out != "" {
		if werr := r.Write(o.Out); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	return r, e, err
}

// env is what a driver runs with: the options, the timeline, and the
// facts every result records.
type env struct {
	o            Options
	name         string
	start        time.Time
	redisVersion string

	mu    sync.Mutex
	steps []Step
	// proxyAddrs are the listen addresses of the proxies the driver
	// started, so that tests can check none is left listening.
	proxyAddrs []string
}

// step records a step of the script on the timeline and logs it.
func (e *env) step(format string, a ...any) {
	s := Step{AtMs: ms(time.Since(e.start)), What: fmt.Sprintf(format, a...)}
	e.mu.Lock()
	e.steps = append(e.steps, s)
	e.mu.Unlock()
	e.logf("%s: %8.1f ms  %s", e.name, s.AtMs, s.What)
}

func (e *env) logf(format string, a ...any) {
	if e.o.Log != nil {
		fmt.Fprintf(e.o.Log, format+"\n", a...)
	}
}

func (e *env) timeline() []Step {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Step(nil), e.steps...)
}

// masters starts n local masters without persistence, so that a restart
// forgets every lock. The caller must defer Stop.
func (e *env) masters(ctx context.Context, n int) (*redisproc.Cluster, error) {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := redisproc.Start(sctx, n, redisproc.Options{})
	if err != nil {
		return nil, fmt.Errorf("start %d masters: %w", n, err)
	}
	e.step("started %d masters without persistence: %s", n, strings.Join(c.Addrs(), " "))
	return c, nil
}

// proxies starts a proxy in front of each master. The caller must close
// every Locker that dials them before it closes them.
func (e *env) proxies(ctx context.Context, upstreams []string) (*fault.Proxies, error) {
	p, err := fault.NewProxies(ctx, upstreams)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.proxyAddrs = p.Addrs()
	e.mu.Unlock()
	e.step("started proxies %s in front of the masters", strings.Join(p.Addrs(), " "))
	return p, nil
}

// locker connects an engine Locker to addrs with the scenario's settings.
// The masters a scenario starts hold no locks, so the policy defaults to
// QuarantineObserved (QuarantineAlways would keep fresh masters out of the
// vote for a TTL); set sets the rest. The caller must Close it.
func (e *env) locker(ctx context.Context, addrs []string, set func(*engine.Config)) (*engine.Locker, error) {
	cfg := engine.DefaultConfig(addrs...)
	cfg.Quarantine = engine.QuarantineObserved
	if set != nil {
		set(&cfg)
	}
	l, err := engine.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if e.redisVersion == "" {
		for _, n := range l.Nodes() {
			if n.Version != "" {
				e.redisVersion = n.Version
				break
			}
		}
	}
	return l, nil
}

// patientDial bounds a patient Locker's connecting to each master at
// New: the masters are up, so only a machine far too slow to run the
// scenario at all waits this long.
const patientDial = 20 * time.Second

// patient makes a Locker wait for a healthy master's answer on a loaded
// machine, where one can take longer than the engine's default node
// timeout (TTL/100, at least 50 ms): a step that needs the answer (a
// holder's acquire on masters it must win, a second client's attempt a
// verdict counts) would otherwise read a slow yes as a timeout, and the
// scenario would fail or judge the wrong thing. A quarter of the TTL is
// the most that still leaves the lease three quarters of its validity
// when a master is really gone, and stays below the engine's TTL/2 limit.
// Call it after the TTL is set.
func patient(c *engine.Config) {
	c.NodeTimeout = c.TTL / 4
	c.Conn.DialTimeout = patientDial
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// directTimeout bounds the set-up commands sent to a master directly:
// the masters are up, so only a machine far too slow to run the scenario
// waits this long (2 s was seen exceeded on a loaded 2-core host).
const directTimeout = 10 * time.Second

// direct sends one set-up command to a master over a fresh connection,
// bypassing the engine.
func direct(addr string, args ...string) error {
	_, err := redisproc.Do(context.Background(), addr, directTimeout, args...)
	if err != nil {
		return fmt.Errorf("%s on %s: %w", strings.Join(args, " "), addr, err)
	}
	return nil
}

// get reads a key on a master directly; "" when it is absent. The script
// answers with a status reply, so that the value comes on the one line
// redisproc.Do reads.
func get(addr, key string) (string, error) {
	line, err := redisproc.Do(context.Background(), addr, directTimeout, "EVAL", "return {ok = redis.call('GET', KEYS[1]) or ''}", "1", key)
	if err != nil {
		return "", fmt.Errorf("GET %s on %s: %w", key, addr, err)
	}
	return strings.TrimPrefix(line, "+"), nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

func machine() Machine {
	return Machine{
		Go:         runtime.Version(),
		OS:         runtime.GOOS + "/" + runtime.GOARCH,
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
}
