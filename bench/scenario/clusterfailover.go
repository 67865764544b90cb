package scenario

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

// cluster-failover: the replication hazard inside a cluster vote. The
// votes are 3 Redis Clusters of 3 shards, each shard a primary with one
// replica. The holder's resource lives in shard 0; the holder sits on
// exactly a quorum, clusters 0 and 1 (cluster 2 holds the key for someone
// else when the holder asks, and frees it once it has refused). Cluster
// 0's shard 0 then fails over to a replica that never received the
// holder's SET: as in failover, the replica is stopped (SIGSTOP) and the
// primary drops its replication link (CLIENT KILL TYPE replica) just
// before the SET, the primary is killed just after it, the replica is
// resumed and takes over (CLUSTER FAILOVER FORCE). A second client,
// whose Locker saw the clusters before, as a running client does, then
// asks: the promoted replica and cluster 2 would say yes, a quorum. The
// engine keeps the promoted replica's slots out of the vote for MaxTTL
// (the per-shard quarantine), so the second client is refused; with the
// quarantine off it wins a second lease while the holder's is valid.
// Shard 1 of cluster 0, which did not fail over, keeps voting: a resource
// there, held on cluster 2 by someone else, is granted on clusters 0 and 1.

const (
	cfClusters = 3
	// cfShards is 3 so that, with shard 0's primary dead, each cluster
	// node still reaches a majority of primaries: with 2, the survivor
	// may report cluster_state:fail until it learns of the takeover.
	cfShards = 3
	cfVote   = 0 // the cluster that fails over
	cfPrefix = "scenario:cluster-failover:"
	// cfNodeTimeout is the clusters' cluster-node-timeout: the killed
	// primary is marked failed, and the cluster whole again, soon after.
	cfNodeTimeout = time.Second
)

// cfTTL is the lock's TTL, and MaxTTL: the holder's lease must outlast
// the failover (about a second on an idle machine, the cluster electing
// the replica; 3 to 5 s on a loaded 2-core one) and the second client's
// cluster client finding the new primary. A longer TTL costs only the
// wait for the nodes to be older than MaxTTL under QuarantineAlways: the
// second client stops at its decisive attempt, and the holder releases.
func cfTTL(short bool) time.Duration {
	if short {
		return 8 * time.Second
	}
	return 10 * time.Second
}

func expectClusterFailover(o Options) string {
	q := o.quarantine()
	head := fmt.Sprintf("%d Redis Cluster votes of %d shards with a replica each; the holder on exactly a quorum (clusters 0 and 1); "+
		"cluster %d's shard holding the resource fails over to a replica that never received the holder's SET (its link cut "+
		"just before, the primary killed just after). ", cfClusters, cfShards, cfVote)
	if q == engine.QuarantineOff {
		return head + "With the quarantine off the promoted replica votes at once, so a second client wins a quorum with it and " +
			"cluster 2 while the holder's lease is valid: the oracle must see a double grant."
	}
	return head + fmt.Sprintf("With quarantine %s the promoted replica's slots sit out MaxTTL (%s), so the second client is refused "+
		"and the oracle sees no double grant; the shard that did not fail over keeps voting, and once the holder releases, "+
		"the second client acquires.", q, cfTTL(o.Short))
}

