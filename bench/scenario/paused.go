package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// paused-holder: the holder stalls past its validity, as in a GC pause,
// and then writes to the protected resource as if it still held the lock.
//
// The pause is simulated in-process: the holder's code simply does not run
// while the script lets another client take the resource over. (A real
// stop-the-world pause would also stop the engine's timers; the signal
// would then be waiting for the holder when it resumes, which is what the
// figures show: lease.Err() right after the pause.) The holder resumes just
// after the new holder's first write, the interleaving fencing exists for,
// and writes without looking at its lease, as a paused program that
// checked its lease just before the pause would. Auto-extension is off: an
// extension timer would keep running through a simulated pause and hide
// it, where a real pause would stop it too.

const (
	pausedMasters  = 5
	pausedResource = "scenario:paused-holder"
	// pausedDoneSlack is how long after the validity end the lost-lock
	// signal may fire, beyond what a plain timer set for the same instant
	// took on this host (pausedObs.TimerLagMs): the engine's own delay.
	pausedDoneSlack = 100 * time.Millisecond
)

func pausedTTL(short bool) time.Duration {
	if short {
		return time.Second
	}
	return 2 * time.Second
}

func expectPausedHolder(o Options) string {
	head := fmt.Sprintf("The holder (TTL %s, no auto-extension) stalls past its validity. Its lease's lost-lock signal fires: "+
		"Done closes with ErrLeaseExpired within %s of the validity end (beyond how late a plain timer for that instant fires on this host). Another client then acquires, without "+
		"overlapping the holder's validity (the oracle sees no double grant), and writes to the protected resource. ",
		pausedTTL(o.Short), pausedDoneSlack)
	if o.Fencing {
		return head + "With fencing on, the new holder's token is higher, and the stale holder's late write, carrying its " +
			"old token, is rejected by the fenced resource: no violation."
	}
	return head + "With fencing off there is no token to check, so the stale holder's late write is accepted: one " +
		"violation, the known weakness that fencing removes. The run passes when it reproduces it."
}

// pausedObs is what paused-holder observed; it is also its figures.
type pausedObs struct {
	Fencing bool  `json:"fencing"`
	TTLMs   int64 `json:"ttl_ms"`
	// ValidForMs is the holder's validity when its acquire returned.
	ValidForMs  float64 `json:"valid_for_ms"`
	HolderToken int64   `json:"holder_token"`
	// PauseMs is how long the holder stalled, from its acquire to its late
	// write.
	PauseMs float64 `json:"pause_ms"`
	// DoneFired: the lease's Done closed during the pause; DoneErr is
	// lease.Err() then; DoneLagMs is from the validity end to the signal.
	DoneFired bool    `json:"done_fired"`
	DoneErr   string  `json:"done_err,omitempty"`
	DoneLagMs float64 `json:"done_lag_ms"`
	// TimerLagMs is how late a plain timer set for the validity end
	// fired, seen the way Done is (a goroutine woken by a channel): the
	// host's scheduling lag, which a loaded machine makes hundreds of
	// milliseconds and which is no fault of the engine's.
	TimerLagMs float64 `json:"timer_lag_ms"`
	// DoneExpired: DoneErr is ErrLeaseExpired.
	DoneExpired bool `json:"done_expired"`
	// ErrAfterPause is what lease.Err() told the holder when it resumed.
	ErrAfterPause     string  `json:"err_after_pause,omitempty"`
	ContenderAcquired bool    `json:"contender_acquired"`
	ContenderToken    int64   `json:"contender_token"`
	ContenderAfterMs  float64 `json:"contender_acquired_after_ms"`
	// Writes is the fenced resource's log: the holder's write, the new
	// holder's, then the stale holder's late one.
	Writes            []Write   `json:"writes"`
	LateWriteDone     bool      `json:"late_write_done"`
	LateWriteAccepted bool      `json:"late_write_accepted"`
	DoubleGrants      int       `json:"double_grants"`
	Overlaps          []Overlap `json:"overlaps,omitempty"`
}

