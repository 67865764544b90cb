package simredis

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RedisVersion is what the simulated masters report: 7.2, so that the
// engine uses SET NX GET.
const RedisVersion = "7.2.0"

// Master is a simulated Redis master: a store (store.go) served by one
// goroutine, as Redis serves its clients from one thread, behind the
// simulated network, with its own clock, identity and faults.
//
// Its loop runs commands in the order they arrive, whichever connection
// they come on, and commands that arrive at one virtual instant in the
// order of their connections' creation, so that the scheduler does not
// decide the order of two clients' commands. Its clock is the bubble's
// virtual time, scaled by a drift rate and moved by jumps: key expiry,
// TIME and INFO's server_time_usec follow it. It logs every change of
// every key (Keys, KeyLog) for the checkers, with the master's own
// deadlines (see Master.VirtualAt).
type Master struct {
	Addr  string
	Index int

	// node is the node's number in its cluster plus one (0 for a master
	// that is a vote of its own), and cl its place there (nil for one).
	node int
	cl   *clusterRole

	seed uint64
	net  *Network
	// wake has room for one signal: new bytes on a connection, a closed
	// connection or a fault change; the loop looks again.
	wake chan struct{}
	done chan struct{} // closed when the loop has ended

	// mu guards the store and everything below. The loop holds it while
	// it runs commands; a pipe's lock comes after it.
	mu sync.Mutex
	st *store
	// Identity: a restart draws a new run_id and resets the uptime.
	runID    string
	restarts int
	bootedAt time.Time // virtual instant the uptime counts from
	// clock is the master's clock since NewMaster, one segment per rate
	// change or jump, the current one last.
	clock []clockSeg
	down  bool // killed and not started again
	close bool // closed for good: the loop ends
	pipes []*pipe
	seq   int // pipes accepted, for their order
	// commands counts what the master ran, scripts' calls included, by
	// name; script calls over several keys (the engine's coalesced calls)
	// also count as "EVALSHA+" or "EVAL+".
	commands map[string]int
	// log is every change of a key, in order (see KeyRecord); start is
	// virtual time 0 for its instants. client is the connection whose
	// command is running, for the log.
	log    []KeyRecord
	leaves []Leave
	alls   []AllAttempt
	start  time.Time
	client string
	cause  string
	// asking: the command running came after ASKING on its connection.
	asking bool

	// fmu guards the faults the connections read; it is taken last.
	fmu       sync.Mutex
	lat       Latency
	paused    bool
	partition PartitionMode
	// changed is closed and replaced on every fault change, to wake the
	// clients' readers.
	changed chan struct{}
}

// clockSeg is one stretch of a master's clock: from virtual instant from
// on, it reads base plus the virtual time since, times rate.
type clockSeg struct {
	from time.Time
	base time.Time
	rate float64
}

// KeyRecord is one change of a key on one master: its state from At on.
type KeyRecord struct {
	// At is virtual time since the master started.
	At     time.Duration
	Master int
	Key    string
	// Gone: the key does not exist (deleted, or found expired); else
	// Value is its string value, or a sorted set's members in order, as
	// "<zset a b c>".
	Gone  bool
	Value string
	// Scores are a read/write lock's sorted set's members' scores (its
	// holders' and its waiting writers'; see rwScored), which say until
	// when each lives: nil for other keys.
	Scores map[string]float64
	// ExpireAt is its deadline on the master's clock (zero: none); see
	// Master.VirtualAt for the virtual instant.
	ExpireAt time.Time
	// Cause is the command that changed it (the script's first line for
	// EVAL and EVALSHA), "restart" for amnesia.
	Cause string
	// Client is the connection's client ("c0"), for a command.
	Client string
}

func (r KeyRecord) String() string {
	state := strconv.Quote(r.Value)
	if r.Gone {
		state = "gone"
	} else if !r.ExpireAt.IsZero() {
		state += " until " + r.ExpireAt.Format("15:04:05.000000") + " (master clock)"
	}
	who := r.Cause
	if r.Client != "" {
		who = r.Client + " " + r.Cause
	}
	return fmt.Sprintf("%12s master%d %s: %s, by %s", fmtDur(r.At), r.Master, strings.ToValidUTF8(r.Key, "?"), state, who)
}

