package multiplex

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-bench/redlock/internal/addrcheck"
	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
)

// Defaults for Options fields left at zero.
const (
	// DefaultNodeTimeout bounds how long a round waits for the nodes. The
	// engine normally sets NodeTimeout from its TTL instead.
	DefaultNodeTimeout = 100 * time.Millisecond
	// DefaultDialTimeout bounds connecting to one master at start-up, so
	// that unreachable masters are reported within a few seconds.
	DefaultDialTimeout = 2 * time.Second
	// DefaultConnTimeout is how long a connection may go without answering
	// before rueidis closes it and fails its in-flight commands. It bounds
	// how long replies from a hung master are waited for after a round.
	DefaultConnTimeout = 3 * time.Second
	// DefaultPipelineMultiplex selects one connection per master (rueidis's
	// -1): commands to a master stay in order, which the late-reply clean-up
	// relies on, and batching per connection is largest.
	DefaultPipelineMultiplex = -1
	// DefaultMaxFlushDelay: no pause after a flush. rueidis pauses only
	// while several calls share a connection, and with one node worker
	// (defaultNodeWorkers) the node's queue does the batching instead; a
	// pause would only be added to the round trip.
	DefaultMaxFlushDelay = 0
	// defaultMaxRounds: enough for hundreds of concurrent lockers to
	// share the pipelines, few enough that a round's queueing stays well
	// inside the node timeout on a small host.
	defaultMaxRounds = 1024
	// defaultNodeWorkers: one batch in flight per master. The worker sends
	// everything queued for its node as one DoMulti; what is submitted
	// while that batch is out waits for it and leaves as the next batch.
	// So a command leaves at once when the pipeline is idle, and batches
	// grow with the load without a timer. With 8 workers, an open loop at
	// 20,000/s sent most commands alone: five worker wake-ups per round,
	// which filled the run queue and were most of the tail latency.
	defaultNodeWorkers = 1
	// nodeQueue is how many commands may wait for a node's workers. Rounds
	// decided at quorum leave their slower nodes' commands queued, so it is
	// several times MaxRounds × 2; a node past it is stuck, not busy.
	nodeQueue = 65536
	// defaultReconnectInterval is how often a master that was down at
	// start-up is dialled again.
	defaultReconnectInterval = 500 * time.Millisecond
)

// The causes of ErrNotSent.
var (
	errSkipped      = fmt.Errorf("%w: the round had already failed", ErrNotSent)
	errStale        = fmt.Errorf("%w: the node was still behind when the round's node timeout ran out", ErrNotSent)
	errNotConnected = fmt.Errorf("%w: not connected", ErrNotSent)
	errOverloaded   = fmt.Errorf("%w: overloaded, too many commands in flight", ErrNotSent)
)

// Errors a caller can branch on. They carry no package prefix: they
// appear inside a caller's messages, per node ("10.0.0.1:6379: timeout: no
// reply within the node timeout"), and so do Dial's errors, which the
// caller prefixes with its own name.
var (
	// ErrUnreachable: too many masters could not be reached at start-up for
	// a quorum to be possible. The error text names each address and cause.
	ErrUnreachable = errors.New("too many masters unreachable for a quorum")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("pool closed")
	// ErrTimeout: the node did not answer within the node timeout.
	ErrTimeout = errors.New("no reply within the node timeout")
	// ErrNotSent: the command never left this process, so it cannot have
	// run: the round failed before its turn, or its node was still behind
	// when the round's node timeout ran out (Command.SkipIfFailed), the
	// node is not connected, or its queue is full (it has stopped
	// answering, or is far behind).
	ErrNotSent = errors.New("not sent")
)

