package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// Config is one simulated run. Zero fields take the defaults below.
type Config struct {
	// Seed drives every choice the simulation makes: the masters' clocks
	// and identities, every network delay, every worker's operations, the
	// Lockers' random delays and the fault schedule.
	Seed uint64
	// Masters is the number of simulated masters. Default: 5.
	Masters int
	// Clients is the number of Lockers, each with its own connections, as
	// separate processes would have. Default: 4.
	Clients int
	// Workers is the number of goroutines per client. Default: 3.
	Workers int
	// Resources is the number of resource names the workers share, each
	// less used than the one before (weights 1/(i+1)^1.5), so that some
	// are busy and some rest long. Default: 4.
	Resources int
	// Semaphores is the number of semaphores the workers share, weighted
	// as the resources are, each of 2 or 3 permits (drawn from the seed).
	// The seed also draws the share of the operations that take a permit,
	// and of those that lock 2 or 3 resources at once (see drawMix).
	// Default: 2.
	Semaphores int
	// Duration is the virtual time the workers run; holds under way then
	// finish, and the clients close. Default: 10s.
	Duration time.Duration
	// TTL is the Lockers' TTL. Default: 1s.
	TTL time.Duration
	// Quarantine is the Lockers' restart policy. Default:
	// QuarantineAlways (the masters start with an hour of uptime).
	Quarantine engine.QuarantinePolicy
	// NoFencing turns the Lockers' fencing off (every other feature stays
	// on). Default: fencing on, but for c0 in a third of the seeds (see
	// drawMix).
	NoFencing bool
	// Control breaks mutual exclusion on purpose, to show that the
	// checker catches it. Default: NoControl.
	Control Control
	// Mutation, when set, is the name of an internal/mutation switch that
	// the run turns on (and back off when it ends): one engine fix undone,
	// for the checkers to find; "a+b" turns on several, for a bug that
	// two fixes each keep out. Runs that set it must not run at once
	// with others: the switches are global.
	Mutation string
	// Latency of every master's connections. Default: simredis.DefaultLatency.
	Latency simredis.Latency
	// Nemesis draws a fault schedule from the seed (DrawFaults), within
	// the model unless OutOfModel. Default: none.
	Nemesis bool
	// OutOfModel adds the faults the engine does not claim to survive to
	// the drawn schedule (see DrawFaults).
	OutOfModel bool
	// Keep, when set, keeps only these faults of the drawn schedule, by
	// their index: the schedule of a shrunk case.
	Keep []int
	// Faults, when set, is the schedule, instead of a drawn one.
	Faults []Fault
	// NoRW: the workers take no read/write lock, every other draw
	// unchanged: the workload of the seeds before the read/write lock
	// joined it, which the cases hunted then replay.
	NoRW bool
	// Clusters is the number of votes that are Redis Clusters (the last
	// Clusters of the Masters votes; see simredis.Cluster), each of Shards
	// shards, each shard with a replica unless NoReplicas. A resource's
	// vote there is its slot's shard's. Default: none.
	Clusters   int
	Shards     int
	NoReplicas bool
	// Idle lists clients ("c1") and workers ("c2/w0") that do nothing,
	// every other draw unchanged: what shrinking takes away.
	Idle []string
	// DriftQuorum adds to the drawn schedule stretches in which a quorum
	// of masters' clocks run fast at the engine's DriftFactor, the bound
	// of the model (past it with OutOfModel; see drawClockFaults).
	// TestSimulation and make sim set it; the hunted cases before it did
	// not.
	DriftQuorum bool
	// Expiry makes the fencing counters expire during the run: each
	// resource, semaphore and read/write lock rests now and then (see
	// drawRests) for longer than it takes its counters to expire, and the
	// drawn schedule steps a quorum of masters' clocks back within the
	// model (see drawClockFaults), so that tokens handed out after an
	// expiry stand on the masters' clocks alone.
	Expiry bool
	// RemoteValidity: holders ask Lease.RemoteValidity of the leases they
	// hold, now and then, every kind's (see CheckRemoteValidity).
	RemoteValidity bool
	// PermitMismatch: the last client's handle of semaphore s0 counts one
	// permit more than every other's, so that its attempts meet the
	// permit count check, concurrent and failed ones included (see
	// CheckPermitCount).
	PermitMismatch bool
}

// Control is a deliberate fault in the clients that must make a checker
// fail: a check that cannot fail proves nothing.
type Control int

const (
	// NoControl: the engine as it is.
	NoControl Control = iota
	// SplitPrefix gives half the clients another KeyPrefix, so that one
	// resource name is two locks on the masters, and the real engine
	// grants it twice.
	SplitPrefix
)

