package chaos

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-bench/redlock/bench/check"
	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/fault"
	"github.com/redlock-bench/redlock/bench/masters"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/results"
)

// The fault classes of the chaos soak.
const (
	// InModel faults are those Redlock claims to survive: a minority
	// of masters killed and restarted without persistence (the quarantine
	// covers the amnesia), stopped, slowed, cut off or dropping their
	// connections, and clients frozen past their leases.
	InModel = "in-model"
	// OutOfModel faults break Redlock's assumptions: the keys deleted
	// on a majority, a master's clock jumping forward. Redlock alone cannot
	// prevent the overlap; fencing must reject every stale write.
	OutOfModel = "out-of-model"
)

// Config configures a chaos soak. Zero values take the defaults named on
// each field.
type Config struct {
	// Spec is how the soak's clients take their locks. Engine is
	// redlock (default) or nolock, the control that grants every request
	// and must make the oracle fire. Lock is what each worker takes: a
	// mutex (default), a permit of the resource's semaphore, one lease on
	// K distinct resources drawn uniformly, or the resource's read/write
	// lock, for reading with probability F; every shape is judged by its
	// rule (see check), a permit's writes go to a store per permit slot,
	// where its tokens increase, and a reader writes nothing. TTL
	// defaults to 1s. Quarantine defaults to always, the engine's own
	// default, whether the soak starts its masters or is given them: the
	// soak tests the engine as a library user gets it (run's default of
	// observed on the masters it starts spares its measured window the
	// quarantine of a TTL; the soak's first TTL is load like the rest).
	// Conn reaches Masters, as in a run (local masters are plain); the
	// engine dials the masters through local proxies, so a TLS config
	// without ServerName verifies the masters' host, which must then be
	// one for all. Observer is set as every client's engine
	// Config.Observer (--metrics-addr). The soak sets the rest: every
	// engine feature on (auto-extension, fencing), its own key prefix.
	engines.Spec
	// Duration is how long the load and the faults run. Default 60s.
	Duration time.Duration
	// Seed drives the fault schedule and every worker's choices, so that a
	// run can be replayed. Zero picks one at random (reported).
	Seed uint64
	// Clients is the number of lock clients, each its own engine.Locker
	// with its own connections (and proxies). Default 3.
	Clients int
	// Workers is the number of goroutines per client. Default 4.
	Workers int
	// Resources is the number of hot resources all workers contend for.
	// Default DefaultResources.
	Resources int
	// Class is InModel (default) or OutOfModel.
	Class string
	// Masters are masters to use instead of starting LocalMasters; on them
	// only the faults that need no process control run (slow, cut, drop,
	// client pauses, and the out-of-model ones).
	Masters []string
	// LocalMasters is how many masters to start when Masters is empty:
	// the votes. Default 5, or 3 with ClusterShards.
	LocalMasters int
	// ClusterShards, when positive, makes each local vote a Redis Cluster
	// of that many shards, each a primary with one replica, and adds the
	// faults inside a cluster to the schedule: a shard's primary killed
	// or paused, a shard failed over to its replica, a slot of a hot
	// resource migrated under load. In model only.
	ClusterShards int
	// SentinelVotes, when positive, makes that many of the LocalMasters
	// votes (the last ones) masters Redis Sentinel manages, each a master
	// with one replica under 3 sentinels, which the clients find through
	// the sentinels, and adds forced failovers of them to the schedule
	// (see nemSentinelFailover); restarts and pauses stay on the plain
	// masters. In model, with the redlock engine, on local votes only.
	SentinelVotes int
	// Jump is how much a clock jump shortens every key's TTL on the master.
	// Default TTL.
	Jump time.Duration
	// Log receives progress lines. Default: none.
	Log io.Writer
}

// Defaults of Config.
const (
	DefaultDuration = 60 * time.Second
	DefaultClients  = 3
	DefaultWorkers  = 4
	DefaultTTL      = time.Second
)