// Options configure a Pool. Zero values are replaced by the defaults above.
type Options struct {
	// Addrs are the masters, host:port each. Required unless Clusters is
	// set; no duplicates.
	Addrs []string
	// Clusters are votes that are Redis Clusters, each given by the
	// host:port of some of its nodes (seeds, from which the client learns
	// the rest); they vote after Addrs, in order. A key's vote is that of
	// the shard that owns its slot, so every key of one command must
	// share a slot. No address may appear twice in Addrs and Clusters.
	Clusters [][]string
	// Sentinels are votes that are masters Redis Sentinel manages, each
	// given by the name the sentinels monitor it under and the host:port
	// of some of the sentinels (the client learns the others); they vote
	// after Clusters, in order. The vote is whichever server the
	// sentinels name the master: after a failover a promoted replica,
	// which may lack the writes the old master took just before, so its
	// new run_id quarantines the vote as a restart does, and each new
	// connection to the master asks the sentinels when it became master
	// and keeps the vote out until MaxTTL after that (docs/library.md,
	// "Sentinel-managed votes"). The sentinels are reached as the
	// masters are (TLS, DialContext) but without credentials: Tune may
	// set the rueidis.ClientOption's Sentinel ones. An element's type is
	// the same as engine.SentinelVote's.
	Sentinels []struct {
		Master string
		Addrs  []string
	}
	// NodeTimeout bounds how long a round waits for replies; a watchdog
	// checks it every quarter of it (at most 25ms), so that a round ends
	// up to that much after it. Default:
	// DefaultNodeTimeout.
	NodeTimeout time.Duration
	// DialTimeout bounds the first connection to each master. Default:
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// ConnTimeout is rueidis's ConnWriteTimeout: a connection that answers
	// nothing for this long is closed. Default: DefaultConnTimeout.
	ConnTimeout time.Duration
	// MaxFlushDelay is rueidis's pause after a flush while several calls
	// share a connection, which lets more commands join the next write;
	// it matters only with NodeWorkers above 1. Zero selects
	// DefaultMaxFlushDelay (none); a negative value flushes at once.
	MaxFlushDelay time.Duration
	// PipelineMultiplex is rueidis's log2 of connections per master; -1 is
	// one connection. Zero selects DefaultPipelineMultiplex (-1); use
	// rueidis semantics for positive values (1 = 2 connections, ...).
	PipelineMultiplex int
	// Scripts are loaded on every node at connect.
	Scripts []*Script
	// Quarantine is the restart policy. Default: quarantine.Always.
	Quarantine quarantine.Policy
	// MaxTTL is the longest lock TTL in use: a node whose run_id changes is
	// ignored for this long from when the change is seen (and, with
	// quarantine.Always, a node first seen younger than this until it is
	// this old). Required unless Quarantine is quarantine.Off.
	MaxTTL time.Duration
	// MaxClockSkew, when set, keeps out of the vote a node whose wall
	// clock, measured on a new connection (server_time_usec), is provably
	// this far or more from the median of the other nodes' clocks (those
	// not kept out for theirs): its yes votes fail with ErrClockSkew until
	// a later connection finds it not provably so. Provably: each reading
	// is off by up to its uncertainty (half its round trip,
	// NodeStatus.ClockErrorMS), and the difference less both readings'
	// uncertainties must reach MaxClockSkew, so that a slow round trip
	// never keeps a healthy node out; a reading uncertain by a quarter of
	// MaxClockSkew or more is read again, at most twice, and the sharpest
	// kept, so that a far clock is not let in on a reading slowed for a
	// moment. A node let in may be off by up to MaxClockSkew plus twice
	// the two uncertainties. A master that restarted, or whose clock was
	// stepped, with a clock far off, would break what callers derive from
	// the masters' clocks (fencing tokens); only new connections are
	// measured. Default: off.
	MaxClockSkew time.Duration
	// DisableCoalesce sends every script command as its own EVALSHA, even
	// when a node's queue holds several of the same script with a Multi.
	DisableCoalesce bool
	// Username and Password authenticate every connection (AUTH, or
	// HELLO AUTH): Password alone for requirepass or the default user,
	// both for an ACL user. Default: none.
	Username, Password string
	// TLS, when set, makes every connection TLS with this configuration.
	// Its ServerName defaults to each address's host. Default: plain TCP.
	TLS *tls.Config
	// DialContext, when set, opens every connection to a master instead
	// of TCP, for custom transports: SSH tunnels, unix sockets, in-memory
	// connections for simulation. It gets the master's address from Addrs
	// and a ctx bounded by DialTimeout; TLS, when set, runs on top of the
	// connection it returns. The restart check (INFO on the new
	// connection, before any command) runs on it as on TCP. Default: nil,
	// TCP.
	DialContext func(ctx context.Context, addr string) (net.Conn, error)
	// Tune, when set, may adjust each rueidis.ClientOption before dialling
	// (after Username, Password and TLS are set, so that it may override
	// them). Turning on retries or the client cache here breaks the guarantees
	// documented in this package.
	Tune func(*rueidis.ClientOption)

	// Knobs that only tests turn; zero selects the defaults above.
	// reconnectInterval: how often a master down at start-up is retried.
	// maxRounds bounds the rounds in flight (sent, not yet decided); more
	// Fanout calls wait for a slot. nodeWorkers is how many goroutines
	// send to one node, each a batch at a time.
	reconnectInterval time.Duration
	maxRounds         int
	nodeWorkers       int
}

// Script is a Lua script sent by SHA; its body is kept for NOSCRIPT reloads.
type Script struct {
	Body string
	SHA  string
	// Multi, when set, runs Body for each of many keys in one call (see
	// Script.Coalesce); a node worker that finds several commands of
	// this script queued sends them as one Multi call.
	Multi *Script
	// guard is the form a cluster vote runs (see guarded), made on first
	// use.
	guard atomic.Pointer[Script]
	keyed bool // Multi is CoalesceKeys's: it groups calls with further keys
}