// clusterFailoverObs is what cluster-failover observed; it is also its
// figures.
type clusterFailoverObs struct {
	Quarantine string `json:"quarantine"`
	TTLMs      int64  `json:"ttl_ms"`
	Clusters   int    `json:"clusters"`
	Shards     int    `json:"shards"`
	Quorum     int    `json:"quorum"`
	Resource   string `json:"resource"`
	Slot       int    `json:"slot"`
	Primary    string `json:"primary"`
	Replica    string `json:"replica"`
	// LinksCut is how many replication links CLIENT KILL TYPE replica
	// closed on the primary.
	LinksCut    int   `json:"links_cut"`
	HolderVotes []int `json:"holder_votes"`
	// HolderOnPrimary: the primary held the holder's value before it died.
	HolderOnPrimary bool    `json:"holder_on_primary"`
	HolderValidMs   float64 `json:"holder_valid_ms"`
	PrimaryKilled   bool    `json:"primary_killed"`
	Promoted        bool    `json:"promoted"`
	PromotedMs      float64 `json:"promoted_ms"`
	// OnPromoted: the promoted replica held the holder's value, i.e. the
	// write was not lost and the run tests nothing.
	OnPromoted bool `json:"key_on_promoted_replica"`
	probeObs
	// OtherShard is the second client's lock on a resource of the shard
	// that did not fail over, held on cluster 2 by someone else.
	OtherShard        string    `json:"other_shard"`
	OtherShardGranted bool      `json:"other_shard_granted"`
	DoubleGrants      int       `json:"double_grants"`
	Overlaps          []Overlap `json:"overlaps,omitempty"`
}

// cfNames are resource names whose keys, with cluster votes, are in
// shard 0 and shard 1 of a cluster of cfShards shards (the slots split in
// contiguous ranges, as redisproc assigns them).
func cfNames() (shard0, shard1 string) {
	per := keyslot.Slots / cfShards
	for i := 0; shard0 == "" || shard1 == ""; i++ {
		name := fmt.Sprintf("%s%d", cfPrefix, i)
		switch slot := keyslot.KeySlot(cfKey(name)); {
		case slot < per && shard0 == "":
			shard0 = name
		case per <= slot && slot < 2*per && shard1 == "":
			shard1 = name
		}
	}
	return shard0, shard1
}

// cfKey is resource's lock key with cluster votes, as the engine names it
// (engine/cluster.go): a tag of the key's own slot in front.
func cfKey(resource string) string {
	return "{" + keyslot.SlotTag(keyslot.KeySlot(resource)) + "}" + resource
}

func runClusterFailover(ctx context.Context, e *env) (outcome, error) {
	q, ttl := e.o.quarantine(), cfTTL(e.o.Short)
	res, other := cfNames()
	obs := clusterFailoverObs{Quarantine: q.String(), TTLMs: ttl.Milliseconds(), Clusters: cfClusters, Shards: cfShards,
		Quorum: cfClusters/2 + 1, Resource: res, Slot: keyslot.KeySlot(cfKey(res)), OtherShard: other}
	fail := func(err error) (outcome, error) { return outcome{figures: obs}, err }

	clusters, err := e.redisClusters(ctx)
	defer stopRedisClusters(clusters)
	if err != nil {
		return fail(err)
	}
	started := time.Now()
	if q == engine.QuarantineAlways {
		// As in failover: the policy quarantines every node younger than
		// MaxTTL when first seen; a real deployment's are older.
		wait := ttl + time.Second - time.Since(started)
		e.step("waiting %s for the nodes to be older than MaxTTL, as long-lived ones are", wait.Round(time.Millisecond))
		if err := sleep(ctx, wait); err != nil {
			return fail(err)
		}
	}
	seeds := make([][]string, len(clusters))
	for i, c := range clusters {
		seeds[i] = c.Seeds()
	}
	set := func(policy engine.QuarantinePolicy) func(*engine.Config) {
		return func(c *engine.Config) {
			c.Masters, c.Clusters = nil, seeds
			c.TTL, c.Quarantine, c.AutoExtend, c.Wait.DisableNotify = ttl, policy, false, true
			patient(c)
		}
	}
	// The holder trusts the clusters; the second client's policy is what
	// is under test. Both see the clusters before the failover.
	holder, err := e.locker(ctx, nil, set(engine.QuarantineObserved))
	if err != nil {
		return fail(fmt.Errorf("holder: %w", err))
	}
	defer holder.Close()
	second, err := e.locker(ctx, nil, set(q))
	if err != nil {
		return fail(fmt.Errorf("second client: %w", err))
	}
	defer second.Close()
	for _, name := range []string{res, other} {
		le, err := second.TryLock(ctx, name)
		if err != nil {
			return fail(fmt.Errorf("second client's first lock of %s: %w", name, err))
		}
		le.Release(ctx)
	}
	e.step("holder and second client connected to %d clusters of %d shards; %q is in slot %d (shard 0), %q in shard 1",
		cfClusters, cfShards, res, obs.Slot, other)

	or := newOracle(e.start)
	err = clusterFailoverPath(ctx, e, clusters, holder, second, or, q, &obs)
	obs.DoubleGrants, obs.Overlaps = or.result()
	if err != nil {
		return fail(err)
	}
	passed, why := judgeClusterFailover(obs, q)
	return outcome{figures: obs, passed: passed, observed: why, violations: obs.DoubleGrants}, nil
}

