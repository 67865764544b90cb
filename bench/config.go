package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/fault"
	"github.com/redlock-bench/redlock/bench/masters"
	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/results"
)

// Config describes one run. Start from DefaultConfig: the zero value is not
// valid. Each field corresponds to a flag of `redlock-bench run`, named in
// its comment, and errors from Validate name that flag.
type Config struct {
	// Spec is how the run takes its locks (engines.Spec): the engine
	// (--engine; a quorum engine's NAME@N votes on the first N masters
	// only), the lock (--lock), the TTL (--ttl), the node timeout
	// (--node-timeout), the restart quarantine (--quarantine; by default
	// observed for local masters, which this process started empty, so
	// that none of them can have forgotten a lock, and the engine's own
	// always for --masters, where a young master may be one that just
	// restarted), --extend, --fencing, --gate, --notify, --key-prefix, the
	// connection (--user, -a/--pass or REDISCLI_AUTH, --tls and its files:
	// only with Masters, local masters are plain; never written to the
	// results) and the engine's Observer (--metrics-addr). Default: the
	// redlock engine taking mutexes with a TTL of 10s, key prefix "rlb:".
	engines.Spec
	// Masters are host:port addresses (--masters). Default: none, so
	// LocalMasters servers are started for engines that need Redis. An
	// engine that votes on fewer (NAME@N, a single-master baseline) uses
	// the first ones, and the run starts only those.
	Masters []string
	// LocalMasters is how many redis-server to start when Masters is empty
	// (--local-masters). Default 5.
	LocalMasters int
	// Clusters are votes that are Redis Clusters, each given by some of
	// its nodes' addresses (--clusters), as engine.Config.Clusters: they
	// vote after Masters. Redlock engines only. Default: none.
	Clusters [][]string
	// ClusterShards, when > 0, makes each of the LocalMasters votes a
	// local Redis Cluster of this many shards instead of one
	// redis-server (--cluster-shards). Default 0.
	ClusterShards int
	// Sentinels are votes that are masters Redis Sentinel manages
	// (--sentinel), as engine.Config.Sentinels: they vote after Masters
	// and Clusters. Redlock engines only. Default: none.
	Sentinels []engines.SentinelVote
	// sharedLocal: the caller (a sweep, a comparison) started the masters
	// named in Masters, or the clusters in Clusters, so the summary
	// counts them as local; sharedShards is the clusters' shards each.
	sharedLocal  bool
	sharedShards int
	// runtimeTimers: holds and open-loop starts sleep on the runtime's
	// timers, not the sleeper's kernel timer, which a testing/synctest
	// bubble's virtual clock does not move (and a goroutine blocked on its
	// fd would keep the bubble's clock from moving at all).
	runtimeTimers bool
	// probeTimeout bounds the pre-flight probe of each master and the
	// interval pings; zero is masters.ProbeTimeout. Tests give it a
	// minute: a loaded machine can keep a live master's answer for a
	// good part of the product's bound, and a probe that times out
	// fails the run.
	probeTimeout time.Duration
	// Workers is the number of concurrent goroutines (--workers). Default 64.
	Workers int
	// Clients is the number of independent engine instances, each with its
	// own connections, shared round-robin by the workers (--clients).
	// Default 1.
	Clients int
	// Resources is the number of distinct lock names (--resources).
	// Default 1000.
	Resources int
	// Distribution picks which resource each operation locks
	// (--distribution). Default uniform.
	Distribution Distribution
	// Mode is ModeTry (one attempt) or ModeWait (--mode). Default try.
	Mode Mode
	// WaitTimeout bounds each Lock in mode wait (--wait-timeout).
	// Default 5s.
	WaitTimeout time.Duration
	// Hold is how long a lock is held before release (--hold). Default 0.
	Hold Hold
	// Duration is the measured window (--duration), after Warmup.
	// Default 10s. Ignored when Ops > 0.
	Duration time.Duration
	// Ops, when > 0, ends the run after this many acquire attempts in the
	// measured window instead of after Duration (--ops). Default 0.
	Ops int64
	// Warmup runs before the measured window and is excluded from every
	// figure except violations (--warmup). Default 1s.
	Warmup time.Duration
	// Rate is 0 for a closed loop, or the arrival rate in acquisitions per
	// second of an open loop (--rate). Default 0.
	Rate float64
	// Check turns the safety oracle on (--check). Default true.
	Check bool
	// Label names the run (--label). Default: derived from the other
	// fields by DeriveLabel.
	Label string
	// Seed seeds the per-worker random sources (--seed). Default 1.
	Seed uint64
	// Faults are injected into the masters during the run (--fault). Every
	// action needs masters this run started, except stall. Default: none.
	Faults fault.Schedule
	// StartAt, when set, is the wall-clock time at which the warm-up
	// begins (--start-at), so that runs on several machines line up. The
	// masters are started and connected before it. It must not be more
	// than a second in the past. Default: start at once.
	StartAt time.Time
	// NoWaitQuarantine makes a run whose masters cannot yet form a quorum
	// (the engine keeps young or restarted masters out of the vote) fail
	// at start instead of waiting the quarantine out
	// (--no-wait-quarantine). Default: wait, visibly, before the warm-up.
	NoWaitQuarantine bool

	// Progress receives a progress line once a second; nil for none.
	Progress io.Writer
	// ProgressInPlace rewrites the progress line in place; set it only when
	// Progress is a terminal.
	ProgressInPlace bool
	// Log receives informational lines (masters started, ...); nil for none.
	Log io.Writer
	// IntervalLog receives the HdrHistogram interval log, one interval per
	// second of the measured window; nil for none.
	IntervalLog io.Writer
}

