package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/bench/check"
)

// The nemesis's fault kinds.
const (
	nemRestart     = "restart"      // kill a master, start it again empty after For
	nemPause       = "pause"        // SIGSTOP for For, then SIGCONT
	nemSlow        = "slow"         // add Latency to every reply, through every client's proxy
	nemCut         = "cut"          // partition a master from every client
	nemDrop        = "drop"         // close every client connection on a master
	nemClientPause = "client-pause" // freeze a client past the TTL: its links cut, its goroutines stopped
	nemDelete      = "delete-majority"
	nemClockJump   = "clock-jump"
)

// nemStep is one fault of the soak's schedule.
type nemStep struct {
	Kind    string
	At, For time.Duration
	Nodes   []int // masters acted on; with clusters, votes
	Client  int   // client-pause
	Latency time.Duration
	// Shard is the shard a fault inside a cluster acts on; for a
	// migration, which other shard takes the slot (counted from the
	// one that serves it). Res is the resource whose slot migrates.
	Shard, Res int
	// Clustered: Nodes are cluster votes.
	Clustered bool
}

func (s nemStep) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%s", s.Kind, s.At.Round(time.Millisecond))
	if s.For > 0 {
		fmt.Fprintf(&b, "+%s", s.For.Round(time.Millisecond))
	}
	ns := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		ns[i] = strconv.Itoa(n)
	}
	switch {
	case s.Kind == nemClientPause:
		fmt.Fprintf(&b, " client %d", s.Client)
	case s.Kind == nemMigrate:
		fmt.Fprintf(&b, " vote %s slot of r%d", strings.Join(ns, ","), s.Res)
	case s.Kind == nemSentinelFailover || s.Kind == nemSentinelLostWrite:
		fmt.Fprintf(&b, " vote %s", strings.Join(ns, ","))
	case s.Kind == nemDelete:
		fmt.Fprintf(&b, " master %s under a hold of r%d", strings.Join(ns, ","), s.Res)
	case strings.HasPrefix(s.Kind, "cluster-"):
		fmt.Fprintf(&b, " vote %s shard %d", strings.Join(ns, ","), s.Shard)
	case s.Clustered:
		fmt.Fprintf(&b, " vote %s", strings.Join(ns, ","))
	default:
		fmt.Fprintf(&b, " master %s", strings.Join(ns, ","))
	}
	if s.Latency > 0 {
		fmt.Fprintf(&b, " latency %s", s.Latency)
	}
	return b.String()
}

