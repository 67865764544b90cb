package simredis

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Latency is the one-way delay of every write on a connection: Min plus a
// uniform share of Jitter, and with probability SpikeP a spike of up to
// Spike more. Each write is delivered after its delay, and never before
// the write that preceded it on the same connection (TCP keeps order);
// writes on different connections overtake each other freely.
type Latency struct {
	Min, Jitter time.Duration
	SpikeP      float64
	Spike       time.Duration
}

// DefaultLatency is a LAN: 50-250µs one way, and one write in a hundred
// up to 20ms late, which is a node timeout's worth at a 2s TTL.
var DefaultLatency = Latency{Min: 50 * time.Microsecond, Jitter: 200 * time.Microsecond, SpikeP: 0.01, Spike: 20 * time.Millisecond}

func (l Latency) draw(r *rand.Rand) time.Duration {
	d := l.Min
	if l.Jitter > 0 {
		d += time.Duration(r.Int64N(int64(l.Jitter)))
	}
	if l.SpikeP > 0 && r.Float64() < l.SpikeP && l.Spike > 0 {
		d += time.Duration(r.Int64N(int64(l.Spike)))
	}
	return d
}

// PartitionMode says how a master cut off from the clients behaves.
type PartitionMode int

const (
	// Connected: no partition.
	Connected PartitionMode = iota
	// Hang: packets are dropped silently. New dials hang until their
	// context ends; bytes in flight on open connections, both ways, wait
	// and are delivered when the partition heals (TCP retransmits them).
	Hang
	// Refuse: the master's host answers with resets. New dials fail with
	// ECONNREFUSED, and open connections break at once, both ends.
	Refuse
)

