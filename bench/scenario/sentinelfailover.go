package scenario

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

// sentinel-failover: the replication hazard in a vote that Redis Sentinel
// manages (engine.Config.Sentinels). The votes are 2 plain masters and a
// Sentinel vote: a master with one replica under 3 sentinels. The holder
// sits on exactly a quorum, master 0 and the Sentinel vote (master 1 holds
// the key for someone else when the holder asks, and is freed once it has
// refused). The Sentinel vote's master then fails over to a replica that
// never received the holder's SET: as in failover, the replica is stopped
// (SIGSTOP) and the master drops its replication link (CLIENT KILL TYPE
// replica) just before the SET, the master is killed just after, the
// replica is resumed, and the sentinels promote it (SENTINEL FAILOVER),
// the run waiting for every sentinel to name it. A second client, whose
// Locker saw the old master, as a running client does, follows the
// sentinels to the promoted master and asks: master 1 and the promoted
// master would say yes, a quorum. The promoted master's new run_id keeps
// the vote out for MaxTTL, so the second client is refused; with the
// quarantine off it wins a second lease while the holder's is valid.

const (
	sfMasters = 2 // plain masters; the Sentinel vote comes after them
	sfVote    = sfMasters
	sfBusy    = 1 // the plain master that refuses the holder
	sfVotes   = sfMasters + 1
	sfRes     = "scenario:sentinel-failover"
	// sfDownAfter is the sentinels' down-after-milliseconds: long, so
	// that the killed master does not start a failover of the
	// sentinels' own before the forced one is taken.
	sfDownAfter = 30 * time.Second
	// sfFailoverWait bounds the forced failover and the second client
	// following it; the holder's lease bounds what the run can use.
	sfFailoverWait = time.Minute
)

// sfTTL is the lock's TTL, and MaxTTL: the holder's lease must outlast
// the failover (the sentinels promote the replica and tell each other,
// a few seconds) and the second client finding the promoted master.
func sfTTL(short bool) time.Duration {
	if short {
		return 10 * time.Second
	}
	return 15 * time.Second
}

func expectSentinelFailover(o Options) string {
	q := o.quarantine()
	head := fmt.Sprintf("%d plain masters and a vote that is a master Redis Sentinel manages (one replica, 3 sentinels); the holder on "+
		"exactly a quorum, master 0 and the Sentinel vote; the Sentinel vote's master fails over to a replica that never "+
		"received the holder's SET (its link cut just before, the master killed just after, SENTINEL FAILOVER). ", sfMasters)
	if q == engine.QuarantineOff {
		return head + "With the quarantine off the promoted master votes as soon as the second client follows the sentinels to it, " +
			"so the second client wins a quorum with it and master 1 while the holder's lease is valid: the oracle must see a double grant."
	}
	return head + fmt.Sprintf("With quarantine %s the promoted master's new run_id keeps the vote out for MaxTTL (%s), so the second "+
		"client is refused with the quarantine named and the oracle sees no double grant; once the holder releases, the second "+
		"client acquires on the plain masters.", q, sfTTL(o.Short))
}

// sentinelFailoverObs is what sentinel-failover observed; it is also its
// figures.
type sentinelFailoverObs struct {
	Quarantine string   `json:"quarantine"`
	TTLMs      int64    `json:"ttl_ms"`
	Votes      int      `json:"votes"`
	Quorum     int      `json:"quorum"`
	Masters    []string `json:"masters"`
	// MasterName is the name the sentinels monitor the vote's master
	// under; Sentinels their addresses.
	MasterName string   `json:"master_name"`
	Sentinels  []string `json:"sentinels"`
	OldMaster  string   `json:"old_master"`
	Replica    string   `json:"replica"`
	// LinksCut is how many replication links CLIENT KILL TYPE replica
	// closed on the old master.
	LinksCut    int   `json:"links_cut"`
	HolderVotes []int `json:"holder_votes"`
	// HolderOnMaster: the old master held the holder's value before it
	// died.
	HolderOnMaster bool    `json:"holder_on_master"`
	HolderValidMs  float64 `json:"holder_valid_ms"`
	MasterKilled   bool    `json:"master_killed"`
	// Promoted is the master every sentinel named after the failover;
	// FailoverMs how long that took after SENTINEL FAILOVER was sent.
	Promoted   string  `json:"promoted"`
	FailoverMs float64 `json:"failover_ms"`
	// OnPromoted: the promoted master held the holder's value, i.e. the
	// write was not lost and the run tests nothing.
	OnPromoted bool `json:"key_on_promoted_master"`
	// Followed: the second client's Sentinel vote reached the promoted
	// master while the holder's lease was valid, FollowedMs after every
	// sentinel named it, with HolderLeftAtFollowMs of the lease left.
	Followed             bool    `json:"followed"`
	FollowedMs           float64 `json:"followed_ms"`
	HolderLeftAtFollowMs float64 `json:"holder_left_at_follow_ms"`
	probeObs
	// VoteState and VoteRestarts are the second client's view of the
	// Sentinel vote at the end of its attempts while the lease lived.
	VoteState    string    `json:"vote_state"`
	VoteRestarts int64     `json:"vote_restarts"`
	DoubleGrants int       `json:"double_grants"`
	Overlaps     []Overlap `json:"overlaps,omitempty"`
}

