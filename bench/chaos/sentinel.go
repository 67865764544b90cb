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

	"github.com/redlock-bench/redlock/bench/check"
	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/fault"
	"github.com/redlock-bench/redlock/bench/masters"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

// The chaos soak over Sentinel votes (Config.SentinelVotes): the last
// votes are masters Redis Sentinel manages, each a master with one
// replica under 3 sentinels, which the clients find through the
// sentinels and follow across failovers (engine.Config.Sentinels). The
// schedule adds forced failovers of them (nemSentinelFailover), and
// failovers that lose a hold's write on exactly a quorum
// (nemSentinelLostWrite). The faults on the network (slow, cut, drop)
// act on every data node of such a vote, through each client's proxy of
// it; restarts and pauses stay on the plain masters. A failover may lose
// the last writes the old master took, and the old master stays a
// writable master until the sentinels demote it: the restart quarantine
// keeps the promoted master out of the vote for MaxTTL after its
// promotion (docs/guarantees.md, "Sentinel failovers"), so the oracle
// must find no overlap; with the quarantine off, each
// nemSentinelLostWrite makes one.

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
const sentinelHealTimeout = 3 * time.Minute

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
		case (kind == nemSentinelFailover || kind == nemSentinelLostWrite) && !ch.isSentinel(v):
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

// nemSentinelLostWrite fails a Sentinel vote over to a replica that never
// received a hold's write, under that hold, so that every such fault puts
// the quarantine to the test whatever the workers' timing (as a delete
// out of model puts fencing to the test, see deleteUnderHold). The soak's
// own two clients of the Sentinel votes (sentinelHazard) take part: A
// takes the hazard's resource on exactly a quorum that includes the vote
// (the others beyond a quorum hold a stray key, as a competitor's
// attempt that won a minority leaves, until A has been refused there),
// with the vote's replica stopped and the master's links to it dropped;
// the master is killed, the replica resumed and promoted (SENTINEL
// FAILOVER), the killed node started again (the sentinels demote it).
// Once B's vote follows the sentinels to the promoted master, B asks
// for the resource until A's lease ends: the promoted master and the
// votes the stray keys left are a quorum without A's key. With the
// quarantine B is refused; with --quarantine off B is granted it while
// A holds, and the oracle counts the overlap.
const nemSentinelLostWrite = "sentinel-lost-write"

// sentinelHazardTTL is the TTL (and MaxTTL) of the hazard's clients: A's
// lease must outlast the kill, the failover and B following it, a few
// seconds.
const sentinelHazardTTL = 10 * time.Second

// sentinelHazardName is the hazard's resource: no worker takes it.
const sentinelHazardName = "sentinel-hazard"

// sentinelHazardWho names the hazard's clients in the history.
var sentinelHazardWho = [2]string{"sentinel.a", "sentinel.b"}

// strayValue is the stray keys' value: no lease's (lease values are
// base64url).
const strayValue = "stray!"

// sentinelHazard is the soak's own two clients of the Sentinel votes,
// with the oracle of their resource.
type sentinelHazard struct {
	// a trusts the votes it finds (QuarantineObserved), so that it holds
	// on the vote before the failover; b has the soak's quarantine, the
	// policy under test. Neither extends; both take mutexes.
	a, b *engines.Client
	or   *check.Oracle
	mu   sync.Mutex // one hazard at a time: they share a and b
	// counts are the hazards' outcomes, under mu.
	counts LostWrites
}

// LostWrites counts the sentinel-lost-write faults whose hazard was set
// up: the first client's hold on exactly a quorum with the vote, its
// write not on the promoted master, the second client's vote following
// the sentinels to it while the first held. Granted are those where the
// second client was granted the resource while the first held (the
// quarantine off: a double grant, which the oracle counts); Quarantined
// those where it was refused with the promoted master out of its vote by
// the quarantine.
type LostWrites struct {
	SetUp       int `json:"set_up"`
	Granted     int `json:"granted"`
	Quarantined int `json:"quarantined"`
}

