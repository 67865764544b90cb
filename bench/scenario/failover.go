package scenario

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

// failover: the replication hazard. Two deployments face the same fault,
// a master replaced by a copy that never received the holder's write.
//
// Single master with an asynchronous replica: the master acknowledges the
// holder's SET before the replica has it, then dies; the replica is
// promoted with REPLICAOF NO ONE and grants the lock again. To make the
// loss deterministic, the replica is stopped (SIGSTOP) and the master
// drops its replication link (CLIENT KILL TYPE replica) just before the
// SET, and the master is killed just after: the SET is then only in the
// master's backlog, which dies with it. Stopping the replica alone would
// not do: the master writes the stream to the replica's socket in the same
// event-loop turn as the reply, and the kernel buffers it for the stopped
// process, which applies it when it resumes.
//
// Redlock on 5 independent masters: the holder sits on exactly a quorum
// (0-2, as in restart-amnesia), and master 0 fails over to an empty server
// at its address. Its run_id changes, so the restart quarantine keeps its
// vote out for MaxTTL and the second client cannot win.
//
// A promotion keeps the replica's run_id and, in a long-lived deployment,
// its uptime, so nothing the engine sees at the promoted address reveals
// that it lost writes. That is why the engine takes only independent
// masters and refuses replicas, and addresses sharing one run_id, as
// masters: safety comes from the independent majority and the quarantine,
// never from replication.

const (
	failoverMasters  = 5
	failoverNode     = 0 // the Redlock master that fails over
	failoverSingle   = "scenario:failover:single-master"
	failoverRedlock  = "scenario:failover:redlock"
	failoverDecisive = 3
	failoverAttempts = 25
	failoverRetry    = 20 * time.Millisecond
	// failoverLinkWait bounds the replica's initial sync.
	failoverLinkWait = 10 * time.Second
)

// failoverTTL is the lock's TTL, and MaxTTL: each holder's lease must
// outlast a restart or promotion and the second client's attempts, which
// on a loaded 2-core machine take seconds. A longer TTL costs only the
// wait for the servers to be older than MaxTTL under QuarantineAlways.
func failoverTTL(short bool) time.Duration {
	if short {
		return 5 * time.Second
	}
	return 6 * time.Second
}

func expectFailover(o Options) string {
	q := o.quarantine()
	head := "Single master with an asynchronous replica: the holder's SET is acknowledged but never reaches the replica " +
		"(the replication link is cut just before it, the master killed just after); the replica, promoted with " +
		"REPLICAOF NO ONE, grants the lock to a second client while the holder's lease is valid: the oracle must see a " +
		"double grant, replication loses the lock. "
	if q == engine.QuarantineOff {
		return head + fmt.Sprintf("Redlock on %d independent masters, the holder on exactly a quorum, master %d failed over "+
			"to an empty server: with the quarantine off its vote counts at once, so the second client wins a quorum too "+
			"and the oracle must see a double grant there as well; the run passes only if both paths lose the lock.",
			failoverMasters, failoverNode)
	}
	return head + fmt.Sprintf("Redlock on %d independent masters, the holder on exactly a quorum, master %d failed over "+
		"to an empty server at its address: with quarantine %s its new run_id keeps its yes out for MaxTTL (%s), so the "+
		"second client is refused and the oracle sees no double grant; once the holder releases, the second client "+
		"acquires. This is why the engine refuses replicas, and addresses sharing a run_id, as masters.",
		failoverMasters, failoverNode, q, failoverTTL(o.Short))
}

// failoverObs is what failover observed; it is also its figures.
type failoverObs struct {
	Quarantine string             `json:"quarantine"`
	TTLMs      int64              `json:"ttl_ms"`
	Single     failoverSingleObs  `json:"single_master"`
	Redlock    failoverRedlockObs `json:"redlock"`
}

// failoverSingleObs is the single-master-with-replica path.
type failoverSingleObs struct {
	Master  string `json:"master"`
	Replica string `json:"replica"`
	// LinkUpMs is how long the replica took to report master_link_status:up.
	LinkUp   bool    `json:"link_up"`
	LinkUpMs float64 `json:"link_up_ms"`
	// LinksCut is how many replication links CLIENT KILL TYPE replica closed.
	LinksCut int `json:"links_cut"`
	// HolderOnMaster: the master held the holder's value before it died.
	HolderOnMaster bool    `json:"holder_on_master"`
	HolderValidMs  float64 `json:"holder_valid_ms"`
	MasterKilled   bool    `json:"master_killed"`
	// OnReplica: the promoted replica held the holder's value, i.e. the
	// write was not lost and the path tests nothing.
	OnReplica  bool    `json:"key_on_promoted_replica"`
	Promoted   bool    `json:"promoted"`
	PromotedMs float64 `json:"promoted_ms"`
	// SecondAttempts is what the second client's attempts returned.
	SecondAttempts []string  `json:"second_attempts"`
	Granted        bool      `json:"second_granted"`
	HolderLeftMs   float64   `json:"holder_left_at_grant_ms,omitempty"`
	DoubleGrants   int       `json:"double_grants"`
	Overlaps       []Overlap `json:"overlaps,omitempty"`
}

