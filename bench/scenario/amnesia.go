package scenario

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// restart-amnesia: the reference's restart hazard. The holder's lock sits
// on exactly a quorum (masters 0-2, because 3 and 4 are pre-occupied by
// someone else and then freed); master 0 restarts without persistence and
// forgets it; a second client then finds 0, 3 and 4 free. Whether it wins
// depends only on whether master 0's vote counts, which is what the
// quarantine policy decides.

const (
	amnesiaMasters   = 5
	amnesiaRestarted = 0
	amnesiaResource  = "scenario:restart-amnesia"
	// amnesiaDecisive is how many refusals with the restarted master's yes
	// discounted the second client needs before it gives up: one proves
	// the quarantine acted, a few show it keeps acting.
	amnesiaDecisive    = 3
	amnesiaMaxAttempts = 25
	amnesiaRetryEvery  = 20 * time.Millisecond
)

// amnesiaTTL is the lock TTL (and MaxTTL). It only needs to outlast the
// restart and the second client's attempts, except that QuarantineAlways
// needs the other masters to be older than it, which costs one TTL of
// waiting at start.
func amnesiaTTL(short bool) time.Duration {
	if short {
		return 2 * time.Second
	}
	return 4 * time.Second
}

func expectRestartAmnesia(o Options) string {
	q := o.quarantine()
	if q == engine.QuarantineOff {
		return "Quarantine off: the restarted master's vote counts at once, so the second client wins a quorum " +
			"(the restarted master and the two the holder never had) while the holder's lease is still valid. " +
			"The oracle must see a double grant; that is the hazard reproduced, and the run passes only if it is."
	}
	return fmt.Sprintf("Quarantine %s: the restarted master's yes is not counted for MaxTTL (%s), so the second client "+
		"is refused while the holder's lease is valid and the oracle sees no double grant. Once the holder releases, "+
		"the second client acquires on the %d masters left: the quarantine costs one vote, not the lock.",
		q, amnesiaTTL(o.Short), amnesiaMasters-1)
}

// amnesiaObs is what restart-amnesia observed; it is also its figures.
type amnesiaObs struct {
	Quarantine string `json:"quarantine"`
	TTLMs      int64  `json:"ttl_ms"`
	Masters    int    `json:"masters"`
	Quorum     int    `json:"quorum"`
	// HolderNodes are the masters that held the holder's value after its
	// acquire: exactly a quorum, or the scenario proves nothing.
	HolderNodes   []int   `json:"holder_nodes"`
	RestartedNode int     `json:"restarted_node"`
	Restarted     bool    `json:"restarted"`
	RestartMs     float64 `json:"restart_ms"`
	// SecondClient says when the second client connected: before the
	// restart (it sees the restart happen) or after (it does not).
	SecondClient string           `json:"second_client"`
	Attempts     []amnesiaAttempt `json:"attempts"`
	// Granted: the second client acquired while the holder's lease was
	// valid.
	Granted bool `json:"second_granted"`
	// HolderLeftMs is what was left of the holder's validity at the grant.
	HolderLeftMs float64 `json:"holder_left_at_grant_ms,omitempty"`
	// DoubleGrants is the oracle's count of overlapping holds.
	DoubleGrants int       `json:"double_grants"`
	Overlaps     []Overlap `json:"overlaps,omitempty"`
	// DiscountedVotes counts the second client's refusals in which the
	// restarted master's yes was discounted by the quarantine.
	DiscountedVotes int `json:"discounted_votes"`
	// RestartedState is the restarted master's state in the second
	// client's Nodes() after its attempts, and QuarantinedForMs how much
	// of its quarantine was left then.
	RestartedState   string  `json:"restarted_node_state"`
	QuarantinedForMs float64 `json:"quarantined_for_ms,omitempty"`
	// AfterRelease is how the second client's acquire went once the holder
	// had released (quarantine on only).
	AfterRelease         string `json:"after_release,omitempty"`
	AfterReleaseAcquired bool   `json:"after_release_acquired"`
}