// startSentinelHazard connects the hazard's clients straight to the votes
// (no proxy: the faults on the network are the workers').
func (ch *chaos) startSentinelHazard(ctx context.Context) error {
	v := engines.Votes{Masters: ch.masters, Sentinels: ch.sentinelVotes()}
	spec := ch.spec()
	spec.Lock = engines.Lock{Kind: engines.LockMutex}
	spec.TTL, spec.Extend, spec.Conn.Dial = sentinelHazardTTL, false, nil
	// Patient: a loaded machine must not time a master's answer out.
	spec.NodeTimeout = sentinelHazardTTL / 4
	h := &sentinelHazard{}
	ch.sentinelHaz = h
	a, b := spec, spec
	a.Quarantine = engines.QuarantineObserved
	var err error
	if h.a, err = engines.Open(ctx, a, v); err != nil {
		return fmt.Errorf("%s: %w", sentinelHazardWho[0], err)
	}
	if h.b, err = engines.Open(ctx, b, v); err != nil {
		return fmt.Errorf("%s: %w", sentinelHazardWho[1], err)
	}
	return nil
}

// close closes the hazard's clients.
func (h *sentinelHazard) close() {
	for _, c := range []*engines.Client{h.a, h.b} {
		if c != nil {
			c.Close()
		}
	}
}

// sentinelHazardID is the oracle's id of the hazard's client i, after the
// workers' and the out-of-model hazard's.
func (ch *chaos) sentinelHazardID(i int) int {
	return ch.cfg.Clients*ch.cfg.Workers + len(hazardWho) + i
}