// failoverRedlockObs is the Redlock path.
type failoverRedlockObs struct {
	Masters     int   `json:"masters"`
	Quorum      int   `json:"quorum"`
	HolderNodes []int `json:"holder_nodes"`
	FailedNode  int   `json:"failed_over_node"`
	FailedOver  bool  `json:"failed_over"`
	// FailoverMs is how long the master took to be replaced.
	FailoverMs float64 `json:"failover_ms"`
	probeObs
	DoubleGrants int       `json:"double_grants"`
	Overlaps     []Overlap `json:"overlaps,omitempty"`
}

// failoverAttempt is one of the second client's attempts on Redlock.
type failoverAttempt struct {
	// AtMs is since the failover completed.
	AtMs    float64 `json:"at_ms"`
	Outcome string  `json:"outcome"`
	// FailedNodeVote is the failed-over master's vote in the attempt.
	FailedNodeVote string `json:"failed_node_vote,omitempty"`
}

func runFailover(ctx context.Context, e *env) (outcome, error) {
	q, ttl := e.o.quarantine(), failoverTTL(e.o.Short)
	obs := failoverObs{Quarantine: q.String(), TTLMs: ttl.Milliseconds()}
	obs.Redlock = failoverRedlockObs{Masters: failoverMasters, Quorum: failoverMasters/2 + 1, FailedNode: failoverNode}
	fail := func(err error) (outcome, error) { return outcome{figures: obs}, err }

	pair, err := e.masters(ctx, 2)
	if err != nil {
		return fail(err)
	}
	defer pair.Stop()
	cluster, err := e.masters(ctx, failoverMasters)
	if err != nil {
		return fail(err)
	}
	defer cluster.Stop()
	started := time.Now()
	if err := e.replicate(ctx, pair.Nodes[1].Addr(), pair.Nodes[0].Addr(), &obs.Single); err != nil {
		return fail(err)
	}
	if q == engine.QuarantineAlways {
		// The policy quarantines every master younger than MaxTTL when
		// first seen; in a real deployment the replica has been up for
		// long. Uptime is whole seconds.
		wait := ttl + time.Second - time.Since(started)
		e.step("waiting %s for the servers to be older than MaxTTL, as long-lived ones are", wait.Round(time.Millisecond))
		if err := sleep(ctx, wait); err != nil {
			return fail(err)
		}
	}
	set := func(policy engine.QuarantinePolicy) func(*engine.Config) {
		return func(c *engine.Config) { c.TTL, c.Quarantine, c.AutoExtend = ttl, policy, false; patient(c) }
	}

	single := newOracle(e.start)
	if err := failoverSinglePath(ctx, e, pair, single, set(q), &obs.Single); err != nil {
		obs.Single.DoubleGrants, obs.Single.Overlaps = single.result()
		return fail(err)
	}
	obs.Single.DoubleGrants, obs.Single.Overlaps = single.result()

	redlock := newOracle(e.start)
	err = failoverRedlockPath(ctx, e, cluster, redlock, set, q, &obs.Redlock)
	obs.Redlock.DoubleGrants, obs.Redlock.Overlaps = redlock.result()
	if err != nil {
		return fail(err)
	}
	passed, why := judgeFailover(obs, q)
	return outcome{figures: obs, passed: passed, observed: why,
		violations: obs.Single.DoubleGrants + obs.Redlock.DoubleGrants}, nil
}