func (c *Config) fill() {
	if c.Masters == 0 {
		c.Masters = 5
	}
	if c.Clients == 0 {
		c.Clients = 4
	}
	if c.Workers == 0 {
		c.Workers = 3
	}
	if c.Resources == 0 {
		c.Resources = 4
	}
	if c.Semaphores == 0 {
		c.Semaphores = 2
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.TTL == 0 {
		c.TTL = time.Second
	}
	if c.Quarantine == 0 {
		c.Quarantine = engine.QuarantineAlways
	}
	if c.Latency == (simredis.Latency{}) {
		c.Latency = simredis.DefaultLatency
	}
	c.Clusters = min(c.Clusters, c.Masters)
	if c.Clusters > 0 && c.Shards == 0 {
		c.Shards = 2
	}
}

// Result is a run's history and what the checkers found in it.
type Result struct {
	Config     Config
	History    *History
	Violations []Violation
	// Virtual is the virtual time the run took, close included.
	Virtual time.Duration
	// Ops is the number of operations the workers made (Lock, TryLock,
	// Extend, Release) and checked.
	Ops int
	// Faults is the schedule the run applied.
	Faults []Fault
	// Leftovers are the masters' keys once every client closed and every
	// TTL ran out (fencing counters too: they expire MaxTTL past their
	// values on the masters' clocks), as "master: key=value", and their
	// subscriptions.
	Leftovers []string
	// Coverage says which of the engine's paths the run took.
	Coverage Coverage
	// Masters' key logs and clocks, for the checkers.
	keyLogs     [][]simredis.KeyRecord
	leaves      []simredis.Leave
	allAttempts []simredis.AllAttempt
	clocks      []simredis.Clock
	quorum      int
	bounds      Bounds
}

// Coverage says which of the engine's paths a run took, so that a
// workload that stops reaching one shows.
type Coverage struct {
	// Wakes counts Lock grants by how their last wait ended.
	Wakes map[string]int
	// Commands counts what the masters ran, scripts' calls included (see
	// simredis.Master.Commands): "EVALSHA+" are coalesced calls, "EVAL" reloads
	// after NOSCRIPT, "PUBLISH" release notifications.
	Commands map[string]int
	// CountersRaisedAfterExpiry counts, over the masters, the fencing
	// counters that expired (or were deleted by a deadline already past)
	// and were raised again later in the run: where a token stood on the
	// masters' clocks alone.
	CountersRaisedAfterExpiry int
	// RWJoins counts the read leases granted on another's entry (its
	// value): readers of one Locker share an entry (engine/rwshare.go).
	RWJoins int
}

func (c Coverage) String() string {
	var b strings.Builder
	b.WriteString("wakes:")
	for _, k := range slices.Sorted(maps.Keys(c.Wakes)) {
		fmt.Fprintf(&b, " %s=%d", k, c.Wakes[k])
	}
	b.WriteString("; commands:")
	for _, k := range []string{"EVALSHA", "EVALSHA+", "EVAL", "SET", "PUBLISH", "SUBSCRIBE", "SPUBLISH", "SSUBSCRIBE", "CLUSTER", "FAILOVER", "MIGRATE", "ASKING", "SETSLOT", "ZADD", "ZPOPMIN", "PEXPIRE", "PEXPIREAT"} {
		fmt.Fprintf(&b, " %s=%d", k, c.Commands[k])
	}
	fmt.Fprintf(&b, "; counters raised after expiry: %d; rw joins: %d", c.CountersRaisedAfterExpiry, c.RWJoins)
	return b.String()
}

// mix is a seed's workload: how its workers hold, and what they take.
type mix struct {
	// long: a quarter of the seeds hold long and extend often, the
	// pattern in which a stale Extend does harm.
	long bool
	// sem and multi are the shares of the operations that take a
	// semaphore's permit (0, 0.15 or 0.3), and that lock several
	// resources at once (0, 0.05 or 0.1); the rest lock one resource.
	sem, multi float64
	// permits is each semaphore's permit count, 2 or 3.
	permits []int
	// rw is the share of the operations that take a read/write lock (0,
	// 0.1 or 0.2), drawn after the others so that they keep their draws;
	// rwReaders of those read, the rest write.
	rw float64
	// unfenced: c0's Lockers do not fence (a third of the seeds). The
	// fence round refuses a lease that does not hold its keys on a
	// quorum, a second line behind the acquire's own guard (a semaphore's
	// quorum on one slot, the multi-resource lock's all-or-nothing
	// script): without it, the first line is judged alone.
	unfenced bool
}

// drawMix draws a seed's mix from the workload's own stream, after the
// draw of long, which it keeps as it was.
func drawMix(cfg Config) mix {
	r := rand.New(rand.NewPCG(cfg.Seed, streamWorkload))
	m := mix{long: r.IntN(4) == 0}
	// Sets cost the masters most (a LockAll waiter is woken by every
	// release of each of its resources, and tries them all again), so
	// they get a smaller share: with 0, 5 or 10% of the operations, and
	// the permits', 150 seeds took 1.2 times the CPU time of the locks
	// alone; with 0, 15 or 30%, 1.6 times.
	semShares, multiShares := []float64{0, 0.15, 0.3}, []float64{0, 0.05, 0.1}
	m.sem, m.multi = semShares[r.IntN(3)], multiShares[r.IntN(3)]
	for range cfg.Semaphores {
		m.permits = append(m.permits, 2+r.IntN(2))
	}
	m.unfenced = r.IntN(3) == 0
	m.rw = []float64{0, 0.1, 0.2}[r.IntN(3)]
	if cfg.NoRW {
		m.rw = 0
	}
	return m
}

// Random streams of a seed, one per consumer, so that one consumer's
// draws do not shift another's.
const (
	streamMasters  = 1
	streamFaults   = 2
	streamWorkload = 3
	// streamClusterFaults draws the faults inside cluster votes.
	streamClusterFaults = 4
	// streamClockFaults draws the clock faults on a quorum of masters.
	streamClockFaults = 5
	// streamRests draws when each name rests (Config.Expiry).
	streamRests   = 6
	streamLockers = 1 << 16
	streamWorkers = 1 << 20
	// streamExtras draws a worker's choices that the later workload
	// options add (Config.RemoteValidity), so that its first stream
	// keeps its draws.
	streamExtras = 1 << 24
)

// Run runs one simulation. It must be called inside a synctest bubble
// (synctest.Test), where time is virtual and every connection is in
// memory; every goroutine it starts has ended when it returns.
func Run(cfg Config) (*Result, error) {
	cfg.fill()
	if cfg.Mutation != "" {
		if !mutation.Enabled {
			return nil, fmt.Errorf("mutation %q: the engine's fault points are compiled out (build with -tags redlock_faults)", cfg.Mutation)
		}
		for _, name := range strings.Split(cfg.Mutation, "+") {
			sw := mutation.ByName(name)
			if sw == nil {
				return nil, fmt.Errorf("mutation %q: no such switch (want one of %s)", name, mutationNames())
			}
			defer sw.Set(true)()
		}
	}
	faults := cfg.Faults
	var index []int // each fault's place in the drawn schedule
	if faults == nil && cfg.Nemesis {
		faults = DrawFaults(cfg)
		if cfg.Keep != nil {
			var kept []Fault
			for _, i := range cfg.Keep {
				if i >= 0 && i < len(faults) {
					kept, index = append(kept, faults[i]), append(index, i)
				}
			}
			faults = kept
		}
	}
	if index == nil {
		for i := range faults {
			index = append(index, i)
		}
	}
	// In time order (the cluster faults come after the rest in the drawn
	// schedule), each with its index.
	order := make([]int, len(faults))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(faults[a].At, faults[b].At) })
	sorted, sortedIndex := make([]Fault, len(faults)), make([]int, len(faults))
	for i, j := range order {
		sorted[i], sortedIndex[i] = faults[j], index[j]
	}
	faults, index = sorted, sortedIndex
	start := time.Now()
	h := NewHistory()
	network := simredis.NewNetwork(cfg.Seed)
	setup := rand.New(rand.NewPCG(cfg.Seed, streamMasters))
	var masters []*simredis.Master // every node
	votes := make([]*vote, cfg.Masters)
	var addrs []string
	var clusters [][]string
	for i := range votes {
		// Within ±20ms of each other and 100 ppm of virtual time:
		// NTP-kept clocks. A cluster's nodes share theirs.
		o := simredis.MasterOptions{
			Uptime:  time.Hour,
			Offset:  time.Duration(setup.Int64N(int64(40*time.Millisecond))) - 20*time.Millisecond,
			Rate:    1 + (setup.Float64()-0.5)*2e-4,
			Latency: cfg.Latency,
		}
		if i >= cfg.Masters-cfg.Clusters {
			cl, nodes := simredis.NewCluster(network, cfg.Seed, i, cfg.Shards, !cfg.NoReplicas, o)
			votes[i] = &vote{nodes: nodes, cl: cl}
			masters = append(masters, nodes...)
			clusters = append(clusters, cl.Seeds())
			continue
		}
		addr := fmt.Sprintf("master%d:6379", i)
		m := simredis.NewMaster(network, cfg.Seed, i, addr, o)
		votes[i] = &vote{nodes: []*simredis.Master{m}}
		masters = append(masters, m)
		addrs = append(addrs, addr)
	}
	defer func() {
		for _, m := range masters {
			m.Close()
		}
	}()

	resources := make([]string, cfg.Resources)
	for i := range resources {
		resources[i] = fmt.Sprintf("r%d", i)
	}
	store := newFencedStore(h)
	mix := drawMix(cfg)
	var rests map[string][]window
	if cfg.Expiry {
		rests = drawRests(cfg, resources, len(mix.permits))
	}
	clients := make([]*client, cfg.Clients)
	for i := range clients {
		permits := mix.permits
		if cfg.PermitMismatch && i == cfg.Clients-1 && len(permits) > 0 {
			// One count more than everyone else's: its attempts are those
			// the masters' permit count must refuse.
			permits = slices.Clone(permits)
			permits[0]++
		}
		c := &client{idx: i, name: fmt.Sprintf("c%d", i), cfg: &cfg, addrs: addrs, clusters: clusters, network: network, h: h, replacing: make(chan struct{}, 1),
			permits: permits, fenced: !cfg.NoFencing && !(i == 0 && mix.unfenced)}
		c.resetLockCtx()
		c.pausedCh = make(chan struct{})
		if err := c.open(); err != nil {
			for _, c := range clients[:i] {
				c.l.Close()
			}
			return nil, err
		}
		clients[i] = c
	}

	ctx, cancel := context.WithCancel(context.Background())
	end := start.Add(cfg.Duration)
	var wg sync.WaitGroup
	var opsMu sync.Mutex
	ops := 0
	for _, c := range clients {
		for w := range cfg.Workers {
			if slices.Contains(cfg.Idle, c.name) || slices.Contains(cfg.Idle, fmt.Sprintf("%s/w%d", c.name, w)) {
				continue
			}
			wk := &worker{
				c: c, id: w, h: h, ttl: cfg.TTL, resources: resources, store: store, mix: mix, rests: rests,
				rng:   rand.New(rand.NewPCG(cfg.Seed, streamWorkers+uint64(c.idx)<<8+uint64(w))),
				extra: rand.New(rand.NewPCG(cfg.Seed, streamExtras+uint64(c.idx)<<8+uint64(w))),
			}
			wg.Go(func() {
				wk.run(ctx, end)
				opsMu.Lock()
				ops += wk.ops
				opsMu.Unlock()
			})
		}
	}
	var nemesis sync.WaitGroup
	nemesis.Go(func() { applyFaults(ctx, faults, index, votes, clients, network, h, cfg.Latency) })
	// Stop the workers' waits at the end of the run; holds finish.
	stop := time.AfterFunc(time.Until(end), cancel)
	wg.Wait()
	stop.Stop()
	cancel()
	nemesis.Wait()
	for _, m := range masters {
		m.Heal(cfg.Latency)
	}
	for _, c := range clients {
		network.Thaw(c.name)
	}
	for _, c := range clients {
		c.close()
	}

	// Every key has a TTL (the queues twice the lock's; the fencing
	// counters MaxTTL past their values, which is the TTL here, plus the
	// masters' skew and a step back, a quarter TTL), and commands in
	// flight arrive at most TTL/2 late (see DrawFaults): past that, what
	// is left on a master outlived the clients.
	drain := 2*cfg.TTL + cfg.TTL/2 + 100*time.Millisecond
	if cfg.Clusters > 0 {
		// rueidis's cluster client closes the connections a topology
		// refresh replaced 5s later, on a goroutine of its own that must
		// end in the bubble.
		drain = max(drain, 5*time.Second+100*time.Millisecond)
	}
	time.Sleep(drain)
	var leftovers []string
	for _, m := range masters {
		for _, kv := range m.Keys() {
			leftovers = append(leftovers, m.Addr+": "+kv)
		}
		for _, s := range m.Subscriptions() {
			leftovers = append(leftovers, m.Addr+": subscribed "+s)
		}
	}
	res := &Result{
		Config:    cfg,
		History:   h,
		Virtual:   time.Since(start),
		Ops:       ops,
		Faults:    faults,
		Leftovers: leftovers,
		quorum:    cfg.Masters/2 + 1,
		bounds:    boundsOf(clients[0].cfgUsed),
	}
	cov := Coverage{Wakes: make(map[string]int), Commands: make(map[string]int)}
	entries := make(map[string]bool)
	for _, g := range h.Grants() {
		if g.Wake != "" {
			cov.Wakes[g.Wake]++
		}
		if g.RW == "read" {
			if entries[g.Value] {
				cov.RWJoins++
			}
			entries[g.Value] = true
		}
	}
	for _, m := range masters {
		for k, n := range m.Commands() {
			cov.Commands[k] += n
		}
	}
	for _, v := range votes {
		logs, leaves, alls := v.logs(cfg.Clusters > 0)
		res.keyLogs = append(res.keyLogs, logs)
		res.leaves = append(res.leaves, leaves...)
		res.allAttempts = append(res.allAttempts, alls...)
		res.clocks = append(res.clocks, v.nodes[0].Clock())
	}
	cov.CountersRaisedAfterExpiry = countersRaisedAfterExpiry(res.keyLogs, res.clocks, h.start)
	res.Coverage = cov
	res.Violations = Check(res)
	return res, nil
}

