package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// FaultKind is what a fault does.
type FaultKind int

// The faults. Within the model: on masters, at most a minority at a time
// (counting a restarted master until its quarantine ends), and clocks
// that drift within the engine's DriftFactor (a quorum of them fast at
// the bound at once, with DriftQuorum), or step back by less than MaxTTL
// (with Expiry); on clients, anything. Out of the model (OutOfModel): a
// master's clock jumping forward past the TTL, and with DriftQuorum a
// quorum of clocks fast past the DriftFactor.
const (
	// Masters.
	FaultPause   FaultKind = iota // SIGSTOP-like: nothing answered, then everything at once
	FaultHang                     // partition: packets dropped, delivered when it heals
	FaultRefuse                   // partition: connections reset, dials refused
	FaultRestart                  // killed for For, then started with amnesia
	FaultBreak                    // every connection of the master broken, commands in flight late or lost
	FaultSlow                     // latency of 5-105ms one way for For
	FaultDrift                    // clock rate off by up to half the DriftFactor for For
	// One connection.
	FaultBreakConn // one connection of one client to one master broken
	// Clients.
	FaultReplace // the Locker closed mid-flight, and a new one opened
	FaultCancel  // every Lock call of the client cancelled
	FaultPauseHolders
	FaultFreeze // the whole client stopped (GC pause, SIGSTOP) for For
	// FaultStall holds what the client sends for For, then breaks its
	// connections: what was held arrives Late after, on the old
	// connections, behind what the client sends on new ones.
	FaultStall
	// FaultBreakClient breaks every connection of the client, each right
	// after its next write (within For), which arrives Late or never: an
	// operation's commands caught in flight to every master.
	FaultBreakClient
	// Out of the model.
	FaultJumpClock // the master's clock jumps forward by Jump
	// Cluster votes (drawn with -sim.clusters only, after the rest).
	// FaultPauseShard pauses one shard's primary (SIGSTOP-like) for For;
	// the cluster's other nodes go on.
	FaultPauseShard
	// FaultMigrate moves a slot (see simredis.Cluster.Migrate) to another shard of
	// the cluster, a key every For/8.
	FaultMigrate
	// Clock faults on a quorum of masters at once (drawn with DriftQuorum
	// and Expiry only, after the rest): Count masters from Master on.
	// FaultDriftQuorum runs their clocks at Rate for For: fast by the
	// DriftFactor, the bound the validity allows for (past it, out of the
	// model). FaultStepBack steps their clocks back by Jump, less than
	// MaxTTL (an NTP correction): keys live Jump longer, and counters
	// that expired must still be covered by the clocks (see
	// engine/fence.go).
	FaultDriftQuorum
	FaultStepBack
)

var faultNames = [...]string{"pause", "hang", "refuse", "restart", "break", "slow", "drift",
	"break-conn", "replace", "cancel", "pause-holders", "freeze", "stall", "break-client", "jump-clock",
	"pause-shard", "migrate", "drift-quorum", "step-back"}