// NewScript computes the script's SHA1, as SCRIPT LOAD does.
func NewScript(body string) *Script {
	sum := sha1.Sum([]byte(body))
	return &Script{Body: body, SHA: hex.EncodeToString(sum[:])}
}

// Pool holds one rueidis client per master.
type Pool struct {
	nodes    []*node
	coalesce bool
	quorum   int
	timeout  time.Duration
	scripts  map[string]*Script
	// scriptList is every script body, Multi ones included, loaded on
	// each new connection to a master; clusterScripts are their guarded
	// forms, loaded on each new connection to a cluster's node.
	scriptList     []*Script
	clusterScripts []*Script
	builder        rueidis.Builder
	rounds         sync.Pool
	// Admission: a round takes a free slot, which holds its deadline for
	// the watchdog and the channel its gatherer waits on.
	slots       []slot
	free        chan int32
	waiting     atomic.Int32  // gatherers waiting in a slot
	kick        chan struct{} // wakes the watchdog when waiting leaves 0
	nodeWorkers int32
	policy      quarantine.Policy
	maxTTL      time.Duration
	maxSkew     time.Duration
	epoch       time.Time  // quarantine deadlines are offsets from it (monotonic)
	ids         sync.Mutex // orders run_id checks and updates across nodes

	// Close has two phases: closing refuses new rounds but still takes
	// clean-up (Post, MustSend) so that a late yes answered while Close
	// drains is still deleted; closed refuses everything.
	closing atomic.Bool
	closed  atomic.Bool
	gate    sync.RWMutex // orders inflight.Add before the phase changes of Close
	stop    chan struct{}
	wg      sync.WaitGroup // reconnect loops
	// clockChecks are the judgeClock goroutines; Add under gate's read
	// lock while not closing.
	clockChecks sync.WaitGroup
	// conns are the open connections to the masters, the pub/sub ones of
	// the caller's dedicated clients included, for Close to cut.
	connMu   sync.Mutex
	conns    map[*trackedConn]struct{}
	cut      bool           // Close cut the connections: new ones are cut at once
	workers  sync.WaitGroup // node workers
	inflight atomic.Int64   // commands sent and not yet answered
}

// slot is an admission slot.
type slot struct {
	// deadline is the waiting round's node timeout, in nanoseconds since
	// Pool.epoch; 0 when no round waits in the slot.
	deadline atomic.Int64
	wake     chan struct{}
}

func (p *Pool) now() int64 { return int64(time.Since(p.epoch)) }

// node is one master.
type node struct {
	Index int
	// Addr is a master's address, or a cluster vote's label (see
	// clusterLabel).
	Addr string
	// seeds are a cluster vote's addresses, nil for a master; builder is
	// its client's, whose commands carry a slot.
	seeds []string
	// sentinels and master are a Sentinel vote's sentinel addresses and
	// master name; nil and empty for others. A Sentinel vote is a master
	// everywhere else (seeds is nil).
	sentinels []string
	master    string
	// masterAddr is where a Sentinel vote's last accepted connection
	// went: the master the sentinels named then. Under mu.
	masterAddr string
	builder    rueidis.Builder
	// Under Pool.ids: the nodes a cluster vote's dialer saw, by address,
	// and whether its first topology was read (see enumerate).
	members     map[string]member
	established bool

	client atomic.Pointer[rueidis.Client]
	mu     sync.Mutex
	err    error // why the node is not connected
	info   serverInfo

	// The node's work queue. A mutex and a slice, not a channel: a worker
	// takes everything queued in one step, and a command costs an append
	// instead of a channel send and receive.
	qmu     sync.Mutex
	queue   []task
	parked  int           // workers waiting for work
	workers int32         // workers running
	wakeup  chan struct{} // signals parked workers; spurious signals are harmless

	down       atomic.Bool  // the last command failed on the connection
	quarantine atomic.Int64 // deadline as nanoseconds since Pool.epoch
	qerr       atomic.Pointer[quarantine.Error]
	// slotq are a cluster vote's slots kept out of the vote, each range
	// until its deadline (see quarantineSlots); nil for a master.
	slotq    atomic.Pointer[[]slotQuarantine]
	skew     atomic.Pointer[error] // set while the node's clock is too far off (MaxClockSkew)
	clockGen atomic.Uint64         // new connections whose clock was judged (judgeClock)
	restarts atomic.Int64

	ok, refused, failed, timedOut atomic.Int64
}