// fmtDur prints virtual time as seconds with microseconds, as bench/sim's
// reports print it, so that a key record reads in their columns.
func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.6fs", d.Seconds())
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
// bubble; Close ends its goroutine.
func NewMaster(n *Network, seed uint64, index int, addr string, o MasterOptions) *Master {
	return newMaster(n, seed, index, 0, addr, o, nil)
}

// NewMasters starts count masters on network n, at "master0:6379",
// "master1:6379"..., numbered from 0, with options o and identities
// drawn from the network's seed, as bench/sim starts its votes: a
// convenience for tests that want a few masters and their addresses for
// engine.Config. Call it inside the bubble; the caller closes them.
func NewMasters(n *Network, count int, o MasterOptions) ([]*Master, []string) {
	ms := make([]*Master, 0, count)
	addrs := make([]string, 0, count)
	for i := range count {
		m := NewMaster(n, n.seed, i, fmt.Sprintf("master%d:6379", i), o)
		ms, addrs = append(ms, m), append(addrs, m.Addr)
	}
	return ms, addrs
}

// newMaster is NewMaster for node node of a cluster (cl), or a master
// (node 0, cl nil).
func newMaster(n *Network, seed uint64, index, node int, addr string, o MasterOptions, cl *clusterRole) *Master {
	if o.Rate == 0 {
		o.Rate = 1
	}
	if o.Latency == (Latency{}) {
		o.Latency = DefaultLatency
	}
	now := time.Now()
	m := &Master{
		Addr: addr, Index: index, seed: seed, net: n, node: node, cl: cl,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		clock:    []clockSeg{{from: now, base: now.Add(o.Offset), rate: o.Rate}},
		lat:      o.Latency,
		changed:  make(chan struct{}),
		commands: make(map[string]int),
		start:    now,
	}
	m.mu.Lock()
	m.startLocked()
	m.bootedAt = now.Add(-o.Uptime)
	m.mu.Unlock()
	n.add(m)
	go m.loop()
	return m
}

// startLocked boots a fresh store: no keys, no scripts, a new run_id.
func (m *Master) startLocked() {
	st := newStore()
	st.changed = m.changedKey
	st.publish = m.publishLocked
	st.spublish = m.spublishLocked
	st.onCommand = m.countLocked
	st.cluster = m.cl != nil
	if m.cl != nil {
		st.nonLocal = m.nonLocalLocked
	}
	m.st = st
	m.runID = m.drawRunID()
	m.bootedAt = time.Now()
	m.down = false
}