func mutationNames() string {
	var names []string
	for _, s := range mutation.All {
		names = append(names, s.Name())
	}
	return strings.Join(names, ", ")
}

// countersRaisedAfterExpiry counts the fencing counters that were gone
// from a master (expired, or deleted by a deadline already past; not by a
// restart) and were raised again there later.
func countersRaisedAfterExpiry(logs [][]simredis.KeyRecord, clocks []simredis.Clock, start time.Time) int {
	fences := make([][]simredis.KeyRecord, len(logs))
	for m, log := range logs {
		for _, r := range log {
			if strings.HasPrefix(r.Key, fencePrefix) {
				fences[m] = append(fences[m], r)
			}
		}
	}
	n := 0
	for _, byMaster := range buildSpans(fences, clocks, start) {
		for _, ss := range byMaster {
			for i := 1; i < len(ss); i++ {
				if ss[i-1].Gone && ss[i-1].Cause != "restart" && !ss[i].Gone && ss[i].Cause != "revived" {
					n++
				}
			}
		}
	}
	return n
}

// The engine's internal keys, as the checkers and the leftovers read
// them (engine/keys.go).
const (
	fencePrefix = "\xffredlock:fence:"
	queuePrefix = "\xffredlock:queue:"
	semPrefix   = "\xffredlock:sem:"
	turnPrefix  = "~"
)