// lostWrite runs nemSentinelLostWrite on Sentinel vote v (see there). It
// does not begin (errNotSetUp) unless A counts every vote and no other
// fault acts on one. A set-up that fails once begun (the hold not on
// exactly a quorum with the vote, the write on the promoted master, B
// not following while A holds) is an error, so that a soak that tested
// nothing says so. soak ends only on an
// interrupt; the vote is repaired (replica resumed, node restarted,
// group settled) whatever happens.
func (ch *chaos) lostWrite(ctx, soak context.Context, v int) (string, error) {
	h := ch.sentinelHaz
	h.mu.Lock()
	defer h.mu.Unlock()
	g := ch.sentinels[v-len(ch.masters)]
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sentinelHealTimeout)
	defer cancel()
	key := keyPrefix + sentinelHazardName
	// A must count every vote, and no other fault act on one, so that
	// its hold is on exactly the quorum the stray keys leave it; a
	// quarantine of A's own (an earlier failover) ends within its MaxTTL.
	n := ch.votes()
	ready := func() bool {
		ch.faultMu.Lock()
		defer ch.faultMu.Unlock()
		for u, st := range h.a.Nodes() {
			if st.State != string(engine.StateUp) || u != v && ch.affected[u] {
				return false
			}
		}
		return true
	}
	wctx, wcancel := context.WithTimeout(hctx, sentinelHazardTTL)
	err := pollUntil(wctx, ready)
	wcancel()
	if err != nil {
		return "", fmt.Errorf("%w: %s does not count every vote, or another fault acts on one", errNotSetUp, sentinelHazardWho[0])
	}
	addr, err := g.MasterAddr(hctx)
	if err != nil {
		return "", err
	}
	master, replica := g.DataNode(addr), (*redisproc.Node)(nil)
	for _, n := range g.Data {
		if n != master {
			replica = n
		}
	}
	if master == nil || replica == nil {
		return "", fmt.Errorf("vote %d: no master and replica among %v", v, ch.sentinelNodes()[v-len(ch.masters)])
	}
	// Stray keys on as many votes as lie beyond a quorum.
	strays, err := ch.strayVotes(hctx, v, n-(n/2+1))
	if err != nil {
		return "", err
	}
	refused := make([]int64, len(strays))
	for i, s := range strays {
		refused[i] = h.a.Nodes()[s.vote].Refused
		if _, err := ch.conn().Do(hctx, s.addr, time.Second, "SET", key, strayValue, "PX", strconv.FormatInt(sentinelHazardTTL.Milliseconds(), 10)); err != nil {
			return "", fmt.Errorf("stray key on vote %d: %w", s.vote, err)
		}
	}
	defer ch.clearStrays(hctx, key, strays)
	// The replication window, held open: A's write never reaches the
	// replica.
	if err := replica.Pause(); err != nil {
		return "", err
	}
	resumed := false
	resume := func() error {
		if resumed {
			return nil
		}
		resumed = true
		return replica.Resume()
	}
	defer resume()
	if _, err := ch.conn().Do(hctx, addr, time.Second, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		return "", fmt.Errorf("vote %d: drop the replication links: %w", v, err)
	}
	la, err := ch.sentinelHold(soak, 0, key)
	if err != nil {
		return "", err
	}
	defer la.end()
	for i, s := range strays {
		// TryLock returns at a quorum: the stray must stay until A's
		// attempt there has been refused, or A's SET lands after it.
		if err := pollUntil(hctx, func() bool { return h.a.Nodes()[s.vote].Refused > refused[i] }); err != nil {
			return "", fmt.Errorf("vote %d never refused %s: %w", s.vote, sentinelHazardWho[0], err)
		}
	}
	ch.clearStrays(hctx, key, strays)
	if on, err := ch.holds(hctx, addr, key, la.le.Value()); err != nil || !on {
		return "", fmt.Errorf("set-up: %s's key not on vote %d's master %s (%v)", sentinelHazardWho[0], v, addr, err)
	}
	// Kill the master before the replica runs again, or it would
	// resynchronise A's write.
	killErr := master.Kill()
	if err := resume(); err != nil || killErr != nil {
		return "", errors.Join(killErr, err)
	}
	promoted, ferr := g.Failover(hctx)
	rerr := master.Restart(hctx) // empty: the sentinels demote it
	if ferr != nil || rerr != nil {
		return "", errors.Join(ferr, rerr)
	}
	detail := fmt.Sprintf("%s killed with %s's write, %s promoted without it", addr, sentinelHazardWho[0], promoted)
	ch.event(Event{AtMs: ch.since(time.Now()), Kind: "heal", Detail: fmt.Sprintf("vote %d: %s", v, detail)})
	if on, err := ch.holds(hctx, promoted, key, la.le.Value()); err != nil || on {
		return detail, fmt.Errorf("set-up: %s's write reached the promoted master %s (%v): the failover lost nothing", sentinelHazardWho[0], promoted, err)
	}
	// B asks once its vote follows the sentinels to the promoted master,
	// until A's lease ends.
	until := la.le.ValidUntil()
	followed := func() bool { return h.b.SentinelMasters()[v] == promoted || time.Now().After(until) }
	if err := pollUntil(hctx, followed); err != nil || h.b.SentinelMasters()[v] != promoted {
		return detail, fmt.Errorf("set-up: %s's vote %d did not follow the sentinels to %s while %s held (%v)", sentinelHazardWho[1], v, promoted, sentinelHazardWho[0], err)
	}
	bctx, bcancel := context.WithDeadline(soak, until)
	lb, berr := ch.sentinelHold(bctx, 1, key)
	bcancel()
	h.counts.SetUp++
	switch st := h.b.Nodes()[v].State; {
	case berr == nil:
		h.counts.Granted++
		detail += ", " + sentinelHazardWho[1] + " granted it while " + sentinelHazardWho[0] + " held"
		lb.end()
	case st == string(engine.StateQuarantined):
		h.counts.Quarantined++
		detail += ", " + sentinelHazardWho[1] + " refused while " + sentinelHazardWho[0] + " held, the promoted master quarantined"
	default:
		detail += ", " + sentinelHazardWho[1] + " refused while " + sentinelHazardWho[0] + " held, its vote " + st
	}
	la.end()
	return detail, g.WaitSettled(hctx)
}

// holds reports whether the server at addr holds value at key.
func (ch *chaos) holds(ctx context.Context, addr, key, value string) (bool, error) {
	r, err := ch.conn().Do(ctx, addr, time.Second, "EVAL", `return redis.call("GET", KEYS[1]) == ARGV[1] and 1 or 0`, "1", key, value)
	return r == ":1", err
}