// fill sets the defaults of zero fields, and what the soak sets itself.
func (c *Config) fill() {
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Resources == 0 {
		c.Resources = DefaultResources(c.Lock)
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Class == "" {
		c.Class = InModel
	}
	if c.Engine.Base == 0 {
		c.Engine = engines.Engine{Base: engines.Redlock}
	}
	if c.LocalMasters == 0 && len(c.Masters) == 0 {
		c.LocalMasters = 5
		if c.ClusterShards > 0 {
			c.LocalMasters = 3
		}
	}
	if c.Quarantine == engines.QuarantineDefault {
		c.Quarantine = engines.QuarantineAlways
	}
	if c.Jump == 0 {
		c.Jump = c.TTL
	}
	c.Extend, c.Fencing, c.KeyPrefix = true, true, keyPrefix
}

// DefaultResources is the soak's default number of resources for lock: 3;
// 1 for a semaphore, whose permits the workers then share; 2K (at least
// 3) for a lease on K resources, so that leases share some of theirs.
func DefaultResources(l engines.Lock) int {
	if l.Holders() > 0 {
		return 1
	}
	return max(3, 2*l.Size())
}

// Validate checks the configuration as given (Run fills the defaults of
// zero fields first); errors are *engines.ConfigError naming the flag.
func (c *Config) Validate() error {
	switch {
	case c.Duration <= 0:
		return cfgErr("duration", c.Duration, "must be positive")
	case c.Duration > fault.MaxDuration:
		return cfgErr("duration", c.Duration, "must be in 1ns..%s", fault.MaxDuration)
	case c.Clients < 1 || c.Clients > 64:
		return cfgErr("clients", c.Clients, "must be in 1..64")
	case c.Workers < 1 || c.Workers > 256:
		return cfgErr("workers", c.Workers, "must be in 1..256")
	case c.Resources < 1 || c.Resources > 1000:
		return cfgErr("resources", c.Resources, "must be in 1..1000")
	case c.TTL < 50*time.Millisecond || c.TTL > time.Minute:
		return cfgErr("ttl", c.TTL, "must be in 50ms..1m")
	case c.Class != InModel && c.Class != OutOfModel:
		return cfgErr("class", c.Class, "must be %s or %s", InModel, OutOfModel)
	case c.Engine != engines.Engine{Base: engines.Redlock} && c.Engine != engines.Engine{Base: engines.Nolock}:
		return cfgErr("engine", c.Engine, "must be redlock or nolock")
	case len(c.Masters) == 0 && (c.LocalMasters < 1 || c.LocalMasters > engines.MaxMasters):
		return cfgErr("local-masters", c.LocalMasters, "must be in 1..%d", engines.MaxMasters)
	case c.Jump <= 0:
		return cfgErr("jump", c.Jump, "must be positive")
	case c.Jump > fault.MaxDuration:
		return cfgErr("jump", c.Jump, "must be in 1ns..%s", fault.MaxDuration)
	}
	if len(c.Masters) > 0 {
		if _, err := engines.ParseMasters(strings.Join(c.Masters, ",")); err != nil {
			return cfgErr("masters", strings.Join(c.Masters, ","), "%v", err)
		}
		if len(c.Masters) > engines.MaxMasters {
			return cfgErr("masters", len(c.Masters), "must name at most %d masters", engines.MaxMasters)
		}
	}
	if err := c.validateClusters(); err != nil {
		return err
	}
	if err := c.validateSentinels(); err != nil {
		return err
	}
	if err := c.validateLock(); err != nil {
		return err
	}
	switch {
	case len(c.Masters) == 0 && c.Conn.TLS != nil:
		return cfgErr("tls", true, "applies to --masters only: local masters are plain TCP")
	case len(c.Masters) == 0 && (c.Conn.Username != "" || c.Conn.Password != ""):
		return cfgErr("pass", "(hidden)", "applies to --masters only: local masters want no password")
	case c.Conn.TLS != nil && c.Conn.TLS.ServerName == "" && !c.Conn.TLS.InsecureSkipVerify:
		if _, err := c.serverName(); err != nil {
			return err
		}
	}
	if len(c.Masters) > 0 {
		return c.Spec.Validate(engines.Votes{Masters: c.Masters}, "masters")
	}
	return c.Spec.Validate(engines.StandIns(c.LocalMasters, c.ClusterShards > 0), "local-masters")
}

// validateLock checks --lock against the soak.
func (c *Config) validateLock() error {
	l := c.Lock
	if err := l.Check(); err != nil {
		return cfgErr("lock", l, "%v", err)
	}
	if err := l.CheckHandles(c.Engine, c.Resources, c.Clients); err != nil {
		return err
	}
	if l.Holders() > 0 && c.Class == OutOfModel {
		// The out-of-model faults act on the lock keys by name; a
		// semaphore's slot keys are the engine's own, in its internal
		// namespace.
		return cfgErr("lock", l, "a semaphore is not available with --class %s: its faults act on the lock keys by name, and a semaphore's slots are the engine's internal keys", OutOfModel)
	}
	return nil
}

// cfgErr is the *engines.ConfigError of flag's value.
func cfgErr(flag string, value any, format string, a ...any) error {
	return &engines.ConfigError{Flag: flag, Value: fmt.Sprint(value), Reason: fmt.Sprintf(format, a...)}
}

// serverName is the one host of the masters, which TLS verifies when no
// ServerName is set: the engine dials the masters' proxies on 127.0.0.1.
func (c *Config) serverName() (string, error) {
	var name string
	for _, m := range c.Masters {
		host, _, _ := net.SplitHostPort(m)
		if name != "" && host != name {
			return "", cfgErr("sni", "", "needed with --tls on masters of several hosts (%s, %s): the engine reaches them through local proxies", name, host)
		}
		name = host
	}
	return name, nil
}

// conn is how the soak's probes and faults reach the masters.
func (ch *chaos) conn() redisproc.Conn {
	return redisproc.Conn{Username: ch.cfg.Conn.Username, Password: ch.cfg.Conn.Password, TLS: ch.cfg.Conn.TLS}
}

// Event is one line of the soak's history: an acquire, a write, a
// Done, a release, or a fault applied or lifted.
type Event struct {
	// AtMs is milliseconds since the soak started.
	AtMs     float64 `json:"at_ms"`
	Kind     string  `json:"kind"`
	Who      string  `json:"who,omitempty"`
	Resource string  `json:"resource,omitempty"`
	Token    int64   `json:"token,omitempty"`
	// ValidMs is, on an acquire, the validity left; on a release, the
	// validity left at the release (negative: it had run out).
	ValidMs float64 `json:"valid_ms,omitempty"`
	Detail  string  `json:"detail,omitempty"`
}

// Result is what a soak found.
type Result struct {
	Seed      uint64   `json:"seed"`
	Class     string   `json:"class"`
	Engine    string   `json:"engine"`
	Masters   []string `json:"masters"`
	Clients   int      `json:"clients"`
	Workers   int      `json:"workers"`
	Resources int      `json:"resources"`
	// Lock is what each worker took (--lock); absent from soaks before
	// it was recorded, which took mutexes.
	Lock      string  `json:"lock,omitempty"`
	TTLMs     int64   `json:"ttl_ms"`
	DurationS float64 `json:"duration_s"`
	// LocalMasters is set when the soak started its masters; Quarantine,
	// JumpMs (out of model), User and TLS are the rest of what a replay
	// needs (the password and TLS files are given again).
	LocalMasters bool `json:"local_masters"`
	// ClusterShards is set when each vote was a local Redis Cluster of
	// that many shards (a replica each); Clusters are then the votes,
	// each its nodes' addresses, and Masters is empty.
	ClusterShards int        `json:"cluster_shards,omitempty"`
	Clusters      [][]string `json:"clusters,omitempty"`
	// SentinelVotes is set when that many of the local votes were masters
	// Redis Sentinel manages (a replica and 3 sentinels each), after the
	// plain Masters; Sentinels are those votes as --sentinel reads each,
	// and SentinelNodes each one's data nodes.
	SentinelVotes int        `json:"sentinel_votes,omitempty"`
	Sentinels     []string   `json:"sentinels,omitempty"`
	SentinelNodes [][]string `json:"sentinel_nodes,omitempty"`
	// SentinelRunIDChanges is, per Sentinel vote, the fewest changes of
	// its master's run_id any client saw: each failover it followed is
	// one, and the quarantine (unless off) kept the promoted master out
	// of that client's vote for MaxTTL after each.
	SentinelRunIDChanges []int64 `json:"sentinel_run_id_changes,omitempty"`
	// SentinelLostWrites counts the outcomes of the sentinel-lost-write
	// faults (see LostWrites).
	SentinelLostWrites *LostWrites `json:"sentinel_lost_writes,omitempty"`
	Quarantine         string      `json:"quarantine"`
	JumpMs             int64       `json:"jump_ms,omitempty"`
	User               string      `json:"user,omitempty"`
	TLS                bool        `json:"tls,omitempty"`
	// Interrupted is set when the soak was cut short (Ctrl-C).
	Interrupted bool `json:"interrupted,omitempty"`
	// Schedule is the faults planned from the seed, in order.
	Schedule []string `json:"schedule"`
	// Faults counts the faults injected, by kind; FaultErrors those that
	// failed to apply or lift.
	Faults      map[string]int `json:"faults"`
	FaultErrors []string       `json:"fault_errors,omitempty"`
	// FaultsSkipped counts, by kind, the faults not injected because
	// another vote was still affected past its planned time: injecting
	// them would have taken the soak out of model.
	FaultsSkipped map[string]int `json:"faults_skipped,omitempty"`
	// StaleImportsCleared counts the stale IMPORTING marks of slots that
	// heals cleared on cluster votes (see redisproc.ClearStaleImports).
	StaleImportsCleared int64 `json:"stale_imports_cleared,omitempty"`

	Attempts int64 `json:"attempts"`
	Acquired int64 `json:"locks_checked"`
	// Reads is how many of the locks checked were read locks (--lock
	// rw:F); the rest were writers'.
	Reads      int64 `json:"reads,omitempty"`
	Failed     int64 `json:"acquire_failed"`
	Lost       int64 `json:"leases_lost"`
	Handoffs   int64 `json:"handoffs"`
	Extensions int64 `json:"extensions"`

	Violations        int64              `json:"violations"`
	ViolationExamples []check.Violation  `json:"violation_examples,omitempty"`
	TokensChecked     int64              `json:"tokens_checked"`
	StaleTokens       int64              `json:"stale_tokens"`
	StaleExamples     []check.StaleToken `json:"stale_token_examples,omitempty"`
	DoneLate          int64              `json:"done_late"`
	DoneLateExamples  []check.DoneLate   `json:"done_late_examples,omitempty"`
	Store             check.StoreCounts  `json:"store"`

	// Expected states the outcome this class must show; Passed is whether
	// it did.
	Expected string `json:"expected"`
	Passed   bool   `json:"passed"`
	Verdict  string `json:"verdict"`
	// Window is the stretch of history around the first failure (or, out
	// of model, the first overlap), also written to history.jsonl.
	Window       []Event `json:"-"`
	WindowFromMs float64 `json:"window_from_ms,omitempty"`
	WindowToMs   float64 `json:"window_to_ms,omitempty"`
	WindowReason string  `json:"window_reason,omitempty"`
}

// expected is the outcome a class must show.
func expected(class string, l engines.Lock) string {
	if class == OutOfModel {
		return "Redlock alone cannot prevent overlapping holds when keys vanish from a majority or a master's clock jumps; " +
			"fencing must reject every stale write: stale writes accepted = 0"
	}
	rule := results.SafetyRule(l.String()) + " within reported validity"
	if l.Holders() > 0 {
		rule += "; tokens increase per permit slot"
	}
	return "0 violations (" + rule + "), 0 stale tokens, 0 stale writes accepted"
}

// chaosLease is what a worker needs of a lease: *engine.Lease has it
// all; the control's leases tell nothing (plainLease).
type chaosLease interface {
	ValidUntil() time.Time
	Release(ctx context.Context) error
	Token() int64
	Done() <-chan struct{}
	Err() error
	Extensions() int
	Wait() engine.WaitInfo
	Permit() int
}

// plainLease is a lease that tells nothing but its validity: the
// control's. No token, no Done, no slot.
type plainLease struct{ engines.Lease }

func (plainLease) Token() int64          { return 0 }
func (plainLease) Done() <-chan struct{} { return nil }
func (plainLease) Err() error            { return nil }
func (plainLease) Extensions() int       { return 0 }
func (plainLease) Wait() engine.WaitInfo { return engine.WaitInfo{} }
func (plainLease) Permit() int           { return -1 }

// client is one lock client, and the proxies its connections go through,
// so that it can be frozen alone.
type client struct {
	id      int
	c       *engines.Client
	proxies *fault.Proxies
	// frozenUntil, nanoseconds since the start, is set during a client
	// pause: the client's goroutines do nothing until then.
	frozenUntil atomic.Int64
}

// lock takes the soak's lock of the resources set, by their keys (one,
// or K for a lease on several; a read/write lock for reading if read),
// waiting as ctx allows. live reports a lease whose validity moves while
// it is held (auto-extended) and which tells at once when it is lost.
func (c *client) lock(ctx context.Context, keys []string, set []int, read bool) (le chaosLease, live bool, err error) {
	ns := make([]string, len(set))
	for i, r := range set {
		ns[i] = keys[r]
	}
	l, err := c.c.Take(ctx, engines.Op{Names: ns, Read: read, Wait: true})
	if err != nil {
		return nil, false, err
	}
	if cl, ok := l.(chaosLease); ok {
		return cl, true, nil
	}
	return plainLease{l}, false, nil
}

// chaos is one soak in progress.
type chaos struct {
	cfg     Config
	start   time.Time
	names   []string
	keys    []string
	masters []string
	cluster *redisproc.Cluster
	// clusters are the votes with ClusterShards, each a local Redis
	// Cluster; masters is then empty. voteProxies are, per vote, the
	// indexes of its nodes' proxies in each client's Proxies (a master's
	// own index without clusters), and proxied the addresses proxied.
	clusters []*redisproc.RedisCluster
	// sentinels are the Sentinel votes (Config.SentinelVotes), after the
	// plain masters.
	sentinels []*redisproc.SentinelGroup
	// sentinelHaz is the soak's own clients of the Sentinel votes, which
	// hold across each nemSentinelLostWrite; nil without Sentinel votes.
	sentinelHaz *sentinelHazard
	voteProxies [][]int
	proxied     []string
	// tls is the engine's TLS set-up: Config.Conn.TLS, verifying the
	// masters' host through the proxies.
	tls     *tls.Config
	clients []*client
	// hazard are the out-of-model soak's own two clients, which hold
	// across each delete on a majority (see deleteUnderHold); nil in
	// model.
	hazard [2]*client
	// hazardMu makes the deletes' hazards one at a time: they share the
	// hazard's clients.
	hazardMu sync.Mutex
	or       *check.Oracle
	stores   []*check.Store

	attempts, acquired, reads, failed, lost, handoffs, extensions atomic.Int64
	// staleImports counts the stale IMPORTING marks a heal cleared.
	staleImports atomic.Int64

	histMu  sync.Mutex
	history []Event

	faultMu     sync.Mutex
	faults      map[string]int
	faultErrors []string
	// skipped counts the faults not applied because other votes were
	// still affected past their planned time (a slow restart or heal),
	// which would have taken the soak out of model.
	skipped map[string]int
	// affected marks the votes a fault acts on, from its start until its
	// vote is whole again.
	affected []bool
	// cuts counts the reasons each client's link to each master is cut
	// (a master cut, a client pause), so that one lifting does not heal
	// the other.
	cuts [][]int
}

// maxHistory bounds the events kept in memory.
const maxHistory = 2_000_000

func (ch *chaos) since(t time.Time) float64 { return float64(t.Sub(ch.start).Microseconds()) / 1e3 }

func (ch *chaos) event(e Event) {
	ch.histMu.Lock()
	if len(ch.history) < maxHistory {
		ch.history = append(ch.history, e)
	}
	ch.histMu.Unlock()
}

func (ch *chaos) logf(format string, a ...any) {
	if ch.cfg.Log != nil {
		fmt.Fprintf(ch.cfg.Log, format+"\n", a...)
	}
}

// Run runs a seeded nemesis soak: several clients lock a few hot
// resources with every engine feature on, while a schedule drawn from the
// seed injects faults, and the oracle (package check) judges every hold,
// token and write. It returns the result (partial when ctx was cancelled)
// and an error only when the soak could not run. Every master it started
// is stopped before it returns.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.fill()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	ch := &chaos{cfg: cfg, faults: map[string]int{}, skipped: map[string]int{}}
	for i := range cfg.Resources {
		ch.names = append(ch.names, "r"+strconv.Itoa(i))
		ch.keys = append(ch.keys, keyPrefix+"r"+strconv.Itoa(i))
	}
	ch.masters = cfg.Masters
	if ch.tls = cfg.Conn.TLS; ch.tls != nil && ch.tls.ServerName == "" {
		name, _ := cfg.serverName() // checked by Validate
		ch.tls = ch.tls.Clone()
		ch.tls.ServerName = name
	}
	switch {
	case cfg.ClusterShards > 0 && cfg.Engine.NeedsRedis():
		cs, err := startClusters(ctx, cfg.LocalMasters, cfg.ClusterShards)
		if err != nil {
			return nil, err
		}
		ch.clusters = cs
		// Stopped on every return path; the signal handler only cancels
		// ctx, which ends the soak and lands here.
		defer masters.StopClusters(cs)
		ch.logf("started %d local Redis Clusters of %d shards with a replica each: %s", len(cs), cfg.ClusterShards, engines.FormatClusters(ch.clusterNodes()))
	case len(ch.masters) == 0 && cfg.Engine.NeedsRedis():
		c, err := masters.Start(ctx, cfg.LocalMasters-cfg.SentinelVotes)
		if err != nil {
			return nil, err
		}
		ch.cluster = c
		defer c.Stop()
		ch.masters = c.Addrs()
		ch.logf("started %d local redis-server: %s", len(ch.masters), strings.Join(ch.masters, ","))
		if cfg.SentinelVotes > 0 {
			gs, err := startSentinels(ctx, cfg.SentinelVotes)
			if err != nil {
				return nil, err
			}
			ch.sentinels = gs
			defer stopSentinels(gs)
			for _, v := range ch.sentinelVotes() {
				ch.logf("started a Sentinel vote, a master with a replica under 3 sentinels: %s", formatSentinel(v))
			}
		}
	}
	if cfg.Engine.NeedsRedis() {
		if _, err := masters.Probe(ctx, ch.conn(), ch.allAddrs()); err != nil {
			return nil, err
		}
	}
	ch.setVotes()
	if err := ch.startClients(ctx); err != nil {
		ch.closeClients()
		return nil, err
	}
	sched := ch.plan()
	res := &Result{Seed: cfg.Seed, Class: cfg.Class, Engine: cfg.Engine.String(), Masters: ch.masters,
		ClusterShards: cfg.ClusterShards, Clusters: ch.clusterNodes(), SentinelVotes: len(ch.sentinels),
		Clients: cfg.Clients, Workers: cfg.Workers, Resources: cfg.Resources, Lock: cfg.Lock.String(), TTLMs: cfg.TTL.Milliseconds(),
		LocalMasters: len(cfg.Masters) == 0, Quarantine: cfg.Quarantine.String(), User: cfg.Conn.Username, TLS: cfg.Conn.TLS != nil,
		Expected: expected(cfg.Class, cfg.Lock)}
	if cfg.Class == OutOfModel {
		res.JumpMs = cfg.Jump.Milliseconds()
	}
	for _, s := range sched {
		res.Schedule = append(res.Schedule, s.String())
	}
	if ch.sentinels != nil {
		for _, v := range ch.sentinelVotes() {
			res.Sentinels = append(res.Sentinels, formatSentinel(v))
		}
		res.SentinelNodes = ch.sentinelNodes()
	}

	ch.start = time.Now()
	ch.or = check.New(ch.start, ch.names)
	if p := cfg.Lock.Holders(); p > 0 {
		ch.or = check.NewSemaphores(ch.start, ch.names, p)
	}
	if ch.sentinelHaz != nil {
		ch.sentinelHaz.or = check.New(ch.start, []string{sentinelHazardName})
	}
	for range len(ch.names) * ch.storesPer() {
		ch.stores = append(ch.stores, check.NewStore(ch.start, false))
	}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var nem sync.WaitGroup
	for _, s := range sched {
		nem.Add(1)
		go func() {
			defer nem.Done()
			ch.inject(runCtx, ctx, s)
		}()
	}
	var wg sync.WaitGroup
	for _, c := range ch.clients {
		for w := range cfg.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ch.work(runCtx, c, w)
			}()
		}
	}
	ch.progress(runCtx)
	wg.Wait()
	// The load's length: the heals that follow check nothing, and a
	// replay's --duration is the load's.
	res.DurationS = time.Since(ch.start).Seconds()
	nem.Wait() // every fault lifted
	res.Interrupted = ctx.Err() != nil
	res.SentinelRunIDChanges = ch.sentinelRunIDChanges()
	ch.closeClients()

	ch.finish(res)
	return res, nil
}