// replicate makes replica a replica of master and waits for the link.
func (e *env) replicate(ctx context.Context, replica, master string, obs *failoverSingleObs) error {
	obs.Master, obs.Replica = master, replica
	// The full sync of an empty data set is immediate once the master
	// does not wait for more replicas (the default waits 5 s).
	if err := direct(master, "CONFIG", "SET", "repl-diskless-sync-delay", "0"); err != nil {
		return err
	}
	host, port, _ := strings.Cut(master, ":")
	t0 := time.Now()
	if err := direct(replica, "REPLICAOF", host, port); err != nil {
		return err
	}
	for {
		st, err := linkStatus(replica)
		if err != nil {
			return err
		}
		if st == "up" {
			break
		}
		if time.Since(t0) > failoverLinkWait {
			return fmt.Errorf("replica %s: master_link_status %s after %s", replica, st, failoverLinkWait)
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	obs.LinkUp, obs.LinkUpMs = true, ms(time.Since(t0))
	e.step("%s replicates %s asynchronously: link up after %.1f ms", replica, master, obs.LinkUpMs)
	return nil
}

// linkStatus reads master_link_status from a replica's INFO replication
// ("none" on a master), in one status line.
func linkStatus(addr string) (string, error) {
	line, err := redisproc.Do(context.Background(), addr, directTimeout, "EVAL",
		"return {ok = string.match(redis.call('INFO', 'replication'), 'master_link_status:(%a+)') or 'none'}", "0")
	if err != nil {
		return "", fmt.Errorf("INFO replication on %s: %w", addr, err)
	}
	return strings.TrimPrefix(line, "+"), nil
}

// awaitRefused waits until vote (what, in the error) has refused l's
// holder once: TryLock returns at a quorum, and the SET still on its way
// to vote could land after the key there is freed.
func awaitRefused(l *engine.Locker, vote int, what string) error {
	for deadline := time.Now().Add(5 * time.Second); l.Nodes()[vote].Refused < 1; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s never answered the holder", what)
		}
	}
	return nil
}

// replicationWindow is the window of asynchronous replication, held
// open: the replica stopped and the master's links to it dropped, so that
// a write acknowledged by the master never reaches the replica.
type replicationWindow struct {
	replica  *redisproc.Node
	linksCut int // the links CLIENT KILL TYPE replica closed
	resumed  bool
}

// holdReplicationOpen opens the window on master and its replica; the
// caller resumes the replica (resume, also deferred for the error paths).
func holdReplicationOpen(ctx context.Context, master, replica *redisproc.Node) (*replicationWindow, error) {
	if err := replica.Pause(); err != nil {
		return nil, err
	}
	w := &replicationWindow{replica: replica}
	line, err := redisproc.Do(ctx, master.Addr(), directTimeout, "CLIENT", "KILL", "TYPE", "replica")
	if err != nil {
		w.resume()
		return nil, fmt.Errorf("CLIENT KILL TYPE replica on %s: %w", master.Addr(), err)
	}
	fmt.Sscanf(strings.TrimPrefix(line, ":"), "%d", &w.linksCut)
	return w, nil
}

// resume lets the replica run again, once.
func (w *replicationWindow) resume() error {
	if w.resumed {
		return nil
	}
	w.resumed = true
	return w.replica.Resume()
}

// failoverSinglePath runs the single master with its replica: pair.Nodes[0]
// is the master, [1] the replica.
func failoverSinglePath(ctx context.Context, e *env, pair *redisproc.Cluster, or *oracle, set func(*engine.Config), obs *failoverSingleObs) error {
	master, replica := pair.Nodes[0], pair.Nodes[1]
	holder, err := e.locker(ctx, []string{master.Addr()}, set)
	if err != nil {
		return fmt.Errorf("holder on the single master: %w", err)
	}
	defer holder.Close()

	win, err := holdReplicationOpen(ctx, master, replica)
	if err != nil {
		return err
	}
	defer win.resume()
	obs.LinksCut = win.linksCut
	e.step("replica stopped; the master dropped %d replication link(s)", obs.LinksCut)

	lease, err := holder.TryLock(ctx, failoverSingle)
	if err != nil {
		return fmt.Errorf("holder on the single master: %w", err)
	}
	got := time.Now()
	or.acquire(failoverSingle, "holder", got, lease.ValidUntil())
	obs.HolderValidMs = ms(lease.ValidUntil().Sub(got))
	v, err := get(master.Addr(), failoverSingle)
	if err != nil {
		return err
	}
	obs.HolderOnMaster = v == lease.Value()
	if err := master.Kill(); err != nil {
		return err
	}
	obs.MasterKilled = true
	e.step("holder acquired on the master (valid for %.0f ms), whose SET was acknowledged; the master is killed", obs.HolderValidMs)
	if err := win.resume(); err != nil {
		return err
	}

	t0 := time.Now()
	if err := direct(replica.Addr(), "REPLICAOF", "NO", "ONE"); err != nil {
		return err
	}
	obs.Promoted, obs.PromotedMs = true, ms(time.Since(t0))
	if v, err = get(replica.Addr(), failoverSingle); err != nil {
		return err
	}
	obs.OnReplica = v == lease.Value()
	e.step("replica promoted with REPLICAOF NO ONE in %.1f ms; the holder's key on it: %v", obs.PromotedMs, obs.OnReplica)

	// The second client is pointed at the promoted replica, as a sentinel
	// or a DNS update would point it.
	second, err := e.locker(ctx, []string{replica.Addr()}, set)
	if err != nil {
		return fmt.Errorf("second client on the promoted replica: %w", err)
	}
	defer second.Close()
	for len(obs.SecondAttempts) < failoverAttempts && lease.Validity() > 0 {
		le, err := second.TryLock(ctx, failoverSingle)
		at := time.Now()
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			or.acquire(failoverSingle, "second", at, le.ValidUntil())
			left := lease.ValidUntil().Sub(at)
			obs.Granted, obs.HolderLeftMs = left > 0, ms(left)
			obs.SecondAttempts = append(obs.SecondAttempts, "acquired")
			e.step("second client GRANTED on the promoted replica with %.0f ms of the holder's validity left", obs.HolderLeftMs)
			or.release(failoverSingle, "second", time.Now())
			le.Release(ctx)
			break
		}
		obs.SecondAttempts = append(obs.SecondAttempts, err.Error())
		e.step("second client attempt %d: %v", len(obs.SecondAttempts), err)
		if err := sleep(ctx, failoverRetry); err != nil {
			return err
		}
	}
	or.release(failoverSingle, "holder", time.Now())
	lease.Release(ctx) // its master is dead
	return nil
}