// drawRunID is 40 hex digits from the seed, the master and its restarts,
// so that identities are the same in every run of a seed.
func (m *Master) drawRunID() string {
	r := rand.New(rand.NewPCG(m.seed, uint64(m.Index)<<32|uint64(m.node)<<20|uint64(m.restarts)))
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

func (m *Master) nowLocked() time.Time { return m.clock[len(m.clock)-1].at(time.Now()) }

func (c clockSeg) at(v time.Time) time.Time {
	return c.base.Add(time.Duration(float64(v.Sub(c.from)) * c.rate))
}

// VirtualAt is the first virtual instant, at or after from, at which the
// master's clock has passed t: when a key with deadline t expires, as
// far as the clock is known (a later change of rate or a jump that has
// not happened yet is not). Zero t is never.
func (m *Master) VirtualAt(t, from time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return virtualAt(m.clock, t, from)
}

func virtualAt(clock []clockSeg, t, from time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	for i, c := range clock {
		end := time.Time{}
		if i+1 < len(clock) {
			end = clock[i+1].from
			if !end.After(from) {
				continue
			}
		}
		begin := from
		if c.from.After(begin) {
			begin = c.from
		}
		if !c.at(begin).Before(t) {
			return begin
		}
		v := c.from.Add(time.Duration(float64(t.Sub(c.base)) / c.rate))
		if end.IsZero() || v.Before(end) {
			return v
		}
	}
	return time.Time{}
}

// countLocked counts a command the store runs.
func (m *Master) countLocked(args []string) {
	m.commands[args[0]]++
	if (args[0] == "EVALSHA" || args[0] == "EVAL") && len(args) > 2 && args[2] != "0" && args[2] != "1" {
		m.commands[args[0]+"+"]++
	}
}

// changedKey logs key's new state, after the store changed it.
func (m *Master) changedKey(key string) {
	r := KeyRecord{At: time.Since(m.start), Master: m.Index, Key: key, Cause: m.cause, Client: m.client}
	switch e := m.st.keys[key]; {
	case e == nil:
		r.Gone = true
	case e.z != nil:
		r.Value, r.ExpireAt = e.z.String(), e.expireAt
		if rwScored(key, e.z) {
			r.Scores = maps.Clone(e.z.byMember)
		}
	default:
		r.Value, r.ExpireAt = e.str, e.expireAt
	}
	m.log = append(m.log, r)
}

// info answers INFO with the fields the engine reads: the server and
// replication sections.
func (m *Master) infoLocked(section string) string {
	section = strings.ToLower(section)
	var b strings.Builder
	mode, role := m.modeRoleLocked()
	if section == "" || section == "all" || section == "default" || section == "server" {
		fmt.Fprintf(&b, "# Server\r\nredis_version:%s\r\nredis_mode:%s\r\nrun_id:%s\r\nuptime_in_seconds:%d\r\nserver_time_usec:%d\r\n",
			RedisVersion, mode, m.runID, int64(time.Since(m.bootedAt)/time.Second), m.nowLocked().UnixMicro())
	}
	if section == "" || section == "all" || section == "default" || section == "replication" {
		fmt.Fprintf(&b, "# Replication\r\nrole:%s\r\nconnected_slaves:0\r\n", role)
	}
	return b.String()
}

// modeRoleLocked is the node's redis_mode and role: a cluster's node
// that serves no slots is a replica ("slave", as INFO says).
func (m *Master) modeRoleLocked() (mode, role string) {
	if m.cl == nil {
		return "standalone", "master"
	}
	if m.cl.c.isPrimary(m) {
		return "cluster", "master"
	}
	return "cluster", "slave"
}

// loop serves the master's connections until Close.
func (m *Master) loop() {
	defer close(m.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		m.mu.Lock()
		if m.close {
			m.mu.Unlock()
			return
		}
		p, at := m.nextLocked()
		now := time.Now()
		if p != nil && !at.After(now) {
			m.serveLocked(p)
			m.mu.Unlock()
			continue
		}
		m.mu.Unlock()
		var due <-chan time.Time
		if p != nil {
			timer.Reset(at.Sub(now))
			due = timer.C
		}
		select {
		case <-m.wake:
		case <-due:
		}
		timer.Stop()
	}
}

// poke wakes the loop.
func (m *Master) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// nextLocked returns the connection whose next bytes arrive first (the
// earliest created among those that arrive at once), and when; or one
// whose client closed, to end at once.
func (m *Master) nextLocked() (*pipe, time.Time) {
	var best *pipe
	var bestAt time.Time
	now := time.Now()
	for _, p := range m.pipes {
		at, ok := p.nextArrival(now)
		if ok && (best == nil || at.Before(bestAt)) {
			best, bestAt = p, at
		}
	}
	return best, bestAt
}

// serveLocked takes p's next chunk and runs the commands it completes,
// then writes their replies as one chunk; or ends p's session when its
// client has gone.
func (m *Master) serveLocked(p *pipe) {
	data, ended := p.take()
	if ended {
		m.endLocked(p)
		return
	}
	p.in = append(p.in, data...)
	var out []byte
	m.client = p.client
	for {
		args, n, err := parseCommand(p.in)
		if err != nil {
			out = errorReply("ERR Protocol error").appendRESP(out, p.resp3)
			p.server.Write(out)
			p.server.Close()
			m.endLocked(p)
			return
		}
		if n == 0 {
			break
		}
		p.in = p.in[n:]
		out = m.execLocked(p, args, out)
	}
	if len(p.in) == 0 {
		p.in = nil
	}
	if len(out) > 0 {
		p.server.Write(out)
	}
	if p.quit {
		p.server.Close()
		m.endLocked(p)
	}
}

// endLocked forgets a connection whose client closed or broke it.
func (m *Master) endLocked(p *pipe) {
	if i := slices.Index(m.pipes, p); i >= 0 {
		m.pipes = slices.Delete(m.pipes, i, i+1)
	}
	p.subs, p.ssubs = nil, nil
}

// execLocked runs one command for p's client and appends its replies.
func (m *Master) execLocked(p *pipe, args []string, out []byte) []byte {
	args[0] = strings.ToUpper(args[0])
	a := args[1:]
	m.st.now = m.nowLocked()
	switch args[0] {
	case "HELLO":
		m.countLocked(args)
		if len(a) > 0 {
			switch a[0] {
			case "2":
				p.resp3 = false
			case "3":
				p.resp3 = true
			default:
				return errorReply("NOPROTO unsupported protocol version").appendRESP(out, p.resp3)
			}
		}
		mode, role := m.modeRoleLocked()
		proto := int64(2)
		if p.resp3 {
			proto = 3
		}
		return reply{kind: rMap, elems: []reply{
			bulkReply("server"), bulkReply("redis"), bulkReply("version"), bulkReply(RedisVersion),
			bulkReply("proto"), intReply(proto), bulkReply("id"), intReply(int64(p.seq)),
			bulkReply("mode"), bulkReply(mode), bulkReply("role"), bulkReply(role),
			bulkReply("modules"), arrayReply(nil),
		}}.appendRESP(out, p.resp3)
	case "CLIENT", "SELECT", "AUTH":
		m.countLocked(args)
		return okReply.appendRESP(out, p.resp3)
	case "QUIT":
		p.quit = true
		return okReply.appendRESP(out, p.resp3)
	case "PING":
		m.countLocked(args)
		if len(a) > 0 {
			return bulkReply(a[0]).appendRESP(out, p.resp3)
		}
		return statusReply("PONG").appendRESP(out, p.resp3)
	case "INFO":
		m.countLocked(args)
		section := ""
		if len(a) > 0 {
			section = a[0]
		}
		return bulkReply(m.infoLocked(section)).appendRESP(out, p.resp3)
	case "SUBSCRIBE", "UNSUBSCRIBE":
		m.countLocked(args)
		return m.subscribeLocked(p, args[0] == "SUBSCRIBE", a, out)
	case "CLUSTER":
		if m.cl == nil {
			return errorReply("ERR This instance has cluster support disabled").appendRESP(out, p.resp3)
		}
		m.countLocked(args)
		return m.cl.c.clusterReply(m, a).appendRESP(out, p.resp3)
	}
	if args[0] == "ASKING" {
		if m.cl == nil {
			return errorReply("ERR This instance has cluster support disabled").appendRESP(out, p.resp3)
		}
		m.countLocked(args)
		p.asking = true
		return okReply.appendRESP(out, p.resp3)
	}
	// ASKING lasts one command.
	asking := p.asking
	p.asking = false
	if m.cl != nil {
		if r, ok := m.routeLocked(args, asking); !ok {
			return r.appendRESP(out, p.resp3)
		}
	}
	m.asking = asking
	defer func() { m.asking = false }()
	switch args[0] {
	case "SSUBSCRIBE", "SUNSUBSCRIBE":
		m.countLocked(args)
		return m.ssubscribeLocked(p, args[0] == "SSUBSCRIBE", a, out)
	}
	m.cause = args[0]
	if (args[0] == "EVALSHA" || args[0] == "EVAL") && len(a) > 0 {
		m.cause = args[0] + " " + scriptName(m.st, args[0], a[0])
	}
	r := m.st.exec(args)
	m.noteLeaves(args)
	m.noteAll(args)
	m.cause = ""
	return r.appendRESP(out, p.resp3)
}

// Leave is the arrival at a master of a waiter's leave of a resource's
// queue after it acquired (the engine's leaveScript, or a plain ZREM of
// the queue), whether or not it changed anything: the turn checker asks
// whether the engine's leave had reached a master before a late release.
type Leave struct {
	At       time.Duration
	Master   int
	Resource string
	ID       string
}

// noteLeaves records the leaves a command carries. The caller holds mu,
// with m.cause naming the command.
func (m *Master) noteLeaves(args []string) {
	at := time.Since(m.start)
	switch {
	case args[0] == "ZREM" && len(args) > 2 && strings.HasPrefix(args[1], queuePrefix):
		for _, id := range args[2:] {
			m.leaves = append(m.leaves, Leave{At: at, Master: m.Index, Resource: strings.TrimPrefix(args[1], queuePrefix), ID: id})
		}
	case strings.HasSuffix(m.cause, " leave") && len(args) > 3:
		// EVALSHA sha numkeys keys... argv...: one key and its id, or a
		// coalesced call whose ARGV gives each key a count and its args.
		n, err := strconv.Atoi(args[2])
		if err != nil || len(args) < 3+n {
			return
		}
		keys, argv := args[3:3+n], args[3+n:]
		if len(argv) == 1 {
			// One key, or a lease on several resources, whose call gives
			// every key the same id.
			for _, k := range keys {
				m.leaves = append(m.leaves, Leave{At: at, Master: m.Index, Resource: k, ID: argv[0]})
			}
			return
		}
		for _, k := range keys {
			if len(argv) < 2 {
				return
			}
			c, err := strconv.Atoi(argv[0])
			if err != nil || c < 1 || len(argv) < 1+c {
				return
			}
			m.leaves = append(m.leaves, Leave{At: at, Master: m.Index, Resource: k, ID: argv[1]})
			argv = argv[1+c:]
		}
	}
}

// AllAttempt is a multi-resource lock's acquire (the engine's
// acquireAllScript) as it ran on a master: the keys it was for and the
// lease's value, for the all-or-nothing checker.
type AllAttempt struct {
	At     time.Duration
	Master int
	Keys   []string
	Value  string
	Client string
}

// noteAll records an acquire of several resources. The caller holds mu,
// with m.cause naming the command.
func (m *Master) noteAll(args []string) {
	if !strings.HasSuffix(m.cause, " acquire all") || len(args) < 4 {
		return
	}
	// EVALSHA sha numkeys keys... value ttl ...
	n, err := strconv.Atoi(args[2])
	if err != nil || len(args) < 4+n {
		return
	}
	m.alls = append(m.alls, AllAttempt{At: time.Since(m.start), Master: m.Index, Keys: slices.Clone(args[3 : 3+n]), Value: args[3+n], Client: m.client})
}

// AllAttempts returns the acquires of several resources that ran on the
// master (see AllAttempt).
func (m *Master) AllAttempts() []AllAttempt {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.alls)
}