// progress logs a line every 10s until ctx ends.
func (ch *chaos) progress(ctx context.Context) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			ch.faultMu.Lock()
			n := 0
			for _, v := range ch.faults {
				n += v
			}
			ch.faultMu.Unlock()
			_, stale, _ := ch.or.StaleTokens()
			ch.logf("chaos %4.0fs: %d locks checked, %d faults, %d violations, %d stale tokens, %d stale writes accepted",
				time.Since(ch.start).Seconds(), ch.acquired.Load(), n, ch.or.Count(), stale, ch.staleAccepted())
		}
	}
}

func (ch *chaos) staleAccepted() int64 {
	var n int64
	for _, s := range ch.stores {
		n += s.Counts().StaleAccepted
	}
	return n
}

// keyPrefix keeps the soak's keys apart, so that the out-of-model
// faults touch nothing else (the engine's fencing counters among them).
const keyPrefix = "chaos:"

func (ch *chaos) startClients(ctx context.Context) error {
	ch.cuts = make([][]int, ch.cfg.Clients)
	for i := range ch.cfg.Clients {
		c := &client{id: i}
		ch.clients = append(ch.clients, c)
		ch.cuts[i] = make([]int, ch.votes())
		var v engines.Votes
		spec := ch.spec()
		if ch.cfg.Engine.NeedsRedis() {
			px, err := fault.NewProxies(ctx, ch.proxied)
			if err != nil {
				return fmt.Errorf("chaos: client %d: start proxies: %w", i, err)
			}
			c.proxies = px
			v = engines.Votes{Masters: px.Addrs()}
			if ch.clusters != nil {
				v, spec.Conn.Dial = ch.clusterVotes(px)
			}
			if ch.sentinels != nil {
				v, spec.Conn.Dial = ch.sentinelClientVotes(px)
			}
		}
		if err := ch.connect(ctx, c, spec, v); err != nil {
			return fmt.Errorf("chaos: client %d: %w", i, err)
		}
	}
	if ch.cfg.Class == OutOfModel && ch.cfg.Engine.NeedsRedis() {
		// The hazard's clients dial the masters themselves: no fault of
		// this class acts on a client's links.
		for i := range ch.hazard {
			c := &client{id: ch.cfg.Clients + i}
			ch.hazard[i] = c
			if err := ch.connect(ctx, c, ch.spec(), engines.Votes{Masters: ch.masters}); err != nil {
				return fmt.Errorf("chaos: %s: %w", hazardWho[i], err)
			}
		}
	}
	if ch.sentinels != nil {
		if err := ch.startSentinelHazard(ctx); err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
	}
	return nil
}