// failoverRedlockPath runs the same fault against independent masters.
func failoverRedlockPath(ctx context.Context, e *env, cluster *redisproc.Cluster, or *oracle,
	set func(engine.QuarantinePolicy) func(*engine.Config), q engine.QuarantinePolicy, obs *failoverRedlockObs) error {
	addrs := cluster.Addrs()
	// The holder trusts the masters; the second client's policy is what
	// is under test.
	holder, err := e.locker(ctx, addrs, set(engine.QuarantineObserved))
	if err != nil {
		return fmt.Errorf("holder on Redlock: %w", err)
	}
	defer holder.Close()
	// The second client sees the failover happen, as a running client
	// does. It connects before the holder acquires: connecting takes time
	// the holder's lease need not spend.
	second, err := e.locker(ctx, addrs, set(q))
	if err != nil {
		return fmt.Errorf("second client on Redlock: %w", err)
	}
	defer second.Close()
	lease, nodes, err := holdExactQuorum(ctx, holder, addrs, failoverRedlock, []int{3, 4})
	obs.HolderNodes = nodes
	if err != nil {
		return err
	}
	got := time.Now()
	or.acquire(failoverRedlock, "holder", got, lease.ValidUntil())
	e.step("holder acquired on Redlock masters %v, valid for %s; masters 3 and 4 freed", nodes, lease.Validity().Round(time.Millisecond))

	t0 := time.Now()
	if err := cluster.Nodes[failoverNode].Restart(ctx); err != nil {
		return fmt.Errorf("fail over master %d: %w", failoverNode, err)
	}
	done := time.Now()
	obs.FailedOver, obs.FailoverMs = true, ms(done.Sub(t0))
	e.step("master %d failed over to an empty server at its address in %.1f ms: it lost the holder's key", failoverNode, obs.FailoverMs)

	p := probe{e: e, or: or, second: second, res: failoverRedlock, vote: failoverNode,
		on: " on Redlock", voteIs: fmt.Sprintf("master %d", failoverNode)}
	if err := p.whileHeld(ctx, lease, done, &obs.probeObs); err != nil {
		return err
	}

	or.release(failoverRedlock, "holder", time.Now())
	lease.Release(ctx) // master 0 forgot the key: the error is expected
	e.step("holder released on Redlock")
	if q == engine.QuarantineOff {
		return nil
	}
	return p.afterRelease(ctx, &obs.probeObs)
}

