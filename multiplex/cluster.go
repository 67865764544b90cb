package multiplex

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"
	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
)

// A vote may be a Redis Cluster (Options.Clusters): one rueidis cluster
// client, whose commands carry their key's slot, so that the shard that
// owns it answers (rueidis follows MOVED and ASK, which say the command
// did not run, and refreshes the topology). The quorum is over votes; a
// cluster's vote for a key is its shard's.
//
// Independence and restarts are judged per node: every connection the
// cluster client opens passes the dialer, which reads the node's INFO
// before anything else travels on it, as for a master. The client talks
// to primaries only: a connection to a replica is refused, so that a
// replica promoted by a failover is reached on a new connection, whose
// INFO shows the new primary. A node's run_id changed, a primary that was
// a replica or that the vote had not seen before, keep the slots that
// node serves out of the vote for MaxTTL (see observeMember); the other
// shards' keys keep voting. The node's slots are read with its INFO
// (CLUSTER NODES, in the same write), and the vote checks a yes against
// its key's slot.

// ErrWrongMode: a master runs in cluster mode, or a cluster vote's node
// does not. The first would answer MOVED for most keys; the second is not
// a cluster to route by slot. Dial fails with it, naming the address.
var ErrWrongMode = errors.New("server mode does not match the vote")

// ErrReplica: a cluster vote's client routed a command to a node that is
// a replica, whose connection the vote refuses (it talks to primaries
// only): after a failover, the demoted primary, until the client has
// refreshed its slot map. The command was not sent: the error is
// ErrNotSent too.
var ErrReplica = errors.New("routed to a replica")

// replicaError is a cluster vote's refusal of a connection to a replica.
type replicaError struct{ addr, vote string }

func (e *replicaError) Error() string {
	return e.addr + " of " + e.vote + " is a replica: a cluster vote talks to primaries only"
}
func (e *replicaError) Unwrap() []error { return []error{ErrReplica, ErrNotSent} }

// member is what a cluster vote's dialer last saw of one node.
type member struct {
	runID   string
	primary bool
	// slots are those it served then, by its own view.
	slots []slotRange
	// clock is the node's clock as its last accepted connection read it,
	// when clockKnown (see judgeMemberClock).
	clock      clockReading
	clockKnown bool
}

// modeError is ErrWrongMode with the address at fault.
type modeError struct{ detail string }

func (e *modeError) Error() string { return ErrWrongMode.Error() + ": " + e.detail }
func (e *modeError) Unwrap() error { return ErrWrongMode }

// clusterLabel names a cluster vote in messages and NodeStatus.Addr.
func clusterLabel(seeds []string) string { return "cluster(" + strings.Join(seeds, ",") + ")" }

// voteName names node n in a message about independence: its address
// for a master, the node's address within its cluster for a cluster vote.
func voteName(n *node, addr string) string {
	if n.seeds == nil {
		return fmt.Sprintf("master %s (vote %d)", n.Addr, n.Index)
	}
	return fmt.Sprintf("node %s of %s (vote %d)", addr, n.Addr, n.Index)
}

// sameServer finds run_id among the nodes of the votes other than n: the
// vote, and the node's address in it. The caller holds p.ids.
func (p *Pool) sameServer(n *node, runID string) (*node, string) {
	if runID == "" {
		return nil, ""
	}
	for _, o := range p.nodes {
		if o == n {
			continue
		}
		if o.seeds == nil {
			if o.Info().RunID == runID {
				return o, o.Addr
			}
			continue
		}
		if faults.ClusterVotesShareNode.On() {
			continue
		}
		for addr, m := range o.members {
			if m.runID == runID {
				return o, addr
			}
		}
	}
	return nil, ""
}

