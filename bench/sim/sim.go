package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// Config is one simulated run. Zero fields take the defaults below.
type Config struct {
	// Seed drives every choice the simulation makes: the masters' clocks
	// and identities, every network delay, every worker's operations.
	Seed uint64
	// Masters is the number of simulated masters. Default: 5.
	Masters int
	// Clients is the number of Lockers, each with its own connections, as
	// separate processes would have. Default: 3.
	Clients int
	// Workers is the number of goroutines per client. Default: 3.
	Workers int
	// Resources is the number of resource names the workers share.
	// Default: 3.
	Resources int
	// Duration is the virtual time the workers run; holds under way then
	// finish, and the clients close. Default: 20s.
	Duration time.Duration
	// TTL is the Lockers' TTL. Default: 1s.
	TTL time.Duration
	// Quarantine is the Lockers' restart policy. Default:
	// QuarantineAlways (the masters start with an hour of uptime).
	Quarantine engine.QuarantinePolicy
	// Control breaks mutual exclusion on purpose, to show that the
	// checker catches it. Default: NoControl.
	Control Control
	// Latency of every master's connections. Default: DefaultLatency.
	Latency Latency
	// Faults, when set, runs on a goroutine of its own from the start of
	// the workload until ctx ends with it, with the masters and a random
	// stream of its own: the place for a nemesis. Whatever it leaves
	// broken is healed before the clients close. Default: none.
	Faults func(ctx context.Context, rng *rand.Rand, masters []*Master)
	// UnguardedLeaseOps lets workers call Release and Extend while an
	// auto-extension of their lease runs, which stalls the bubble as long
	// as the engine holds a sync.Mutex across it (see autoextend.go).
	// Default: off, the workers wait for a clear window.
	UnguardedLeaseOps bool
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
		c.Clients = 3
	}
	if c.Workers == 0 {
		c.Workers = 3
	}
	if c.Resources == 0 {
		c.Resources = 3
	}
	if c.Duration == 0 {
		c.Duration = 20 * time.Second
	}
	if c.TTL == 0 {
		c.TTL = time.Second
	}
	if c.Quarantine == 0 {
		c.Quarantine = engine.QuarantineAlways
	}
	if c.Latency == (Latency{}) {
		c.Latency = DefaultLatency
	}
}

// Result is a run's history and what the checkers found in it.
type Result struct {
	Config     Config
	History    *History
	Violations []Violation
	// Virtual is the virtual time the run took, close included.
	Virtual time.Duration
	// Ops is the number of events the workers recorded: their operations,
	// and leases that ended on their own.
	Ops int
	// Leftovers are the masters' keys once every client closed and every
	// TTL ran out, other than fencing counters (which never expire), as
	// "master: key=value".
	Leftovers []string
	// Coverage says which of the engine's paths the run took.
	Coverage Coverage
}

// Coverage says which of the engine's paths a run took, so that a
// workload that stops reaching one shows.
type Coverage struct {
	// Wakes counts Lock grants by how their last wait ended.
	Wakes map[string]int
	// Commands counts what the masters ran, scripts' calls included (see
	// Master.Commands): "EVALSHA+" are coalesced calls, "EVAL" reloads
	// after NOSCRIPT, "PUBLISH" release notifications.
	Commands map[string]int
}

func (c Coverage) String() string {
	var b strings.Builder
	b.WriteString("wakes:")
	for _, k := range slices.Sorted(maps.Keys(c.Wakes)) {
		fmt.Fprintf(&b, " %s=%d", k, c.Wakes[k])
	}
	b.WriteString("; commands:")
	for _, k := range []string{"EVALSHA", "EVALSHA+", "EVAL", "SET", "PUBLISH", "SUBSCRIBE", "ZADD", "ZPOPMIN", "PEXPIRE"} {
		fmt.Fprintf(&b, " %s=%d", k, c.Commands[k])
	}
	return b.String()
}

// Random streams of a seed, one per consumer, so that one consumer's
// draws do not shift another's.
const (
	streamMasters = 1
	streamFaults  = 2
	streamWorkers = 1 << 20
)