func (m PartitionMode) String() string {
	switch m {
	case Connected:
		return "connected"
	case Hang:
		return "hang"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("PartitionMode(%d)", int(m))
}

// errReset is what a connection broken by a fault reads and writes.
var errReset = syscall.ECONNRESET

// pipe is one connection between a client and a master: two links, one
// each way. Its mutex guards both links and the ends' state. It must be
// created and used inside the simulation's synctest bubble: its readers
// block on channels and timers only, so that virtual time can advance.
// The master's loop reads the link to the master (nextArrival, take);
// the client reads the other through its Conn.
type pipe struct {
	master *Master
	client string // the client's name ("c0"), for faults and the key log
	seq    int    // the order the master accepted it in

	mu     sync.Mutex
	rng    *rand.Rand
	up     link // client to master
	down   link // master to client
	broken bool // a fault broke the connection: the client's end fails
	// armed: a fault breaks the connection right after the client's next
	// write, which then arrives armLate late (or never, if negative), so
	// that the break catches a command in flight.
	armed   bool
	armLate time.Duration
	// conn and server are the two ends: the client's, and the master's.
	conn, server *Conn

	// The master's session, under the master's mutex: bytes read but not
	// yet a whole command, the protocol, the channels subscribed, and
	// QUIT.
	in    []byte
	resp3 bool
	subs  map[string]bool
	ssubs map[string]bool
	quit  bool
	// asking: ASKING came, for the next command (see routeLocked).
	asking bool
}

// link is one direction of a pipe: writes queued with the instant they
// arrive.
type link struct {
	queue  []chunk
	last   time.Time // arrival of the last queued chunk, for FIFO order
	closed bool      // the writer closed: EOF once the queue is drained
	// late holds delivery until this instant (Break with late delivery).
	late time.Time
}

type chunk struct {
	data []byte
	at   time.Time
}

// Conn is one end of a simulated connection. It implements net.Conn with
// deadlines; writes never block (buffers are unbounded), reads block until
// a chunk has arrived.
type Conn struct {
	p      *pipe
	server bool // the master's end
	local  net.Addr
	remote net.Addr

	// wake has room for one signal: a write or close by the other end, a
	// deadline change or a fault pokes it, and the reader looks again.
	wake chan struct{}

	// Under p.mu.
	closed        bool
	readDeadline  time.Time
	writeDeadline time.Time
	timer         *time.Timer
}

var _ net.Conn = (*Conn)(nil)

// simAddr is a simulated endpoint's address.
type simAddr string

func (a simAddr) Network() string { return "sim" }
func (a simAddr) String() string  { return string(a) }

// in and out are the links this end reads and writes.
func (c *Conn) in() *link {
	if c.server {
		return &c.p.up
	}
	return &c.p.down
}

func (c *Conn) out() *link {
	if c.server {
		return &c.p.down
	}
	return &c.p.up
}

// peer is the other end.
func (c *Conn) peer() *Conn {
	if c.server {
		return c.p.conn
	}
	return c.p.server
}

func (c *Conn) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Read returns the bytes of the first chunk that has arrived at the
// client, once the faults let it through. Only the client's end reads:
// the master's loop takes what reaches the master (nextArrival, take).
func (c *Conn) Read(b []byte) (int, error) {
	p := c.p
	for {
		p.mu.Lock()
		if c.closed {
			p.mu.Unlock()
			return 0, c.opError("read", net.ErrClosed)
		}
		if p.broken {
			p.mu.Unlock()
			return 0, c.opError("read", errReset)
		}
		now := time.Now()
		if !c.readDeadline.IsZero() && !now.Before(c.readDeadline) {
			p.mu.Unlock()
			return 0, c.opError("read", os.ErrDeadlineExceeded)
		}
		in := &p.down
		held, changed := p.held(false)
		var wait time.Time
		if len(in.queue) > 0 && !held {
			head := &in.queue[0]
			if !now.Before(head.at) {
				n := copy(b, head.data)
				head.data = head.data[n:]
				if len(head.data) == 0 {
					in.queue[0] = chunk{}
					in.queue = in.queue[1:]
				}
				p.mu.Unlock()
				return n, nil
			}
			wait = head.at
		}
		if len(in.queue) == 0 && in.closed && !held {
			p.mu.Unlock()
			return 0, io.EOF
		}
		if !c.readDeadline.IsZero() && (wait.IsZero() || c.readDeadline.Before(wait)) {
			wait = c.readDeadline
		}
		var timeout <-chan time.Time
		if !wait.IsZero() {
			if c.timer == nil {
				c.timer = time.NewTimer(wait.Sub(now))
			} else {
				c.timer.Reset(wait.Sub(now))
			}
			timeout = c.timer.C
		}
		p.mu.Unlock()
		select {
		case <-c.wake:
		case <-changed:
		case <-timeout:
		}
	}
}

// held reports whether faults hold back what arrives at one end (the
// master's if server): the master's, and a freeze of the client; and a
// channel closed when the master's faults change (a freeze pokes the
// readers itself).
func (p *pipe) held(server bool) (bool, <-chan struct{}) {
	held, changed := p.master.holds(server)
	return held || p.master.net.holds(p.client, server), changed
}

// nextArrival is when the master's end gets its next chunk (ok false:
// nothing is on its way, or faults hold it back), or now when the client
// has gone and everything it sent was taken. The master's loop calls it.
func (p *pipe) nextArrival(now time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	up := &p.up
	if len(up.queue) == 0 {
		return now, up.closed
	}
	if held, _ := p.held(true); held {
		return time.Time{}, false
	}
	at := up.queue[0].at
	if up.late.After(at) {
		at = up.late
	}
	return at, true
}

// take returns the master's next chunk, or ended when the client has gone
// and everything it sent was taken. Call it once nextArrival's instant has
// come.
func (p *pipe) take() (data []byte, ended bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	up := &p.up
	if len(up.queue) == 0 {
		return nil, up.closed
	}
	data = up.queue[0].data
	up.queue[0] = chunk{}
	up.queue = up.queue[1:]
	return data, false
}

// Write queues b to arrive after the link's delay.
func (c *Conn) Write(b []byte) (int, error) {
	p := c.p
	p.mu.Lock()
	switch {
	case c.closed:
		p.mu.Unlock()
		return 0, c.opError("write", net.ErrClosed)
	case p.broken && !c.server:
		p.mu.Unlock()
		return 0, c.opError("write", errReset)
	case !c.writeDeadline.IsZero() && !time.Now().Before(c.writeDeadline):
		p.mu.Unlock()
		return 0, c.opError("write", os.ErrDeadlineExceeded)
	}
	if c.peer().closed || (c.server && p.broken) {
		// Nobody reads this any more: a real peer would answer with a
		// reset.
		p.mu.Unlock()
		return 0, c.opError("write", syscall.EPIPE)
	}
	out := c.out()
	at := time.Now().Add(p.master.latency().draw(p.rng))
	if at.Before(out.last) {
		at = out.last
	}
	out.last = at
	out.queue = append(out.queue, chunk{data: append([]byte(nil), b...), at: at})
	if p.armed && !c.server {
		p.breakLocked(p.armLate)
	}
	p.mu.Unlock()
	if c.server {
		p.conn.poke()
	} else {
		p.master.poke()
	}
	return len(b), nil
}

// Close closes this end: the other end reads EOF once it has read what
// was already sent.
func (c *Conn) Close() error {
	p := c.p
	p.mu.Lock()
	if c.closed {
		p.mu.Unlock()
		return nil
	}
	c.closed = true
	c.out().closed = true
	c.in().queue = nil // unread bytes are dropped
	if c.timer != nil {
		c.timer.Stop()
	}
	p.mu.Unlock()
	c.poke()
	c.peer().poke()
	p.master.poke()
	return nil
}

func (c *Conn) LocalAddr() net.Addr  { return c.local }
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

func (c *Conn) SetDeadline(t time.Time) error {
	c.p.mu.Lock()
	c.readDeadline, c.writeDeadline = t, t
	c.p.mu.Unlock()
	c.poke()
	return nil
}

func (c *Conn) SetReadDeadline(t time.Time) error {
	c.p.mu.Lock()
	c.readDeadline = t
	c.p.mu.Unlock()
	c.poke()
	return nil
}

func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.p.mu.Lock()
	c.writeDeadline = t
	c.p.mu.Unlock()
	return nil
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "sim", Source: c.local, Addr: c.remote, Err: err}
}

