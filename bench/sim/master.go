package sim

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// RedisVersion is what the simulated masters report: 7.2, so that the
// engine uses SET NX GET.
const RedisVersion = "7.2.0"

// Master is a simulated Redis master: a miniredis server (which runs the
// engine's Lua scripts with gopher-lua) behind the simulated network, with
// its own clock, identity and faults.
//
// Its clock is the bubble's virtual time, scaled by a drift rate and moved
// by jumps: key expiry, TIME and INFO's server_time_usec all follow it.
// miniredis is told the time (SetTime, with ClockTTL) whenever the master
// reads commands off a connection, which is the instant they run: virtual
// time stands still while any goroutine of the bubble can run.
type Master struct {
	Addr  string
	Index int

	seed uint64

	mu sync.Mutex
	mr *miniredis.Miniredis
	// Identity: a restart draws a new run_id and resets the uptime.
	runID    string
	restarts int
	bootedAt time.Time // virtual instant the uptime counts from
	// The clock: base at the virtual instant anchor, running at rate.
	anchor time.Time
	base   time.Time
	rate   float64
	// Faults.
	lat       Latency
	paused    bool
	partition PartitionMode
	down      bool // killed and not started again
	// changed is closed and replaced on every fault change, to wake the
	// readers of this master's connections.
	changed chan struct{}
	pipes   map[*pipe]struct{}
	// commands counts what the master ran, scripts' calls included, by
	// name; script calls over several keys (the engine's coalesced calls)
	// also count as "EVALSHA+" or "EVAL+".
	commands map[string]int
}

// MasterOptions are a master's initial clock and network.
type MasterOptions struct {
	// Uptime is how long the master has been up when the simulation
	// starts; a master younger than MaxTTL is quarantined by
	// QuarantineAlways.
	Uptime time.Duration
	// Offset is the master's clock minus virtual time at the start; Rate
	// is how fast it runs (1: exactly with virtual time; 1.0001 gains
	// 100µs a second). Zero selects 1.
	Offset time.Duration
	Rate   float64
	// Latency of its connections. Zero selects DefaultLatency.
	Latency Latency
}

// NewMaster starts master index at addr on network n. Call it inside the
// bubble.
func NewMaster(n *Network, seed uint64, index int, addr string, o MasterOptions) *Master {
	if o.Rate == 0 {
		o.Rate = 1
	}
	if o.Latency == (Latency{}) {
		o.Latency = DefaultLatency
	}
	now := time.Now()
	m := &Master{
		Addr: addr, Index: index, seed: seed,
		anchor: now, base: now.Add(o.Offset), rate: o.Rate,
		lat:      o.Latency,
		changed:  make(chan struct{}),
		pipes:    make(map[*pipe]struct{}),
		commands: make(map[string]int),
	}
	m.mu.Lock()
	m.startLocked()
	m.bootedAt = now.Add(-o.Uptime)
	m.mu.Unlock()
	n.add(m)
	return m
}

// startLocked boots a fresh miniredis: no keys, no scripts, a new run_id.
func (m *Master) startLocked() {
	mr := miniredis.NewMiniRedis()
	// Dial starts the server without a listener; the pipe it opens is
	// not needed, our own connections are served with ServeConn.
	if c, err := mr.Dial(); err == nil {
		c.Close()
	}
	mr.SetTime(m.nowLocked())
	mr.ClockTTL(true)
	mr.Server().SetPreHook(m.hook)
	m.mr = mr
	m.runID = m.drawRunID()
	m.bootedAt = time.Now()
	m.down = false
}

// drawRunID is 40 hex digits from the seed, the master and its restarts,
// so that identities are the same in every run of a seed.
func (m *Master) drawRunID() string {
	r := rand.New(rand.NewPCG(m.seed, uint64(m.Index)<<32|uint64(m.restarts)))
	var b [20]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return hex.EncodeToString(b[:])
}

// Now is the master's clock.
func (m *Master) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nowLocked()
}

func (m *Master) nowLocked() time.Time {
	return m.base.Add(time.Duration(float64(time.Since(m.anchor)) * m.rate))
}