// serverInfo is what a node said about itself on its last new connection.
type serverInfo struct {
	Version string // redis_version, or valkey_version on Valkey
	// Server is "valkey" on Valkey, empty on Redis.
	Server string
	// Mode is redis_mode: "standalone", "cluster" or "sentinel".
	Mode  string
	RunID string
	// Uptime is uptime_in_seconds at connect.
	Uptime time.Duration
	// Role is INFO replication's role: "master" for a usable node, "slave"
	// for a replica; empty when the server did not say.
	Role string
	// MasterAddr is a replica's master_host:master_port.
	MasterAddr string
	// ServerTime is server_time_usec (Redis 7.0 or later); zero when absent.
	ServerTime time.Time
	// ClockOffset is the server's wall clock minus this process's, taken
	// against the middle of the round trip that read ServerTime, and
	// ClockError its uncertainty: the server read its clock somewhere
	// within that round trip, so the true offset is within ClockError
	// (half the round trip, plus the microsecond ServerTime is truncated
	// to) of ClockOffset. ClockKnown says whether it was measured;
	// parseServerInfo alone never sets it.
	ClockOffset time.Duration
	ClockError  time.Duration
	ClockKnown  bool
	// view is a cluster node's CLUSTER NODES, read with its INFO on a
	// new connection; nil for a master, or when the node did not answer
	// it.
	view *clusterView
}

// measureClock sets ClockOffset and ClockError from ServerTime, read on
// a request sent at sent whose reply arrived at received.
func (si *serverInfo) measureClock(sent, received time.Time) {
	if si.ServerTime.IsZero() {
		return
	}
	mid := sent.Add(received.Sub(sent) / 2)
	// ServerTime has no monotonic reading, so Sub compares wall clocks.
	si.ClockOffset, si.ClockKnown = si.ServerTime.Sub(mid), true
	// ServerTime, truncated to the microsecond, is up to one behind what
	// the server read.
	si.ClockError = received.Sub(mid) + time.Microsecond
}

// clock is si's clock reading.
func (si *serverInfo) clock() clockReading {
	return clockReading{off: si.ClockOffset, err: si.ClockError}
}