func runSentinelFailover(ctx context.Context, e *env) (outcome, error) {
	q, ttl := e.o.quarantine(), sfTTL(e.o.Short)
	obs := sentinelFailoverObs{Quarantine: q.String(), TTLMs: ttl.Milliseconds(), Votes: sfVotes, Quorum: sfVotes/2 + 1}
	fail := func(err error) (outcome, error) { return outcome{figures: obs}, err }

	masters, err := e.masters(ctx, sfMasters)
	if err != nil {
		return fail(err)
	}
	defer masters.Stop()
	g, err := e.sentinels(ctx)
	if err != nil {
		return fail(err)
	}
	defer g.Stop()
	obs.Masters, obs.MasterName, obs.Sentinels = masters.Addrs(), g.Master, g.SentinelAddrs()
	if q == engine.QuarantineAlways {
		// The policy quarantines every master younger than MaxTTL when
		// first seen; a real deployment's are older.
		data := append(masters.Addrs(), g.Data[0].Addr(), g.Data[1].Addr())
		e.step("waiting for the masters and the replica to be older than MaxTTL (%s), as long-lived ones are", ttl)
		if err := awaitOlder(ctx, data, ttl); err != nil {
			return fail(err)
		}
		// It also keeps a Sentinel vote's master out until MaxTTL after
		// the sentinels saw it become master, or began watching it.
		e.step("waiting for the sentinels to have watched the master for longer than MaxTTL (%s)", ttl)
		for {
			age, err := g.MasterRoleAge(ctx)
			if err != nil {
				return fail(err)
			}
			if age > ttl {
				break
			}
			if err := sleep(ctx, ttl-age+10*time.Millisecond); err != nil {
				return fail(err)
			}
		}
	}
	set := func(policy engine.QuarantinePolicy) func(*engine.Config) {
		return func(c *engine.Config) {
			c.Sentinels = []engine.SentinelVote{{Master: g.Master, Addrs: g.SentinelAddrs()}}
			c.TTL, c.Quarantine, c.AutoExtend = ttl, policy, false
			patient(c)
		}
	}
	// The holder trusts the votes; the second client's policy is what is
	// under test. Both see the old master before the failover.
	holder, err := e.locker(ctx, masters.Addrs(), set(engine.QuarantineObserved))
	if err != nil {
		return fail(fmt.Errorf("holder: %w", err))
	}
	defer holder.Close()
	second, err := e.locker(ctx, masters.Addrs(), set(q))
	if err != nil {
		return fail(fmt.Errorf("second client: %w", err))
	}
	defer second.Close()
	old := g.Data[0].Addr()
	for _, l := range []*engine.Locker{holder, second} {
		if st := l.Nodes()[sfVote]; st.Master != old || st.State != engine.StateUp {
			return fail(fmt.Errorf("the Sentinel vote before the failover: %+v, want up on %s", st, old))
		}
	}
	e.step("holder and second client connected to masters %s and Sentinel vote %s@%s (master %s)",
		strings.Join(obs.Masters, " "), g.Master, strings.Join(obs.Sentinels, ","), old)

	or := newOracle(e.start)
	err = sentinelFailoverPath(ctx, e, masters, g, holder, second, or, q, &obs)
	obs.DoubleGrants, obs.Overlaps = or.result()
	if err != nil {
		return fail(err)
	}
	passed, why := judgeSentinelFailover(obs, q)
	return outcome{figures: obs, passed: passed, observed: why, violations: obs.DoubleGrants}, nil
}

// sentinels starts the Sentinel vote: a master and one replica under 3
// sentinels, without persistence. The caller must Stop it.
func (e *env) sentinels(ctx context.Context) (*redisproc.SentinelGroup, error) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	g, err := redisproc.StartSentinels(sctx, redisproc.SentinelOptions{DownAfter: sfDownAfter}, redisproc.Options{})
	if err != nil {
		return nil, fmt.Errorf("start a sentinel group: %w", err)
	}
	e.step("started master %s with replica %s under sentinels %s, monitored as %q",
		g.Data[0].Addr(), g.Data[1].Addr(), strings.Join(g.SentinelAddrs(), " "), g.Master)
	return g, nil
}