// plan draws the schedule from the seed. In model, at most a minority of
// masters is faulted at any time (a restart counts until its master is back,
// with a second's margin for the start), and one client at a time is frozen.
// Out of model, the keys vanish from a majority, or a master's clock jumps.
func (ch *chaos) plan() []nemStep {
	if !ch.cfg.Engine.NeedsRedis() {
		return nil // no masters to act on
	}
	rng := rand.New(rand.NewPCG(ch.cfg.Seed, 0x6e656d65))
	ttl, n := ch.cfg.TTL, ch.votes()
	minority := (n - 1) / 2
	local := ch.cluster != nil || ch.clusters != nil
	clustered := ch.clusters != nil
	var steps []nemStep
	busyUntil := make([]time.Duration, n) // per master
	var clientBusy time.Duration
	dur := func(lo, hi float64) time.Duration {
		return time.Duration((lo + rng.Float64()*(hi-lo)) * float64(ttl))
	}
	// The resources a delete's hazard holds are drawn apart, so that the
	// faults a seed draws stay those it drew before the hazard.
	held := rand.New(rand.NewPCG(ch.cfg.Seed, 0x686f6c64))
	for at := ttl + dur(0, 1); at < ch.cfg.Duration; at += dur(0.3, 1.2) {
		if ch.cfg.Class == OutOfModel {
			if rng.IntN(2) == 0 {
				steps = append(steps, nemStep{Kind: nemDelete, At: at, Nodes: pick(rng, n, n/2+1), Res: held.IntN(len(ch.names))})
			} else {
				steps = append(steps, nemStep{Kind: nemClockJump, At: at, Nodes: pick(rng, n, 1)})
			}
			continue
		}
		kinds := []string{nemSlow, nemCut, nemDrop, nemClientPause}
		if local {
			kinds = append(kinds, nemRestart, nemRestart, nemPause, nemPause)
		}
		if clustered {
			// A whole cluster restarted is a rarer event than one of
			// its shards failing.
			kinds = append(kinds[:len(kinds)-3], nemPause, nemPrimaryKill, nemPrimaryKill, nemPrimaryPause, nemPrimaryPause,
				nemFailover, nemFailover, nemMigrate, nemMigrate)
		}
		if ch.sentinels != nil {
			kinds = append(kinds, nemSentinelFailover, nemSentinelLostWrite)
		}
		kind := kinds[rng.IntN(len(kinds))]
		if kind == nemClientPause {
			if clientBusy > at {
				continue
			}
			s := nemStep{Kind: kind, At: at, For: dur(1.2, 2.5), Client: rng.IntN(ch.cfg.Clients)}
			clientBusy = at + s.For + ttl
			steps = append(steps, s)
			continue
		}
		var busy, free []int
		for i, u := range busyUntil {
			if u > at {
				busy = append(busy, i)
			} else {
				free = append(free, i)
			}
		}
		if len(busy) >= minority || len(free) == 0 {
			continue
		}
		if ch.sentinels != nil {
			// Without Sentinel votes every vote is eligible, and the
			// draws are those of a soak before them.
			if free = ch.eligible(kind, free); len(free) == 0 {
				continue
			}
		}
		node := free[rng.IntN(len(free))]
		s := nemStep{Kind: kind, At: at, Nodes: []int{node}, Clustered: clustered}
		switch kind {
		case nemPrimaryKill, nemPrimaryPause:
			s.Shard = rng.IntN(ch.cfg.ClusterShards)
			s.For = dur(0.5, 4)
			busyUntil[node] = at + s.For + 3*time.Second
		case nemFailover:
			s.Shard = rng.IntN(ch.cfg.ClusterShards)
			busyUntil[node] = at + 3*time.Second
		case nemSentinelFailover:
			busyUntil[node] = at + sentinelSettle
		case nemSentinelLostWrite:
			busyUntil[node] = at + sentinelHazardTTL + sentinelSettle
		case nemMigrate:
			if ch.cfg.ClusterShards < 2 {
				continue
			}
			s.Shard, s.Res = rng.IntN(ch.cfg.ClusterShards-1), rng.IntN(len(ch.names))
			s.For = dur(0.2, 2)
			busyUntil[node] = at + s.For + 2*time.Second
		case nemRestart:
			s.For = dur(0.2, 2)
			busyUntil[node] = at + s.For + time.Second
			if clustered {
				busyUntil[node] += 4 * time.Second
			}
		case nemPause:
			s.For = dur(0.2, 2)
			busyUntil[node] = at + s.For + 100*time.Millisecond
			if clustered {
				busyUntil[node] += 2 * time.Second
			}
		case nemSlow:
			s.For = dur(0.5, 3)
			s.Latency = []time.Duration{5, 20, 50, 150}[rng.IntN(4)] * time.Millisecond
			busyUntil[node] = at + s.For
		case nemCut:
			s.For = dur(0.3, 2)
			busyUntil[node] = at + s.For
		case nemDrop:
			busyUntil[node] = at + 100*time.Millisecond
		}
		steps = append(steps, s)
	}
	return steps
}

// pick draws k distinct masters of n.
func pick(rng *rand.Rand, n, k int) []int {
	p := rng.Perm(n)[:k]
	sort.Ints(p)
	return p
}