func (k FaultKind) String() string {
	if int(k) < len(faultNames) {
		return faultNames[k]
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// onMaster reports whether the fault is a master's (it counts toward the
// minority that may be faulted at once). The clock faults on a quorum
// are not: they stop no master.
func (k FaultKind) onMaster() bool {
	return k <= FaultSlow || k >= FaultJumpClock && k != FaultDriftQuorum && k != FaultStepBack
}

// onClient reports whether the fault is a client's.
func (k FaultKind) onClient() bool { return k >= FaultReplace && k <= FaultBreakClient }

// Fault is one entry of a fault schedule.
type Fault struct {
	// At is when it starts (virtual time since the run started); For how
	// long it lasts, for the faults that last.
	At, For time.Duration
	Kind    FaultKind
	Master  int // the master, for master and connection faults
	Client  int // the client, for client and connection faults
	Conn    int // which of the client's connections to the master
	// Late is how late commands in flight on a broken connection still
	// arrive; negative: never.
	Late time.Duration
	// OnWrite: FaultBreak and FaultBreakConn break each connection right
	// after its next write (within For), with a command in flight, rather
	// than at once.
	OnWrite bool
	Rate    float64          // FaultDrift
	Jump    time.Duration    // FaultJumpClock
	Latency simredis.Latency // FaultSlow
	// Pick draws FaultMigrate's slot among the clusters' hot slots (see
	// migrationSlot), and Conn its target shard; FaultPauseShard's shard
	// is Conn's. Every: FaultMigrate moves every hot slot, one after
	// another.
	Pick  uint64
	Every bool
	// Count is how many masters, from Master on (modulo the votes),
	// FaultDriftQuorum and FaultStepBack act on.
	Count int
}

// masters are the votes the fault acts on, of n.
func (f Fault) masters(n int) []int {
	if f.Count == 0 {
		return []int{f.Master}
	}
	var out []int
	for i := range f.Count {
		out = append(out, (f.Master+i)%n)
	}
	return out
}

// span names the Count masters from Master on.
func (f Fault) span() string {
	return fmt.Sprintf("%d masters from master%d on", f.Count, f.Master)
}

// Describe says what the fault does, for the failure report.
func (f Fault) Describe() string {
	switch f.Kind {
	case FaultPause, FaultHang, FaultRefuse, FaultRestart:
		return fmt.Sprintf("%s master%d for %s", f.Kind, f.Master, f.For)
	case FaultBreak:
		return fmt.Sprintf("break master%d's connections%s, in flight %s", f.Master, onWrite(f), lateString(f.Late))
	case FaultSlow:
		return fmt.Sprintf("slow master%d (%s-%s one way) for %s", f.Master, f.Latency.Min, f.Latency.Min+f.Latency.Jitter, f.For)
	case FaultDrift:
		return fmt.Sprintf("drift master%d's clock at rate %.4f for %s", f.Master, f.Rate, f.For)
	case FaultBreakConn:
		return fmt.Sprintf("break connection %d of c%d to master%d%s, in flight %s", f.Conn, f.Client, f.Master, onWrite(f), lateString(f.Late))
	case FaultBreakClient:
		return fmt.Sprintf("break c%d's connections on their next write (within %s), in flight %s", f.Client, f.For, lateString(f.Late))
	case FaultReplace:
		return fmt.Sprintf("close c%d's Locker and open a new one", f.Client)
	case FaultCancel:
		return fmt.Sprintf("cancel c%d's Lock calls", f.Client)
	case FaultPauseHolders:
		return fmt.Sprintf("pause c%d's holders for %s, their leases unwatched", f.Client, f.For)
	case FaultFreeze:
		return fmt.Sprintf("freeze c%d (connections and workers) for %s", f.Client, f.For)
	case FaultStall:
		return fmt.Sprintf("stall what c%d sends for %s, then break its connections, held commands %s", f.Client, f.For, lateString(f.Late))
	case FaultJumpClock:
		return fmt.Sprintf("jump master%d's clock by %s", f.Master, f.Jump)
	case FaultDriftQuorum:
		return fmt.Sprintf("drift the clocks of %s at rate %.4f for %s", f.span(), f.Rate, f.For)
	case FaultStepBack:
		return fmt.Sprintf("step the clocks of %s back by %s", f.span(), f.Jump)
	case FaultPauseShard:
		return fmt.Sprintf("pause vote%d's primary of shard %d (mod shards) for %s", f.Master, f.Conn, f.For)
	case FaultMigrate:
		if f.Every {
			return fmt.Sprintf("migrate every hot slot of vote%d to another shard, a key every %s", f.Master, f.For/8)
		}
		return fmt.Sprintf("migrate a hot slot (pick %d) of vote%d to another shard, a key every %s", f.Pick%1000, f.Master, f.For/8)
	}
	return f.Kind.String()
}

func onWrite(f Fault) string {
	if f.OnWrite {
		return fmt.Sprintf(" on their next write (within %s)", f.For)
	}
	return ""
}

func lateString(late time.Duration) string {
	if late < 0 {
		return "lost"
	}
	return "delivered " + late.String() + " late"
}

// The nemesis's profiles: a seed draws one, so that every kind of
// schedule comes up often: no faults (the liveness checker's tight bound
// needs fault-free stretches), client faults only, every kind, masters
// restarting one after another (fencing counters forgotten), and the
// network's faults (connections broken with commands in flight).
const (
	profileNone = iota
	profileClients
	profileAll
	profileRestarts
	profileNetwork
)

var profileNames = [...]string{"none", "clients", "all", "restarts", "network"}

// Profile names the nemesis profile a seed draws (see profileNone).
func Profile(seed uint64) string {
	return profileNames[profileOf(rand.New(rand.NewPCG(seed, streamFaults)))]
}

// profileOf draws cfg's profile, first on the faults' stream.
func profileOf(r *rand.Rand) int {
	switch p := r.IntN(20); {
	case p < 4:
		return profileNone
	case p < 7:
		return profileClients
	case p < 14:
		return profileAll
	case p < 17:
		return profileRestarts
	}
	return profileNetwork
}

// DrawFaults draws the fault schedule of cfg from its seed: its own
// random stream, so that the workload's draws do not move it, and one
// fault after another, so that a shorter Duration keeps a prefix of the
// schedule and fewer clients keep its length (a missing client's faults
// go to another). The seed's profile (see profileNone) weighs the kinds.
func DrawFaults(cfg Config) []Fault {
	cfg.fill()
	out, profile := drawFaults(cfg)
	out = append(out, drawClusterFaults(cfg, profile, out)...)
	return append(out, drawClockFaults(cfg)...)
}

// drawClockFaults draws the clock faults on a quorum of masters, on a
// stream of their own, after the rest of the schedule, so that it stays
// as it was (and the cases shrunk from it, by index):
//   - with DriftQuorum, stretches of 2 to 6 TTLs, a TTL to 4 apart, in
//     which a quorum of masters (whose keys decide every lease there)
//     runs fast at the engine's DriftFactor, the most a validity allows
//     for: a lease trusted to its validity finds its keys there still,
//     by DriftFloor, unless the validity leaves the drift out. With
//     OutOfModel, three times faster: past the bound, where two holders
//     at once are expected.
//   - with Expiry, the clocks of a quorum of masters or more stepping
//     back together (NTP correcting a shared upstream's error), by an
//     eighth to a quarter of MaxTTL (the TTL here), 2 to 5 TTLs apart:
//     within the clock assumption of fencing, whose counters expire
//     MaxTTL past their values on these clocks. Where every master of a
//     token's next quorum stepped back, only a counter still there keeps
//     the next token above it.
func drawClockFaults(cfg Config) []Fault {
	if !cfg.DriftQuorum && !cfg.Expiry {
		return nil
	}
	r := rand.New(rand.NewPCG(cfg.Seed, streamClockFaults))
	uniform := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.Int64N(int64(hi-lo)))
	}
	ttl, quorum := cfg.TTL, cfg.Masters/2+1
	var out []Fault
	if cfg.DriftQuorum {
		rate := 1 + engine.DefaultDriftFactor
		if cfg.OutOfModel {
			rate = 1 + 3*engine.DefaultDriftFactor
		}
		for at := uniform(0, 2*ttl); at < cfg.Duration; {
			f := Fault{At: at, For: uniform(2*ttl, 6*ttl), Kind: FaultDriftQuorum, Master: r.IntN(cfg.Masters), Count: quorum, Rate: rate, Late: -1}
			out = append(out, f)
			at += f.For + uniform(ttl, 4*ttl)
		}
	}
	if cfg.Expiry {
		for at := uniform(ttl, 3*ttl); at < cfg.Duration; at += uniform(2*ttl, 5*ttl) {
			jump := uniform(ttl/8, ttl/4)
			// For: the keys on those masters live as much longer.
			f := Fault{At: at, For: jump, Kind: FaultStepBack, Master: r.IntN(cfg.Masters), Jump: jump, Late: -1}
			f.Count = quorum + r.IntN(cfg.Masters-quorum+1)
			out = append(out, f)
		}
	}
	return out
}