// Leaves returns the leaves that reached the master (see Leave).
func (m *Master) Leaves() []Leave {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.leaves)
}

// scriptName names one of the engine's scripts by a line of its Lua
// (engine: acquire.go, release.go, extend.go, fence.go, queue.go), for
// the key log and the checkers: "acquire all", "release", "undo", "quit",
// "leave", "extend", "fence", "acquire"; or its first line.
func scriptName(st *store, cmd, arg string) string {
	if cmd != "EVALSHA" {
		return nameOf(arg)
	}
	sha := strings.ToLower(arg)
	if name, ok := scriptNames.Load(sha); ok {
		return name.(string)
	}
	body, ok := st.scripts[sha]
	name := nameOf(body)
	if ok {
		scriptNames.Store(sha, name)
	}
	return name
}

// scriptNames caches scriptName's answer by SHA: a body's name never
// changes, and finding it scans the body for every marker.
var scriptNames sync.Map

func nameOf(body string) string {
	for _, k := range scriptKinds {
		if strings.Contains(body, k.marker) {
			return k.name
		}
	}
	line, _, _ := strings.Cut(body, "\n")
	return line
}

// scriptKinds are the engine's scripts and a line only each has, in the
// order to look for them (the release script, and the acquire of several
// resources, hold the quit's lines).
var scriptKinds = []struct{ name, marker string }{
	{"acquire all", "local vals, free, top, held"},
	{"undo", "if w[1] and w[1] ~= "},
	{"release", "redis.call(\"ZREM\", q, id)\n  end\n  local w = redis.call(\"ZPOPMIN\", q)"},
	{"quit", "[1] == id"},
	{"leave", "#id + 1"},
	{"extend", "\"PEXPIRE\", KEYS[1], ttl"},
	{"fence", "local token, value"},
	{"acquire", "local value, ttl, "},
}