// Defaults of Config. The flag defaults of redlock-bench come from here.
const (
	DefaultLocalMasters = 5
	DefaultWorkers      = 64
	DefaultClients      = 1
	DefaultResources    = 1000
	DefaultWaitTimeout  = 5 * time.Second
	DefaultDuration     = 10 * time.Second
	DefaultWarmup       = time.Second
	DefaultSeed         = 1
	DefaultKeyPrefix    = "rlb:"
)

// DefaultConfig returns a valid configuration: 64 workers on 1000 uniformly
// chosen resources, one attempt each, for 10s after a 1s warm-up, against
// five local masters, with the oracle on.
func DefaultConfig() Config {
	spec := engines.DefaultSpec()
	spec.KeyPrefix = DefaultKeyPrefix
	return Config{
		Spec:         spec,
		LocalMasters: DefaultLocalMasters,
		Workers:      DefaultWorkers,
		Clients:      DefaultClients,
		Resources:    DefaultResources,
		Mode:         ModeTry,
		WaitTimeout:  DefaultWaitTimeout,
		Duration:     DefaultDuration,
		Warmup:       DefaultWarmup,
		Check:        true,
		Seed:         DefaultSeed,
	}
}

// ConfigError is a bad configuration value, naming the flag and the
// value: engines.ConfigError, which the lock client's checks return too.
type ConfigError = engines.ConfigError

func cfgErr(flag string, value any, format string, a ...any) error {
	return &ConfigError{Flag: flag, Value: fmt.Sprint(value), Reason: fmt.Sprintf(format, a...)}
}