// spec is the soak's lock clients' spec: the configuration's, with TLS
// verifying the masters' host through the proxies.
func (ch *chaos) spec() engines.Spec {
	spec := ch.cfg.Spec
	spec.Conn.TLS = ch.tls
	return spec
}

// connect gives c its lock client of spec on the votes v.
func (ch *chaos) connect(ctx context.Context, c *client, spec engines.Spec, v engines.Votes) error {
	cl, err := engines.Open(ctx, spec, v)
	if err != nil {
		return err
	}
	c.c = cl
	return nil
}

// storesPer is how many fenced stores each resource has: one per permit
// slot of a semaphore, whose tokens increase per slot; else one.
func (ch *chaos) storesPer() int {
	return max(ch.cfg.Lock.Holders(), 1)
}

// store is the fenced store that resource r's holder of permit slot
// permit (-1: none, or not told) writes to.
func (ch *chaos) store(r, permit int) *check.Store {
	return ch.stores[r*ch.storesPer()+max(permit, 0)]
}

// pickSet draws the resources of a worker's next lock into set: one, or K
// distinct ones for a lease on several, uniformly.
func (ch *chaos) pickSet(rng *rand.Rand, set []int) []int {
	set = set[:0]
	for len(set) < ch.cfg.Lock.Size() {
		if r := rng.IntN(len(ch.names)); !slices.Contains(set, r) {
			set = append(set, r)
		}
	}
	return set
}