// inject applies one step at its time and lifts it after its length; a
// cancelled ctx skips a step not yet due and lifts one in effect at once.
// A restart in progress completes, so that no master is left down.
// soak is the soak's own context, which outlives ctx's deadline: a
// delete's hazard under way completes after the run's end, unless the soak
// is interrupted.
func (ch *chaos) inject(ctx, soak context.Context, s nemStep) {
	if !waitUntilCtx(ctx, ch.start.Add(s.At)) {
		return
	}
	if !ch.occupy(s) {
		ch.event(Event{AtMs: ch.since(time.Now()), Kind: "skip", Detail: s.String() + ": another vote is still affected"})
		return
	}
	defer ch.release(s)
	ch.faultMu.Lock()
	ch.faults[s.Kind]++
	ch.faultMu.Unlock()
	ch.event(Event{AtMs: ch.since(time.Now()), Kind: "fault", Detail: s.String()})
	var err error
	var what string
	if ch.clusters != nil && (s.Kind == nemRestart || s.Kind == nemPause || strings.HasPrefix(s.Kind, "cluster-")) {
		what, err = ch.injectCluster(ctx, s)
	}
	switch s.Kind {
	case nemRestart:
		if ch.clusters != nil {
			break
		}
		node := ch.cluster.Nodes[s.Nodes[0]]
		err = node.Kill()
		waitUntilCtx(ctx, ch.start.Add(s.At+s.For))
		rctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if rerr := node.Restart(rctx); rerr != nil && err == nil {
			err = rerr
		}
		cancel()
	case nemPause:
		if ch.clusters != nil {
			break
		}
		node := ch.cluster.Nodes[s.Nodes[0]]
		err = node.Pause()
		waitUntilCtx(ctx, ch.start.Add(s.At+s.For))
		if rerr := node.Resume(); rerr != nil && err == nil {
			err = rerr
		}
	case nemSlow:
		for _, c := range ch.clients {
			for _, p := range ch.voteProxies[s.Nodes[0]] {
				if e := c.proxies.Slow(p, s.Latency); e != nil && err == nil {
					err = e
				}
			}
		}
		waitUntilCtx(ctx, ch.start.Add(s.At+s.For))
		for _, c := range ch.clients {
			for _, p := range ch.voteProxies[s.Nodes[0]] {
				if e := c.proxies.Slow(p, 0); e != nil && err == nil {
					err = e
				}
			}
		}
	case nemCut:
		var all []int
		for i := range ch.clients {
			all = append(all, i)
		}
		err = ch.cut(all, s.Nodes, +1)
		waitUntilCtx(ctx, ch.start.Add(s.At+s.For))
		if e := ch.cut(all, s.Nodes, -1); e != nil && err == nil {
			err = e
		}
	case nemClientPause:
		c := ch.clients[s.Client]
		c.frozenUntil.Store(int64(s.At + s.For))
		nodes := make([]int, ch.votes())
		for i := range nodes {
			nodes[i] = i
		}
		err = ch.cut([]int{s.Client}, nodes, +1)
		waitUntilCtx(ctx, ch.start.Add(s.At+s.For))
		if e := ch.cut([]int{s.Client}, nodes, -1); e != nil && err == nil {
			err = e
		}
		c.frozenUntil.Store(0)
	case nemDrop:
		for _, addr := range ch.voteAddrs(s.Nodes[0]) {
			for _, typ := range []string{"normal", "pubsub"} {
				if _, e := ch.conn().Do(context.WithoutCancel(ctx), addr, time.Second, "CLIENT", "KILL", "TYPE", typ); e != nil && err == nil {
					err = e
				}
			}
		}
	case nemSentinelFailover:
		what, err = ch.failover(ctx, s.Nodes[0])
	case nemSentinelLostWrite:
		what, err = ch.lostWrite(ctx, soak, s.Nodes[0])
		if errors.Is(err, errNotSetUp) {
			ch.notInjected(s, err)
			return
		}
	case nemDelete:
		err = ch.deleteUnderHold(soak, s)
	case nemClockJump:
		args := append([]string{"EVAL", clockJumpScript, strconv.Itoa(len(ch.keys))}, ch.keys...)
		args = append(args, strconv.FormatInt(ch.cfg.Jump.Milliseconds(), 10))
		_, err = ch.conn().Do(context.WithoutCancel(ctx), ch.masters[s.Nodes[0]], time.Second, args...)
	}
	detail := "lifted: " + s.String()
	if what != "" {
		detail += " (" + what + ")"
	}
	if err != nil {
		detail += ": " + err.Error()
		ch.faultMu.Lock()
		ch.faultErrors = append(ch.faultErrors, s.String()+": "+err.Error())
		ch.faultMu.Unlock()
	}
	if s.For > 0 || err != nil || what != "" {
		ch.event(Event{AtMs: ch.since(time.Now()), Kind: "heal", Detail: detail})
	}
}

