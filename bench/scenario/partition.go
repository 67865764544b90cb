package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-bench/redlock/bench/fault"
	"github.com/redlock-bench/redlock/engine"
)

// partition: one client reaches the masters through proxies, another
// directly. Cutting three proxies cuts the first client off from a
// majority while the second still sees all five: the first must not be
// able to acquire, its held lease must report the loss (the next
// auto-extension misses the quorum), and the second must get the resource
// only after the first stopped trusting it. Then the cut heals.

const (
	partitionMasters  = 5
	partitionCutCount = 3 // masters 0-2
	partitionHeld     = "scenario:partition:held"
	partitionOther    = "scenario:partition:other"
)

func partitionTTL(short bool) time.Duration {
	if short {
		return 1500 * time.Millisecond
	}
	return 3 * time.Second
}

func expectPartition(o Options) string {
	ttl := partitionTTL(o.Short)
	return fmt.Sprintf("A client cut off from 3 of 5 masters cannot acquire: its attempt fails with ErrNoQuorum within "+
		"the node timeout. Its auto-extended lease (TTL %s, extended every %s) reports the loss: Done closes with "+
		"ErrLockLost when the next extension misses the quorum, or at the latest with ErrLeaseExpired at its validity "+
		"end. A client on the majority side acquires the resource once the keys expire, and not before the cut-off "+
		"client stopped trusting its lease (the oracle sees no double grant). After the heal the cut-off client "+
		"acquires again.", ttl, ttl/3)
}

// partitionObs is what partition observed; it is also its figures.
type partitionObs struct {
	TTLMs         int64   `json:"ttl_ms"`
	ExtendEveryMs float64 `json:"extend_every_ms"`
	NodeTimeoutMs float64 `json:"node_timeout_ms"`
	Cut           []int   `json:"cut"`
	Held          bool    `json:"held"`
	// RefusedBeforeCut: the majority side was refused the held resource
	// before the cut, so the lease was real.
	RefusedBeforeCut bool `json:"majority_side_refused_before_cut"`
	// CutOff* is the cut-off client's attempt on another resource.
	CutOffOutcome string  `json:"cut_off_attempt"`
	CutOffMs      float64 `json:"cut_off_attempt_ms"`
	CutOffError   string  `json:"cut_off_error,omitempty"`
	// LeaseLost: Done closed; LostErr is lease.Err() then; LostAfterCutMs
	// is from the cut; LostLeftMs is what the lease's validity still had
	// (positive: the loss was reported early, by a failed extension).
	LeaseLost      bool    `json:"lease_lost"`
	LostErr        string  `json:"lost_err,omitempty"`
	LostLockLost   bool    `json:"lost_is_lock_lost"`
	LostExpired    bool    `json:"lost_is_expired"`
	LostAfterCutMs float64 `json:"lost_after_cut_ms"`
	LostLeftMs     float64 `json:"lost_validity_left_ms"`
	Extensions     int     `json:"extensions_before_loss"`
	// MajorityAcquired: the majority side got the held resource;
	// MajorityAfterCutMs is when, from the cut.
	MajorityAcquired   bool    `json:"majority_side_acquired"`
	MajorityAfterCutMs float64 `json:"majority_side_acquired_after_cut_ms"`
	// Recovered: the cut-off client acquired after the heal, in
	// RecoveryMs and RecoveryAttempts.
	Recovered        bool      `json:"recovered"`
	RecoveryMs       float64   `json:"recovery_ms"`
	RecoveryAttempts int       `json:"recovery_attempts"`
	DoubleGrants     int       `json:"double_grants"`
	Overlaps         []Overlap `json:"overlaps,omitempty"`
}

// partitionRun is one run of partition: what its phases share.
type partitionRun struct {
	e   *env
	ttl time.Duration
	or  *oracle
	obs partitionObs
}