func runPausedHolder(ctx context.Context, e *env) (outcome, error) {
	ttl := pausedTTL(e.o.Short)
	obs := pausedObs{Fencing: e.o.Fencing, TTLMs: ttl.Milliseconds()}
	fail := func(err error) (outcome, error) { return outcome{figures: obs}, err }

	cluster, err := e.masters(ctx, pausedMasters)
	if err != nil {
		return fail(err)
	}
	defer cluster.Stop()
	set := func(c *engine.Config) { c.TTL, c.Fencing, c.AutoExtend = ttl, e.o.Fencing, false; patient(c) }
	holder, err := e.locker(ctx, cluster.Addrs(), set)
	if err != nil {
		return fail(err)
	}
	defer holder.Close()
	contender, err := e.locker(ctx, cluster.Addrs(), set)
	if err != nil {
		return fail(err)
	}
	defer contender.Close()
	or := newOracle(e.start)
	res := &fencedResource{base: e.start}

	lease, err := holder.TryLock(ctx, pausedResource)
	if err != nil {
		return fail(fmt.Errorf("holder: %w", err))
	}
	got := time.Now()
	validUntil := lease.ValidUntil()
	obs.ValidForMs, obs.HolderToken = ms(validUntil.Sub(got)), lease.Token()
	or.acquire(pausedResource, "holder", got, validUntil)
	e.step("holder acquired, token %d, valid for %.0f ms", obs.HolderToken, obs.ValidForMs)

	// The lost-lock signal, watched as a careful program would, and a
	// plain timer for the same instant, watched the same way: how late it
	// fires is the host's lag, not the engine's.
	done := lease.Done()
	ref := time.NewTimer(time.Until(validUntil))
	defer ref.Stop()
	refFired := make(chan time.Time, 1)
	type signal struct {
		at  time.Time
		err error
	}
	fired := make(chan signal, 1)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		select {
		case <-ref.C:
			refFired <- time.Now()
		case <-watchCtx.Done():
		}
	}()
	go func() {
		select {
		case <-done:
			fired <- signal{time.Now(), lease.Err()}
		case <-watchCtx.Done():
			select { // both ready: the signal wins
			case <-done:
				fired <- signal{time.Now(), lease.Err()}
			default:
				close(fired)
			}
		}
	}()

	w := res.write("holder", lease.Token())
	e.step("holder wrote with token %d: accepted=%v", w.Token, w.Accepted)
	// Counted from the acquire, as the validity is (ValidForMs): the
	// write before the stall takes time too, on a loaded machine more
	// than the masters' keys outlive the validity by.
	pauseStart := got
	e.step("holder stalls (GC pause), without auto-extension")

	// While the holder is stalled, another client waits for the resource.
	// Lock returns once the holder's keys expire on the masters: an event
	// that comes on any machine, so only the run's ctx bounds the wait.
	next, err := contender.Lock(ctx, pausedResource)
	if err != nil {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		e.step("contender could not acquire: %v", err)
	} else {
		at := time.Now()
		or.acquire(pausedResource, "contender", at, next.ValidUntil())
		obs.ContenderAcquired, obs.ContenderToken, obs.ContenderAfterMs = true, next.Token(), ms(at.Sub(got))
		e.step("contender acquired %.0f ms after the holder, token %d", obs.ContenderAfterMs, obs.ContenderToken)
		w := res.write("contender", next.Token())
		e.step("contender wrote with token %d: accepted=%v", w.Token, w.Accepted)
	}

	// The holder resumes and writes, believing it still holds the lock.
	obs.PauseMs = ms(time.Since(pauseStart))
	if err := lease.Err(); err != nil {
		obs.ErrAfterPause = err.Error()
	}
	late := res.write("holder", lease.Token())
	obs.LateWriteDone, obs.LateWriteAccepted = true, late.Accepted
	e.step("holder resumes after %.0f ms (lease.Err: %s) and writes with token %d: accepted=%v",
		obs.PauseMs, orNone(obs.ErrAfterPause), late.Token, late.Accepted)

	// The holder's pause ends only after the contender acquired, when the
	// keys had expired, past the validity end: both timers were due.
	select {
	case at := <-refFired:
		obs.TimerLagMs = ms(at.Sub(validUntil))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	stopWatch()
	if s, ok := <-fired; ok {
		obs.DoneFired, obs.DoneLagMs = true, ms(s.at.Sub(validUntil))
		if s.err != nil {
			obs.DoneErr = s.err.Error()
		}
		obs.DoneExpired = errors.Is(s.err, engine.ErrLeaseExpired)
	}
	if obs.ContenderAcquired {
		or.release(pausedResource, "contender", time.Now())
		next.Release(ctx)
	}
	lease.Release(ctx) // expired: it tells the masters nothing they keep
	obs.Writes = res.log()
	obs.DoubleGrants, obs.Overlaps = or.result()

	passed, why := judgePausedHolder(obs)
	violations := obs.DoubleGrants
	if obs.LateWriteAccepted {
		violations++
	}
	return outcome{figures: obs, passed: passed, observed: why, violations: violations}, nil
}