// errNotSetUp is a nemSentinelLostWrite that did not begin: the soak
// skips it, as it skips a fault that would take it out of model.
var errNotSetUp = errors.New("not set up")

// strayVote is a vote that holds a stray key of the hazard, and where.
type strayVote struct {
	vote int
	addr string
}

// strayVotes are k votes other than v, plain masters first, and the
// address of each one's master.
func (ch *chaos) strayVotes(ctx context.Context, v, k int) ([]strayVote, error) {
	var out []strayVote
	for u := 0; u < ch.votes() && len(out) < k; u++ {
		if u == v {
			continue
		}
		addr := ""
		if ch.isSentinel(u) {
			a, err := ch.sentinels[u-len(ch.masters)].MasterAddr(ctx)
			if err != nil {
				return nil, err
			}
			addr = a
		} else {
			addr = ch.masters[u]
		}
		out = append(out, strayVote{vote: u, addr: addr})
	}
	return out, nil
}

// clearStrays deletes the stray keys where they still hold.
func (ch *chaos) clearStrays(ctx context.Context, key string, strays []strayVote) {
	for _, s := range strays {
		ch.conn().Do(ctx, s.addr, time.Second, "EVAL",
			`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`, "1", key, strayValue)
	}
}

// sentinelLease is a hold of one of the hazard's clients.
type sentinelLease struct {
	ch  *chaos
	le  sentinelHazardLease
	id  int
	who string
}

// sentinelHazardLease is what the hazard needs of its clients' leases:
// the oracle's token and Done, and the value the hazard looks for on the
// masters. The redlock engine's leases (*engine.Lease) have it all.
type sentinelHazardLease interface {
	engines.Watched
	engines.Valued
	Token() int64
}

// sentinelHold takes key with the hazard's client i (A: at once; B:
// waiting as ctx allows) and registers the hold with the hazard's
// oracle.
func (ch *chaos) sentinelHold(ctx context.Context, i int, key string) (*sentinelLease, error) {
	h := ch.sentinelHaz
	ch.attempts.Add(1)
	c := [2]*engines.Client{h.a, h.b}[i]
	l, err := c.Take(ctx, engines.Op{Names: []string{key}, Wait: i == 1})
	t1 := time.Now()
	if err != nil {
		ch.failed.Add(1)
		return nil, fmt.Errorf("%s: %w", sentinelHazardWho[i], err)
	}
	le, ok := l.(sentinelHazardLease)
	if !ok {
		// Not the redlock engine (validateSentinels allows no other):
		// give the lock back and count the attempt failed.
		ch.failed.Add(1)
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		l.Release(rctx)
		cancel()
		return nil, fmt.Errorf("%s: a %T tells no token, Done or value", sentinelHazardWho[i], l)
	}
	ch.acquired.Add(1)
	s := &sentinelLease{ch: ch, le: le, id: ch.sentinelHazardID(i), who: sentinelHazardWho[i]}
	h.or.Begin(0, s.id, check.Hold{Start: t1, Until: le.ValidUntil(), Token: le.Token(), Done: le.Done()})
	ch.event(Event{AtMs: ch.since(t1), Kind: "acquire", Who: s.who, Resource: sentinelHazardName, Token: le.Token(),
		ValidMs: float64(le.ValidUntil().Sub(t1).Microseconds()) / 1e3})
	return s, nil
}

// end ends the hold, once, and releases it.
func (s *sentinelLease) end() {
	if s.le == nil {
		return
	}
	ch, le := s.ch, s.le
	s.le = nil
	t2 := time.Now()
	ch.sentinelHaz.or.End(0, s.id, t2)
	ch.event(Event{AtMs: ch.since(t2), Kind: "release", Who: s.who, Resource: sentinelHazardName, Token: le.Token(),
		ValidMs: float64(le.ValidUntil().Sub(t2).Microseconds()) / 1e3})
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	le.Release(rctx)
	cancel()
}

// pollUntil checks cond every few milliseconds until it holds or ctx
// ends: the engine's node state has no event to wait on.
func pollUntil(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