// Break breaks the connection as a fault does: the client's end fails at
// once (reads and writes return ECONNRESET). What the client had sent and
// the master had not read yet arrives anyway, late after now, when late
// >= 0 (a command in flight that still runs), or never when late < 0.
// Replies not yet read are lost. The master's end then reads EOF.
func (p *pipe) Break(late time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.breakLocked(late)
}

// arm makes the connection break right after the client's next write
// (see pipe.armed), or disarms it.
func (p *pipe) arm(on bool, late time.Duration) {
	p.mu.Lock()
	p.armed, p.armLate = on, late
	p.mu.Unlock()
}

func (p *pipe) breakLocked(late time.Duration) {
	p.armed = false
	if p.broken {
		return
	}
	p.broken = true
	p.down.queue = nil
	p.up.closed = true // the client's end is gone
	if late < 0 {
		p.up.queue = nil
	} else {
		p.up.late = time.Now().Add(late)
	}
	p.conn.poke()
	p.server.poke()
	p.master.poke()
}

// Network is the simulated network: it opens connections to the
// simulation's masters by address, each with its own random stream.
type Network struct {
	seed    uint64
	mu      sync.Mutex
	masters map[string]*Master
	// frozen clients' connections deliver nothing either way (see
	// Freeze); thawed is closed and replaced when one thaws. stalled
	// clients' connections deliver nothing to the masters (see Stall).
	frozenSet map[string]bool
	stalled   map[string]bool
	thawed    chan struct{}
}