// judgePausedHolder decides paused-holder. The fencing setting is in the
// observation: with it on, the late write must be rejected; with it off,
// it must go through, since nothing can tell it apart.
func judgePausedHolder(obs pausedObs) (bool, string) {
	slack := ms(pausedDoneSlack)
	switch {
	case !obs.ContenderAcquired:
		return false, "set-up failed: no other client acquired the resource after the holder's TTL"
	case obs.PauseMs <= obs.ValidForMs:
		return false, fmt.Sprintf("set-up failed: the pause (%.0f ms) did not outlast the holder's validity (%.0f ms)", obs.PauseMs, obs.ValidForMs)
	case !obs.LateWriteDone:
		return false, "set-up failed: the stale holder never wrote"
	case obs.DoubleGrants > 0:
		return false, fmt.Sprintf("the oracle saw %d overlapping hold(s): the new holder acquired within the old one's validity", obs.DoubleGrants)
	case !obs.DoneFired:
		return false, "the lost-lock signal never fired: Done stayed open past the validity end"
	case !obs.DoneExpired:
		return false, fmt.Sprintf("Done fired with %q, want ErrLeaseExpired", obs.DoneErr)
	case obs.DoneLagMs < -1 || obs.DoneLagMs > slack+max(0, obs.TimerLagMs):
		return false, fmt.Sprintf("Done fired %.1f ms from the validity end, outside [-1, %.0f] ms (%.0f ms, plus the %.1f ms a plain timer for that instant was late)",
			obs.DoneLagMs, slack+max(0, obs.TimerLagMs), slack, obs.TimerLagMs)
	}
	signal := fmt.Sprintf("The holder stalled %.0f ms, past its %.0f ms validity; Done fired with ErrLeaseExpired %.1f ms after the validity end "+
		"(a plain timer: %.1f ms), and the next holder acquired %.0f ms after the first, without overlap. ",
		obs.PauseMs, obs.ValidForMs, obs.DoneLagMs, obs.TimerLagMs, obs.ContenderAfterMs)
	if obs.Fencing {
		switch {
		case obs.ContenderToken <= obs.HolderToken:
			return false, signal + fmt.Sprintf("But the tokens did not increase: holder %d, next holder %d.", obs.HolderToken, obs.ContenderToken)
		case obs.LateWriteAccepted:
			return false, signal + fmt.Sprintf("STALE WRITE: the fenced resource accepted the late write with token %d after seeing %d.", obs.HolderToken, obs.ContenderToken)
		}
		return true, signal + fmt.Sprintf("The stale holder's late write (token %d) was rejected by the fenced resource, which had seen token %d.",
			obs.HolderToken, obs.ContenderToken)
	}
	if !obs.LateWriteAccepted {
		return false, signal + "Without fencing the late write was rejected, which the resource has no way to do: the scenario is broken."
	}
	return true, signal + "As expected without fencing, the stale holder's late write went through: the resource cannot tell it from the " +
		"new holder's. This is the weakness fencing tokens remove."
}