// tick tells miniredis the master's time, before it runs what it read.
func (m *Master) tick() {
	m.mu.Lock()
	mr, now := m.mr, m.nowLocked()
	m.mu.Unlock()
	mr.SetTime(now)
}

// hook answers what miniredis lacks (see the package doc): INFO with the
// fields the engine reads. It runs before every command, including those
// a script calls; it must not lock miniredis.
func (m *Master) hook(c *server.Peer, cmd string, args ...string) bool {
	m.mu.Lock()
	m.commands[cmd]++
	if (cmd == "EVALSHA" || cmd == "EVAL") && len(args) > 1 && args[1] != "0" && args[1] != "1" {
		m.commands[cmd+"+"]++
	}
	m.mu.Unlock()
	if cmd != "INFO" {
		return false
	}
	section := "all"
	if len(args) > 0 {
		section = strings.ToLower(args[0])
	}
	m.mu.Lock()
	now, runID, up := m.nowLocked(), m.runID, time.Since(m.bootedAt)
	m.mu.Unlock()
	var b strings.Builder
	if section == "all" || section == "default" || section == "server" {
		fmt.Fprintf(&b, "# Server\r\nredis_version:%s\r\nredis_mode:standalone\r\nrun_id:%s\r\nuptime_in_seconds:%d\r\nserver_time_usec:%d\r\n",
			RedisVersion, runID, int64(up/time.Second), now.UnixMicro())
	}
	if section == "all" || section == "default" || section == "replication" {
		b.WriteString("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n")
	}
	c.WriteBulk(b.String())
	return true
}

// latency is the delay model of the master's connections now.
func (m *Master) latency() Latency {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lat
}

// holds reports whether the master's faults hold back what arrives at
// one end of its connections (the master's end if server), and the
// channel that is closed when they change.
func (m *Master) holds(server bool) (bool, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.partition == Hang || (server && m.paused), m.changed
}

// changedLocked wakes every reader to look at the faults again.
func (m *Master) changedLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// accept opens a connection to the master, as a dial would: refused when
// the master is down or refuses, hung until ctx ends while it is
// partitioned by Hang, and otherwise after a round trip (a paused master's
// kernel still accepts).
func (m *Master) accept(ctx context.Context, name string, rng *rand.Rand) (net.Conn, error) {
	for {
		m.mu.Lock()
		refused := m.down || m.partition == Refuse
		hang, changed, lat := m.partition == Hang, m.changed, m.lat
		m.mu.Unlock()
		if refused {
			return nil, &net.OpError{Op: "dial", Net: "sim", Addr: simAddr(m.Addr), Err: syscall.ECONNREFUSED}
		}
		if !hang {
			t := time.NewTimer(lat.draw(rng) + lat.draw(rng))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, &net.OpError{Op: "dial", Net: "sim", Addr: simAddr(m.Addr), Err: ctx.Err()}
			}
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, &net.OpError{Op: "dial", Net: "sim", Addr: simAddr(m.Addr), Err: ctx.Err()}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down || m.partition == Refuse {
		return nil, &net.OpError{Op: "dial", Net: "sim", Addr: simAddr(m.Addr), Err: syscall.ECONNREFUSED}
	}
	p := &pipe{master: m, rng: rng}
	p.client = &Conn{p: p, local: simAddr(name), remote: simAddr(m.Addr), wake: make(chan struct{}, 1)}
	p.server = &Conn{p: p, server: true, local: simAddr(m.Addr), remote: simAddr(name), wake: make(chan struct{}, 1)}
	m.pipes[p] = struct{}{}
	m.mr.Server().ServeConn(p.server)
	return p.client, nil
}

// forget drops a pipe whose client closed it.
func (m *Master) forget(p *pipe) {
	m.mu.Lock()
	delete(m.pipes, p)
	m.mu.Unlock()
}

// takePipesLocked empties the master's pipe set and returns it, for a
// fault to break them after letting go of m.mu (a pipe's lock comes
// before the master's).
func (m *Master) takePipesLocked() []*pipe {
	ps := make([]*pipe, 0, len(m.pipes))
	for p := range m.pipes {
		ps = append(ps, p)
	}
	clear(m.pipes)
	return ps
}

// Kill stops the master as a crash does: every connection breaks, and
// what it had not read is lost; dials are refused until Start.
func (m *Master) Kill() {
	m.mu.Lock()
	if m.down {
		m.mu.Unlock()
		return
	}
	m.down = true
	mr, ps := m.mr, m.takePipesLocked()
	m.changedLocked()
	m.mu.Unlock()
	for _, p := range ps {
		p.Break(-1)
	}
	mr.Close()
}

// Start boots a killed master with amnesia: no keys, no scripts, a new
// run_id, uptime from now.
func (m *Master) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.down {
		return
	}
	m.restarts++
	m.startLocked()
	m.changedLocked()
}