// NewNetwork returns a network whose every random choice derives from seed.
func NewNetwork(seed uint64) *Network {
	return &Network{seed: seed, masters: make(map[string]*Master), frozenSet: make(map[string]bool),
		stalled: make(map[string]bool), thawed: make(chan struct{})}
}

// Freeze stops every connection of client, both ways, until Thaw: what
// it sent and what was sent to it waits, as when its process stops (a
// GC pause, SIGSTOP), and its dials wait too. Its goroutines still run:
// see the package doc.
func (n *Network) Freeze(client string) { n.setFrozen(client, true) }

// Thaw ends a Freeze: what waited arrives.
func (n *Network) Thaw(client string) { n.setFrozen(client, false) }

func (n *Network) setFrozen(client string, on bool) {
	n.mu.Lock()
	if on {
		n.frozenSet[client] = true
	} else {
		delete(n.frozenSet, client)
		close(n.thawed)
		n.thawed = make(chan struct{})
	}
	ms := slices.Collect(maps.Values(n.masters))
	n.mu.Unlock()
	for _, m := range ms {
		m.mu.Lock()
		for _, p := range m.pipes {
			if p.client == client {
				p.conn.poke()
			}
		}
		m.mu.Unlock()
		m.poke()
	}
}

// Stall holds back what client sends to every master until Unstall,
// while what the masters send still reaches it: its commands wait in
// flight, as behind a link that drops one way and retransmits.
func (n *Network) Stall(client string) {
	n.mu.Lock()
	n.stalled[client] = true
	n.mu.Unlock()
}

// Unstall ends a Stall: what was held arrives, after late when the
// client's connections are broken first (see Master.BreakClient).
func (n *Network) Unstall(client string) {
	n.mu.Lock()
	delete(n.stalled, client)
	ms := slices.Collect(maps.Values(n.masters))
	n.mu.Unlock()
	for _, m := range ms {
		m.poke()
	}
}

// holds reports whether client's bytes toward the masters (server) or
// from them are held back.
func (n *Network) holds(client string, server bool) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.frozenSet[client] || (server && n.stalled[client])
}

// waitThaw waits until client is not frozen, or ctx ends.
func (n *Network) waitThaw(ctx context.Context, client string) error {
	for {
		n.mu.Lock()
		frozen, thawed := n.frozenSet[client], n.thawed
		n.mu.Unlock()
		if !frozen {
			return nil
		}
		select {
		case <-thawed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (n *Network) add(m *Master) {
	n.mu.Lock()
	n.masters[m.Addr] = m
	n.mu.Unlock()
}

// Dialer returns a DialContext for engine.Config for one client, named
// client: its connections draw their delays from streams derived from
// the seed, the client's name, the master and the connection's number
// among this client's connections to that master, so that one client's
// n-th connection to a master behaves alike in every run of a seed,
// whatever order the clients dial in.
func (n *Network) Dialer(client string) func(ctx context.Context, addr string) (net.Conn, error) {
	var mu sync.Mutex
	count := make(map[string]uint64)
	return func(ctx context.Context, addr string) (net.Conn, error) {
		n.mu.Lock()
		m := n.masters[addr]
		n.mu.Unlock()
		if m == nil {
			return nil, &net.OpError{Op: "dial", Net: "sim", Addr: simAddr(addr), Err: errors.New("no such host")}
		}
		mu.Lock()
		count[addr]++
		k := count[addr]
		mu.Unlock()
		name := fmt.Sprintf("%s/%s#%d", client, addr, k)
		h := fnv.New64a()
		h.Write([]byte(name))
		rng := rand.New(rand.NewPCG(n.seed, h.Sum64()))
		if err := n.waitThaw(ctx, client); err != nil {
			return nil, &net.OpError{Op: "dial", Net: "sim", Addr: simAddr(addr), Err: err}
		}
		return m.accept(ctx, name, client, rng)
	}
}