// subscribeLocked is SUBSCRIBE and UNSUBSCRIBE: a push per channel.
func (m *Master) subscribeLocked(p *pipe, sub bool, channels []string, out []byte) []byte {
	if sub && len(channels) == 0 {
		return errArgs("subscribe").appendRESP(out, p.resp3)
	}
	if p.subs == nil {
		p.subs = make(map[string]bool)
	}
	kind := "unsubscribe"
	if sub {
		kind = "subscribe"
	}
	if !sub && len(channels) == 0 {
		channels = slices.Sorted(maps.Keys(p.subs))
		if len(channels) == 0 {
			return reply{kind: rPush, elems: []reply{bulkReply(kind), nilReply, intReply(0)}}.appendRESP(out, p.resp3)
		}
	}
	for _, ch := range channels {
		if sub {
			p.subs[ch] = true
		} else {
			delete(p.subs, ch)
		}
		out = reply{kind: rPush, elems: []reply{bulkReply(kind), bulkReply(ch), intReply(int64(len(p.subs)))}}.appendRESP(out, p.resp3)
	}
	return out
}

// ssubscribeLocked is SSUBSCRIBE and SUNSUBSCRIBE: a push per channel.
func (m *Master) ssubscribeLocked(p *pipe, sub bool, channels []string, out []byte) []byte {
	if sub && len(channels) == 0 {
		return errArgs("ssubscribe").appendRESP(out, p.resp3)
	}
	if p.ssubs == nil {
		p.ssubs = make(map[string]bool)
	}
	kind := "sunsubscribe"
	if sub {
		kind = "ssubscribe"
	}
	if !sub && len(channels) == 0 {
		channels = slices.Sorted(maps.Keys(p.ssubs))
		if len(channels) == 0 {
			return reply{kind: rPush, elems: []reply{bulkReply(kind), nilReply, intReply(0)}}.appendRESP(out, p.resp3)
		}
	}
	for _, ch := range channels {
		if sub {
			p.ssubs[ch] = true
		} else {
			delete(p.ssubs, ch)
		}
		out = reply{kind: rPush, elems: []reply{bulkReply(kind), bulkReply(ch), intReply(int64(len(p.ssubs)))}}.appendRESP(out, p.resp3)
	}
	return out
}