// closeClients closes the engines, then their proxies (see fault.Proxies).
func (ch *chaos) closeClients() {
	for _, c := range append(ch.clients, ch.hazard[:]...) {
		if c != nil && c.c != nil {
			c.c.Close()
			c.c = nil
		}
	}
	if ch.sentinelHaz != nil {
		ch.sentinelHaz.close()
	}
	for _, c := range ch.clients {
		if c.proxies != nil {
			c.proxies.Close()
			c.proxies = nil
		}
	}
}

// work is one worker: lock a random hot resource (a permit of its
// semaphore, a lease on several, its read/write lock for reading or
// writing), write to the fenced store (a writer; a reader writes
// nothing), hold for a random time (now and then past the TTL, kept by
// auto-extension), write again, let go.
func (ch *chaos) work(ctx context.Context, c *client, w int) {
	ttl := ch.cfg.TTL
	who := "c" + strconv.Itoa(c.id) + ".w" + strconv.Itoa(w)
	id := c.id*ch.cfg.Workers + w
	rng := rand.New(rand.NewPCG(ch.cfg.Seed, uint64(id)+1))
	var set []int
	for ctx.Err() == nil {
		ch.thaw(ctx, c)
		set = ch.pickSet(rng, set)
		f := ch.cfg.Lock.Reads()
		read := f > 0 && rng.Float64() < f
		ch.attempts.Add(1)
		wctx, cancel := context.WithTimeout(ctx, 2*ttl)
		t0 := time.Now()
		le, live, err := c.lock(wctx, ch.keys, set, read)
		cancel()
		t1 := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			ch.failed.Add(1)
			sleep(ctx, time.Duration(rng.Int64N(int64(ttl/20)+1)))
			continue
		}
		ch.acquired.Add(1)
		if read {
			ch.reads.Add(1)
		}
		until := le.ValidUntil()
		tok := le.Token()
		done := le.Done()
		permit := le.Permit()
		if le.Wait().Cause == engine.WakeHandoff {
			ch.handoffs.Add(1)
		}
		res := ch.resourceNames(set)
		// A reader changes nothing a fence protects: it writes nothing,
		// and opens no store (which would make the writer before it
		// stale).
		var wrs []*check.Writer
		began := ch.began(le, t0, t1)
		for _, r := range set {
			if !read {
				wrs = append(wrs, ch.store(r, permit).OpenSpan(who, tok, began, t1))
			}
			h := check.Hold{Start: t1, Until: until, Token: tok, Done: done, Permit: permit + 1, Shared: read}
			if live {
				h.Live = le
			}
			ch.or.Begin(r, id, h)
		}
		ev := Event{AtMs: ch.since(t1), Kind: "acquire", Who: who, Resource: res, Token: tok,
			ValidMs: float64(until.Sub(t1).Microseconds()) / 1e3}
		switch {
		case permit >= 0:
			ev.Detail = "permit " + strconv.Itoa(permit)
		case read:
			ev.Detail = "read"
		}
		ch.event(ev)
		for i, wr := range wrs {
			ch.write(wr, ch.names[set[i]])
		}

		doneAt := ch.watchDone(le, who, res)

		sleep(ctx, holdTime(rng, ttl))
		// A frozen client's holder resumes where it stopped, past its
		// lease, and writes: the store must refuse it.
		ch.thaw(context.Background(), c)
		for i, wr := range wrs {
			ch.write(wr, ch.names[set[i]])
		}

		t2 := time.Now()
		end := t2
		if d, ok := doneAt(); ok {
			end = d
			ch.lost.Add(1)
		}
		vu := le.ValidUntil()
		for _, r := range set {
			ch.or.End(r, id, end)
		}
		ch.extensions.Add(int64(le.Extensions()))
		ch.event(Event{AtMs: ch.since(t2), Kind: "release", Who: who, Resource: res, Token: tok,
			ValidMs: float64(vu.Sub(t2).Microseconds()) / 1e3})
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		le.Release(rctx)
		rcancel()
	}
}