// client is one process of the simulation: a Locker, replaced when the
// nemesis closes it, and the state the nemesis acts on.
type client struct {
	idx   int
	name  string
	cfg   *Config
	addrs []string
	// clusters are the cluster votes' seed addresses.
	clusters [][]string
	network  *simredis.Network
	h        *History

	// replacing serializes replace: two faults close together must not
	// each open a Locker, one of which nobody would close. A channel, not
	// a sync.Mutex: a goroutine waiting on a channel is durably blocked,
	// so virtual time goes on meanwhile.
	replacing chan struct{}

	// permits: each semaphore's permit count, the same for every client.
	permits []int
	// fenced: the client's Lockers fence.
	fenced bool

	mu      sync.Mutex
	l       *engine.Locker
	sems    []*engine.Semaphore // the Locker's handles of the semaphores
	rws     []*engine.RWMutex   // and of the read/write locks
	gen     int                 // Lockers made so far
	cfgUsed engine.Config       // the Locker's effective configuration
	// lockCtx is the parent of the workers' Lock contexts: the nemesis
	// cancels it (and makes a new one) to cancel them all at once.
	lockCtx    context.Context
	lockCancel context.CancelFunc
	// pausedCh is closed (and replaced) when the nemesis pauses the
	// client's workers for pauseFor; frozenUntil is the end of a freeze.
	pausedCh    chan struct{}
	pauseFor    time.Duration
	frozenUntil time.Time
}