// redisClusters starts the scenario's clusters at once. The caller must
// stop them (stopRedisClusters), also on error: those started are in the
// slice.
func (e *env) redisClusters(ctx context.Context) ([]*redisproc.RedisCluster, error) {
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out := make([]*redisproc.RedisCluster, cfClusters)
	errs := make([]error, cfClusters)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = redisproc.StartRedisCluster(sctx,
				redisproc.ClusterOptions{Shards: cfShards, Replicas: 1, NodeTimeout: cfNodeTimeout}, redisproc.Options{})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("start %d Redis Clusters: %w", cfClusters, err)
	}
	var votes []string
	for _, c := range out {
		votes = append(votes, strings.Join(c.Seeds(), ","))
	}
	e.step("started %d Redis Clusters of %d shards, a replica per primary, without persistence; primaries %s",
		cfClusters, cfShards, strings.Join(votes, " / "))
	return out, nil
}

func stopRedisClusters(cs []*redisproc.RedisCluster) {
	for _, c := range cs {
		if c != nil {
			c.Stop()
		}
	}
}

// clusterFailoverPath holds the resource on clusters 0 and 1, fails
// cluster 0's shard 0 over to a replica without the holder's SET, and lets
// the second client try.
func clusterFailoverPath(ctx context.Context, e *env, clusters []*redisproc.RedisCluster, holder, second *engine.Locker,
	or *oracle, q engine.QuarantinePolicy, obs *clusterFailoverObs) error {
	res, key := obs.Resource, cfKey(obs.Resource)
	shard := clusters[cfVote].Shards[0]
	primary, replica := shard.Nodes[0], shard.Nodes[1]
	obs.Primary, obs.Replica = primary.Addr(), replica.Addr()
	// shard0 is the node serving the resource's slot in cluster i, as
	// started.
	shard0 := func(i int) string { return clusters[i].Shards[0].Nodes[0].Addr() }
	busy := cfClusters - 1

	// The second client's first lock returned at a quorum: its release
	// may still be on its way to some clusters. It must have reached them
	// all, and cluster 0's replica, before the window opens, or a
	// cluster keeps the second client's own old key and refuses.
	for i := range clusters {
		if err := settle(ctx, shard0(i), key, i == cfVote, time.Duration(obs.TTLMs)*time.Millisecond); err != nil {
			return err
		}
	}
	win, err := holdReplicationOpen(ctx, primary, replica)
	if err != nil {
		return err
	}
	defer win.resume()
	obs.LinksCut = win.linksCut
	e.step("cluster %d shard 0: replica %s stopped; primary %s dropped %d replication link(s)", cfVote, replica.Addr(), primary.Addr(), obs.LinksCut)

	if err := direct(shard0(busy), "SET", key, "someone-else"); err != nil {
		return err
	}
	lease, err := holder.TryLock(ctx, res)
	if err != nil {
		return fmt.Errorf("holder: %w", err)
	}
	got := time.Now()
	or.acquire(res, "holder", got, lease.ValidUntil())
	obs.HolderValidMs = ms(lease.ValidUntil().Sub(got))
	released := false
	defer func() {
		if !released {
			or.release(res, "holder", time.Now())
			lease.Release(ctx)
		}
	}()
	// TryLock returns at quorum: wait until the busy vote has refused as
	// well, or its SET could land after it is freed.
	if err := awaitRefused(holder, busy, fmt.Sprintf("cluster %d", busy)); err != nil {
		return err
	}
	for i := range clusters {
		v, err := get(shard0(i), key)
		if err != nil {
			return err
		}
		if v == lease.Value() {
			obs.HolderVotes = append(obs.HolderVotes, i)
		}
	}
	obs.HolderOnPrimary = contains(obs.HolderVotes, cfVote)
	if err := direct(shard0(busy), "DEL", key); err != nil {
		return err
	}
	e.step("holder acquired %q on clusters %v (valid for %.0f ms); cluster %d refused, then freed", res, obs.HolderVotes, obs.HolderValidMs, busy)

	if err := primary.Kill(); err != nil {
		return err
	}
	obs.PrimaryKilled = true
	if err := win.resume(); err != nil {
		return err
	}
	t0 := time.Now()
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = forceFailover(fctx, clusters[cfVote], replica)
	cancel()
	if err != nil {
		return fmt.Errorf("fail cluster %d shard 0 over to %s: %w", cfVote, replica.Addr(), err)
	}
	done := time.Now()
	obs.Promoted, obs.PromotedMs = true, ms(done.Sub(t0))
	v, err := get(replica.Addr(), key)
	if err != nil {
		return err
	}
	obs.OnPromoted = v == lease.Value()
	e.step("primary %s killed; replica %s took over (CLUSTER FAILOVER FORCE) in %.1f ms; the holder's key on it: %v",
		primary.Addr(), replica.Addr(), obs.PromotedMs, obs.OnPromoted)

	// The shard that did not fail over keeps cluster 0's vote: a resource
	// there, held on cluster 2 by someone else, needs it.
	otherKey := cfKey(obs.OtherShard)
	if err := direct(clusters[busy].Shards[1].Nodes[0].Addr(), "SET", otherKey, "someone-else", "PX", "60000"); err != nil {
		return err
	}
	for i := 0; i < failoverAttempts && !obs.OtherShardGranted; i++ {
		le, err := second.TryLock(ctx, obs.OtherShard)
		if err == nil {
			obs.OtherShardGranted = true
			le.Release(ctx)
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := sleep(ctx, failoverRetry); err != nil {
			return err
		}
	}
	e.step("second client on %q (shard 1, held on cluster %d by someone else): granted %v", obs.OtherShard, busy, obs.OtherShardGranted)

	// The second client's cluster client learns the promoted replica at
	// its next topology refresh: until then its attempts dial the dead
	// primary. Its attempts go on for as long as the holder's lease lives.
	p := probe{e: e, or: or, second: second, res: res, vote: cfVote,
		on: fmt.Sprintf(" on %q", res), voteIs: fmt.Sprintf("cluster %d", cfVote), tries: 8 * failoverAttempts}
	if err := p.whileHeld(ctx, lease, done, &obs.probeObs); err != nil {
		return err
	}

	or.release(res, "holder", time.Now())
	lease.Release(ctx) // its primary is dead: the error is expected
	released = true
	e.step("holder released")
	if q == engine.QuarantineOff {
		return nil
	}
	return p.afterRelease(ctx, &obs.probeObs)
}

// forceFailover makes replica, whose primary is dead, the primary of shard
// 0 with CLUSTER FAILOVER FORCE, and waits until the cluster is whole. Not
// TAKEOVER: it claims the slots without an election, and when the dead
// primary held the highest config epoch the claim carries the same epoch
// as the dead primary's, which some nodes then keep as the slots' owner.
// FORCE is elected by the other primaries, a majority with shard 0's dead
// (cfShards is 3), and gets an epoch of its own.
func forceFailover(ctx context.Context, c *redisproc.RedisCluster, replica *redisproc.Node) error {
	if _, err := redisproc.Do(ctx, replica.Addr(), directTimeout, "CLUSTER", "FAILOVER", "FORCE"); err != nil {
		return fmt.Errorf("CLUSTER FAILOVER FORCE on %s: %w", replica.Addr(), err)
	}
	for c.Primary(ctx, 0) != replica {
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("%s never became the primary: %w", replica.Addr(), err)
		}
	}
	return c.WaitHealthy(ctx)
}