// holdExactQuorum acquires res with holder on exactly a quorum of addrs:
// the masters in busy are pre-occupied by someone else, so that they
// refuse, and freed once they have. It returns the lease and the masters
// that hold its value. A lock on more masters than a quorum survives the
// loss of one; the hazards of losing one need the holder's exact quorum,
// which contention and failed masters produce in practice.
func holdExactQuorum(ctx context.Context, holder *engine.Locker, addrs []string, res string, busy []int) (*engine.Lease, []int, error) {
	for _, i := range busy {
		if err := direct(addrs[i], "SET", res, "someone-else"); err != nil {
			return nil, nil, err
		}
	}
	lease, err := holder.TryLock(ctx, res)
	if err != nil {
		return nil, nil, fmt.Errorf("holder: %w", err)
	}
	// TryLock returns at quorum. Wait until the busy masters have refused
	// as well: the SET could otherwise land after they are freed.
	for deadline := time.Now().Add(5 * time.Second); ; {
		st, all := holder.Nodes(), true
		for _, i := range busy {
			all = all && st[i].Refused >= 1
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			lease.Release(ctx)
			return nil, nil, fmt.Errorf("masters %v never answered the holder: %+v", busy, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
	var nodes []int
	for i, a := range addrs {
		v, err := get(a, res)
		if err != nil {
			lease.Release(ctx)
			return nil, nil, err
		}
		if v == lease.Value() {
			nodes = append(nodes, i)
		}
	}
	for _, i := range busy {
		if err := direct(addrs[i], "DEL", res); err != nil {
			lease.Release(ctx)
			return nil, nodes, err
		}
	}
	return lease, nodes, nil
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// judgeFailover decides failover: the single master must lose the lock,
// and Redlock must keep it unless the quarantine is off.
func judgeFailover(obs failoverObs, q engine.QuarantinePolicy) (bool, string) {
	s, r := obs.Single, obs.Redlock
	switch {
	case !s.LinkUp:
		return false, "set-up failed: the replica's link to the master never came up"
	case !s.HolderOnMaster:
		return false, "set-up failed: the master did not hold the holder's key before it died"
	case !s.MasterKilled || !s.Promoted:
		return false, "set-up failed: the master was not killed or the replica not promoted"
	case s.OnReplica:
		return false, "set-up failed: the holder's write reached the replica before the failover, so nothing was lost and the single-master path tests nothing"
	case len(r.HolderNodes) != r.Quorum || !contains(r.HolderNodes, r.FailedNode):
		return false, fmt.Sprintf("set-up failed: the Redlock holder sat on masters %v, not on exactly a quorum of %d including master %d", r.HolderNodes, r.Quorum, r.FailedNode)
	case !r.FailedOver:
		return false, fmt.Sprintf("set-up failed: Redlock master %d was not failed over", r.FailedNode)
	case r.HolderLeftAtProbeMs <= 0:
		return false, fmt.Sprintf("set-up failed: the Redlock holder's lease ran out before the second client began (the failover took %.0f ms): its attempts test nothing; the TTL is too short for this machine", r.FailoverMs)
	case s.DoubleGrants == 0:
		return false, fmt.Sprintf("The single master with a replica did not lose the lock: no double grant after the promotion (second client: %s). The hazard was not reproduced.",
			strings.Join(s.SecondAttempts, "; "))
	}
	single := fmt.Sprintf("The single master with an asynchronous replica LOST the lock: the promoted replica had never received the holder's key, "+
		"and granted it to the second client with %.0f ms of the holder's validity left (%d double grant(s)). ", s.HolderLeftMs, s.DoubleGrants)
	if q == engine.QuarantineOff {
		if r.DoubleGrants > 0 {
			return true, single + fmt.Sprintf("As expected with the quarantine off, Redlock lost it as well: master %d's empty replacement voted at once, and the second client won a quorum with %.0f ms left (%d double grant(s)).",
				r.FailedNode, r.HolderLeftMs, r.DoubleGrants)
		}
		return false, single + fmt.Sprintf("But with the quarantine off, Redlock showed no double grant after %d attempt(s): its path did not reproduce the hazard, so it cannot show what the quarantine prevents.", len(r.Attempts))
	}
	switch {
	case r.DoubleGrants > 0:
		return false, single + fmt.Sprintf("DOUBLE GRANT on Redlock with quarantine %s as well: %d overlapping hold(s), the second client won with %.0f ms of the holder's validity left.",
			q, r.DoubleGrants, r.HolderLeftMs)
	case r.Granted:
		return false, single + fmt.Sprintf("On Redlock with quarantine %s the second client was granted the lock while the holder's lease was valid, although the oracle missed it.", q)
	case r.DiscountedVotes == 0:
		return false, single + fmt.Sprintf("Redlock showed no double grant, but in %d attempt(s) master %d's yes was never seen discounted by the quarantine: the refusal had another cause.", len(r.Attempts), r.FailedNode)
	case !r.AfterReleaseAcquired:
		return false, single + fmt.Sprintf("Redlock showed no double grant, but after the holder released, the second client still could not acquire (%s).", r.AfterRelease)
	}
	return true, single + fmt.Sprintf("Redlock on %d independent masters did not: master %d's empty replacement had its yes discounted by quarantine %s in %d refusal(s), "+
		"and the second client acquired only after the holder released. This is why the engine refuses replicas, and addresses sharing a run_id, as masters.",
		r.Masters, r.FailedNode, q, r.DiscountedVotes)
}