// amnesiaAttempt is one of the second client's attempts.
type amnesiaAttempt struct {
	// AtMs is since the restart completed.
	AtMs    float64 `json:"at_ms"`
	Outcome string  `json:"outcome"`
	// RestartedVote is the restarted master's vote in the attempt.
	RestartedVote string `json:"restarted_node_vote"`
}

// amnesiaRun is one run of restart-amnesia: what its phases share.
type amnesiaRun struct {
	e     *env
	q     engine.QuarantinePolicy
	ttl   time.Duration
	addrs []string
	or    *oracle
	obs   amnesiaObs
}

func (r *amnesiaRun) config(policy engine.QuarantinePolicy) func(*engine.Config) {
	return func(c *engine.Config) { c.TTL, c.Quarantine = r.ttl, policy; patient(c) }
}

func runRestartAmnesia(ctx context.Context, e *env) (outcome, error) {
	q, ttl := e.o.quarantine(), amnesiaTTL(e.o.Short)
	r := &amnesiaRun{e: e, q: q, ttl: ttl, or: newOracle(e.start), obs: amnesiaObs{Quarantine: q.String(), TTLMs: ttl.Milliseconds(),
		Masters: amnesiaMasters, Quorum: amnesiaMasters/2 + 1, RestartedNode: amnesiaRestarted}}
	fail := func(err error) (outcome, error) { return outcome{figures: r.obs}, err }

	cluster, err := e.masters(ctx, amnesiaMasters)
	if err != nil {
		return fail(err)
	}
	defer cluster.Stop()
	started := time.Now()
	r.addrs = cluster.Addrs()

	if err := r.waitOlderThanTTL(ctx, started); err != nil {
		return fail(err)
	}
	// The holder trusts the fresh masters; the second client's policy is
	// what is under test.
	holder, err := e.locker(ctx, r.addrs, r.config(engine.QuarantineObserved))
	if err != nil {
		return fail(err)
	}
	defer holder.Close()
	lease, err := r.holderOnQuorum(ctx, holder)
	if err != nil {
		return fail(err)
	}

	var second *engine.Locker
	connectSecond := func(when string) error {
		l, err := e.locker(ctx, r.addrs, r.config(q))
		if err != nil {
			return fmt.Errorf("second client: %w", err)
		}
		second, r.obs.SecondClient = l, when
		e.step("second client connected %s, quarantine %s", when, q)
		return nil
	}
	// QuarantineAlways is the policy that covers restarts a client did not
	// see: connect after the restart to show it. The others must see the
	// restart happen to act on it (observed), or ignore it (off).
	if q != engine.QuarantineAlways {
		if err := connectSecond("before the restart"); err != nil {
			return fail(err)
		}
		defer second.Close()
	}

	t0 := time.Now()
	if err := cluster.Nodes[amnesiaRestarted].Restart(ctx); err != nil {
		return fail(fmt.Errorf("restart master %d: %w", amnesiaRestarted, err))
	}
	restarted := time.Now()
	r.obs.Restarted, r.obs.RestartMs = true, ms(restarted.Sub(t0))
	e.step("restarted master %d without persistence in %.1f ms: it forgot the holder's key", amnesiaRestarted, r.obs.RestartMs)
	if q == engine.QuarantineAlways {
		if err := connectSecond("after the restart"); err != nil {
			return fail(err)
		}
		defer second.Close()
	}

	if err := r.secondAttempts(ctx, second, lease, restarted); err != nil {
		return fail(err)
	}
	if err := r.afterRelease(ctx, second, lease); err != nil {
		return fail(err)
	}
	r.obs.DoubleGrants, r.obs.Overlaps = r.or.result()

	passed, why := judgeRestartAmnesia(r.obs, q)
	return outcome{figures: r.obs, passed: passed, observed: why, violations: r.obs.DoubleGrants}, nil
}

// waitOlderThanTTL lets the masters, started at started, grow older than
// MaxTTL under QuarantineAlways. The policy quarantines every master
// younger than that when first seen; for the restarted master to be the
// only one kept out, the others must be older. Uptime is whole seconds.
func (r *amnesiaRun) waitOlderThanTTL(ctx context.Context, started time.Time) error {
	if r.q != engine.QuarantineAlways {
		return nil
	}
	wait := r.ttl + time.Second - time.Since(started)
	r.e.step("waiting %s for the masters to be older than MaxTTL, so that only the restarted one is young", wait.Round(time.Millisecond))
	return sleep(ctx, wait)
}