// engineConfig is the Locker configuration of the simulation: every
// feature on.
func (c *client) engineConfig() engine.Config {
	cfg := c.cfg
	ec := engine.DefaultConfig(c.addrs...)
	ec.Clusters = cloneClusters(c.clusters)
	ec.TTL = cfg.TTL
	ec.Quarantine = cfg.Quarantine
	ec.Fencing = c.fenced
	ec.AutoExtend = true
	ec.MaxExtensions = 3
	// A waiter that misses its wake-up sleeps a whole TTL, so that the
	// liveness checker's tight bound sees it (see Bounds).
	ec.Wait.FallbackMin, ec.Wait.FallbackMax = cfg.TTL, cfg.TTL
	// The simulated masters (miniredis) have no CLIENT TRACKING; the
	// tracker's extra connection would only shift the connections'
	// numbers, and with them the hunted schedules.
	ec.DisableTracking = true
	ec.Conn.DialContext = c.network.Dialer(c.name)
	// Smaller buffers: restarts and breaks make many connections, and
	// rueidis's half a MiB each way is much of a connection's cost here,
	// for in-memory connections whose writes are a few KiB at most. (Its
	// ring of in-flight commands keeps its size: fewer slots would make
	// callers wait behind a hung master that they do not wait for in
	// production.)
	ec.Conn.Tune = func(o *rueidis.ClientOption) {
		o.ReadBufferEachConn, o.WriteBufferEachConn = 64<<10, 64<<10
	}
	ec.Wait.Rand = rand.New(rand.NewPCG(cfg.Seed, streamLockers+uint64(c.idx)<<8+uint64(c.gen)))
	if cfg.Control == SplitPrefix && c.idx%2 == 1 {
		ec.KeyPrefix = "split:"
	}
	return ec
}

// open makes the client's next Locker, trying again while New fails (a
// majority unreachable for a moment).
func (c *client) open() error {
	var err error
	for range 20 {
		c.mu.Lock()
		ec := c.engineConfig()
		c.gen++
		c.mu.Unlock()
		var l *engine.Locker
		if l, err = engine.New(context.Background(), ec); err == nil {
			// One handle per semaphore and Locker, shared by its workers,
			// as the engine asks.
			sems := make([]*engine.Semaphore, len(c.permits))
			for i, p := range c.permits {
				if sems[i], err = l.Semaphore(semName(i), p); err != nil {
					l.Close()
					return fmt.Errorf("client %s: %w", c.name, err)
				}
			}
			rws := make([]*engine.RWMutex, rwLocks)
			for i := range rws {
				if rws[i], err = l.RWMutex(rwName(i)); err != nil {
					l.Close()
					return fmt.Errorf("client %s: %w", c.name, err)
				}
			}
			c.mu.Lock()
			c.l, c.sems, c.rws, c.cfgUsed = l, sems, rws, l.Config()
			c.mu.Unlock()
			return nil
		}
		time.Sleep(c.cfg.TTL / 4)
	}
	return fmt.Errorf("client %s: %w", c.name, err)
}

func (c *client) locker() *engine.Locker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.l
}

// handles returns the client's Locker and its semaphore and read/write
// lock handles.
func (c *client) handles() (*engine.Locker, []*engine.Semaphore, []*engine.RWMutex) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.l, c.sems, c.rws
}

// semName is semaphore i's name.
func semName(i int) string { return fmt.Sprintf("s%d", i) }

// rwLocks is the number of read/write locks the workers share, weighted
// as the resources are.
const rwLocks = 2

// rwName is read/write lock i's name.
func rwName(i int) string { return fmt.Sprintf("rw%d", i) }

// rwReaders is the share of a read/write lock's acquisitions that read:
// readers keep coming while writers wait.
const rwReaders = 0.7

// close closes the client's Locker and records how long Close took.
func (c *client) close() {
	l := c.locker()
	began := time.Now()
	l.Close()
	c.h.closed(c.idx, c.h.since(began), c.h.since(time.Now()))
}

// replace closes the client's Locker mid-flight and opens the next.
func (c *client) replace() {
	c.replacing <- struct{}{}
	defer func() { <-c.replacing }()
	c.close()
	if err := c.open(); err != nil {
		c.h.note(fmt.Sprintf("%s: no new Locker: %v", c.name, err))
	}
}

func (c *client) resetLockCtx() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lockCancel != nil {
		c.lockCancel()
	}
	c.lockCtx, c.lockCancel = context.WithCancel(context.Background())
}

// lockContext is a Lock call's context: the run's, bounded by d, and
// cancelled by the nemesis's cancel of the client.
func (c *client) lockContext(run context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c.mu.Lock()
	parent := c.lockCtx
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(run, d)
	stop := context.AfterFunc(parent, cancel)
	return ctx, func() { stop(); cancel() }
}