// observeMember records what a new connection to addr, a node of cluster
// vote n, found, or refuses it: a replica (the client sends nothing a
// replica should answer; refused, a promoted replica is reached anew),
// a node not in cluster mode, or a node another vote has. Any sign that
// a primary may have lost writes keeps the slots it serves out of the
// vote for MaxTTL (see quarantineSlots): a run_id changed at addr (a
// restart), a primary that was a replica (a failover), or a primary
// first seen after the vote's first topology. Its other slots' keys, on
// other primaries, keep voting.
//
// A failover demotes the slots' previous primary, whose connection, open
// since it was a primary, would carry its votes unchecked if it were
// promoted again: observeMember returns the members it takes for
// demoted (those that served a promoted replica's slots, and those the
// new primary's view shows as replicas), for the dialer to cut their
// connections; each one's next connection is checked anew, and, if it
// is a primary again, is quarantined as a promoted replica.
func (p *Pool) observeMember(n *node, addr string, info serverInfo) (demoted []string, err error) {
	if info.Mode != "" && info.Mode != "cluster" {
		return nil, &modeError{fmt.Sprintf("%s of %s runs %s, not in cluster mode: give it as a master", addr, n.Addr, info.Mode)}
	}
	p.ids.Lock()
	defer p.ids.Unlock()
	if o, oaddr := p.sameServer(n, info.RunID); o != nil {
		return nil, &dependenceError{fmt.Sprintf("%s and %s report the same run_id %s: one server in two votes", voteName(n, addr), voteName(o, oaddr), info.RunID)}
	}
	primary := info.Role == "master"
	prev, known := n.members[addr]
	if n.members == nil {
		n.members = make(map[string]member)
	}
	var slots []slotRange
	if info.view != nil {
		slots = info.view.slots
	}
	n.members[addr] = member{runID: info.RunID, primary: primary, slots: slots}
	if !primary {
		return nil, &replicaError{addr, n.Addr}
	}
	failover := known && !prev.primary
	promoted := (failover || !known && n.established) && !faults.ClusterFailoverTrusted.On()
	switch {
	case known && prev.runID != info.RunID, promoted:
		n.restarts.Add(1)
		// A restart lost what the node held when it went down: the slots
		// it served then, as last seen, too. A migration under way may
		// have handed one over since, without the keys the node had not
		// moved yet: the new owner serves it without them.
		var lost []slotRange
		if known && !faults.ClusterRestartSlotsAsSeen.On() {
			lost = prev.slots
		}
		p.quarantineSlots(n, info, lost, p.maxTTL, quarantine.Error{Restarted: true})
	case !known && p.policy == quarantine.Always && info.Uptime < p.maxTTL:
		p.quarantineSlots(n, info, nil, p.maxTTL-info.Uptime, quarantine.Error{Uptime: info.Uptime})
	}
	if !promoted || faults.ClusterDemotedConnKept.On() {
		return nil, nil
	}
	for a, m := range n.members {
		if a == addr || !m.primary {
			continue
		}
		// A primary new to the vote may have been filled by migrations
		// from the others, still primaries: only a replica's promotion
		// takes its slots' previous primary for demoted unseen.
		if failover && overlaps(m.slots, slots) || info.view != nil && slices.Contains(info.view.replicas, a) {
			m.primary = false
			n.members[a] = m
			demoted = append(demoted, a)
		}
	}
	return demoted, nil
}

// judgeMemberClock refuses a connection to a cluster's node whose clock,
// as the connection measured it, is provably MaxClockSkew or more from
// the median of the other nodes' (the masters', and every cluster node's
// last accepted reading; see clockReading.apart), and records its
// reading otherwise. Each shard's primary answers for its own slots'
// fencing tokens with its own clock once it has forgotten its counters,
// so each is judged, as a master is.
// Refused, the node's slots fail their votes (it cannot be reached) until
// a new connection finds it within; the other shards vote. The vote's
// own clock, for the masters' judgement and Status, is the median of its
// accepted nodes'.
func (p *Pool) judgeMemberClock(n *node, addr string, info serverInfo) error {
	if p.maxSkew <= 0 || !info.ClockKnown || faults.ClusterClockUnjudged.On() {
		return nil
	}
	p.ids.Lock()
	defer p.ids.Unlock()
	m := n.members[addr]
	if ref, ok := medianClock(p.clockRefs(n, addr)); ok {
		if d, beyond := info.clock().apart(ref, p.maxSkew); beyond {
			m.clockKnown = false
			n.members[addr] = m
			p.setVoteClock(n)
			return fmt.Errorf("%s of %s: %w: its clock is %s from the others' (±%s as read; at most %s)", addr, n.Addr, ErrClockSkew,
				d.Round(time.Millisecond), (info.ClockError + ref.err).Round(100*time.Microsecond), p.maxSkew)
		}
	}
	m.clock, m.clockKnown = info.clock(), true
	n.members[addr] = m
	p.setVoteClock(n)
	return nil
}

// rejudgeClocks judges again every cluster node's reading that was taken
// before the others had theirs (the votes connect at once): those off
// lose their connections, and their next ones are refused while still
// off. Dial runs it once every vote has connected.
func (p *Pool) rejudgeClocks() {
	if p.maxSkew <= 0 || faults.ClusterClockUnjudged.On() {
		return
	}
	type off struct {
		n    *node
		addr string
	}
	var cut []off
	p.ids.Lock()
	for _, n := range p.nodes {
		if n.seeds == nil {
			continue
		}
		for addr, m := range n.members {
			if !m.clockKnown {
				continue
			}
			ref, ok := medianClock(p.clockRefs(n, addr))
			if _, beyond := m.clock.apart(ref, p.maxSkew); ok && beyond {
				m.clockKnown = false
				n.members[addr] = m
				cut = append(cut, off{n, addr})
			}
		}
		p.setVoteClock(n)
	}
	p.ids.Unlock()
	for _, c := range cut {
		p.cutMembers(c.n, []string{c.addr}, nil)
	}
}