// watchDone watches le's Done as it happens, so that a hold ends when its
// holder is told, not when it next looks, and logs it. The function it
// returns stops the watch and says when Done closed, if it did.
func (ch *chaos) watchDone(le chaosLease, who, res string) func() (time.Time, bool) {
	done := le.Done()
	over := make(chan struct{})
	var doneAt time.Time
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if done == nil {
			return
		}
		select {
		case <-done:
			doneAt = time.Now()
			ch.event(Event{AtMs: ch.since(doneAt), Kind: "done", Who: who, Resource: res, Token: le.Token(), Detail: errText(le.Err())})
		case <-over:
		}
	}()
	return func() (time.Time, bool) {
		close(over)
		<-watched
		return doneAt, !doneAt.IsZero()
	}
}

// began is when the attempt that acquired le began, or earlier: the
// start its validity counts from (ValidUntil is that start plus the TTL
// less the drift) while no extension has moved it, else t0, when the
// call began; at most t1, when it returned. The fenced stores order
// holders by it: out of model two acquisitions may overlap (keys
// vanished under the first while its call was still under way), and the
// call that returns last need not be the one granted last.
func (ch *chaos) began(le chaosLease, t0, t1 time.Time) time.Time {
	if le.Extensions() > 0 {
		return t0
	}
	ttl := ch.cfg.TTL
	b := le.ValidUntil().Add(-(ttl - time.Duration(float64(ttl)*engine.DefaultDriftFactor) - engine.DriftFloor))
	if le.Extensions() > 0 || b.Before(t0) {
		return t0
	}
	if b.After(t1) {
		return t1
	}
	return b
}