// Validate checks every field and returns a *ConfigError for the first bad
// one.
func (c *Config) Validate() error {
	if c.Engine.Base == 0 {
		return cfgErr("engine", c.Engine, "no engine (known: %s)", engines.NamesHelp())
	}
	if err := c.validateClusters(); err != nil {
		return err
	}
	if err := c.validateSentinels(); err != nil {
		return err
	}
	if len(c.Masters) > 0 {
		if _, err := engines.ParseMasters(strings.Join(c.Masters, ",")); err != nil {
			return cfgErr("masters", strings.Join(c.Masters, ","), "%v", err)
		}
	} else if len(c.Clusters) > 0 || len(c.Sentinels) > 0 {
		// Votes given: nothing is started.
	} else if c.LocalMasters <= 0 {
		return cfgErr("local-masters", c.LocalMasters, "must be > 0")
	} else if c.LocalMasters > MaxMasters && !c.Engine.IsRedlock() {
		// The redlock engine names its own limit, the same (Spec.Validate).
		return cfgErr("local-masters", c.LocalMasters, "must be at most %d", MaxMasters)
	} else {
		switch {
		case c.Conn.TLS != nil:
			return cfgErr("tls", true, "applies to --masters only: local masters are plain TCP")
		case c.Conn.Username != "" || c.Conn.Password != "":
			// The value stays out of the message: it may be the password.
			return cfgErr("pass", "(hidden)", "applies to --masters only: local masters want no password")
		}
	}
	if len(c.Masters) > MaxMasters && !c.Engine.IsRedlock() {
		return cfgErr("masters", len(c.Masters), "must name at most %d masters", MaxMasters)
	}
	if n, have := c.Engine.FixedVoters(), c.masterCount(); n > have {
		return cfgErr("engine", c.Engine, "votes on the first %d masters, and the run has %d", n, have)
	}
	if c.Workers <= 0 {
		return cfgErr("workers", c.Workers, "must be > 0")
	}
	if c.Workers > MaxWorkers {
		return cfgErr("workers", c.Workers, "must be at most %d (each worker costs about 12 KiB and a goroutine: %d take about 1.2 GiB)", MaxWorkers, MaxWorkers)
	}
	if c.Clients <= 0 {
		return cfgErr("clients", c.Clients, "must be > 0")
	}
	if c.Clients > MaxClients {
		return cfgErr("clients", c.Clients, "must be at most %d (each client is an engine with its own connections to every master, about 2.2 MiB)", MaxClients)
	}
	if c.Clients > c.Workers {
		return cfgErr("clients", c.Clients, "must be <= --workers (%d): a client without a worker measures nothing", c.Workers)
	}
	if c.Resources <= 0 {
		return cfgErr("resources", c.Resources, "must be > 0")
	}
	if c.Resources > MaxResources {
		return cfgErr("resources", c.Resources, "must be at most %d (each resource costs about 130 bytes of names and oracle state: %d take about 650 MiB)", MaxResources, MaxResources)
	}
	if err := c.Distribution.validate(); err != nil {
		return cfgErr("distribution", c.Distribution, "%v", err)
	}
	if err := c.validateLock(); err != nil {
		return err
	}
	if c.Mode != ModeTry && c.Mode != ModeWait {
		return cfgErr("mode", c.Mode, "must be try or wait")
	}
	if c.WaitTimeout <= 0 {
		return cfgErr("wait-timeout", c.WaitTimeout, "must be > 0")
	}
	if err := c.Hold.validate(); err != nil {
		return cfgErr("hold", c.Hold, "%v", err)
	}
	if c.TTL <= 0 {
		return cfgErr("ttl", c.TTL, "must be > 0")
	}
	if c.Ops < 0 {
		return cfgErr("ops", c.Ops, "must be > 0")
	}
	if c.Ops > MaxOps {
		return cfgErr("ops", c.Ops, "must be at most %d", MaxOps)
	}
	if c.Ops == 0 && c.Duration <= 0 {
		return cfgErr("duration", c.Duration, "must be > 0")
	}
	if c.Warmup < 0 {
		return cfgErr("warmup", c.Warmup, "must be >= 0")
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"duration", c.Duration}, {"warmup", c.Warmup}, {"ttl", c.TTL}, {"wait-timeout", c.WaitTimeout}, {"node-timeout", c.NodeTimeout}} {
		if d.v > MaxTime {
			return cfgErr(d.flag, d.v, "must be at most %s", MaxTime)
		}
	}
	if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) {
		return cfgErr("rate", c.Rate, "must be 0 (closed loop) or a positive rate")
	}
	if c.Rate > MaxRate {
		return cfgErr("rate", c.Rate, "must be at most %d acquisitions/s (ten times what the fastest engine does here)", MaxRate)
	}
	if c.Label != "" {
		if err := ValidateLabel(c.Label); err != nil {
			return cfgErr("label", c.Label, "%v", err)
		}
	}
	if strings.ContainsAny(c.KeyPrefix, " \r\n") {
		return cfgErr("key-prefix", c.KeyPrefix, "must not contain spaces or line breaks")
	}
	if len(c.KeyPrefix) > MaxKeyPrefix {
		return cfgErr("key-prefix", len(c.KeyPrefix), "must be at most %d bytes", MaxKeyPrefix)
	}
	if len(c.Faults) > MaxFaults {
		return cfgErr("fault", len(c.Faults), "must have at most %d items", MaxFaults)
	}
	if len(c.Faults) > 0 {
		if !c.Engine.NeedsRedis() {
			return cfgErr("fault", c.Faults, "engine %s uses no Redis masters to inject faults into", c.Engine)
		}
		// Faults name the masters the engine votes on: the run has no
		// other (Run starts or keeps only those).
		if err := c.Faults.Validate(c.voters(), len(c.Masters) == 0); err != nil {
			var ie *fault.ItemError
			if errors.As(err, &ie) {
				return cfgErr("fault", c.Faults, "item %d %q: %s", ie.Pos, ie.Item, ie.Msg)
			}
			return cfgErr("fault", c.Faults, "%v", err)
		}
	}
	if err := c.validateSpec(); err != nil {
		return err
	}
	if !c.StartAt.IsZero() && time.Until(c.StartAt) < -time.Second {
		return cfgErr("start-at", c.StartAt.Format(time.RFC3339Nano), "is more than a second in the past (now %s)",
			time.Now().UTC().Format(time.RFC3339))
	}
	if !c.StartAt.IsZero() && time.Until(c.StartAt) > MaxTime {
		return cfgErr("start-at", c.StartAt.Format(time.RFC3339Nano), "must be at most %s ahead (now %s)",
			MaxTime, time.Now().UTC().Format(time.RFC3339))
	}
	return nil
}