// awaitOlder waits until every server at addrs reports an uptime
// (INFO server, whole seconds) longer than d.
func awaitOlder(ctx context.Context, addrs []string, d time.Duration) error {
	for _, a := range addrs {
		for {
			line, err := redisproc.Do(ctx, a, directTimeout, "EVAL",
				"return {ok = string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)') or '0'}", "0")
			if err != nil {
				return fmt.Errorf("INFO server on %s: %w", a, err)
			}
			up, _ := strconv.Atoi(strings.TrimPrefix(line, "+"))
			if time.Duration(up)*time.Second > d {
				break
			}
			// Uptime counts whole seconds: a tenth of one is fine enough.
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// sentinelFailoverPath holds the resource on master 0 and the Sentinel
// vote, fails the vote's master over to a replica without the holder's
// SET, and lets the second client try.
func sentinelFailoverPath(ctx context.Context, e *env, masters *redisproc.Cluster, g *redisproc.SentinelGroup,
	holder, second *engine.Locker, or *oracle, q engine.QuarantinePolicy, obs *sentinelFailoverObs) error {
	master, replica := g.Data[0], g.Data[1]
	obs.OldMaster, obs.Replica = master.Addr(), replica.Addr()
	busy := masters.Nodes[sfBusy].Addr()

	win, err := holdReplicationOpen(ctx, master, replica)
	if err != nil {
		return err
	}
	defer win.resume()
	obs.LinksCut = win.linksCut
	e.step("replica %s stopped; master %s dropped %d replication link(s)", replica.Addr(), master.Addr(), obs.LinksCut)

	if err := direct(busy, "SET", sfRes, "someone-else"); err != nil {
		return err
	}
	lease, err := holder.TryLock(ctx, sfRes)
	if err != nil {
		return fmt.Errorf("holder: %w", err)
	}
	got := time.Now()
	or.acquire(sfRes, "holder", got, lease.ValidUntil())
	obs.HolderValidMs = ms(lease.ValidUntil().Sub(got))
	released := false
	defer func() {
		if !released {
			or.release(sfRes, "holder", time.Now())
			lease.Release(ctx)
		}
	}()
	// TryLock returns at quorum: wait until master 1 has refused as
	// well, or its SET could land after it is freed.
	if err := awaitRefused(holder, sfBusy, fmt.Sprintf("master %d", sfBusy)); err != nil {
		return err
	}
	for i, a := range append(masters.Addrs(), master.Addr()) {
		v, err := get(a, sfRes)
		if err != nil {
			return err
		}
		if v == lease.Value() {
			obs.HolderVotes = append(obs.HolderVotes, i)
		}
	}
	obs.HolderOnMaster = contains(obs.HolderVotes, sfVote)
	if err := direct(busy, "DEL", sfRes); err != nil {
		return err
	}
	e.step("holder acquired on votes %v (valid for %.0f ms); master %d refused, then freed", obs.HolderVotes, obs.HolderValidMs, sfBusy)

	if err := master.Kill(); err != nil {
		return err
	}
	obs.MasterKilled = true
	if err := win.resume(); err != nil {
		return err
	}
	t0 := time.Now()
	fctx, cancel := context.WithTimeout(ctx, sfFailoverWait)
	obs.Promoted, err = g.Failover(fctx)
	cancel()
	if err != nil {
		return fmt.Errorf("fail %s over: %w", g.Master, err)
	}
	done := time.Now()
	obs.FailoverMs = ms(done.Sub(t0))
	v, err := get(obs.Promoted, sfRes)
	if err != nil {
		return err
	}
	obs.OnPromoted = v == lease.Value()
	e.step("master %s killed; every sentinel names %s the master of %q, %.1f ms after SENTINEL FAILOVER; the holder's key on it: %v",
		master.Addr(), obs.Promoted, g.Master, obs.FailoverMs, obs.OnPromoted)

	p := probe{e: e, or: or, second: second, res: sfRes, vote: sfVote, voteIs: "the Sentinel vote"}
	// The event the second client's attempts wait for: its Sentinel vote
	// follows the sentinels to the promoted master. Attempts before it
	// would ask the dead master, and test nothing.
	for second.Nodes()[sfVote].Master != obs.Promoted {
		if lease.Validity() <= 0 || time.Since(done) > sfFailoverWait {
			e.step("the second client's Sentinel vote did not follow the sentinels while the holder's lease was valid: %+v", second.Nodes()[sfVote])
			break
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	if second.Nodes()[sfVote].Master == obs.Promoted && lease.Validity() > 0 {
		obs.Followed, obs.FollowedMs, obs.HolderLeftAtFollowMs = true, ms(time.Since(done)), ms(lease.Validity())
		e.step("the second client's Sentinel vote follows the sentinels to %s after %.1f ms, %.0f ms of the holder's validity left",
			obs.Promoted, obs.FollowedMs, obs.HolderLeftAtFollowMs)
		if err := p.whileHeld(ctx, lease, done, &obs.probeObs); err != nil {
			return err
		}
		st := second.Nodes()[sfVote]
		obs.VoteState, obs.VoteRestarts = string(st.State), st.Restarts
	}

	or.release(sfRes, "holder", time.Now())
	lease.Release(ctx) // the Sentinel vote lost the key: the error is expected
	released = true
	e.step("holder released")
	if q == engine.QuarantineOff || !obs.Followed {
		return nil
	}
	return p.afterRelease(ctx, &obs.probeObs)
}

// judgeSentinelFailover decides sentinel-failover: with the quarantine off
// the failover must lose the lock; with it on, the lock must hold, by the
// quarantine's doing.
func judgeSentinelFailover(obs sentinelFailoverObs, q engine.QuarantinePolicy) (bool, string) {
	switch {
	case !obs.HolderOnMaster || len(obs.HolderVotes) != obs.Quorum:
		return false, fmt.Sprintf("set-up failed: the holder sat on votes %v, not on exactly a quorum of %d including the Sentinel vote (%d)", obs.HolderVotes, obs.Quorum, sfVote)
	case !obs.MasterKilled || obs.Promoted == "" || obs.Promoted == obs.OldMaster:
		return false, fmt.Sprintf("set-up failed: the Sentinel vote's master %s was not killed or the sentinels did not name another (%q)", obs.OldMaster, obs.Promoted)
	case obs.OnPromoted:
		return false, "set-up failed: the holder's write reached the replica before the failover, so nothing was lost and the run tests nothing"
	case !obs.Followed:
		return false, fmt.Sprintf("set-up failed: the second client's Sentinel vote did not follow the sentinels to %s while the holder's lease was valid, so its attempts tested nothing", obs.Promoted)
	}
	lost := fmt.Sprintf("The Sentinel vote's master failed over to a replica without the holder's key (%d replication link(s) cut, the master killed, "+
		"every sentinel naming %s %.0f ms after SENTINEL FAILOVER); the second client followed it %.0f ms later. ",
		obs.LinksCut, obs.Promoted, obs.FailoverMs, obs.FollowedMs)
	if q == engine.QuarantineOff {
		if obs.DoubleGrants > 0 {
			return true, lost + fmt.Sprintf("As expected with the quarantine off, the promoted master voted at once: the second client won a quorum with %.0f ms of the holder's validity left (%d double grant(s)).",
				obs.HolderLeftMs, obs.DoubleGrants)
		}
		return false, lost + fmt.Sprintf("But with the quarantine off there was no double grant after %d attempt(s): the hazard was not reproduced, so the run cannot show what the quarantine prevents.", len(obs.Attempts))
	}
	switch {
	case obs.DoubleGrants > 0:
		return false, lost + fmt.Sprintf("DOUBLE GRANT with quarantine %s: %d overlapping hold(s), the second client won with %.0f ms of the holder's validity left.",
			q, obs.DoubleGrants, obs.HolderLeftMs)
	case obs.Granted:
		return false, lost + fmt.Sprintf("With quarantine %s the second client was granted the lock while the holder's lease was valid, although the oracle missed it.", q)
	case obs.DiscountedVotes == 0:
		return false, lost + fmt.Sprintf("No double grant, but in %d attempt(s) the Sentinel vote was never the quarantine's: the refusal had another cause.", len(obs.Attempts))
	case !obs.AfterReleaseAcquired:
		return false, lost + fmt.Sprintf("No double grant, but after the holder released, the second client still could not acquire (%s).", obs.AfterRelease)
	}
	return true, lost + fmt.Sprintf("The promoted master's new run_id kept the vote out under quarantine %s (the vote %s after %d run_id change(s)): %d refusal(s) named it, "+
		"and the second client acquired only after the holder released. No double grant.", q, obs.VoteState, obs.VoteRestarts, obs.DiscountedVotes)
}