// resourceNames names the resources of set in the history: "r1", or
// "r0,r3,r4" for a lease on several.
func (ch *chaos) resourceNames(set []int) string {
	if len(set) == 1 {
		return ch.names[set[0]]
	}
	ns := make([]string, len(set))
	for i, r := range set {
		ns[i] = ch.names[r]
	}
	return strings.Join(ns, ",")
}

// holdTime draws a hold: mostly short, some up to half the TTL, and a few
// past it, which only auto-extension keeps.
func holdTime(rng *rand.Rand, ttl time.Duration) time.Duration {
	switch p := rng.IntN(100); {
	case p < 75:
		return time.Duration(rng.Int64N(int64(ttl / 20)))
	case p < 93:
		return ttl/10 + time.Duration(rng.Int64N(int64(ttl*2/5)))
	default:
		return ttl + time.Duration(rng.Int64N(int64(ttl)))
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (ch *chaos) write(wr *check.Writer, res string) {
	w := wr.Write()
	if w.Stale || !w.Accepted {
		detail := "rejected"
		if w.Accepted {
			detail = "accepted"
		}
		if w.Stale {
			detail = "stale, " + detail
		}
		ch.event(Event{AtMs: w.AtMs, Kind: "write", Who: w.Who, Resource: res, Token: w.Token,
			Detail: fmt.Sprintf("%s (highest seen %d)", detail, w.Highest)})
	}
}

// thaw waits while the client is frozen.
func (ch *chaos) thaw(ctx context.Context, c *client) {
	if u := c.frozenUntil.Load(); u > 0 {
		if d := time.Until(ch.start.Add(time.Duration(u))); d > 0 {
			sleep(ctx, d)
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
