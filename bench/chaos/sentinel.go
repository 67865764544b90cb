package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/fault"
	"github.com/redlock-bench/redlock/bench/masters"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

// The chaos soak over Sentinel votes (Config.SentinelVotes): the last
// votes are masters Redis Sentinel manages, each a master with one
// replica under 3 sentinels, which the clients find through the
// sentinels and follow across failovers (engine.Config.Sentinels). The
// schedule adds forced failovers of them; the faults on the network
// (slow, cut, drop) act on every data node of such a vote, through each
// client's proxy of it, and restarts and pauses stay on the plain
// masters. A failover may lose the last writes the old master took, and
// the old master stays a writable master until the sentinels demote it:
// the restart quarantine keeps the promoted master out of the vote for
// MaxTTL after its promotion (docs/guarantees.md, "Sentinel failovers"),
// so the oracle must find no overlap.

// nemSentinelFailover fails a Sentinel vote over to its replica
// (SENTINEL FAILOVER), and waits until the old master is the new one's
// replica and every sentinel knows it: done again on a vote, it fails
// back.
const nemSentinelFailover = "sentinel-failover"

// sentinelSettle is how long the plan counts a Sentinel vote affected
// after a failover is due: the failover takes a second or two, and the
// sentinels demote the old master and learn its new link within some
// twenty seconds (their INFO of a replica comes every 10s).
const sentinelSettle = 25 * time.Second

// sentinelHealTimeout bounds a failover and the wait for its vote to
// settle; past it the fault is reported as failed.
const sentinelHealTimeout = 2 * time.Minute

// maxSentinelVotes bounds SentinelVotes: each vote is five processes.
const maxSentinelVotes = 4

// validateSentinels checks SentinelVotes against the rest of the soak.
func (c *Config) validateSentinels() error {
	switch {
	case c.SentinelVotes == 0:
		return nil
	case c.SentinelVotes < 0 || c.SentinelVotes > maxSentinelVotes:
		return cfgErr("sentinel-votes", c.SentinelVotes, "must be in 0..%d (0: plain masters): each is a master, a replica and 3 sentinels", maxSentinelVotes)
	case len(c.Masters) > 0:
		return cfgErr("sentinel-votes", c.SentinelVotes, "applies to local votes only, not --masters")
	case c.ClusterShards > 0:
		return cfgErr("sentinel-votes", c.SentinelVotes, "cannot be combined with --cluster-shards")
	case c.Class != InModel:
		return cfgErr("sentinel-votes", c.SentinelVotes, "applies to --class %s only", InModel)
	case c.Engine != engines.Engine{Base: engines.Redlock}:
		return cfgErr("sentinel-votes", c.SentinelVotes, "applies to --engine redlock only: the control votes nowhere")
	case c.SentinelVotes >= c.LocalMasters:
		return cfgErr("sentinel-votes", c.SentinelVotes, "must be below --local-masters (%d): the plain masters take the restarts and pauses", c.LocalMasters)
	}
	return nil
}

// startSentinels starts n Sentinel votes at once, each a master with one
// replica under 3 sentinels monitoring it as chaos0, chaos1, ...; on error
// it stops those it started. The caller stops them (stopSentinels).
func startSentinels(ctx context.Context, n int) ([]*redisproc.SentinelGroup, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	gs := make([]*redisproc.SentinelGroup, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gs[i], errs[i] = redisproc.StartSentinels(ctx, redisproc.SentinelOptions{Master: "chaos" + strconv.Itoa(i)}, redisproc.Options{})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		stopSentinels(gs)
		return nil, fmt.Errorf("chaos: start %d Sentinel votes: %w", n, err)
	}
	return gs, nil
}

// stopSentinels stops every group of gs that started.
func stopSentinels(gs []*redisproc.SentinelGroup) {
	for _, g := range gs {
		if g != nil {
			g.Stop()
		}
	}
}

// sentinelVotes are the Sentinel votes as the engine takes them, and as
// --sentinel reads each.
func (ch *chaos) sentinelVotes() []engines.SentinelVote {
	out := make([]engines.SentinelVote, len(ch.sentinels))
	for i, g := range ch.sentinels {
		out[i] = engines.SentinelVote{Master: g.Master, Addrs: g.SentinelAddrs()}
	}
	return out
}