// validateLock checks --lock against the rest of the run: the lock's
// ranges, whether the engine has it, and whether there are the resources
// for it.
func (c *Config) validateLock() error {
	l := c.Lock
	if err := l.Check(); err != nil {
		return cfgErr("lock", l, "%v", err)
	}
	if err := l.Takes(c.Engine); err != nil {
		return cfgErr("lock", l, "%v", err)
	}
	return l.CheckHandles(c.Engine, c.Resources, c.Clients)
}

// masterCount is how many votes the run has: --masters and --clusters, or
// the local ones it starts.
func (c *Config) masterCount() int {
	if c.givenVotes() {
		return len(c.Masters) + len(c.Clusters) + len(c.Sentinels)
	}
	return c.LocalMasters
}

// givenVotes reports whether the votes are the user's (--masters,
// --clusters) rather than started by the run.
func (c *Config) givenVotes() bool {
	return len(c.Masters) > 0 || len(c.Clusters) > 0 || len(c.Sentinels) > 0
}

// voters is how many masters the engine votes on: the first voters() of
// the run's (NAME@N, or a single-master baseline), else all of them.
func (c *Config) voters() int { return c.Engine.Voters(c.masterCount()) }

// givenVoted are the given votes (--masters, then --clusters, then --sentinel) the engine
// votes on: the first voters() of them.
func (c *Config) givenVoted() engines.Votes {
	return engines.Votes{Masters: c.Masters, Clusters: c.Clusters, Sentinels: c.Sentinels}.First(c.voters())
}

// probeWithin is how long each master has to answer a probe or a ping:
// masters.ProbeTimeout unless a test set probeTimeout.
func (c *Config) probeWithin() time.Duration {
	if c.probeTimeout > 0 {
		return c.probeTimeout
	}
	return masters.ProbeTimeout
}

// conn is how the run's probes and clean-up reach the masters.
func (c *Config) conn() redisproc.Conn {
	return redisproc.Conn{Username: c.Conn.Username, Password: c.Conn.Password, TLS: c.Conn.TLS}
}