// Restart is Kill then Start.
func (m *Master) Restart() {
	m.Kill()
	m.Start()
}

// Pause stops the master as SIGSTOP does: connections are accepted (by
// the kernel) but nothing is read or answered until Resume, when
// everything sent meanwhile arrives at once.
func (m *Master) Pause() { m.setPaused(true) }

// Resume ends a Pause.
func (m *Master) Resume() { m.setPaused(false) }

func (m *Master) setPaused(p bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused = p
	m.changedLocked()
}

// Partition cuts the master off from every client (Hang or Refuse), or
// heals the cut (Connected).
func (m *Master) Partition(mode PartitionMode) {
	m.mu.Lock()
	m.partition = mode
	var ps []*pipe
	if mode == Refuse {
		ps = m.takePipesLocked()
	}
	m.changedLocked()
	m.mu.Unlock()
	for _, p := range ps {
		p.Break(-1)
	}
}

// BreakConnections breaks every open connection to the master (see
// pipe.Break): with late >= 0, commands in flight still arrive, late.
func (m *Master) BreakConnections(late time.Duration) int {
	m.mu.Lock()
	ps := m.takePipesLocked()
	m.mu.Unlock()
	for _, p := range ps {
		p.Break(late)
	}
	return len(ps)
}

// Heal ends every fault: a killed master starts (with amnesia), a paused
// one resumes, a partition heals, and the latency is l again. The clock
// keeps its rate and jumps.
func (m *Master) Heal(l Latency) {
	m.Start()
	m.Resume()
	m.Partition(Connected)
	m.SetLatency(l)
}

// SetLatency changes the delay of writes from now on (slowness).
func (m *Master) SetLatency(l Latency) {
	m.mu.Lock()
	m.lat = l
	m.mu.Unlock()
}

// SetRate changes how fast the master's clock runs from now on.
func (m *Master) SetRate(rate float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.base, m.anchor, m.rate = m.nowLocked(), time.Now(), rate
}

// JumpClock moves the master's clock by d at once (an NTP step, or a
// clock set by hand). Forward past a key's expiry expires it, as on
// Redis; backward does not lengthen keys' lives, unlike Redis, which
// stores absolute expiry times (see the package doc).
func (m *Master) JumpClock(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.base, m.anchor = m.nowLocked().Add(d), time.Now()
}

// RunID is the master's current run_id.
func (m *Master) RunID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runID
}

// Keys returns the master's keys and their values or types, sorted, for
// checks after a run: a string key's value, or "<type>" for others.
func (m *Master) Keys() []string {
	m.mu.Lock()
	mr, now := m.mr, m.nowLocked()
	m.mu.Unlock()
	mr.SetTime(now)
	var out []string
	for _, k := range mr.Keys() {
		if v, err := mr.Get(k); err == nil {
			out = append(out, k+"="+strconv.Quote(v))
		} else {
			out = append(out, k+"=<"+mr.Type(k)+">")
		}
	}
	return out
}

// Commands returns how many times the master ran each command (see
// Master.commands).
func (m *Master) Commands() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.commands)
}

// Close shuts the master down at the end of a run.
func (m *Master) Close() {
	m.mu.Lock()
	mr, down := m.mr, m.down
	m.down = true
	ps := m.takePipesLocked()
	m.changedLocked()
	m.mu.Unlock()
	for _, p := range ps {
		p.Break(-1)
	}
	if !down {
		mr.Close()
	}
}