// sentinelNodes are each Sentinel vote's data nodes' addresses.
func (ch *chaos) sentinelNodes() [][]string {
	out := make([][]string, len(ch.sentinels))
	for i, g := range ch.sentinels {
		for _, n := range g.Data {
			out[i] = append(out[i], n.Addr())
		}
	}
	return out
}

// isSentinel reports whether vote v is a Sentinel vote: they come after
// the plain masters.
func (ch *chaos) isSentinel(v int) bool { return v >= len(ch.masters) && ch.sentinels != nil }

// sentinelClientVotes are a client's votes with Sentinel votes: the
// plain masters through their proxies in px, and the Sentinel votes,
// with the dialer that sends every connection to a data node, whichever
// the sentinels name the master, through that node's proxy in px. The
// sentinels themselves are dialed directly.
func (ch *chaos) sentinelClientVotes(px *fault.Proxies) (engines.Votes, func(context.Context, string) (net.Conn, error)) {
	via := make(map[string]string, len(ch.proxied))
	for i, a := range px.Addrs() {
		via[ch.proxied[i]] = a
	}
	v := engines.Votes{Masters: px.Addrs()[:len(ch.masters)], Sentinels: ch.sentinelVotes()}
	return v, func(ctx context.Context, addr string) (net.Conn, error) {
		if p, ok := via[addr]; ok {
			addr = p
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// eligible are the votes of free that a fault of kind may act on when
// some votes are Sentinel votes: a failover acts on those only, a
// restart or a pause on the plain masters only, the rest on any.
func (ch *chaos) eligible(kind string, free []int) []int {
	var out []int
	for _, v := range free {
		switch {
		case kind == nemSentinelFailover && !ch.isSentinel(v):
		case (kind == nemRestart || kind == nemPause) && ch.isSentinel(v):
		default:
			out = append(out, v)
		}
	}
	return out
}

// failover fails Sentinel vote v over and waits until it has settled
// (see nemSentinelFailover). It runs to its end even when ctx ends, so
// that no group is left mid-failover; what it returns says which data
// node the sentinels promoted.
func (ch *chaos) failover(ctx context.Context, v int) (string, error) {
	g := ch.sentinels[v-len(ch.masters)]
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sentinelHealTimeout)
	defer cancel()
	old, err := g.MasterAddr(fctx)
	if err != nil {
		return "", err
	}
	promoted, err := g.Failover(fctx)
	if err != nil {
		return old + " -> ?", err
	}
	ch.event(Event{AtMs: ch.since(time.Now()), Kind: "heal", Detail: fmt.Sprintf("vote %d: the sentinels name %s master of %s, was %s", v, promoted, g.Master, old)})
	return old + " -> " + promoted, g.WaitSettled(fctx)
}

// probeAddrs are the servers the soak probes before it starts: every
// plain master and every Sentinel vote's data node.
func (ch *chaos) probeAddrs() []string {
	return append(append([]string(nil), ch.masters...), masters.Flatten(ch.sentinelNodes())...)
}

// formatSentinel writes v as --sentinel reads it: MASTER@HOST:PORT,...
func formatSentinel(v engines.SentinelVote) string {
	return v.Master + "@" + strings.Join(v.Addrs, ",")
}

// sentinelRunIDChanges is, per Sentinel vote, the fewest run_id changes
// of its master any client saw; nil without Sentinel votes.
func (ch *chaos) sentinelRunIDChanges() []int64 {
	if ch.sentinels == nil {
		return nil
	}
	out := make([]int64, len(ch.sentinels))
	for i := range out {
		out[i] = -1
	}
	for _, c := range ch.clients {
		nodes := c.c.Nodes()
		for i := range out {
			if v := len(ch.masters) + i; v < len(nodes) && (out[i] < 0 || nodes[v].Restarts < out[i]) {
				out[i] = nodes[v].Restarts
			}
		}
	}
	return out
}