// drawFaults is DrawFaults's schedule for every kind of vote, and the
// seed's profile.
func drawFaults(cfg Config) (_ []Fault, profile int) {
	r := rand.New(rand.NewPCG(cfg.Seed, streamFaults))
	uniform := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(r.Int64N(int64(hi-lo)))
	}
	profile = profileOf(r)
	if profile == profileNone && !cfg.OutOfModel {
		return nil, profile
	}
	ttl := cfg.TTL
	// A master counts as faulted until its fault ends, and a restarted
	// one until its quarantine (MaxTTL, the TTL here) has ended too.
	busyUntil := make([]time.Duration, cfg.Masters)
	minority := (cfg.Masters - 1) / 2
	var out []Fault
	// The kinds and their weights.
	type kw struct {
		k FaultKind
		w int
	}
	var kinds []kw
	switch profile {
	case profileNone, profileAll:
		kinds = []kw{{FaultPause, 3}, {FaultHang, 3}, {FaultRefuse, 2}, {FaultRestart, 4}, {FaultBreak, 3},
			{FaultSlow, 2}, {FaultDrift, 1}, {FaultBreakConn, 4},
			{FaultReplace, 2}, {FaultCancel, 2}, {FaultPauseHolders, 2}, {FaultFreeze, 2}, {FaultStall, 2}, {FaultBreakClient, 2}}
	case profileClients:
		kinds = []kw{{FaultReplace, 2}, {FaultCancel, 2}, {FaultPauseHolders, 2}, {FaultFreeze, 2}, {FaultStall, 2}, {FaultBreakClient, 2}}
	case profileRestarts:
		kinds = []kw{{FaultRestart, 8}, {FaultSlow, 1}, {FaultHang, 1}, {FaultReplace, 1}}
	case profileNetwork:
		kinds = []kw{{FaultBreak, 3}, {FaultBreakConn, 3}, {FaultStall, 3}, {FaultBreakClient, 6}, {FaultSlow, 1}}
	}
	if cfg.OutOfModel {
		kinds = append(kinds, kw{FaultJumpClock, 4})
	}
	total := 0
	for _, x := range kinds {
		total += x.w
	}
	at := time.Duration(0)
	for {
		if profile == profileRestarts {
			// Several masters restart between two holds of a resource:
			// what makes them forget its fencing counter.
			at += uniform(ttl/20, ttl/2)
		} else {
			at += uniform(ttl/5, 2*ttl)
		}
		if at >= cfg.Duration {
			return out, profile
		}
		pick := r.IntN(total)
		var k FaultKind
		for _, x := range kinds {
			if pick < x.w {
				k = x.k
				break
			}
			pick -= x.w
		}
		// Targets from raw draws, so that a case shrunk to fewer clients
		// keeps its schedule (a client's fault moves to another client).
		f := Fault{At: at, Kind: k, Master: int(r.Uint64() % uint64(cfg.Masters)), Client: int(r.Uint64() % uint64(cfg.Clients)),
			Conn: int(r.Uint64() % 4), For: uniform(ttl/10, 2*ttl), Late: -1}
		if r.IntN(2) == 0 {
			f.Late = uniform(0, ttl/2)
		}
		f.OnWrite = r.IntN(2) == 0
		switch k {
		case FaultSlow:
			f.Latency = simredis.Latency{Min: 5 * time.Millisecond, Jitter: 100 * time.Millisecond}
		case FaultDrift:
			// Within half the engine's DriftFactor (1%): the model.
			f.Rate = 1 + (r.Float64()-0.5)*0.01
		case FaultPauseHolders:
			f.For = uniform(ttl, 3*ttl)
		case FaultStall:
			// Long enough to hold an Extend, short enough for the next to
			// come on new connections before the held ones arrive.
			f.For, f.Late = uniform(ttl/20, ttl/4), uniform(ttl/10, ttl/2)
		case FaultBreakClient:
			// Late enough for the next operation to overtake the one caught.
			f.Late = uniform(ttl/10, ttl/2)
		case FaultJumpClock:
			f.Jump = uniform(ttl, 3*ttl)
		case FaultRestart:
			if profile == profileRestarts {
				f.For = uniform(ttl/20, ttl/2)
			}
		}
		if k.onMaster() && k != FaultDrift {
			// Keep a majority of masters healthy: pick one that is free,
			// or skip the fault.
			busy := 0
			for _, u := range busyUntil {
				if u > at {
					busy++
				}
			}
			if busy >= minority && busyUntil[f.Master] <= at {
				continue
			}
			until := at + f.For
			if (k == FaultRestart && profile != profileRestarts) || k == FaultJumpClock {
				// Until its quarantine ends; in the restarts profile, masters
				// restart one after another, each once the last is back,
				// quarantined or not: more than a majority may sit out at
				// once, which stops the locks but must not break them.
				until += ttl + ttl/2
			}
			busyUntil[f.Master] = max(busyUntil[f.Master], until)
		}
		out = append(out, f)
	}
}

