package fault

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// ErrClosed reports a call on Proxies after Close.
var ErrClosed = errors.New("proxies closed")

// Toxic names; each proxy carries at most one of each.
const (
	toxicSlow    = "slow"
	toxicCutUp   = "cut_up"
	toxicCutDown = "cut_down"
)

// Proxies are in-process toxiproxy proxies, one in front of each local
// master, listening on free ports of 127.0.0.1. The engine dials Addrs
// instead of the masters, which lets slow and cut act on the wire without a
// separate toxiproxy server, without root and without tc. A proxy dials its
// master afresh for every client connection, so a master restarted on its
// own port is reachable through the same proxy address.
//
// Methods are safe for concurrent use.
//
// A limitation of toxiproxy (v2.12.0) to know about: when a proxied
// connection is torn down while bytes are still in its pipeline (a master
// killed under load, or a client hanging up while replies are in flight or
// held back by slow), toxiproxy stops writing without draining the pipeline,
// and one or two of its goroutines stay blocked for the life of the
// process, with a 32 KB copy buffer each. Sockets and listeners are closed all the same.
// To keep this to the mid-run kills where it cannot be helped, let the
// Injector's Run return (it lifts slow) before closing the engine, and close
// the engine before the Proxies.
type Proxies struct {
	mu     sync.Mutex
	server *toxiproxy.ApiServer
	nodes  []*proxyNode
	closed bool
}

type proxyNode struct {
	name     string
	listen   string // fixed after the first start, so Addrs never changes
	upstream string
	proxy    *toxiproxy.Proxy
	latency  time.Duration
	cut      bool
}

// NewProxies starts one proxy per upstream master, in order. On error every
// proxy already started is stopped.
func NewProxies(ctx context.Context, upstreams []string) (*Proxies, error) {
	if len(upstreams) == 0 {
		return nil, errors.New("no upstream masters to proxy")
	}
	// The API server is never listened on: toxiproxy's proxies only need it
	// for their logger and metrics, both turned off.
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := &Proxies{server: server}
	for i, up := range upstreams {
		if err := ctx.Err(); err != nil {
			p.Close()
			return nil, fmt.Errorf("start proxies: %w", err)
		}
		n := &proxyNode{name: "master" + strconv.Itoa(i), listen: "127.0.0.1:0", upstream: up}
		if err := p.start(n); err != nil {
			p.Close()
			return nil, err
		}
		p.nodes = append(p.nodes, n)
	}
	return p, nil
}

// start creates and starts a fresh proxy for n on n.listen. A fresh proxy
// rather than a restarted one, because toxiproxy keeps the toxics of a
// stopped proxy.
func (p *Proxies) start(n *proxyNode) error {
	var err error
	// The port was ours a moment ago; another process may grab it between
	// stop and start, so retry briefly before giving up on the address.
	for attempt := 0; attempt < 20; attempt++ {
		px := toxiproxy.NewProxy(p.server, n.name, n.listen, n.upstream)
		if err = px.Start(); err == nil {
			n.proxy = px
			n.listen = px.Listen
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("start proxy %s -> %s: %w", n.listen, n.upstream, err)
}

// Addrs returns the address to dial for each master, in the order given to
// NewProxies. They stay the same for the life of Proxies, across cuts and
// restarts.
func (p *Proxies) Addrs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, len(p.nodes))
	for i, n := range p.nodes {
		out[i] = n.listen
	}
	return out
}

func (p *Proxies) node(i int) (*proxyNode, error) {
	if p.closed {
		return nil, ErrClosed
	}
	if i < 0 || i >= len(p.nodes) {
		return nil, fmt.Errorf("node %d out of range: %d proxies (0-%d)", i, len(p.nodes), len(p.nodes)-1)
	}
	return p.nodes[i], nil
}

// Slow delays every reply from master i by d, on open and new connections
// alike; d = 0 removes the delay. Requests are not delayed, so the added
// round-trip time is d. d is rounded down to whole milliseconds.
func (p *Proxies) Slow(i int, d time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, err := p.node(i)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("node %d: negative latency %s", i, d)
	}
	if err := setLatency(n.proxy, d); err != nil {
		return fmt.Errorf("slow node %d: %w", i, err)
	}
	n.latency = d
	return nil
}

func setLatency(px *toxiproxy.Proxy, d time.Duration) error {
	// Remove and add rather than update: toxiproxy's update decodes into the
	// toxic that running links are reading.
	if px.Toxics.GetToxic(toxicSlow) != nil {
		if err := px.Toxics.RemoveToxic(context.Background(), toxicSlow); err != nil {
			return err
		}
	}
	if d <= 0 {
		return nil
	}
	_, err := px.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":%q,"type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":%d}}`,
		toxicSlow, d.Milliseconds())))
	return err
}

// Cut partitions master i from the engine. Every byte is dropped, in both
// directions, on open connections and on new ones, and nothing is reset or
// closed: a client sees requests that never get an answer and has to time
// out, as in a real partition where packets are lost. (Stopping the proxy
// instead would refuse connections at once, which is a dead node, not a
// partition.) One difference remains: the proxy still completes the TCP
// handshake of a new connection, where a real partition would drop the SYN,
// so a client's dial succeeds and its first command times out.
//
// Cutting a node that is already cut does nothing.
func (p *Proxies) Cut(i int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, err := p.node(i)
	if err != nil {
		return err
	}
	if n.cut {
		return nil
	}
	for _, t := range []struct{ name, stream string }{{toxicCutUp, "upstream"}, {toxicCutDown, "downstream"}} {
		// timeout 0: drop data and never close the connection.
		_, err := n.proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
			`{"name":%q,"type":"timeout","stream":%q,"toxicity":1,"attributes":{"timeout":0}}`, t.name, t.stream)))
		if err != nil {
			return fmt.Errorf("cut node %d: %w", i, err)
		}
	}
	n.cut = true
	return nil
}

// Heal ends a cut of master i. Connections that were open across the cut are
// closed (with FIN, not RST), because the bytes dropped during the cut leave
// holes in their streams that no client could parse past; a real TCP
// connection would likewise have died in a partition of any length. New
// connections go through at once. A latency set with Slow stays in force.
// Healing a node that is not cut does nothing.
func (p *Proxies) Heal(i int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, err := p.node(i)
	if err != nil {
		return err
	}
	if !n.cut {
		return nil
	}
	// A fresh proxy on the same address, rather than removing the timeout
	// toxics: toxiproxy closes a link when a timeout toxic is removed under
	// it, and a byte arriving in that moment can strand the link's
	// goroutines. Stopping the proxy first lets every link drain through the
	// toxic and end.
	n.proxy.Stop()
	n.cut = false
	if err := p.start(n); err != nil {
		return err
	}
	if err := setLatency(n.proxy, n.latency); err != nil {
		return fmt.Errorf("heal node %d: restore latency: %w", i, err)
	}
	return nil
}

// Close stops every proxy: listeners are closed and every proxied connection
// with them. It is safe to call more than once.
func (p *Proxies) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for i, n := range p.nodes {
		if n.proxy == nil {
			continue
		}
		// Delayed replies are handed to their clients before the sockets
		// close, rather than stranded in the latency toxic (see above).
		if n.latency > 0 {
			if err := setLatency(n.proxy, 0); err != nil {
				errs = append(errs, fmt.Errorf("close node %d: lift latency: %w", i, err))
			}
		}
		n.proxy.Stop()
	}
	return errors.Join(errs...)
}