func runPartition(ctx context.Context, e *env) (outcome, error) {
	ttl := partitionTTL(e.o.Short)
	r := &partitionRun{e: e, ttl: ttl, or: newOracle(e.start), obs: partitionObs{TTLMs: ttl.Milliseconds()}}
	obs := &r.obs
	for i := range partitionCutCount {
		obs.Cut = append(obs.Cut, i)
	}
	fail := func(err error) (outcome, error) { return outcome{figures: r.obs}, err }

	cluster, err := e.masters(ctx, partitionMasters)
	if err != nil {
		return fail(err)
	}
	defer cluster.Stop()
	px, err := e.proxies(ctx, cluster.Addrs())
	if err != nil {
		return fail(err)
	}
	defer px.Close()
	isolated, err := e.locker(ctx, px.Addrs(), func(c *engine.Config) { c.TTL, c.AutoExtend = ttl, true })
	if err != nil {
		return fail(err)
	}
	defer isolated.Close()
	// Deferred last, so run first: heal before the locker closes, so that
	// no connection is torn down with bytes held in a cut (see
	// fault.Proxies).
	defer func() {
		for _, i := range obs.Cut {
			px.Heal(i)
		}
	}()
	majority, err := e.locker(ctx, cluster.Addrs(), func(c *engine.Config) { c.TTL = ttl })
	if err != nil {
		return fail(err)
	}
	defer majority.Close()
	cfg := isolated.Config()
	obs.ExtendEveryMs, obs.NodeTimeoutMs = ms(cfg.ExtendEvery), ms(cfg.NodeTimeout)

	lease, err := isolated.TryLock(ctx, partitionHeld)
	if err != nil {
		return fail(fmt.Errorf("cut-off client, before the cut: %w", err))
	}
	obs.Held = true
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	lost := r.watch(watchCtx, lease)
	e.step("cut-off client acquired %q through the proxies, auto-extended every %.0f ms", partitionHeld, obs.ExtendEveryMs)

	_, err = majority.TryLock(ctx, partitionHeld)
	obs.RefusedBeforeCut = errors.Is(err, engine.ErrNotAcquired)
	e.step("majority side, before the cut: %s", classify(err))

	for _, i := range obs.Cut {
		if err := px.Cut(i); err != nil {
			return fail(err)
		}
	}
	cutAt := time.Now()
	e.step("cut the client off from masters %v", obs.Cut)
	r.cutOffAttempt(ctx, isolated)
	if err := r.awaitLoss(ctx, lost, lease, cutAt); err != nil {
		return fail(err)
	}
	if err := r.majorityTakes(ctx, majority, cutAt); err != nil {
		return fail(err)
	}
	if err := r.healAndRecover(ctx, px, isolated); err != nil {
		return fail(err)
	}
	stopWatch()
	lease.Release(ctx)
	obs.DoubleGrants, obs.Overlaps = r.or.result()

	passed, why := judgePartition(r.obs)
	return outcome{figures: r.obs, passed: passed, observed: why, violations: obs.DoubleGrants}, nil
}

// watch tells the oracle the cut-off client's hold began, and sends on
// the channel it returns when the client stops trusting it (Done closes);
// the channel is closed instead if ctx ends first.
func (r *partitionRun) watch(ctx context.Context, lease *engine.Lease) <-chan time.Time {
	// The hold lasts until the client stops trusting it: auto-extension
	// moves the validity, so the oracle hears of the end from Done.
	r.or.acquire(partitionHeld, "cut-off", time.Now(), time.Now().Add(24*time.Hour))
	done := lease.Done()
	lost := make(chan time.Time, 1)
	go func() {
		select {
		case <-done:
			at := time.Now()
			r.or.release(partitionHeld, "cut-off", at)
			lost <- at
		case <-ctx.Done():
			close(lost)
		}
	}()
	return lost
}

// cutOffAttempt has the cut-off client try another resource.
func (r *partitionRun) cutOffAttempt(ctx context.Context, isolated *engine.Locker) {
	t0 := time.Now()
	le, err := isolated.TryLock(ctx, partitionOther)
	r.obs.CutOffMs, r.obs.CutOffOutcome = ms(time.Since(t0)), classify(err).String()
	if err == nil {
		le.Release(ctx)
	} else {
		r.obs.CutOffError = err.Error()
	}
	r.e.step("cut-off client's attempt on %q: %s in %.1f ms", partitionOther, r.obs.CutOffOutcome, r.obs.CutOffMs)
}