// settle waits until key is gone from the primary at addr and, if
// replicated, its replica has every write it made (its replication offset
// is the primary's). The key is a lock taken with ttl before the call: it
// is gone by then at the latest, released or expired, so settle fails
// only if the master does not delete it, or the replica does not catch
// up, within ttl (a release goes to a cluster only once it has answered
// the acquire, which a loaded machine can put off for seconds).
func settle(ctx context.Context, addr, key string, replicated bool, ttl time.Duration) error {
	const script = `local info = redis.call('INFO', 'replication')
local mine = string.match(info, 'master_repl_offset:(%d+)')
local theirs = string.match(info, 'slave0:[^\r\n]*offset=(%d+)')
return {ok = (redis.call('EXISTS', KEYS[1]) == 0 and (ARGV[1] == '0' or mine == theirs)) and 'settled' or 'not'}`
	for deadline := time.Now().Add(ttl); ; {
		repl := "0"
		if replicated {
			repl = "1"
		}
		line, err := redisproc.Do(ctx, addr, directTimeout, "EVAL", script, "1", key, repl)
		if err != nil {
			return fmt.Errorf("replication offsets on %s: %w", addr, err)
		}
		if strings.TrimPrefix(line, "+") == "settled" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s still there, or its replica behind, after %s", addr, key, ttl)
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
}

// judgeClusterFailover decides cluster-failover: with the quarantine off
// the failover must lose the lock; with it on, the lock must hold, by
// the quarantine's doing, and only the failed-over shard sit out.
func judgeClusterFailover(obs clusterFailoverObs, q engine.QuarantinePolicy) (bool, string) {
	switch {
	case !obs.HolderOnPrimary || len(obs.HolderVotes) != obs.Quorum:
		return false, fmt.Sprintf("set-up failed: the holder sat on clusters %v, not on exactly a quorum of %d including cluster %d", obs.HolderVotes, obs.Quorum, cfVote)
	case !obs.PrimaryKilled || !obs.Promoted:
		return false, "set-up failed: the primary was not killed or the replica not promoted"
	case obs.OnPromoted:
		return false, "set-up failed: the holder's write reached the replica before the failover, so nothing was lost and the run tests nothing"
	case obs.HolderLeftAtProbeMs <= 0:
		return false, fmt.Sprintf("set-up failed: the holder's lease ran out before the second client began (the promotion took %.0f ms): its attempts test nothing; the TTL is too short for this machine", obs.PromotedMs)
	case !obs.OtherShardGranted:
		return false, fmt.Sprintf("The shard that did not fail over did not keep cluster %d's vote: %q was refused", cfVote, obs.OtherShard)
	}
	lost := fmt.Sprintf("Cluster %d's shard 0 failed over to a replica without the holder's key (%d replication link(s) cut, the primary killed, promoted in %.0f ms). ",
		cfVote, obs.LinksCut, obs.PromotedMs)
	if q == engine.QuarantineOff {
		if obs.DoubleGrants > 0 {
			return true, lost + fmt.Sprintf("As expected with the quarantine off, the promoted replica voted at once: the second client won a quorum with %.0f ms of the holder's validity left (%d double grant(s)).",
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
		return false, lost + fmt.Sprintf("No double grant, but in %d attempt(s) cluster %d's vote was never the quarantine's: the refusal had another cause.", len(obs.Attempts), cfVote)
	case !obs.AfterReleaseAcquired:
		return false, lost + fmt.Sprintf("No double grant, but after the holder released, the second client still could not acquire (%s).", obs.AfterRelease)
	}
	return true, lost + fmt.Sprintf("The promoted replica's slots sat out under quarantine %s: %d refusal(s) named it, the other shard kept voting, "+
		"and the second client acquired only after the holder released. No double grant.", q, obs.DiscountedVotes)
}