// holderOnQuorum has the holder acquire on exactly masters 0-2: 3 and 4
// are pre-occupied while it acquires, and freed once they have refused it.
func (r *amnesiaRun) holderOnQuorum(ctx context.Context, holder *engine.Locker) (*engine.Lease, error) {
	for _, i := range []int{3, 4} {
		if err := direct(r.addrs[i], "SET", amnesiaResource, "someone-else"); err != nil {
			return nil, err
		}
	}
	lease, err := holder.TryLock(ctx, amnesiaResource)
	if err != nil {
		return nil, fmt.Errorf("holder: %w", err)
	}
	r.or.acquire(amnesiaResource, "holder", time.Now(), lease.ValidUntil())
	// TryLock returns at quorum. Wait until masters 3 and 4 have refused
	// the holder as well: its SET could otherwise land after they are
	// freed, and the holder would then hold more than a quorum.
	for deadline := time.Now().Add(5 * time.Second); ; {
		st := holder.Nodes()
		if st[3].Refused >= 1 && st[4].Refused >= 1 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("masters 3 and 4 never answered the holder: %+v", st)
		}
		time.Sleep(2 * time.Millisecond)
	}
	for i, a := range r.addrs {
		v, err := get(a, amnesiaResource)
		if err != nil {
			return nil, err
		}
		if v == lease.Value() {
			r.obs.HolderNodes = append(r.obs.HolderNodes, i)
		}
	}
	r.e.step("holder acquired on masters %v, valid for %s", r.obs.HolderNodes, lease.Validity().Round(time.Millisecond))
	for _, i := range []int{3, 4} {
		if err := direct(r.addrs[i], "DEL", amnesiaResource); err != nil {
			return nil, err
		}
	}
	r.e.step("freed masters 3 and 4")
	return lease, nil
}

// secondAttempts has the second client try while the holder's lease is
// valid, until it is granted or refused decisively by the quarantine.
func (r *amnesiaRun) secondAttempts(ctx context.Context, second *engine.Locker, lease *engine.Lease, restarted time.Time) error {
	// The first command after the restart may fail on the dead
	// connection; further attempts ride the new one.
	decisive := 0
	for len(r.obs.Attempts) < amnesiaMaxAttempts && lease.Validity() > 0 {
		le, err := second.TryLock(ctx, amnesiaResource)
		at := time.Now()
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		a := amnesiaAttempt{AtMs: ms(at.Sub(restarted)), Outcome: classify(err).String()}
		if err == nil {
			left := lease.ValidUntil().Sub(at)
			r.or.acquire(amnesiaResource, "second", at, le.ValidUntil())
			r.or.release(amnesiaResource, "second", time.Now())
			r.obs.Granted, r.obs.HolderLeftMs = left > 0, ms(left)
			a.RestartedVote = "ok (counted)"
			r.obs.Attempts = append(r.obs.Attempts, a)
			r.e.step("second client GRANTED with %.1f ms of the holder's validity left", r.obs.HolderLeftMs)
			le.Release(ctx)
			break
		}
		var ve *engine.VotesError
		if errors.As(err, &ve) && amnesiaRestarted < len(ve.Votes) {
			v := ve.Votes[amnesiaRestarted]
			a.RestartedVote = describeVote(v)
			if errors.Is(v.Err, engine.ErrQuarantined) && errors.Is(err, engine.ErrNotAcquired) {
				decisive++
			}
		}
		r.obs.Attempts = append(r.obs.Attempts, a)
		r.e.step("second client attempt %d: %s (restarted master: %s)", len(r.obs.Attempts), a.Outcome, a.RestartedVote)
		if decisive >= amnesiaDecisive {
			break
		}
		if err := sleep(ctx, amnesiaRetryEvery); err != nil {
			return err
		}
	}
	r.obs.DiscountedVotes = decisive
	st := second.Nodes()[amnesiaRestarted]
	r.obs.RestartedState = string(st.State)
	if st.State == engine.StateQuarantined {
		r.obs.QuarantinedForMs = ms(time.Until(st.QuarantinedUntil))
	}
	return nil
}