// awaitLoss waits, up to TTL + 2s, for the held lease to report the loss.
func (r *partitionRun) awaitLoss(ctx context.Context, lost <-chan time.Time, lease *engine.Lease, cutAt time.Time) error {
	obs := &r.obs
	select {
	case at, ok := <-lost:
		if !ok {
			return ctx.Err()
		}
		obs.LeaseLost, obs.LostAfterCutMs = true, ms(at.Sub(cutAt))
		obs.LostLeftMs = ms(lease.ValidUntil().Sub(at))
		err := lease.Err()
		obs.LostErr = fmt.Sprint(err)
		obs.LostLockLost, obs.LostExpired = errors.Is(err, engine.ErrLockLost), errors.Is(err, engine.ErrLeaseExpired)
		obs.Extensions = lease.Extensions()
		r.e.step("held lease reported loss %.0f ms after the cut, %.0f ms before its validity end: %s", obs.LostAfterCutMs, obs.LostLeftMs, obs.LostErr)
	case <-time.After(r.ttl + 2*time.Second):
		r.e.step("held lease did not report loss within TTL + 2s")
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// majorityTakes has the majority side wait for the held resource.
func (r *partitionRun) majorityTakes(ctx context.Context, majority *engine.Locker, cutAt time.Time) error {
	lctx, cancel := context.WithTimeout(ctx, 2*r.ttl+2*time.Second)
	taken, err := majority.Lock(lctx, partitionHeld)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.e.step("majority side could not acquire: %v", err)
		return nil
	}
	at := time.Now()
	r.or.acquire(partitionHeld, "majority-side", at, taken.ValidUntil())
	r.obs.MajorityAcquired, r.obs.MajorityAfterCutMs = true, ms(at.Sub(cutAt))
	r.e.step("majority side acquired %q %.0f ms after the cut", partitionHeld, r.obs.MajorityAfterCutMs)
	r.or.release(partitionHeld, "majority-side", time.Now())
	taken.Release(ctx)
	return nil
}

// healAndRecover heals the cut and has the cut-off client acquire again.
func (r *partitionRun) healAndRecover(ctx context.Context, px *fault.Proxies, isolated *engine.Locker) error {
	obs := &r.obs
	for _, i := range obs.Cut {
		if err := px.Heal(i); err != nil {
			return err
		}
	}
	healed := time.Now()
	r.e.step("healed the cut")
	// The connections open across the cut were closed by the heal; the
	// first attempts may still meet them.
	for time.Since(healed) < 3*time.Second {
		obs.RecoveryAttempts++
		le, err := isolated.TryLock(ctx, partitionOther)
		if err == nil {
			obs.Recovered, obs.RecoveryMs = true, ms(time.Since(healed))
			le.Release(ctx)
			break
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	r.e.step("cut-off client after the heal: recovered=%v in %d attempt(s), %.0f ms", obs.Recovered, obs.RecoveryAttempts, obs.RecoveryMs)
	return nil
}

// judgePartition decides partition.
func judgePartition(obs partitionObs) (bool, string) {
	switch {
	case !obs.Held || !obs.RefusedBeforeCut:
		return false, fmt.Sprintf("set-up failed: held=%v, majority side refused before the cut=%v", obs.Held, obs.RefusedBeforeCut)
	case obs.DoubleGrants > 0:
		return false, fmt.Sprintf("the oracle saw %d overlapping hold(s): the majority side acquired while the cut-off client still trusted its lease", obs.DoubleGrants)
	case obs.CutOffOutcome == kindAcquired.String():
		return false, "the cut-off client ACQUIRED with only 2 of 5 masters reachable"
	case obs.CutOffOutcome != kindNoQuorum.String():
		return false, fmt.Sprintf("the cut-off client's attempt failed as %s, not ErrNoQuorum: a partition must not look like contention (%s)", obs.CutOffOutcome, obs.CutOffError)
	case !obs.LeaseLost:
		return false, "the held lease never reported the loss"
	case !obs.LostLockLost && !obs.LostExpired:
		return false, fmt.Sprintf("the held lease ended with %q, not ErrLockLost or ErrLeaseExpired", obs.LostErr)
	case !obs.MajorityAcquired:
		return false, "the majority side never acquired the resource the cut-off client had lost"
	case !obs.Recovered:
		return false, "the cut-off client could not acquire after the heal"
	}
	how := "ErrLockLost, when an extension missed the quorum"
	if !obs.LostLockLost {
		how = "ErrLeaseExpired, at its validity end"
	}
	return true, fmt.Sprintf("Cut off from masters %v, the client's attempt failed with ErrNoQuorum in %.1f ms; its held lease reported "+
		"the loss %.0f ms after the cut with %s (%.0f ms of validity left). The majority side acquired %.0f ms after the cut, "+
		"after the loss was reported; no double grant. After the heal the client acquired again in %.0f ms.",
		obs.Cut, obs.CutOffMs, obs.LostAfterCutMs, how, obs.LostLeftMs, obs.MajorityAfterCutMs, obs.RecoveryMs)
}