// Dial connects to every master at once. A minority may be down: those are
// retried in the background. If a quorum cannot be reached, Dial fails with
// ErrUnreachable naming every unreachable address and why. If two addresses
// reach the same server, or one reaches a replica, Dial fails with
// ErrNotIndependent naming them.
func Dial(ctx context.Context, o Options) (*Pool, error) {
	sentinels := make([]addrcheck.Sentinel, len(o.Sentinels))
	for i, v := range o.Sentinels {
		sentinels[i] = addrcheck.Sentinel(v)
	}
	if err := addrcheck.AllVotes(o.Addrs, o.Clusters, sentinels); err != nil {
		return nil, err
	}
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = DefaultNodeTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ConnTimeout <= 0 {
		o.ConnTimeout = DefaultConnTimeout
	}
	if o.PipelineMultiplex == 0 {
		o.PipelineMultiplex = DefaultPipelineMultiplex
	}
	if o.PipelineMultiplex > rueidis.MaxPipelineMultiplex {
		return nil, fmt.Errorf("PipelineMultiplex %d exceeds %d", o.PipelineMultiplex, rueidis.MaxPipelineMultiplex)
	}
	switch {
	case o.MaxFlushDelay == 0:
		o.MaxFlushDelay = DefaultMaxFlushDelay
	case o.MaxFlushDelay < 0:
		o.MaxFlushDelay = 0
	}
	if o.reconnectInterval <= 0 {
		o.reconnectInterval = defaultReconnectInterval
	}
	if o.maxRounds <= 0 {
		o.maxRounds = defaultMaxRounds
	}
	if o.nodeWorkers <= 0 {
		o.nodeWorkers = defaultNodeWorkers
	}
	if o.Quarantine == 0 {
		o.Quarantine = quarantine.Always
	}
	if o.Quarantine > quarantine.Always {
		return nil, fmt.Errorf("unknown Quarantine policy %d", o.Quarantine)
	}
	if o.Quarantine != quarantine.Off && o.MaxTTL <= 0 {
		return nil, fmt.Errorf("MaxTTL must be > 0 with Quarantine %s, got %s", o.Quarantine, o.MaxTTL)
	}
	p := &Pool{
		slots:       make([]slot, o.maxRounds),
		free:        make(chan int32, o.maxRounds),
		kick:        make(chan struct{}, 1),
		nodeWorkers: int32(o.nodeWorkers),
		policy:      o.Quarantine,
		maxTTL:      o.MaxTTL,
		maxSkew:     o.MaxClockSkew,
		epoch:       time.Now(),
		quorum:      (len(o.Addrs)+len(o.Clusters)+len(o.Sentinels))/2 + 1,
		coalesce:    !o.DisableCoalesce,
		timeout:     o.NodeTimeout,
		scripts:     make(map[string]*Script, len(o.Scripts)),
		stop:        make(chan struct{}),
	}
	for _, s := range o.Scripts {
		p.scripts[s.SHA] = s
		for ; s != nil; s = s.Multi {
			p.scriptList = append(p.scriptList, s)
			if len(o.Clusters) > 0 {
				p.clusterScripts = append(p.clusterScripts, s.guarded())
			}
		}
	}
	for i := range p.slots {
		p.slots[i].wake = make(chan struct{}, 1)
		p.free <- int32(i)
	}
	p.nodes = make([]*node, 0, len(o.Addrs)+len(o.Clusters)+len(o.Sentinels))
	for _, a := range o.Addrs {
		p.nodes = append(p.nodes, &node{Index: len(p.nodes), Addr: a, wakeup: make(chan struct{}, p.nodeWorkers)})
	}
	for _, seeds := range o.Clusters {
		p.nodes = append(p.nodes, &node{Index: len(p.nodes), Addr: clusterLabel(seeds), seeds: slices.Clone(seeds),
			wakeup: make(chan struct{}, p.nodeWorkers)})
	}
	for _, v := range o.Sentinels {
		p.nodes = append(p.nodes, &node{Index: len(p.nodes), Addr: sentinelLabel(v.Master, v.Addrs), master: v.Master,
			sentinels: slices.Clone(v.Addrs), wakeup: make(chan struct{}, p.nodeWorkers)})
	}
	n := len(p.nodes)
	p.rounds.New = func() any { return newRound(n) }

	var wg sync.WaitGroup
	for _, node := range p.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node.setErr(p.connect(ctx, node, o))
		}()
	}
	wg.Wait()

	var dependent, wrong []string
	for _, node := range p.nodes {
		var de *dependenceError
		var me *modeError
		if errors.As(node.Err(), &de) {
			dependent = append(dependent, de.detail)
		} else if errors.As(node.Err(), &me) {
			wrong = append(wrong, me.detail)
		}
	}
	if len(dependent) > 0 {
		p.Close()
		return nil, fmt.Errorf("%w: %s", ErrNotIndependent, strings.Join(dependent, "; "))
	}
	if len(wrong) > 0 {
		p.Close()
		return nil, fmt.Errorf("%w: %s", ErrWrongMode, strings.Join(wrong, "; "))
	}
	p.rejudgeClocks()
	var down []*node
	for _, node := range p.nodes {
		if c := node.client.Load(); c != nil && !p.hasBuilder() {
			p.builder = (*c).B()
		}
		if node.Err() != nil {
			down = append(down, node)
		}
	}
	if len(down) > n-p.quorum {
		p.Close()
		return nil, fmt.Errorf("%w: %d of %d down, quorum needs %d: %s",
			ErrUnreachable, len(down), n, p.quorum, causes(down))
	}
	for _, node := range p.nodes {
		if node.client.Load() == nil {
			p.wg.Add(1)
			go p.reconnect(node, o)
		}
	}
	p.wg.Add(1)
	go p.watchdog()
	return p, nil
}

func (p *Pool) hasBuilder() bool { return p.builder != rueidis.Builder{} }

// causes lists nodes by why they are down, masters with the same cause
// together ("a:1, b:2 (AUTH ... refused: WRONGPASS ...); c:3 (...)"), so
// that five masters refusing one password read as one problem.
func causes(nodes []*node) string {
	var order []string
	byCause := make(map[string][]string)
	for _, n := range nodes {
		c := cause(n.Err())
		if byCause[c] == nil {
			order = append(order, c)
		}
		byCause[c] = append(byCause[c], n.Addr)
	}
	parts := make([]string, len(order))
	for i, c := range order {
		parts[i] = strings.Join(byCause[c], ", ") + " (" + c + ")"
	}
	return strings.Join(parts, "; ")
}

// cause is err's message without the addresses, which the list names
// already, so that masters failing alike group together: a network
// error's text carries the address, and the local port too ("read tcp
// 127.0.0.1:41234->10.0.0.1:6379: read: connection reset by peer").
func cause(err error) string {
	return netAddrs.ReplaceAllString(err.Error(), "$1 tcp: ")
}

var netAddrs = regexp.MustCompile(`(dial|read|write) tcp [^ ]+: `)