// spublishLocked is publishLocked for SPUBLISH and SSUBSCRIBE.
func (m *Master) spublishLocked(channel, msg string) int {
	n := 0
	for _, p := range m.pipes {
		if p.ssubs[channel] {
			p.server.Write(reply{kind: rPush, elems: []reply{bulkReply("smessage"), bulkReply(channel), bulkReply(msg)}}.appendRESP(nil, p.resp3))
			n++
		}
	}
	return n
}

// publishLocked sends a message to every connection subscribed to
// channel, in the order the connections were made.
func (m *Master) publishLocked(channel, msg string) int {
	n := 0
	for _, p := range m.pipes {
		if p.subs[channel] {
			p.server.Write(reply{kind: rPush, elems: []reply{bulkReply("message"), bulkReply(channel), bulkReply(msg)}}.appendRESP(nil, p.resp3))
			n++
		}
	}
	return n
}

// latency is the delay model of the master's connections now.
func (m *Master) latency() Latency {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	return m.lat
}

// holds reports whether the master's faults hold back what arrives at
// one end of its connections (the master's end if server), and the
// channel that is closed when they change.
func (m *Master) holds(server bool) (bool, <-chan struct{}) {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	return m.partition == Hang || (server && m.paused), m.changed
}

// setFault changes the faults under fmu, and wakes every reader.
func (m *Master) setFault(f func()) {
	m.fmu.Lock()
	f()
	close(m.changed)
	m.changed = make(chan struct{})
	m.fmu.Unlock()
	m.poke()
}