// pause makes the client's holding workers stop touching their leases
// for d.
func (c *client) pause(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pauseFor = d
	close(c.pausedCh)
	c.pausedCh = make(chan struct{})
}

// paused is the channel the next pause closes.
func (c *client) paused() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pausedCh
}

// pauseLength is the length of the last pause.
func (c *client) pauseLength() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pauseFor
}

// freeze stops the client (its connections and its workers) for d.
func (c *client) freeze(d time.Duration) {
	c.mu.Lock()
	c.frozenUntil = time.Now().Add(d)
	c.mu.Unlock()
	c.network.Freeze(c.name)
}

func (c *client) thaw() { c.network.Thaw(c.name) }

// stopped waits out a freeze of the client: its workers do nothing while
// its process is stopped.
func (c *client) stopped() {
	c.mu.Lock()
	until := c.frozenUntil
	c.mu.Unlock()
	if d := time.Until(until); d > 0 {
		time.Sleep(d)
	}
}

// worker is one goroutine of a client: it locks (one resource or
// several), takes a semaphore's permit or read- or write-locks a
// read/write lock, holds, extends and releases (or abandons),
// with every choice drawn from its own random stream.
type worker struct {
	c         *client
	id        int
	h         *History
	ttl       time.Duration
	resources []string
	store     *fencedStore
	rng       *rand.Rand
	// extra draws what Config.RemoteValidity adds, apart from rng.
	extra *rand.Rand
	ops   int
	mix   mix
	// rests are the stretches (since the run's start) in which each name
	// rests, with Config.Expiry (see drawRests).
	rests map[string][]window
}

// drawRests draws, for each name the workers take (resources,
// semaphores, read/write locks), stretches in which nobody acquires it:
// 1.5 to 3 TTLs each (the Lockers' MaxTTL is the TTL, and a counter
// expires MaxTTL past its value on its master's clock, which the masters'
// skew and a step back of a quarter TTL put at most 0.3 TTL later), a TTL
// to 3 apart, each name's from a stream of its own.
func drawRests(cfg Config, resources []string, semaphores int) map[string][]window {
	names := slices.Clone(resources)
	for i := range semaphores {
		names = append(names, semName(i))
	}
	for i := range rwLocks {
		names = append(names, rwName(i))
	}
	out := make(map[string][]window)
	for i, name := range names {
		r := rand.New(rand.NewPCG(cfg.Seed, streamRests+uint64(i)<<8))
		uniform := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo))) }
		for at := uniform(0, 2*cfg.TTL); at < cfg.Duration; {
			rest := window{at, at + uniform(cfg.TTL*3/2, 3*cfg.TTL)}
			out[name] = append(out[name], rest)
			at = rest.to + uniform(cfg.TTL, 3*cfg.TTL)
		}
	}
	return out
}

// resting reports whether one of t's names rests at virtual instant now
// (since the run's start).
func (w *worker) resting(t *target, now time.Duration) bool {
	names := t.set
	if names == nil {
		names = []string{t.resource}
	}
	for _, n := range names {
		for _, r := range w.rests[n] {
			if r.from <= now && now < r.to {
				return true
			}
		}
	}
	return false
}

// target is what one acquisition asks for, and then holds: a resource, a
// set of them, or a semaphore's permit.
type target struct {
	// resource is the resource, the semaphore's name, or the set's label.
	resource string
	// set is a multi-resource lock's names, sorted; sem the semaphore's
	// index, or -1.
	set []string
	sem int
	// rw is the read/write lock's index, or -1; write: a writer.
	rw    int
	write bool
	// units are what the lease holds, for the fenced store (see
	// Grant.Units), once it is granted.
	units []string
}

// call records one operation.
func (w *worker) call(op string, t *target, called time.Time, err error, grant int) {
	w.ops++
	w.h.add(Event{Called: w.h.since(called), At: w.h.since(time.Now()), Client: w.c.idx, Worker: w.id,
		Op: op, Resource: t.resource, Resources: t.set, Result: errClass(err), Err: err, Grant: grant})
}

// note records a step that is not an operation.
func (w *worker) note(op string, t *target, result string, grant int) {
	now := w.h.since(time.Now())
	w.h.add(Event{Called: now, At: now, Client: w.c.idx, Worker: w.id, Op: op, Resource: t.resource, Resources: t.set, Result: result, Grant: grant})
}

// pick draws one of n names' index, i with weight 1/(i+1)^1.5.
func (w *worker) pick(n int) int {
	total := 0.0
	for i := range n {
		total += math.Pow(float64(i+1), -1.5)
	}
	x := w.rng.Float64() * total
	for i := range n {
		if x -= math.Pow(float64(i+1), -1.5); x < 0 {
			return i
		}
	}
	return n - 1
}

// pickSet draws 2 or 3 distinct resources (as many as there are, if
// fewer), each as pick does, in a random order.
func (w *worker) pickSet() []string {
	k := min(2+w.rng.IntN(2), len(w.resources))
	var set []string
	for len(set) < k {
		if r := w.resources[w.pick(len(w.resources))]; !slices.Contains(set, r) {
			set = append(set, r)
		}
	}
	w.rng.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
	return set
}

// uniform draws a duration in [lo, hi).
func (w *worker) uniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