// notInjected counts s, which inject counted as injected, as skipped
// instead: it did not begin, for why.
func (ch *chaos) notInjected(s nemStep, why error) {
	ch.faultMu.Lock()
	ch.faults[s.Kind]--
	if ch.faults[s.Kind] == 0 {
		delete(ch.faults, s.Kind)
	}
	ch.skipped[s.Kind]++
	ch.faultMu.Unlock()
	ch.event(Event{AtMs: ch.since(time.Now()), Kind: "skip", Detail: s.String() + ": " + why.Error()})
}

// hazardTimeout bounds each acquisition of a delete's hazard. The holds
// it waits out are the workers' (at most two TTLs), so it is reached only
// when the lock cannot be had at all.
const hazardTimeout = time.Minute

// hazardWho names the hazard's two clients in the history.
var hazardWho = [2]string{"nemesis.a", "nemesis.b"}

// deleteUnderHold deletes the soak's keys on s's majority while a hold
// of the hazard's first client covers s.Res, then has the second client
// take the same, write, and the first write after it. Redlock cannot keep
// the two apart once the keys are gone; the first's late write is stale,
// and the store must refuse it. Whether the workers happen to hold
// across a delete and write late is timing; this hold does, so that
// every delete puts fencing to the test. The hazard stops when soak ends
// (an interrupt); the delete is skipped if the first hold cannot be had.
func (ch *chaos) deleteUnderHold(soak context.Context, s nemStep) error {
	ch.hazardMu.Lock()
	defer ch.hazardMu.Unlock()
	set := make([]int, ch.cfg.Lock.Size())
	for i := range set {
		set[i] = (s.Res + i) % len(ch.names)
	}
	a, err := ch.hazardHold(soak, 0, set)
	if err != nil {
		return fmt.Errorf("%s: %w", hazardWho[0], err)
	}
	defer a.end()
	for _, i := range s.Nodes {
		args := append([]string{"DEL"}, ch.keys...)
		if _, e := ch.conn().Do(context.WithoutCancel(soak), ch.masters[i], time.Second, args...); e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		// A's lease may still stand on a majority: no second hold.
		return err
	}
	b, err := ch.hazardHold(soak, 1, set)
	if err != nil {
		return fmt.Errorf("%s: %w", hazardWho[1], err)
	}
	a.write()
	b.end()
	return nil
}

// hazardLease is a hold of one of the hazard's clients.
type hazardLease struct {
	ch     *chaos
	le     chaosLease
	id     int
	who    string
	set    []int
	wrs    []*check.Writer
	doneAt func() (time.Time, bool)
}