// clockRefs are the clock readings the node at addr of vote n is judged
// against: the masters' that vote, and every other accepted cluster
// node's. The caller holds p.ids.
func (p *Pool) clockRefs(n *node, addr string) []clockReading {
	var refs []clockReading
	for _, o := range p.nodes {
		if o.seeds == nil {
			if oi := o.Info(); oi.ClockKnown && o.skew.Load() == nil {
				refs = append(refs, oi.clock())
			}
			continue
		}
		for a, m := range o.members {
			if m.clockKnown && m.primary && (o != n || a != addr) {
				refs = append(refs, m.clock)
			}
		}
	}
	return refs
}

// setVoteClock makes cluster vote n's clock the median of its accepted
// primaries' readings (see medianClock). The caller holds p.ids.
func (p *Pool) setVoteClock(n *node) {
	var readings []clockReading
	for _, m := range n.members {
		if m.clockKnown && m.primary {
			readings = append(readings, m.clock)
		}
	}
	if r, ok := medianClock(readings); ok {
		n.mu.Lock()
		n.info.ClockOffset, n.info.ClockError, n.info.ClockKnown = r.off, r.err, true
		n.mu.Unlock()
	}
}

// slotRange is slots lo to hi, inclusive.
type slotRange struct{ lo, hi int32 }

func overlaps(a, b []slotRange) bool {
	for _, x := range a {
		for _, y := range b {
			if x.lo <= y.hi && y.lo <= x.hi {
				return true
			}
		}
	}
	return false
}

// clusterView is what a node's CLUSTER NODES says.
type clusterView struct {
	// slots are the node's own: those it serves, and those it imports
	// (keys moved to it already are there).
	slots []slotRange
	// replicas are the addresses of the nodes it takes for replicas.
	replicas []string
}

// parseClusterNodes reads CLUSTER NODES: for each node, "id
// host:port@bus[,hostname] flags master-id ping pong epoch link slots...",
// the node itself flagged "myself", its slots as "lo-hi" or "s", and
// slots in migration as "[s->-id]" (migrating out, still in its ranges)
// or "[s-<-id]" (importing).
func parseClusterNodes(txt string) *clusterView {
	v := &clusterView{}
	for _, line := range strings.Split(strings.TrimSpace(txt), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		flags := strings.Split(f[2], ",")
		if !slices.Contains(flags, "myself") {
			if slices.Contains(flags, "slave") {
				addr, _, _ := strings.Cut(f[1], "@")
				v.replicas = append(v.replicas, addr)
			}
			continue
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				s, _, importing := strings.Cut(strings.Trim(r, "[]"), "-<-")
				if n, err := strconv.Atoi(s); importing && err == nil && n >= 0 && n < keyslot.Slots {
					v.slots = append(v.slots, slotRange{int32(n), int32(n)})
				}
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := a, error(nil)
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 == nil && err2 == nil && 0 <= a && a <= b && b < keyslot.Slots {
				v.slots = append(v.slots, slotRange{int32(a), int32(b)})
			}
		}
	}
	return v
}

// slotQuarantine keeps a cluster vote's slots lo to hi out of the vote
// until until (nanoseconds since Pool.epoch); err is their votes' error
// meanwhile.
type slotQuarantine struct {
	slotRange
	until int64
	err   *quarantine.Error
}

// quarantineSlots keeps the slots a node serves, as its view read with
// info says, and the slots in also, out of cluster vote n for d from now;
// e says why. A node whose view is unknown keeps the whole vote out. The
// caller holds p.ids.
func (p *Pool) quarantineSlots(n *node, info serverInfo, also []slotRange, d time.Duration, e quarantine.Error) {
	if info.view == nil {
		p.quarantineFor(n, d, e)
		return
	}
	slots := append(slices.Clip(info.view.slots), also...)
	if d <= 0 || p.policy == quarantine.Off || len(slots) == 0 {
		return
	}
	now := p.now()
	until := now + int64(d)
	e.Until, e.MaxTTL = p.epoch.Add(time.Duration(until)), p.maxTTL
	n.mu.Lock()
	defer n.mu.Unlock()
	var next []slotQuarantine
	if old := n.slotq.Load(); old != nil {
		for _, q := range *old {
			if q.until > now {
				next = append(next, q)
			}
		}
	}
	for _, r := range slots {
		next = append(next, slotQuarantine{r, until, &e})
	}
	n.slotq.Store(&next)
}