func (p *Pool) connect(ctx context.Context, node *node, o Options) error {
	opt := rueidis.ClientOption{
		InitAddress:       []string{node.Addr},
		ForceSingleClient: true,
		DisableCache:      true,
		DisableRetry:      true,
		AlwaysPipelining:  true,
		MaxFlushDelay:     o.MaxFlushDelay,
		PipelineMultiplex: o.PipelineMultiplex,
		ConnWriteTimeout:  o.ConnTimeout,
		Dialer:            net.Dialer{Timeout: o.DialTimeout, KeepAlive: time.Second},
		ClientName:        "redlock",
		ClientSetInfo:     rueidis.DisableClientSetInfo,
		Username:          o.Username,
		Password:          o.Password,
		TLSConfig:         o.TLS,
	}
	if node.seeds != nil {
		// One connection per node of the cluster, as per master.
		opt.InitAddress, opt.ForceSingleClient = node.seeds, false
	}
	if node.sentinels != nil {
		// rueidis asks the sentinels for the master, connects to it,
		// and follows their +switch-master events to the next one.
		opt.InitAddress, opt.ForceSingleClient = node.sentinels, false
		opt.Sentinel = rueidis.SentinelOption{
			MasterSet:               node.master,
			Dialer:                  opt.Dialer,
			TLSConfig:               o.TLS,
			ClientName:              "redlock",
			TopologyRefreshInterval: sentinelRefresh,
		}
	}
	if o.Tune != nil {
		o.Tune(&opt)
	}
	if node.sentinels != nil {
		markSentinelDialer(&opt.Sentinel.Dialer)
	}
	// Set after Tune, so that the restart check cannot be tuned away; it
	// reads TLS and credentials from the tuned options.
	opt.DialCtxFn = p.dialer(node, &opt, o.DialContext)
	dctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	type result struct {
		c   rueidis.Client
		err error
	}
	ch := make(chan result, 1)
	// rueidis.NewClient takes no context; the dialer timeout bounds it.
	go func() {
		c, err := rueidis.NewClient(opt)
		ch <- result{c, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-dctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		r.err = fmt.Errorf("connect: %w", dctx.Err())
	}
	if r.err != nil {
		// With ForceSingleClient, rueidis returns a client even when its
		// first dial fails.
		if r.c != nil {
			r.c.Close()
		}
		if opt.TLSConfig != nil && errors.Is(r.err, context.DeadlineExceeded) && ctx.Err() == nil {
			// A plain server waits for the end of a line that a TLS
			// ClientHello seldom holds: the handshake just hangs.
			return fmt.Errorf("%w (no TLS handshake within %s: does the master serve TLS on this port?)", r.err, o.DialTimeout)
		}
		return r.err
	}
	scripts := o.Scripts
	if node.seeds != nil {
		// The dialer loaded them on every connection of the cluster's.
		scripts = nil
		if err := p.enumerate(dctx, node, r.c, o); err != nil {
			r.c.Close()
			return err
		}
		node.builder = r.c.B()
	}
	var info serverInfo
	var err error
	if node.seeds != nil {
		info, err = p.clusterInfo(dctx, node, r.c)
	} else {
		info, err = loadNode(dctx, r.c, scripts)
	}
	if err != nil {
		r.c.Close()
		return err
	}
	if node.seeds == nil && info.ClockKnown {
		// The dialer read the clock on this connection moments before:
		// the sharper reading of the two, and sharper still if it can
		// be had (sharpenClock).
		if prev := node.Info(); prev.ClockKnown && prev.ClockError < info.ClockError {
			info.ServerTime, info.ClockOffset, info.ClockError = prev.ServerTime, prev.ClockOffset, prev.ClockError
		}
		info = p.sharpenClock(r.c, info)
	}
	node.mu.Lock()
	// run_id, uptime and role come from the dialer, which decided whether
	// the node may vote; the clock offset is refreshed.
	node.info.Version = info.Version
	if info.ClockKnown && (node.seeds == nil || p.maxSkew <= 0) {
		// A cluster vote's, judged, is its nodes' median (judgeMemberClock).
		node.info.ServerTime, node.info.ClockOffset, node.info.ClockError, node.info.ClockKnown = info.ServerTime, info.ClockOffset, info.ClockError, true
	}
	node.mu.Unlock()
	node.down.Store(false)
	node.client.Store(&r.c)
	return nil
}

// clusterInfo reads cluster vote n's INFO server through client c, or
// else through each of the vote's nodes seen as primaries: c sends a
// command without a key to any node it knows, and knows the replicas once
// the cluster lists them (it leaves out those that have replicated nothing
// yet), whose connections the dialer refuses.
func (p *Pool) clusterInfo(ctx context.Context, n *node, c rueidis.Client) (serverInfo, error) {
	info, err := loadNode(ctx, c, nil)
	if err == nil || faults.ClusterInfoAnyNode.On() {
		return info, err
	}
	var primaries []string
	p.ids.Lock()
	for addr, m := range n.members {
		if m.primary {
			primaries = append(primaries, addr)
		}
	}
	p.ids.Unlock()
	nodes := c.Nodes()
	for _, addr := range primaries {
		if nc := nodes[addr]; nc != nil {
			if i, e := loadNode(ctx, nc, nil); e == nil {
				return i, nil
			}
		}
	}
	return info, err
}

// loadNode loads the scripts, Multi forms included, on a new client in
// one round trip, then reads INFO server on its own, so that the clock
// measurement does not wait for the loads.
func loadNode(ctx context.Context, c rueidis.Client, scripts []*Script) (serverInfo, error) {
	var all []*Script
	for _, s := range scripts {
		for ; s != nil; s = s.Multi {
			all = append(all, s)
		}
	}
	if len(all) > 0 {
		cmds := make(rueidis.Commands, len(all))
		for i, s := range all {
			cmds[i] = c.B().ScriptLoad().Script(s.Body).Build()
		}
		for i, res := range c.DoMulti(ctx, cmds...) {
			sha, err := res.ToString()
			if err != nil {
				return serverInfo{}, fmt.Errorf("SCRIPT LOAD: %w", err)
			}
			if sha != all[i].SHA {
				return serverInfo{}, fmt.Errorf("SCRIPT LOAD returned %s, want %s", sha, all[i].SHA)
			}
		}
	}
	info, err := readClock(ctx, c)
	if err != nil {
		return serverInfo{}, fmt.Errorf("INFO server: %w", err)
	}
	return info, nil
}

// parseServerInfo reads redis_version, run_id, uptime_in_seconds and
// server_time_usec from the text of INFO server, and role, master_host and
// master_port from INFO replication when the text includes it.
func parseServerInfo(txt string) serverInfo {
	var host, port string
	var si serverInfo
	for _, line := range strings.Split(txt, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "redis_version":
			if si.Server != "valkey" {
				si.Version = v
			}
		case "valkey_version":
			// Valkey also reports redis_version, frozen at 7.2.4 for
			// compatibility; its own version is the one that says what
			// it can do.
			si.Server, si.Version = "valkey", v
		case "run_id":
			si.RunID = v
		case "redis_mode", "server_mode":
			si.Mode = v
		case "uptime_in_seconds":
			if s, err := strconv.ParseInt(v, 10, 64); err == nil {
				si.Uptime = time.Duration(s) * time.Second
			}
		case "server_time_usec":
			if us, err := strconv.ParseInt(v, 10, 64); err == nil && us > 0 {
				si.ServerTime = time.UnixMicro(us)
			}
		case "role":
			si.Role = v
		case "master_host":
			host = v
		case "master_port":
			port = v
		}
	}
	if host != "" && port != "" {
		si.MasterAddr = net.JoinHostPort(host, port)
	}
	return si
}