// draw chooses the next acquisition: what (a resource, a set, a permit,
// by the seed's mix) and whether it waits. A seed without semaphores,
// sets and read/write locks draws exactly what it drew before they were
// added; one without read/write locks, what it drew before they were.
func (w *worker) draw() (t *target, names []string, wait bool) {
	kind := 0 // 0: one resource, 1: a permit, 2: several resources, 3: a read/write lock
	if w.mix.sem+w.mix.multi+w.mix.rw > 0 {
		switch p := w.rng.Float64(); {
		case p < w.mix.sem:
			kind = 1
		case p < w.mix.sem+w.mix.multi:
			kind = 2
		case p < w.mix.sem+w.mix.multi+w.mix.rw:
			kind = 3
		}
	}
	t = &target{sem: -1, rw: -1}
	switch kind {
	case 0:
		t.resource = w.resources[w.pick(len(w.resources))]
	case 1:
		t.sem = w.pick(len(w.mix.permits))
		t.resource = semName(t.sem)
	case 2:
		names = w.pickSet()
		t.set = slices.Sorted(slices.Values(names))
		t.resource = "{" + strings.Join(t.set, ",") + "}"
	case 3:
		t.rw = w.pick(rwLocks)
		t.resource = rwName(t.rw)
		t.write = w.rng.Float64() >= rwReaders
	}
	return t, names, w.rng.Float64() >= 0.3
}

func (w *worker) run(ctx context.Context, end time.Time) {
	for time.Now().Before(end) {
		w.c.stopped()
		t, names, wait := w.draw()
		// Drawn whatever the op, so that the stream does not depend on
		// outcomes more than it must.
		waitFor := w.uniform(w.ttl/4, 3*w.ttl)
		think := w.uniform(0, w.ttl/10)
		if w.rests != nil && w.resting(t, w.h.since(time.Now())) {
			sleep(ctx, think+w.ttl/20)
			continue
		}
		l, sems, rws := w.c.handles()
		op := "trylock"
		if wait {
			op = "lock"
		}
		switch {
		case t.rw >= 0 && t.write:
			op = strings.Replace(op, "lock", "wlock", 1)
		case t.rw >= 0:
			op = strings.Replace(op, "lock", "rlock", 1)
		case t.sem >= 0:
			op = strings.Replace(op, "lock", "acquire", 1)
		case t.set != nil:
			op += "all"
		}
		called := time.Now()
		var le *engine.Lease
		var err error
		if wait {
			lctx, cancel := w.c.lockContext(ctx, waitFor)
			switch {
			case t.rw >= 0 && t.write:
				le, err = rws[t.rw].Lock(lctx)
			case t.rw >= 0:
				le, err = rws[t.rw].RLock(lctx)
			case t.sem >= 0:
				le, err = sems[t.sem].Acquire(lctx)
			case t.set != nil:
				le, err = l.LockAll(lctx, names...)
			default:
				le, err = l.Lock(lctx, t.resource)
			}
			cancel()
		} else {
			switch {
			case t.rw >= 0 && t.write:
				le, err = rws[t.rw].TryLock(ctx)
			case t.rw >= 0:
				le, err = rws[t.rw].TryRLock(ctx)
			case t.sem >= 0:
				le, err = sems[t.sem].TryAcquire(ctx)
			case t.set != nil:
				le, err = l.TryLockAll(ctx, names...)
			default:
				le, err = l.TryLock(ctx, t.resource)
			}
		}
		id := -1
		if err == nil {
			g := Grant{Resource: t.resource, Resources: t.set, Client: w.c.idx, Worker: w.id, Token: le.Token(), Value: le.Value(),
				Called: w.h.since(called), Granted: w.h.since(time.Now()), ValidUntil: w.h.since(le.ValidUntil())}
			if t.sem >= 0 {
				g.Permits, g.Permit = w.c.permits[t.sem], le.Permit()
			}
			if t.rw >= 0 {
				g.RW = "read"
				if t.write {
					g.RW = "write"
				}
			}
			if wait {
				g.Wake = le.Wait().Cause.String()
			}
			id = w.h.grant(g)
			t.units = g.Units()
			if t.rw >= 0 && t.write {
				// A writer writes to what the lock protects; a reader
				// only reads.
				t.units = []string{t.resource}
			}
			// The holder writes to the protected resources as it begins.
			w.write(t, id, le.Token(), true)
		}
		w.call(op, t, called, err, id)
		if err == nil {
			w.hold(le, t, id)
		}
		sleep(ctx, think)
	}
}

// write is the holder's write to each resource its lease protects.
func (w *worker) write(t *target, id int, token int64, open bool) {
	for _, u := range t.units {
		w.store.write(u, id, token, open)
	}
}