// afterRelease has the holder let go and, with the quarantine on, the
// second client acquire on the masters left.
func (r *amnesiaRun) afterRelease(ctx context.Context, second *engine.Locker, lease *engine.Lease) error {
	// The oracle's hold ends before the release is sent, as the rule says.
	r.or.release(amnesiaResource, "holder", time.Now())
	if err := lease.Release(ctx); err != nil {
		r.e.step("holder released: %v (master %d had forgotten the key)", err, amnesiaRestarted)
	} else {
		r.e.step("holder released")
	}
	if r.q == engine.QuarantineOff {
		return nil
	}
	// The second client's failed attempts are undone in the background;
	// a retry or two covers an undo still on its way.
	for i := 0; i < 10; i++ {
		le, err := second.TryLock(ctx, amnesiaResource)
		if err == nil {
			r.obs.AfterReleaseAcquired, r.obs.AfterRelease = true, "acquired"
			le.Release(ctx)
			break
		}
		r.obs.AfterRelease = err.Error()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := sleep(ctx, amnesiaRetryEvery); err != nil {
			return err
		}
	}
	r.e.step("after the release, the second client: %s", r.obs.AfterRelease)
	return nil
}

// describeVote renders a master's vote for the figures.
func describeVote(v engine.Vote) string {
	s := v.Outcome.String()
	if v.Err != nil {
		s += ": " + strings.TrimPrefix(v.Err.Error(), "multiplex: ")
	}
	return s
}

// judgeRestartAmnesia decides restart-amnesia from what was observed.
// With the quarantine off the hazard must be reproduced; with it on, it
// must be prevented, and prevented by the quarantine rather than by luck.
func judgeRestartAmnesia(obs amnesiaObs, q engine.QuarantinePolicy) (bool, string) {
	switch {
	case len(obs.HolderNodes) != obs.Quorum:
		return false, fmt.Sprintf("set-up failed: the holder's lock sat on masters %v, not on exactly a quorum of %d, so a restart does not test the hazard", obs.HolderNodes, obs.Quorum)
	case !obs.Restarted:
		return false, fmt.Sprintf("set-up failed: master %d was not restarted", obs.RestartedNode)
	}
	if q == engine.QuarantineOff {
		if obs.DoubleGrants > 0 {
			return true, fmt.Sprintf("As expected with the quarantine off, the oracle saw %d double grant(s): master %d restarted with no memory of the lock, its vote counted, and the second client won a quorum with %.0f ms of the holder's validity left.",
				obs.DoubleGrants, obs.RestartedNode, obs.HolderLeftMs)
		}
		return false, fmt.Sprintf("No double grant with the quarantine off, after %d attempt(s): the hazard was not reproduced, so this run cannot show what the quarantine prevents.", len(obs.Attempts))
	}
	switch {
	case obs.DoubleGrants > 0:
		return false, fmt.Sprintf("DOUBLE GRANT with quarantine %s: the oracle saw %d overlapping hold(s); the second client won with %.0f ms of the holder's validity left.",
			q, obs.DoubleGrants, obs.HolderLeftMs)
	case obs.Granted:
		return false, fmt.Sprintf("with quarantine %s the second client was granted the lock while the holder's lease was valid, although the oracle missed it", q)
	case obs.DiscountedVotes == 0:
		return false, fmt.Sprintf("No double grant, but in %d attempt(s) the restarted master's yes was never seen discounted by the quarantine: the second client was refused for some other reason, so this run does not show the quarantine at work.", len(obs.Attempts))
	case !obs.AfterReleaseAcquired:
		return false, fmt.Sprintf("No double grant, but after the holder released, the second client still could not acquire on the %d other masters (%s): the quarantine should cost one vote, not the lock.",
			obs.Masters-1, obs.AfterRelease)
	}
	return true, fmt.Sprintf("No double grant with quarantine %s: the restarted master's yes was discounted in %d refusal(s) (it stayed %s, %.0f ms left), and after the holder released, the second client acquired on the other masters.",
		q, obs.DiscountedVotes, obs.RestartedState, obs.QuarantinedForMs)
}