// validateSpec checks the lock client's spec on the votes the engine will
// have, so that a TTL too short for the clock drift (and every other rule
// the engine has) is refused at flag-parse time, before any master starts,
// and the rules live in the engine alone. Local masters' addresses are not
// known yet: stand-ins take their places (engines.StandIns).
func (c *Config) validateSpec() error {
	if c.givenVotes() {
		return c.Spec.Validate(c.givenVoted(), "masters")
	}
	return c.Spec.Validate(engines.StandIns(c.voters(), c.ClusterShards > 0), "local-masters")
}

// Warnings are the settings that are valid but make a run measure
// something other than what it seems to: a hold longer than the TTL
// without --extend loses every lease; more workers than the CPUs serve
// (WorkersPerCPU) time out waiting for a CPU.
func (c *Config) Warnings() []string {
	var out []string
	if procs := runtime.GOMAXPROCS(0); c.Workers > WorkersPerCPU*procs {
		out = append(out, fmt.Sprintf("--workers %d on %d CPUs: more than %d workers a CPU wait for it longer than an attempt may take, and the run may measure errors or nothing; --workers %d or fewer measure capacity (sweep --workers finds the most this machine serves)",
			c.Workers, procs, WorkersPerCPU, WorkersPerCPU*procs))
	}
	if c.Extend || c.Engine.SelfExtending() {
		return out
	}
	var every, some bool
	switch c.Hold.Kind {
	case HoldFixed:
		every = c.Hold.D >= c.TTL
	case HoldUniform:
		every, some = c.Hold.Min >= c.TTL, c.Hold.Max >= c.TTL
	case HoldExp:
		// An exponential hold exceeds the TTL with probability e^(-TTL/mean).
		every, some = false, float64(c.TTL) < 5*float64(c.Hold.D)
	}
	switch {
	case every:
		out = append(out, fmt.Sprintf("--hold %s is not below --ttl %s and --extend is off: every lease expires before its release, so every one is counted lost; add --extend or raise --ttl",
			c.Hold, c.TTL))
	case some:
		out = append(out, fmt.Sprintf("--hold %s may reach --ttl %s and --extend is off: some leases expire before their release and are counted lost; add --extend or raise --ttl",
			c.Hold, c.TTL))
	}
	return out
}

// ParseStartAt parses --start-at: an RFC 3339 time such as
// 2025-01-02T15:04:05Z (fractional seconds allowed).
func ParseStartAt(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("want an RFC 3339 time such as 2025-01-02T15:04:05Z")
	}
	return t, nil
}

// Mode is how an operation asks for the lock.
type Mode string

// Modes.
const (
	// ModeTry makes one attempt; a refusal counts as contended.
	ModeTry Mode = "try"
	// ModeWait blocks in Lock until acquired or WaitTimeout.
	ModeWait Mode = "wait"
)

// ParseMode parses "try" or "wait".
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeTry, ModeWait:
		return m, nil
	}
	return "", errors.New("must be try or wait")
}

// Distribution says how operations pick a resource.
type Distribution struct {
	// Zipf is false for uniform. When true, resource i is chosen with a
	// probability proportional to 1/(i+1)^S, so resource 0 is the hottest.
	Zipf bool
	// S is the Zipf exponent, > 1.
	S float64
}

// ParseDistribution parses "uniform" or "zipf:S" with S > 1.
func ParseDistribution(s string) (Distribution, error) {
	if s == "uniform" {
		return Distribution{}, nil
	}
	rest, ok := strings.CutPrefix(s, "zipf:")
	if !ok {
		return Distribution{}, errors.New("must be uniform or zipf:S with S > 1")
	}
	v, err := strconv.ParseFloat(rest, 64)
	if err != nil {
		return Distribution{}, fmt.Errorf("zipf exponent %q is not a number", rest)
	}
	d := Distribution{Zipf: true, S: v}
	return d, d.validate()
}

func (d Distribution) validate() error {
	if d.Zipf && !(d.S > 1 && d.S <= 1e6) {
		return errors.New("zipf exponent S must be > 1 (and at most 1e6)")
	}
	return nil
}