// hazardHold takes set with the hazard's client i, registers the hold
// with the oracle as a worker's, and writes once to each store.
func (ch *chaos) hazardHold(ctx context.Context, i int, set []int) (*hazardLease, error) {
	c := ch.hazard[i]
	h := &hazardLease{ch: ch, id: ch.cfg.Clients*ch.cfg.Workers + i, who: hazardWho[i], set: set}
	ch.attempts.Add(1)
	lctx, cancel := context.WithTimeout(ctx, hazardTimeout)
	t0 := time.Now()
	le, _, err := c.lock(lctx, ch.keys, set, false)
	cancel()
	t1 := time.Now()
	if err != nil {
		ch.failed.Add(1)
		return nil, err
	}
	ch.acquired.Add(1)
	h.le = le
	until, tok, began := le.ValidUntil(), le.Token(), ch.began(le, t0, t1)
	for _, r := range set {
		h.wrs = append(h.wrs, ch.store(r, -1).OpenSpan(h.who, tok, began, t1))
		ch.or.Begin(r, h.id, check.Hold{Start: t1, Until: until, Token: tok, Done: le.Done(), Live: le})
	}
	res := ch.resourceNames(set)
	ch.event(Event{AtMs: ch.since(t1), Kind: "acquire", Who: h.who, Resource: res, Token: tok,
		ValidMs: float64(until.Sub(t1).Microseconds()) / 1e3})
	h.doneAt = ch.watchDone(le, h.who, res)
	h.write()
	return h, nil
}

func (h *hazardLease) write() {
	for i, wr := range h.wrs {
		h.ch.write(wr, h.ch.names[h.set[i]])
	}
}

// end ends the hold as a worker's ends, and releases it.
func (h *hazardLease) end() {
	ch := h.ch
	t2 := time.Now()
	end := t2
	if d, ok := h.doneAt(); ok {
		end = d
		ch.lost.Add(1)
	}
	for _, r := range h.set {
		ch.or.End(r, h.id, end)
	}
	ch.extensions.Add(int64(h.le.Extensions()))
	ch.event(Event{AtMs: ch.since(t2), Kind: "release", Who: h.who, Resource: ch.resourceNames(h.set), Token: h.le.Token(),
		ValidMs: float64(h.le.ValidUntil().Sub(t2).Microseconds()) / 1e3})
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	h.le.Release(rctx)
	cancel()
}

// clockJumpScript shortens every given key's remaining TTL by ARGV[1] ms,
// to at least 1 ms: a master whose clock jumped forward by that much.
const clockJumpScript = `local n = 0
for _, k in ipairs(KEYS) do
  local t = redis.call("PTTL", k)
  if t > 0 then
    redis.call("PEXPIRE", k, math.max(1, t - tonumber(ARGV[1])))
    n = n + 1
  end
end
return n`

// voteAddrs are the addresses of vote v's servers: its master, every
// node of its cluster, or every data node of a Sentinel vote.
func (ch *chaos) voteAddrs(v int) []string {
	switch {
	case ch.isSentinel(v):
		return ch.sentinelNodes()[v-len(ch.masters)]
	case ch.clusters == nil:
		return []string{ch.masters[v]}
	}
	return ch.clusterNodes()[v]
}

// cut raises (+1) or lowers (-1) the cut count of each client's link to
// each master (every node of a cluster vote), cutting on 0 -> 1 and
// healing on 1 -> 0.
func (ch *chaos) cut(clients, nodes []int, d int) error {
	ch.faultMu.Lock()
	defer ch.faultMu.Unlock()
	var err error
	for _, c := range clients {
		for _, n := range nodes {
			before := ch.cuts[c][n]
			ch.cuts[c][n] = max(0, before+d)
			for _, p := range ch.voteProxies[n] {
				var e error
				switch {
				case before == 0 && d > 0:
					e = ch.clients[c].proxies.Cut(p)
				case before == 1 && d < 0:
					e = ch.clients[c].proxies.Heal(p)
				}
				if e != nil && err == nil {
					err = e
				}
			}
		}
	}
	return err
}

// waitUntilCtx sleeps until t; false when ctx ended first.
func waitUntilCtx(ctx context.Context, t time.Time) bool {
	if d := time.Until(t); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	return ctx.Err() == nil
}

// faultKinds lists the kinds a result may count, in a stable order.
func faultKinds(m map[string]int) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