// accept opens a connection to the master, as a dial would: refused when
// the master is down or refuses, hung until ctx ends while it is
// partitioned by Hang, and otherwise after a round trip (a paused master's
// kernel still accepts).
func (m *Master) accept(ctx context.Context, name, client string, rng *rand.Rand) (net.Conn, error) {
	refused := func() error {
		return &net.OpError{Op: "dial", Net: "sim", Addr: simAddr(m.Addr), Err: syscall.ECONNREFUSED}
	}
	for {
		m.mu.Lock()
		down := m.down || m.close
		m.mu.Unlock()
		m.fmu.Lock()
		part, changed, lat := m.partition, m.changed, m.lat
		m.fmu.Unlock()
		if down || part == Refuse {
			return nil, refused()
		}
		if part != Hang {
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
	m.fmu.Lock()
	part := m.partition
	m.fmu.Unlock()
	if m.down || m.close || part == Refuse {
		return nil, refused()
	}
	m.seq++
	p := &pipe{master: m, rng: rng, client: client, seq: m.seq}
	p.conn = &Conn{p: p, local: simAddr(name), remote: simAddr(m.Addr), wake: make(chan struct{}, 1)}
	p.server = &Conn{p: p, server: true, local: simAddr(m.Addr), remote: simAddr(name), wake: make(chan struct{}, 1)}
	m.pipes = append(m.pipes, p)
	return p.conn, nil
}

// takePipesLocked empties the master's pipe set and returns it, for a
// fault to break them.
func (m *Master) takePipesLocked() []*pipe {
	ps := m.pipes
	m.pipes = nil
	return ps
}

// Kill stops the master as a crash does: every connection breaks, and
// what it had not read is lost; dials are refused until Start.
func (m *Master) Kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return
	}
	m.down = true
	if m.cl != nil {
		m.cl.c.setDown(m, true)
	}
	for _, p := range m.takePipesLocked() {
		p.Break(-1)
	}
}

// Start boots a killed master with amnesia: no keys, no scripts, a new
// run_id, uptime from now.
func (m *Master) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.down || m.close {
		return
	}
	m.restarts++
	old := m.st
	m.startLocked()
	if m.cl != nil {
		m.cl.c.setDown(m, false)
	}
	if m.cl != nil && !m.cl.c.isPrimary(m) {
		// A replica's keys were never the vote's.
		return
	}
	for _, k := range slices.Sorted(maps.Keys(old.keys)) {
		m.log = append(m.log, KeyRecord{At: time.Since(m.start), Master: m.Index, Key: k, Gone: true, Cause: "restart"})
	}
}

// Restart is Kill then Start.
func (m *Master) Restart() {
	m.Kill()
	m.Start()
}

// Pause stops the master as SIGSTOP does: connections are accepted (by
// the kernel) but nothing is read or answered until Resume, when
// everything sent meanwhile arrives at once.
func (m *Master) Pause() { m.setFault(func() { m.paused = true }) }

// Resume ends a Pause.
func (m *Master) Resume() { m.setFault(func() { m.paused = false }) }

// Partition cuts the master off from every client (Hang or Refuse), or
// heals the cut (Connected).
func (m *Master) Partition(mode PartitionMode) {
	m.setFault(func() { m.partition = mode })
	if mode == Refuse {
		m.BreakConnections(-1)
	}
}

// BreakConnections breaks every open connection to the master (see
// pipe.Break): with late >= 0, commands in flight still arrive, late.
func (m *Master) BreakConnections(late time.Duration) int {
	return m.BreakClient("", -1, late)
}

// BreakClient breaks connections of client ("" for every client) to the
// master: the which-th of them (modulo their number) in the order they
// were opened, or all of them when which < 0. It returns how many.
func (m *Master) BreakClient(client string, which int, late time.Duration) int {
	return m.eachPipe(client, which, func(p *pipe) { p.Break(late) })
}

// ArmClient makes connections of client to the master, chosen as
// BreakClient chooses them, break right after their next write, which
// then arrives late (or never, if late < 0); on false, it disarms them.
// It returns how many.
func (m *Master) ArmClient(client string, which int, late time.Duration, on bool) int {
	return m.eachPipe(client, which, func(p *pipe) { p.arm(on, late) })
}

// eachPipe runs f on connections of client ("" for every client): the
// which-th of them in the order they were opened, or all when which < 0.
func (m *Master) eachPipe(client string, which int, f func(*pipe)) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []*pipe
	for _, p := range m.pipes {
		if client == "" || p.client == client {
			ps = append(ps, p)
		}
	}
	if which >= 0 && len(ps) > 0 {
		ps = ps[which%len(ps) : which%len(ps)+1]
	}
	for _, p := range ps {
		f(p)
	}
	return len(ps)
}

// Heal ends every fault: a killed master starts (with amnesia), a paused
// one resumes, a partition heals, and the latency is l again. The clock
// keeps its rate and jumps.
func (m *Master) Heal(l Latency) {
	m.Start()
	m.setFault(func() { m.paused, m.partition, m.lat = false, Connected, l })
}

// SetLatency changes the delay of writes from now on (slowness).
func (m *Master) SetLatency(l Latency) { m.setFault(func() { m.lat = l }) }