// String is the inverse of ParseDistribution.
func (d Distribution) String() string {
	if !d.Zipf {
		return "uniform"
	}
	return "zipf:" + strconv.FormatFloat(d.S, 'g', -1, 64)
}

// HoldKind is the shape of the hold-time distribution.
type HoldKind uint8

// Hold kinds.
const (
	// HoldFixed holds for exactly D (0: release at once).
	HoldFixed HoldKind = iota
	// HoldExp holds for an exponentially distributed time of mean D.
	HoldExp
	// HoldUniform holds for a time uniformly distributed in [Min, Max].
	HoldUniform
)

// Hold is the time a lock is held before release.
type Hold struct {
	Kind HoldKind
	// D is the fixed time (HoldFixed) or the mean (HoldExp).
	D time.Duration
	// Min and Max bound HoldUniform.
	Min, Max time.Duration
}

// ParseHold parses "0", a duration ("1ms"), "exp:MEAN" or
// "uniform:MIN-MAX".
func ParseHold(s string) (Hold, error) {
	var h Hold
	switch {
	case strings.HasPrefix(s, "exp:"):
		d, err := parsePositive(s[len("exp:"):])
		if err != nil {
			return Hold{}, fmt.Errorf("exp mean: %v", err)
		}
		h = Hold{Kind: HoldExp, D: d}
	case strings.HasPrefix(s, "uniform:"):
		lo, hi, ok := strings.Cut(s[len("uniform:"):], "-")
		if !ok {
			return Hold{}, errors.New("want uniform:MIN-MAX, e.g. uniform:1ms-5ms")
		}
		min, err1 := time.ParseDuration(lo)
		max, err2 := time.ParseDuration(hi)
		if err1 != nil || err2 != nil {
			return Hold{}, errors.New("want uniform:MIN-MAX with two durations, e.g. uniform:1ms-5ms")
		}
		h = Hold{Kind: HoldUniform, Min: min, Max: max}
	default:
		d, err := time.ParseDuration(s)
		if err != nil {
			return Hold{}, errors.New("want 0, a duration (1ms), exp:MEAN or uniform:MIN-MAX")
		}
		h = Hold{Kind: HoldFixed, D: d}
	}
	return h, h.validate()
}

func parsePositive(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s must be > 0", d)
	}
	return d, nil
}

func (h Hold) validate() error {
	switch h.Kind {
	case HoldFixed:
		if h.D < 0 {
			return errors.New("must be >= 0")
		}
		if h.D > MaxTime {
			return fmt.Errorf("must be at most %s", MaxTime)
		}
	case HoldExp:
		if h.D <= 0 {
			return errors.New("exp mean must be > 0")
		}
		if h.D > MaxTime {
			return fmt.Errorf("exp mean must be at most %s", MaxTime)
		}
	case HoldUniform:
		if h.Min < 0 || h.Max < h.Min {
			return errors.New("uniform bounds need 0 <= MIN <= MAX")
		}
		if h.Max > MaxTime {
			return fmt.Errorf("uniform bounds must be at most %s", MaxTime)
		}
	default:
		return errors.New("unknown hold kind")
	}
	return nil
}

// String is the inverse of ParseHold.
func (h Hold) String() string {
	switch h.Kind {
	case HoldExp:
		return "exp:" + h.D.String()
	case HoldUniform:
		return "uniform:" + h.Min.String() + "-" + h.Max.String()
	}
	if h.D == 0 {
		return "0"
	}
	return h.D.String()
}

// Zero reports whether locks are released at once.
func (h Hold) Zero() bool { return h.Kind == HoldFixed && h.D == 0 }

// ValidateLabel accepts labels made of letters, digits, '.', '_' and '-',
// so that a label is always a safe directory name.
func ValidateLabel(s string) error {
	if s == "" || len(s) > 128 {
		return errors.New("must be 1..128 characters")
	}
	if s[0] == '.' || s[0] == '-' {
		return errors.New("must not start with '.' or '-'")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return errors.New("may hold only letters, digits, '.', '_' and '-'")
		}
	}
	return nil
}