// drawClusterFaults draws the faults inside cluster votes, on a stream
// of their own, so that the rest of a seed's schedule (and the cases
// shrunk from it, by index) stays as it was: a shard's primary paused,
// within the minority of votes faulted at once that the schedule so far
// (main) leaves; slot migrations, half of them on every cluster vote at
// once (one fault each, the same slot: a resharding of them all). A
// migration does not count toward the minority: it makes a vote's
// scripts fail on one slot for a while (the engine's guard), which costs
// availability only. The profile without faults gets one resharding in
// its first quarter, and quiet after it: what a waiter's subscriptions
// must survive for the tight bound to hold. None in the clients'
// profile.
func drawClusterFaults(cfg Config, profile int, main []Fault) []Fault {
	if cfg.Clusters == 0 || profile == profileClients {
		return nil
	}
	r := rand.New(rand.NewPCG(cfg.Seed, streamClusterFaults))
	ttl := cfg.TTL
	uniform := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(r.Int64N(int64(hi-lo)))
	}
	first := cfg.Masters - cfg.Clusters
	if profile == profileNone {
		f := Fault{Kind: FaultMigrate, At: uniform(ttl/2, cfg.Duration/4), For: uniform(ttl/10, ttl/2), Pick: r.Uint64(), Conn: int(r.Uint64() % 4), Late: -1, Every: true}
		var out []Fault
		for v := first; v < cfg.Masters && f.At < cfg.Duration; v++ {
			f.Master = v
			out = append(out, f)
		}
		return out
	}
	type busy struct {
		m        int
		from, to time.Duration
	}
	var windows []busy
	for _, f := range main {
		if f.Kind.onMaster() && f.Kind != FaultDrift {
			to := f.At + f.For
			if f.Kind == FaultRestart || f.Kind == FaultJumpClock {
				to += ttl + ttl/2
			}
			windows = append(windows, busy{f.Master, f.At, to})
		}
	}
	minority := (cfg.Masters - 1) / 2
	var out []Fault
	for at := time.Duration(0); ; {
		at += uniform(ttl, 4*ttl)
		if at >= cfg.Duration {
			return out
		}
		f := Fault{At: at, Master: first + int(r.Uint64()%uint64(cfg.Clusters)), Conn: int(r.Uint64() % 4),
			For: uniform(ttl/10, 2*ttl), Pick: r.Uint64(), Late: -1}
		if r.IntN(5) < 3 {
			f.Kind = FaultMigrate
			if r.IntN(2) == 0 {
				for v := first; v < cfg.Masters; v++ {
					g := f
					g.Master = v
					out = append(out, g)
				}
			} else {
				out = append(out, f)
			}
			continue
		}
		f.Kind = FaultPauseShard
		others, self := make(map[int]bool), false
		for _, w := range windows {
			if w.from < at+f.For && at < w.to {
				others[w.m] = true
				self = self || w.m == f.Master
			}
		}
		if len(others) >= minority && !self {
			continue
		}
		windows = append(windows, busy{f.Master, at, at + f.For})
		out = append(out, f)
	}
}