// SetRate changes how fast the master's clock runs from now on.
func (m *Master) SetRate(rate float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.clock = append(m.clock, clockSeg{from: now, base: m.nowLocked(), rate: rate})
}

// JumpClock moves the master's clock by d at once (an NTP step, or a
// clock set by hand). Keys' deadlines are absolute, as on Redis: forward
// past a deadline expires the key, backward lengthens its life.
func (m *Master) JumpClock(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	c := m.clock[len(m.clock)-1]
	m.clock = append(m.clock, clockSeg{from: now, base: c.at(now).Add(d), rate: c.rate})
}

// RunID is the master's current run_id.
func (m *Master) RunID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runID
}

// BootedAt is the virtual instant the master's uptime counts from: its
// last restart.
func (m *Master) BootedAt() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bootedAt
}

// Keys returns the master's keys that exist now and their values or
// types, sorted, for checks after a run: a string key's value, or
// "<zset>".
func (m *Master) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.now = m.nowLocked()
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m.st.keys)) {
		switch e := m.st.get(k); {
		case e == nil:
		case e.z != nil:
			out = append(out, k+"=<zset>")
		default:
			out = append(out, k+"="+strconv.Quote(e.str))
		}
	}
	return out
}

// Subscriptions returns the channels the master's connections are
// subscribed to, one entry per connection and channel, sorted.
func (m *Master) Subscriptions() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, p := range m.pipes {
		for ch := range p.subs {
			out = append(out, p.client+": "+ch)
		}
	}
	slices.Sort(out)
	return out
}

// ShardSubscriptions returns the sharded channels the master's
// connections are subscribed to (SSUBSCRIBE), one entry per connection
// and channel, sorted, as Subscriptions does.
func (m *Master) ShardSubscriptions() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, p := range m.pipes {
		for ch := range p.ssubs {
			out = append(out, p.client+": "+ch)
		}
	}
	slices.Sort(out)
	return out
}

// KeyLog returns every change of a key so far (see KeyRecord).
func (m *Master) KeyLog() []KeyRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

// Clock is a master's clock as it ran until some instant: its start,
// rate changes and jumps. It is exported for the checkers, which read the
// key log's deadlines (on the master's clock) as virtual instants after
// the run, when the masters are closed.
type Clock struct{ segs []clockSeg }

// Clock returns the master's clock so far.
func (m *Master) Clock() Clock {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Clock{slices.Clone(m.clock)}
}

// VirtualClock is a clock that reads virtual time from start on, with no
// offset, drift or jump: for tests of the checkers, without masters.
func VirtualClock(start time.Time) Clock {
	return Clock{[]clockSeg{{from: start, base: start, rate: 1}}}
}

// Jumped is c moved by d (back, if negative) at virtual instant at, as
// Master.JumpClock moves a master's clock: for tests of the checkers.
func (c Clock) Jumped(at time.Time, d time.Duration) Clock {
	last := c.segs[len(c.segs)-1]
	return Clock{append(slices.Clone(c.segs), clockSeg{from: at, base: last.at(at).Add(d), rate: last.rate})}
}

// VirtualAt is Master.VirtualAt on the clock as it ran.
func (c Clock) VirtualAt(t, from time.Time) time.Time { return virtualAt(c.segs, t, from) }

// BackBefore is the first virtual instant after from at which the clock,
// having passed t, is stepped back to before it (zero: never, as far as
// it ran): when a key with deadline t that nothing looked at meanwhile
// lives again, as Redis's does when its clock steps back, since it
// deletes an expired key only when a command finds it (and the master
// logs that deletion). Between steps the clock only moves forward, so
// only a step's first instant can be one.
func (c Clock) BackBefore(t, from time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	for _, s := range c.segs {
		if s.from.After(from) && s.base.Before(t) {
			return s.from
		}
	}
	return time.Time{}
}

// Commands returns how many times the master ran each command (see
// Master.commands).
func (m *Master) Commands() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.commands)
}

// Close shuts the master down at the end of a run, and waits for its
// loop to end.
func (m *Master) Close() {
	m.mu.Lock()
	m.close = true
	for _, p := range m.takePipesLocked() {
		p.Break(-1)
	}
	m.mu.Unlock()
	m.poke()
	<-m.done
}