// DeriveLabel names a run after what sets it apart, e.g.
// "redlock-w64-r1000-zipf1.1-wait-hold1ms".
func DeriveLabel(c Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s-w%d-r%d%s", c.Engine, c.Workers, c.Resources, lockLabel(c.Lock))
	if c.Clients > 1 {
		fmt.Fprintf(&b, "-c%d", c.Clients)
	}
	if c.Distribution.Zipf {
		b.WriteString("-zipf" + strconv.FormatFloat(c.Distribution.S, 'g', -1, 64))
	}
	b.WriteString("-" + string(c.Mode))
	if !c.Hold.Zero() {
		b.WriteString("-hold" + strings.NewReplacer(":", "", "µ", "u").Replace(c.Hold.String()))
	}
	if c.Rate > 0 {
		b.WriteString("-rate" + strconv.FormatFloat(c.Rate, 'g', -1, 64))
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{c.Extend, "-extend"}, {c.Fencing, "-fencing"}, {c.DisableGate, "-nogate"}, {c.DisableNotify, "-nonotify"}, {len(c.Faults) > 0, "-faults"}} {
		if f.on {
			b.WriteString(f.name)
		}
	}
	return labelSafe(b.String())
}

// lockLabel is the lock in a derived label: "" for the mutex, so that the
// labels of runs before --lock stay as they were.
func lockLabel(l engines.Lock) string {
	if l.Kind == engines.LockMutex {
		return ""
	}
	return "-" + strings.ReplaceAll(l.String(), ":", "")
}

// labelSafe turns what the label alphabet lacks into '_': a "+" in an
// exponent, the "@" of redlock@1.
func labelSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// RunConfig returns every setting as it appears in summary.json's config.
func (c Config) RunConfig() results.RunConfig {
	startAt := ""
	if !c.StartAt.IsZero() {
		startAt = c.StartAt.UTC().Format(time.RFC3339Nano)
	}
	sni, tls := "", c.Conn.TLS
	if tls != nil {
		sni = tls.ServerName
	}
	clusters, shards := engines.FormatClusters(c.Clusters), c.ClusterShards
	if c.sharedLocal && c.sharedShards > 0 {
		// Local clusters a comparison started: recorded as the flags
		// that start them.
		clusters, shards = "", c.sharedShards
	}
	return results.RunConfig{
		Engine: c.Engine.String(), Masters: strings.Join(c.Masters, ","), LocalMasters: c.LocalMasters,
		Clusters: clusters, ClusterShards: shards,
		Workers: c.Workers, Clients: c.Clients, Resources: c.Resources,
		Distribution: c.Distribution.String(), Lock: c.Lock.String(), Mode: string(c.Mode),
		WaitTimeout: c.WaitTimeout.String(), Hold: c.Hold.String(), TTL: c.TTL.String(),
		NodeTimeout: nodeTimeoutFlag(c.NodeTimeout),
		Duration:    c.Duration.String(), Ops: c.Ops, Warmup: c.Warmup.String(), Rate: c.Rate,
		Check: c.Check, Label: c.Label, Seed: c.Seed, KeyPrefix: c.KeyPrefix,
		Quarantine: c.Quarantine.String(), Extend: c.Extend, Fencing: c.Fencing,
		Gate: !c.DisableGate, Notify: !c.DisableNotify, Fault: c.Faults.String(),
		StartAt: startAt, NoWaitQuarantine: c.NoWaitQuarantine,
		User: c.Conn.Username, TLS: tls != nil,
		SNI: sni, Insecure: tls != nil && tls.InsecureSkipVerify,
		Sentinel: formatSentinels(c.Sentinels),
	}
}

// nodeTimeoutFlag is --node-timeout as the config records it: "" for the
// engine's default.
func nodeTimeoutFlag(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// Flags is the run's config as summary.json holds it: RunConfig.
func (c Config) Flags() results.RunConfig { return c.RunConfig() }
