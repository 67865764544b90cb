package scenario

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// probeObs is what a second client saw when it tried a resource whose
// holder had lost its key on one vote (a master failed over, or a shard's
// primary replaced by a lagging replica): while the holder's lease lived,
// and once it was released.
type probeObs struct {
	// HolderLeftAtProbeMs is what was left of the holder's validity when
	// the second client began: at most 0 when the failover outlasted the
	// lease, and the attempts then test nothing.
	HolderLeftAtProbeMs float64           `json:"holder_left_at_probe_ms"`
	Attempts            []failoverAttempt `json:"attempts"`
	Granted             bool              `json:"second_granted"`
	// HolderLeftMs is what was left of the holder's validity at the grant.
	HolderLeftMs float64 `json:"holder_left_at_grant_ms,omitempty"`
	// DiscountedVotes counts refusals in which the failed vote was the
	// quarantine's.
	DiscountedVotes      int    `json:"discounted_votes"`
	AfterRelease         string `json:"after_release,omitempty"`
	AfterReleaseAcquired bool   `json:"after_release_acquired"`
}

// probe is the second client of a failover run and how its steps name
// the resource ("on Redlock") and the failed vote ("master 0"); tries
// bounds its attempts while the holder's lease lives (0: failoverAttempts).
type probe struct {
	e      *env
	or     *oracle
	second *engine.Locker
	res    string
	vote   int
	on     string
	voteIs string
	tries  int
}

// whileHeld tries the resource until the second client is granted it, the
// failed vote has been seen discounted failoverDecisive times, or the
// holder's lease ends. since is when the failover completed.
func (p probe) whileHeld(ctx context.Context, lease *engine.Lease, since time.Time, obs *probeObs) error {
	tries := cmp.Or(p.tries, failoverAttempts)
	obs.HolderLeftAtProbeMs = ms(lease.Validity())
	for len(obs.Attempts) < tries && lease.Validity() > 0 {
		le, err := p.second.TryLock(ctx, p.res)
		at := time.Now()
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		a := failoverAttempt{AtMs: ms(at.Sub(since)), Outcome: classify(err).String()}
		if err == nil {
			p.or.acquire(p.res, "second", at, le.ValidUntil())
			left := lease.ValidUntil().Sub(at)
			obs.Granted, obs.HolderLeftMs = left > 0, ms(left)
			a.FailedNodeVote = "ok (counted)"
			obs.Attempts = append(obs.Attempts, a)
			p.e.step("second client GRANTED%s with %.0f ms of the holder's validity left", p.on, obs.HolderLeftMs)
			p.or.release(p.res, "second", time.Now())
			le.Release(ctx)
			return nil
		}
		var ve *engine.VotesError
		if errors.As(err, &ve) && p.vote < len(ve.Votes) {
			v := ve.Votes[p.vote]
			a.FailedNodeVote = describeVote(v)
			if errors.Is(v.Err, engine.ErrQuarantined) && errors.Is(err, engine.ErrNotAcquired) {
				obs.DiscountedVotes++
			}
		}
		obs.Attempts = append(obs.Attempts, a)
		p.e.step("second client attempt %d%s: %s (%s: %s)", len(obs.Attempts), p.on, a.Outcome, p.voteIs, a.FailedNodeVote)
		if obs.DiscountedVotes >= failoverDecisive {
			return nil
		}
		if err := sleep(ctx, failoverRetry); err != nil {
			return err
		}
	}
	return nil
}

// afterRelease tries the resource once the holder has released it: the
// failed vote's quarantine must not keep it from being taken. The second
// client's failed attempts are undone in the background; a retry or two
// covers an undo still on its way.
func (p probe) afterRelease(ctx context.Context, obs *probeObs) error {
	for i := 0; i < 10; i++ {
		le, err := p.second.TryLock(ctx, p.res)
		if err == nil {
			obs.AfterReleaseAcquired, obs.AfterRelease = true, "acquired"
			le.Release(ctx)
			break
		}
		obs.AfterRelease = err.Error()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := sleep(ctx, failoverRetry); err != nil {
			return err
		}
	}
	p.e.step("after the release, the second client%s: %s", p.on, obs.AfterRelease)
	return nil
}