// applyFaults runs the schedule until ctx ends, recording each fault
// with its index in the drawn schedule; whatever it leaves broken the
// caller heals.
func applyFaults(ctx context.Context, faults []Fault, index []int, votes []*vote, clients []*client, n *simredis.Network, h *History, lat simredis.Latency) {
	var wg sync.WaitGroup
	defer wg.Wait()
	// The slots each instant's migrations move: drawn once, for every
	// cluster migrated at that instant.
	slots := make(map[time.Duration][]int)
	for i, f := range faults {
		if !sleep(ctx, time.Until(h.start.Add(f.At))) {
			return
		}
		if f.Client >= len(clients) || f.Master >= len(votes) {
			continue
		}
		now := h.since(time.Now())
		rec := h.fault(FaultRecord{Fault: f, Index: index[i], At: now, End: now})
		v, c := votes[f.Master], clients[f.Client]
		m := v.at(f.Conn)
		// heal runs the end of a lasting fault after For, or when the run
		// ends, and records when.
		heal := func(undo func()) {
			wg.Go(func() {
				sleep(ctx, f.For)
				undo()
				h.faultEnded(rec, h.since(time.Now()))
			})
		}
		switch f.Kind {
		case FaultPause:
			v.each((*simredis.Master).Pause)
			heal(func() { v.each((*simredis.Master).Resume) })
		case FaultHang:
			v.each(func(m *simredis.Master) { m.Partition(simredis.Hang) })
			heal(func() { v.each(func(m *simredis.Master) { m.Partition(simredis.Connected) }) })
		case FaultRefuse:
			v.each(func(m *simredis.Master) { m.Partition(simredis.Refuse) })
			heal(func() { v.each(func(m *simredis.Master) { m.Partition(simredis.Connected) }) })
		case FaultRestart:
			if v.cl != nil && v.failover(f.Conn) {
				wg.Go(func() {
					v.failoverFor(ctx, f, h)
					h.faultEnded(rec, h.since(time.Now()))
				})
				break
			}
			m.Kill()
			heal(m.Start)
		case FaultBreak:
			if f.OnWrite {
				v.each(func(m *simredis.Master) { m.ArmClient("", -1, f.Late, true) })
				heal(func() { v.each(func(m *simredis.Master) { m.ArmClient("", -1, 0, false) }) })
				break
			}
			v.each(func(m *simredis.Master) { m.BreakConnections(f.Late) })
		case FaultSlow:
			v.each(func(m *simredis.Master) { m.SetLatency(f.Latency) })
			heal(func() { v.each(func(m *simredis.Master) { m.SetLatency(lat) }) })
		case FaultDrift:
			v.each(func(m *simredis.Master) { m.SetRate(f.Rate) })
			heal(func() { v.each(func(m *simredis.Master) { m.SetRate(1) }) })
		case FaultJumpClock:
			v.each(func(m *simredis.Master) { m.JumpClock(f.Jump) })
		case FaultDriftQuorum:
			for _, i := range f.masters(len(votes)) {
				votes[i].each(func(m *simredis.Master) { m.SetRate(f.Rate) })
			}
			heal(func() {
				for _, i := range f.masters(len(votes)) {
					votes[i].each(func(m *simredis.Master) { m.SetRate(1) })
				}
			})
		case FaultStepBack:
			for _, i := range f.masters(len(votes)) {
				votes[i].each(func(m *simredis.Master) { m.JumpClock(-f.Jump) })
			}
			heal(func() {})
		case FaultPauseShard:
			if v.cl == nil {
				break
			}
			m.Pause()
			heal(m.Resume)
		case FaultMigrate:
			if v.cl == nil {
				break
			}
			moving, ok := slots[f.At]
			if !ok {
				moving = migrationSlots(votes, f)
				slots[f.At] = moving
			}
			wg.Go(func() {
				v.migrate(ctx, f, moving, h)
				h.faultEnded(rec, h.since(time.Now()))
			})
		case FaultBreakConn:
			if f.OnWrite {
				m.ArmClient(c.name, f.Conn, f.Late, true)
				heal(func() { m.ArmClient(c.name, f.Conn, 0, false) })
				break
			}
			m.BreakClient(c.name, f.Conn, f.Late)
		case FaultBreakClient:
			eachNode(votes, func(m *simredis.Master) { m.ArmClient(c.name, -1, f.Late, true) })
			heal(func() { eachNode(votes, func(m *simredis.Master) { m.ArmClient(c.name, -1, 0, false) }) })
		case FaultReplace:
			wg.Go(func() {
				c.replace()
				h.faultEnded(rec, h.since(time.Now()))
			})
		case FaultCancel:
			c.resetLockCtx()
		case FaultPauseHolders:
			c.pause(f.For)
			heal(func() {})
		case FaultFreeze:
			c.freeze(f.For)
			heal(c.thaw)
		case FaultStall:
			n.Stall(c.name)
			heal(func() {
				eachNode(votes, func(m *simredis.Master) { m.BreakClient(c.name, -1, f.Late) })
				n.Unstall(c.name)
			})
		}
	}
}