// slotQuarantined is key's slot's quarantine in cluster vote n (the
// latest of those that cover it), or nil.
func (p *Pool) slotQuarantined(n *node, key string) *quarantine.Error {
	sq := n.slotq.Load()
	if sq == nil || len(*sq) == 0 {
		return nil
	}
	now, slot := p.now(), int32(keyslot.KeySlot(key))
	var last *slotQuarantine
	for i := range *sq {
		q := &(*sq)[i]
		if q.until > now && q.lo <= slot && slot <= q.hi && (last == nil || q.until > last.until) {
			last = q
		}
	}
	if last == nil {
		return nil
	}
	return last.err
}

// slotsQuarantined is how many of cluster vote n's slots are out of the
// vote now, and until when the last of them is.
func (p *Pool) slotsQuarantined(n *node) (count int, until time.Time) {
	sq := n.slotq.Load()
	if sq == nil {
		return 0, time.Time{}
	}
	now := p.now()
	var out [keyslot.Slots / 64]uint64
	var last int64
	for _, q := range *sq {
		if q.until <= now {
			continue
		}
		last = max(last, q.until)
		for s := q.lo; s <= q.hi; s++ {
			out[s/64] |= 1 << (s % 64)
		}
	}
	for _, w := range out {
		count += bits.OnesCount64(w)
	}
	if count == 0 {
		return 0, time.Time{}
	}
	return count, p.epoch.Add(time.Duration(last))
}

// cutMembers closes cluster vote n's connections to the nodes at addrs,
// but keep: the next command to each dials it anew, and the dialer
// checks it again.
func (p *Pool) cutMembers(n *node, addrs []string, keep net.Conn) {
	if len(addrs) == 0 {
		return
	}
	p.connMu.Lock()
	var cut []*trackedConn
	for c := range p.conns {
		if c.vote == n && c != keep && slices.Contains(addrs, c.addr) {
			cut = append(cut, c)
		}
	}
	p.connMu.Unlock()
	for _, c := range cut {
		c.Close()
	}
}

// enumerate reads the cluster's nodes (CLUSTER NODES) through c, the
// vote's new client, and the INFO of each that the client has not yet
// reached, replicas included, so that a node that serves another vote is
// found at start whatever its role. Afterwards a primary new to the vote
// is a topology change (see observeMember).
func (p *Pool) enumerate(ctx context.Context, n *node, c rueidis.Client, o Options) error {
	// From any node the client reaches: one it refuses (its clock, say)
	// must not keep the vote from starting.
	txt, err := c.Do(ctx, c.B().ClusterNodes().Build()).ToString()
	for _, nc := range c.Nodes() {
		if err == nil {
			break
		}
		txt, err = nc.Do(ctx, nc.B().ClusterNodes().Build()).ToString()
	}
	if err != nil {
		return fmt.Errorf("CLUSTER NODES: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(txt), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.Contains(f[2], "fail") || strings.Contains(f[2], "noaddr") || strings.Contains(f[2], "handshake") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		if h, _, err := net.SplitHostPort(addr); err != nil || h == "" {
			continue
		}
		p.ids.Lock()
		_, known := n.members[addr]
		p.ids.Unlock()
		if known {
			continue
		}
		info, err := p.probe(ctx, addr, o)
		if err != nil {
			return fmt.Errorf("%s of %s: %w", addr, n.Addr, err)
		}
		if _, err := p.observeMember(n, addr, info); err != nil && (errors.Is(err, ErrNotIndependent) || errors.Is(err, ErrWrongMode)) {
			return err
		}
	}
	p.ids.Lock()
	n.established = true
	p.ids.Unlock()
	return nil
}

// probe reads INFO on a connection of its own to addr, as the dialer
// does, and closes it. The connection is not the pool's, which Close
// cuts: it ends with ctx instead, so that a node that took it and does
// not answer (stopped, or behind a partition that holds what is sent)
// holds up neither a reconnect's Close nor its ctx's end until the dial
// timeout.
func (p *Pool) probe(ctx context.Context, addr string, o Options) (serverInfo, error) {
	d := &net.Dialer{Timeout: o.DialTimeout}
	conn, err := dial(ctx, addr, d, o.TLS, o.DialContext)
	if err != nil {
		return serverInfo{}, err
	}
	defer conn.Close()
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	deadline := time.Now().Add(o.DialTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	return rawInfo(conn, deadline, o.Username, o.Password, true)
}

// errCrossSlot is the vote of a cluster for a command whose keys are in
// different slots: no shard can run it, so it is not sent.
var errCrossSlot = errors.New("keys in different hash slots: a cluster vote runs one command on one shard")

// crossSlot reports whether cmd's keys are in more than one slot.
func crossSlot(cmd *Command) bool {
	if cmd.Keys == nil {
		return false
	}
	s := keyslot.KeySlot(cmd.Key)
	for _, k := range *cmd.Keys {
		if keyslot.KeySlot(k) != s {
			return true
		}
	}
	return false
}
