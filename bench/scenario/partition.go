package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

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

func runPartition(ctx context.Context, e *env) (outcome, error) {
	ttl := partitionTTL(e.o.Short)
	obs := partitionObs{TTLMs: ttl.Milliseconds()}
	for i := range partitionCutCount {
		obs.Cut = append(obs.Cut, i)
	}
	fail := func(err error) (outcome, error) { return outcome{figures: obs}, err }

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
	or := newOracle(e.start)

	lease, err := isolated.TryLock(ctx, partitionHeld)
	if err != nil {
		return fail(fmt.Errorf("cut-off client, before the cut: %w", err))
	}
	obs.Held = true
	// The hold lasts until the client stops trusting it: auto-extension
	// moves the validity, so the oracle hears of the end from Done.
	or.acquire(partitionHeld, "cut-off", time.Now(), time.Now().Add(24*time.Hour))
	done := lease.Done()
	lost := make(chan time.Time, 1)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		select {
		case <-done:
			at := time.Now()
			or.release(partitionHeld, "cut-off", at)
			lost <- at
		case <-watchCtx.Done():
			close(lost)
		}
	}()
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

	t0 := time.Now()
	le, err := isolated.TryLock(ctx, partitionOther)
	obs.CutOffMs, obs.CutOffOutcome = ms(time.Since(t0)), classify(err).String()
	if err == nil {
		le.Release(ctx)
	} else {
		obs.CutOffError = err.Error()
	}
	e.step("cut-off client's attempt on %q: %s in %.1f ms", partitionOther, obs.CutOffOutcome, obs.CutOffMs)

	select {
	case at, ok := <-lost:
		if !ok {
			return fail(ctx.Err())
		}
		obs.LeaseLost, obs.LostAfterCutMs = true, ms(at.Sub(cutAt))
		obs.LostLeftMs = ms(lease.ValidUntil().Sub(at))
		err := lease.Err()
		obs.LostErr = fmt.Sprint(err)
		obs.LostLockLost, obs.LostExpired = errors.Is(err, engine.ErrLockLost), errors.Is(err, engine.ErrLeaseExpired)
		obs.Extensions = lease.Extensions()
		e.step("held lease reported loss %.0f ms after the cut, %.0f ms before its validity end: %s", obs.LostAfterCutMs, obs.LostLeftMs, obs.LostErr)
	case <-time.After(ttl + 2*time.Second):
		e.step("held lease did not report loss within TTL + 2s")
	case <-ctx.Done():
		return fail(ctx.Err())
	}

	lctx, cancel := context.WithTimeout(ctx, 2*ttl+2*time.Second)
	taken, err := majority.Lock(lctx, partitionHeld)
	cancel()
	if err == nil {
		at := time.Now()
		or.acquire(partitionHeld, "majority-side", at, taken.ValidUntil())
		obs.MajorityAcquired, obs.MajorityAfterCutMs = true, ms(at.Sub(cutAt))
		e.step("majority side acquired %q %.0f ms after the cut", partitionHeld, obs.MajorityAfterCutMs)
		or.release(partitionHeld, "majority-side", time.Now())
		taken.Release(ctx)
	} else {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		e.step("majority side could not acquire: %v", err)
	}

	for _, i := range obs.Cut {
		if err := px.Heal(i); err != nil {
			return fail(err)
		}
	}
	healed := time.Now()
	e.step("healed the cut")
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
			return fail(err)
		}
	}
	e.step("cut-off client after the heal: recovered=%v in %d attempt(s), %.0f ms", obs.Recovered, obs.RecoveryAttempts, obs.RecoveryMs)
	stopWatch()
	lease.Release(ctx)
	obs.DoubleGrants, obs.Overlaps = or.result()

	passed, why := judgePartition(obs)
	return outcome{figures: obs, passed: passed, observed: why, violations: obs.DoubleGrants}, nil
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