func (p *Pool) reconnect(node *node, o Options) {
	defer p.wg.Done()
	t := time.NewTicker(o.reconnectInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-p.stop:
			case <-ctx.Done():
			}
			cancel()
		}()
		err := p.connect(ctx, node, o)
		cancel()
		node.setErr(err)
		if err == nil {
			p.gate.Lock()
			if p.closed.Load() { // lost the race with Close
				if c := node.client.Swap(nil); c != nil {
					(*c).Close()
				}
			}
			p.gate.Unlock()
			return
		}
	}
}

func (n *node) setErr(err error) {
	n.mu.Lock()
	n.err = err
	n.mu.Unlock()
}

// Err is why the node is not connected, or why its last new connection was
// refused (ErrNotIndependent), or nil.
func (n *node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// Info is what the node reported on its last accepted connection.
func (n *node) Info() serverInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.info
}

// Client returns the node's rueidis client, or nil while it is not
// connected.
func (n *node) Client() rueidis.Client {
	if c := n.client.Load(); c != nil {
		return *c
	}
	return nil
}

// Counts returns the node's cumulative outcomes.
func (n *node) Counts() (ok, refused, failed, timedOut int64) {
	return n.ok.Load(), n.refused.Load(), n.failed.Load(), n.timedOut.Load()
}

// trackedConn is a connection to a master that Close can cut.
type trackedConn struct {
	net.Conn
	p *Pool
	// vote and addr are the node the connection is to: a master, or a
	// cluster vote and the address of its node.
	vote *node
	addr string
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.p.connMu.Lock()
		delete(c.p.conns, c)
		c.p.connMu.Unlock()
	})
	return c.Conn.Close()
}