// Run runs one simulation. It must be called inside a synctest bubble
// (synctest.Test), where time is virtual and every connection is in
// memory; every goroutine it starts has ended when it returns.
func Run(cfg Config) (*Result, error) {
	cfg.fill()
	start := time.Now()
	h := NewHistory()
	network := NewNetwork(cfg.Seed)
	setup := rand.New(rand.NewPCG(cfg.Seed, streamMasters))
	masters := make([]*Master, cfg.Masters)
	addrs := make([]string, cfg.Masters)
	for i := range masters {
		addrs[i] = fmt.Sprintf("master%d:6379", i)
		masters[i] = NewMaster(network, cfg.Seed, i, addrs[i], MasterOptions{
			Uptime: time.Hour,
			// Within ±20ms of each other and 100 ppm of virtual time:
			// NTP-kept clocks.
			Offset:  time.Duration(setup.Int64N(int64(40*time.Millisecond))) - 20*time.Millisecond,
			Rate:    1 + (setup.Float64()-0.5)*2e-4,
			Latency: cfg.Latency,
		})
	}
	defer func() {
		for _, m := range masters {
			m.Close()
		}
	}()

	lockers := make([]*engine.Locker, cfg.Clients)
	autos := make([]*autoExtends, cfg.Clients)
	for i := range lockers {
		ec := engine.DefaultConfig(addrs...)
		ec.TTL = cfg.TTL
		ec.Quarantine = cfg.Quarantine
		ec.Fencing = true
		ec.AutoExtend = true
		ec.MaxExtensions = 3
		ec.DialContext = network.Dialer(fmt.Sprintf("c%d", i))
		autos[i] = newAutoExtends()
		ec.Observer = &engine.Observer{Extend: autos[i].observe}
		if cfg.Control == SplitPrefix && i%2 == 1 {
			ec.KeyPrefix = "split:"
		}
		l, err := engine.New(context.Background(), ec)
		if err != nil {
			for _, l := range lockers[:i] {
				l.Close()
			}
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		lockers[i] = l
	}

	resources := make([]string, cfg.Resources)
	for i := range resources {
		resources[i] = fmt.Sprintf("r%d", i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	end := start.Add(cfg.Duration)
	var wg sync.WaitGroup
	var opsMu sync.Mutex
	ops := 0
	for c, l := range lockers {
		for w := range cfg.Workers {
			wk := &worker{
				client: c, id: w, l: l, h: h, ttl: cfg.TTL, resources: resources,
				auto: autos[c], guard: !cfg.UnguardedLeaseOps,
				rng: rand.New(rand.NewPCG(cfg.Seed, streamWorkers+uint64(c)<<16+uint64(w))),
			}
			wg.Go(func() {
				wk.run(ctx, end)
				opsMu.Lock()
				ops += wk.seq
				opsMu.Unlock()
			})
		}
	}
	var faults sync.WaitGroup
	if cfg.Faults != nil {
		faults.Go(func() { cfg.Faults(ctx, rand.New(rand.NewPCG(cfg.Seed, streamFaults)), masters) })
	}
	// Stop the workers' waits at the end of the run; holds finish.
	stop := time.AfterFunc(time.Until(end), cancel)
	wg.Wait()
	stop.Stop()
	cancel()
	faults.Wait()
	for _, m := range masters {
		m.Heal(cfg.Latency)
	}
	for _, l := range lockers {
		l.Close()
	}

	// Every key but the fencing counters has a TTL (the queues twice the
	// lock's): past it, what is left on a master outlived the clients.
	time.Sleep(2*cfg.TTL + 100*time.Millisecond)
	var leftovers []string
	for _, m := range masters {
		for _, kv := range m.Keys() {
			if !isFenceKey(kv) {
				leftovers = append(leftovers, m.Addr+": "+kv)
			}
		}
	}
	grants := h.Grants()
	cov := Coverage{Wakes: make(map[string]int), Commands: make(map[string]int)}
	for _, g := range grants {
		if g.Wake != "" {
			cov.Wakes[g.Wake]++
		}
	}
	for _, m := range masters {
		for k, n := range m.Commands() {
			cov.Commands[k] += n
		}
	}
	return &Result{
		Coverage:   cov,
		Config:     cfg,
		History:    h,
		Violations: CheckMutualExclusion(grants),
		Virtual:    time.Since(start),
		Ops:        ops,
		Leftovers:  leftovers,
	}, nil
}

// isFenceKey reports whether a "key=value" line is a fencing counter.
func isFenceKey(kv string) bool {
	const prefix = "\xffredlock:fence:"
	return len(kv) >= len(prefix) && kv[:len(prefix)] == prefix
}

// worker is one goroutine of a client: it locks, holds, extends and
// releases, with every choice drawn from its own random stream.
type worker struct {
	client, id int
	l          *engine.Locker
	h          *History
	ttl        time.Duration
	resources  []string
	rng        *rand.Rand
	seq        int
	// auto follows the client's auto-extensions; with guard, Release and
	// Extend wait until none runs (see autoextend.go).
	auto  *autoExtends
	guard bool
}

func (w *worker) event(op, resource string, err error, grant int) {
	w.seq++
	w.h.add(Event{At: w.h.since(time.Now()), Client: w.client, Worker: w.id, Seq: w.seq,
		Op: op, Resource: resource, Result: errClass(err), Grant: grant})
}

// uniform draws a duration in [lo, hi).
func (w *worker) uniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

func (w *worker) run(ctx context.Context, end time.Time) {
	for time.Now().Before(end) {
		resource := w.resources[w.rng.IntN(len(w.resources))]
		op := "lock"
		if w.rng.Float64() < 0.3 {
			op = "trylock"
		}
		// Drawn whatever the op, so that the stream does not depend on
		// outcomes more than it must.
		wait := w.uniform(w.ttl/2, 3*w.ttl)
		think := w.uniform(0, w.ttl/10)
		called := time.Now()
		var le *engine.Lease
		var err error
		if op == "lock" {
			lctx, cancel := context.WithTimeout(ctx, wait)
			le, err = w.l.Lock(lctx, resource)
			cancel()
		} else {
			le, err = w.l.TryLock(ctx, resource)
		}
		id := -1
		if err == nil {
			g := Grant{Resource: resource, Client: w.client, Worker: w.id, Token: le.Token(), Value: le.Value(),
				Called: w.h.since(called), Granted: w.h.since(time.Now()), ValidUntil: w.h.since(le.ValidUntil())}
			if op == "lock" {
				g.Wake = le.Wait().Cause.String()
			}
			id = w.h.grant(g)
		}
		w.event(op, resource, err, id)
		if err == nil {
			w.hold(le, id, w.auto.schedule(le, w.l.Config()))
		}
		sleep(ctx, think)
	}
}

// hold keeps the lease for a drawn time, or until it ends on its own,
// extending it by hand now and then, and then releases it, as a deferred
// Release would, even when it has ended.
func (w *worker) hold(le *engine.Lease, id int, auto *autoSchedule) {
	var d time.Duration
	switch p := w.rng.Float64(); {
	case p < 0.60:
		d = w.uniform(0, w.ttl/5)
	case p < 0.85:
		d = w.uniform(w.ttl/5, w.ttl)
	case p < 0.95:
		d = w.uniform(w.ttl, 3*w.ttl) // auto-extension carries it
	default:
		d = w.uniform(3*w.ttl, 6*w.ttl) // past MaxExtensions: it expires
	}
	extend := w.rng.Float64() < 0.15
	ended := false
	if extend {
		ended = !w.await(le, d/2)
		d -= d / 2
		if !ended {
			w.waitClear(le, auto)
			ctx, cancel := context.WithTimeout(context.Background(), w.ttl)
			err := le.Extend(ctx, w.ttl)
			cancel()
			w.event("extend", le.Resource(), err, id)
		}
	}
	if !ended && !w.await(le, d) {
		ended = true
	}
	if ended {
		w.event("done", le.Resource(), le.Err(), id)
		// Work that does not watch Done runs on past the lease, and its
		// deferred Release comes late.
		if w.rng.Float64() < 0.5 {
			time.Sleep(w.uniform(0, w.ttl))
		}
	}
	how := "released"
	if err := le.Err(); err != nil {
		how = errClass(err)
	}
	w.waitClear(le, auto)
	ctx, cancel := context.WithTimeout(context.Background(), w.ttl)
	err := le.Release(ctx)
	cancel()
	w.event("release", le.Resource(), err, id)
	w.h.end(id, w.h.since(le.ValidUntil()), how, le.Extensions())
}

// waitClear waits, with guard, until a Release or Extend of le cannot
// overlap an auto-extension: three rounds' span, for a release that
// hands the lease on (a fencing round) or an extend, with room to spare.
func (w *worker) waitClear(le *engine.Lease, auto *autoSchedule) {
	if !w.guard {
		return
	}
	nt := w.l.Config().NodeTimeout
	auto.waitClear(le, 3*(nt+min(max(nt/4, time.Millisecond), 25*time.Millisecond)))
}

// await waits d, or until the lease ends; it reports whether the lease
// is still trusted.
func (w *worker) await(le *engine.Lease, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return le.Err() == nil
	case <-le.Done():
		return false
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
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error: " + err.Error()
}