// hold keeps the lease for a drawn time, or until it ends on its own,
// extending it by hand now and then, and then releases it, as a deferred
// Release would, even when it has ended. A pause of the client makes it
// stop touching the lease for a while, without looking at its validity,
// and then write to the protected resource as if it still held it.
func (w *worker) hold(le *engine.Lease, t *target, id int) {
	if t.rw >= 0 && w.rng.Float64() < 0.05 {
		w.abandon(le, t, id)
		return
	}
	var d time.Duration
	switch p := w.rng.Float64(); {
	case w.mix.long && p < 0.5:
		d = w.uniform(w.ttl/2, 3*w.ttl)
	case p < 0.60:
		d = w.uniform(0, w.ttl/5)
	case p < 0.85:
		d = w.uniform(w.ttl/5, w.ttl)
	case p < 0.95:
		d = w.uniform(w.ttl, 3*w.ttl) // auto-extension carries it
	default:
		d = w.uniform(3*w.ttl, 6*w.ttl) // past MaxExtensions: it expires
	}
	// Extends by hand: none, one, or a shorter one then a longer one
	// (the order in which a stale shorter PEXPIRE does harm), or for a
	// long hold, one every quarter TTL, each to a TTL drawn anew.
	var extends []time.Duration
	switch p := w.rng.Float64(); {
	case p < 0.15:
		extends = []time.Duration{w.extendTTL()}
	case p < 0.25:
		a, b := w.extendTTL(), w.extendTTL()
		extends = []time.Duration{min(a, b), max(a, b)}
	case (p < 0.55 || w.mix.long) && d > w.ttl/2:
		for range d / (w.ttl / 4) {
			extends = append(extends, w.extendTTL())
		}
	}
	lateRelease := w.rng.Float64() < 0.5
	lateBy := w.uniform(0, w.ttl)
	step := d / time.Duration(len(extends)+1)
	paused := false
	for i := 0; i <= len(extends); i++ {
		ended, pause := w.await(le, t, step)
		if pause {
			paused = true
			break
		}
		if ended {
			w.note("done", t, errClass(le.Err()), id)
			// Work that does not watch Done runs on past the lease, and
			// its deferred Release comes late.
			if lateRelease {
				time.Sleep(lateBy)
			}
			break
		}
		if w.c.cfg.RemoteValidity && w.extra.Float64() < 0.3 {
			w.remoteValidity(le, t, id)
		}
		if i < len(extends) {
			ctx, cancel := context.WithTimeout(context.Background(), w.ttl)
			called := time.Now()
			err := le.Extend(ctx, extends[i])
			cancel()
			w.call("extend", t, called, err, id)
		}
	}
	ended := le.Err()
	if paused || ended == nil {
		// A holder that believes it holds writes before it releases; a
		// paused one comes back and writes without looking.
		w.write(t, id, le.Token(), false)
	}
	how := "released"
	if ended != nil {
		how = errClass(ended)
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.ttl)
	called := time.Now()
	err := le.Release(ctx)
	cancel()
	w.call("release", t, called, err, id)
	w.h.end(id, w.h.since(le.ValidUntil()), how, le.Extensions())
}

// remoteValidity asks the masters how long they vouch for the lease, and
// records the answer (see CheckRemoteValidity).
func (w *worker) remoteValidity(le *engine.Lease, t *target, id int) {
	ctx, cancel := context.WithTimeout(context.Background(), w.ttl)
	defer cancel()
	called := time.Now()
	left, err := le.RemoteValidity(ctx)
	w.ops++
	w.h.add(Event{Called: w.h.since(called), At: w.h.since(time.Now()), Client: w.c.idx, Worker: w.id,
		Op: "remotevalidity", Resource: t.resource, Resources: t.set, Result: errClass(err), Err: err, Grant: id, Left: left})
}

// abandon leaves the lease without a Release, as a holder that hangs or
// leaks it does: auto-extension carries it to its cap, then it expires,
// and nothing of it may stay on the masters (checker 4) nor keep a
// writer out past its expiry.
func (w *worker) abandon(le *engine.Lease, t *target, id int) {
	w.note("abandon", t, "ok", id)
	<-le.Done()
	how := errClass(le.Err())
	w.note("done", t, how, id)
	w.h.end(id, w.h.since(le.ValidUntil()), how, le.Extensions())
}

// extendTTL draws the TTL of an Extend by hand: a quarter TTL to a whole
// one, in whole milliseconds.
func (w *worker) extendTTL() time.Duration {
	return w.uniform(w.ttl/4, w.ttl+time.Millisecond).Truncate(time.Millisecond)
}

// await waits d, or until the lease ends or the client is paused or
// frozen; it reports whether the lease ended, and whether a pause came
// (then it has slept the pause, the lease unwatched).
func (w *worker) await(le *engine.Lease, t *target, d time.Duration) (ended, paused bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	pause := w.c.paused()
	select {
	case <-timer.C:
		w.c.stopped()
		return le.Err() != nil, false
	case <-le.Done():
		w.c.stopped()
		return true, false
	case <-pause:
		p := w.c.pauseLength()
		w.note("paused", t, fmt.Sprintf("for %s", p), -1)
		time.Sleep(p)
		return false, true
	}
}

// sleep sleeps d unless ctx ends first; it reports whether it slept.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// errClass names an error by the sentinel it matches, for the history.
func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, engine.ErrNotAcquired):
		return "not-acquired"
	case errors.Is(err, engine.ErrNoQuorum):
		return "no-quorum"
	case errors.Is(err, engine.ErrLeaseExpired):
		return "expired"
	case errors.Is(err, engine.ErrLockLost):
		return "lost"
	case errors.Is(err, engine.ErrNotHeld):
		return "not-held"
	case errors.Is(err, engine.ErrReleased):
		return "released"
	case errors.Is(err, engine.ErrClosed):
		return "closed"
	case errors.Is(err, engine.ErrWrongType):
		return "wrong-type"
	case errors.Is(err, engine.ErrPermitCount):
		return "permit-count"
	case errors.Is(err, engine.ErrCrossSlot):
		// With cluster votes, a set drawn across slots is refused.
		return "cross-slot"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error: " + err.Error()
}