// track registers conn for Close to cut; once Close has cut the others,
// it cuts conn at once.
func (p *Pool) track(conn net.Conn, vote *node, addr string) net.Conn {
	c := &trackedConn{Conn: conn, p: p, vote: vote, addr: addr}
	p.connMu.Lock()
	if p.conns == nil {
		p.conns = make(map[*trackedConn]struct{})
	}
	p.conns[c] = struct{}{}
	cut := p.cut
	p.connMu.Unlock()
	if cut {
		c.Close()
	}
	return c
}

// cutConns closes every open connection at once, replies pending or not.
func (p *Pool) cutConns() {
	p.connMu.Lock()
	p.cut = true
	conns := make([]*trackedConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.connMu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Client returns master i's rueidis client, for commands outside rounds
// (a dedicated pub/sub connection, say), or nil while it is not
// connected. Masters are numbered in the order of Options.Addrs.
func (p *Pool) Client(i int) rueidis.Client { return p.nodes[i].Client() }

// Close closes every connection. Commands already sent (the tail of a
// release that returned at quorum, say) get up to one node timeout to
// finish, and so does the clean-up their replies post meanwhile (the delete
// of a failed attempt's late yes); then the connections close and what is
// left ends with an error. No goroutine of the pool outlives Close.
func (p *Pool) Close() {
	p.gate.Lock()
	already := p.closing.Swap(true)
	p.gate.Unlock()
	if already {
		return
	}
	// Polled rather than waited on: Post may add to inflight while it
	// drains, which a WaitGroup does not allow once its Wait has begun.
	for deadline := time.Now().Add(p.timeout); p.inflight.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	p.gate.Lock()
	p.closed.Store(true)
	p.gate.Unlock()
	close(p.stop)
	// What is still in flight went to masters that did not answer within
	// the node timeout: cut their connections, which rueidis would close
	// politely, waiting for replies that may never come.
	p.cutConns()
	for _, n := range p.nodes {
		if c := n.client.Swap(nil); c != nil {
			(*c).Close()
		}
	}
	p.wg.Wait()
	p.clockChecks.Wait()
	p.workers.Wait()
	// The workers have sent what was queued; closed clients fail the rest
	// at once.
	for p.inflight.Load() > 0 {
		time.Sleep(time.Millisecond)
	}
}

// buildFor makes the rueidis command for node n: for a cluster vote, with
// the slot of its key, which routes it to the shard.
func (p *Pool) buildFor(n *node, c *Command, eval bool) rueidis.Completed {
	if n.seeds == nil {
		return buildWith(p.builder, c, eval)
	}
	return buildCluster(n.builder, c, eval)
}

// buildWith makes the rueidis command with builder b. The key goes in as
// an argument, not with Keys: Keys computes the key's cluster slot (a
// CRC16 per command), which a client per master never uses.
func buildWith(b rueidis.Builder, c *Command, eval bool) rueidis.Completed {
	switch {
	case c.Script == nil:
		return b.Arbitrary(c.Name).Args(c.Key).Args(c.Args[:c.NArgs]...).Build()
	case c.Keys != nil:
		head, body := "EVALSHA", c.Script.SHA
		if eval {
			head, body = "EVAL", c.Script.Body
		}
		return b.Arbitrary(head, body, strconv.Itoa(1+len(*c.Keys)), c.Key).Args(*c.Keys...).Args(c.Args[:c.NArgs]...).Build()
	case eval:
		return b.Arbitrary("EVAL", c.Script.Body, "1", c.Key).Args(c.Args[:c.NArgs]...).Build()
	}
	return b.Arbitrary("EVALSHA", c.Script.SHA, "1", c.Key).Args(c.Args[:c.NArgs]...).Build()
}

func (p *Pool) send(ctx context.Context, node *node, cmd *Command) rueidis.RedisResult {
	c := node.Client()
	if c == nil {
		err := node.Err()
		if err == nil {
			err = ErrClosed
		}
		return rueidis.NewErrorResult(fmt.Errorf("%w: %w", errNotConnected, err))
	}
	if node.seeds != nil && crossSlot(cmd) {
		return rueidis.NewErrorResult(errCrossSlot)
	}
	return p.reloadOnNoScript(ctx, node, c, cmd, c.Do(ctx, p.buildFor(node, cmd, false)))
}

// reloadOnNoScript resends a script command as EVAL when the node answered
// NOSCRIPT (it restarted, or its scripts were flushed); EVAL loads it again.
func (p *Pool) reloadOnNoScript(ctx context.Context, n *node, c rueidis.Client, cmd *Command, res rueidis.RedisResult) rueidis.RedisResult {
	if cmd.Script != nil {
		if re, ok := rueidis.IsRedisErr(res.Error()); ok && re.IsNoScript() {
			return c.Do(ctx, p.buildFor(n, cmd, true))
		}
	}
	return res
}
