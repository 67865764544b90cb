package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lock acquires resource, waiting as long as ctx allows.
//
// Goroutines of this Locker that Lock the same resource queue at an
// in-process gate in FIFO order; only the head asks the masters. When the
// resource is held elsewhere, the head subscribes to its release channel
// and retries the moment a release is published, or after a random
// fallback delay (FallbackMin..FallbackMax, capped at the TTL) that covers
// expiries and lost notifications. A split vote or an outage backs off for
// a random RetryDelayMin..RetryDelayMax. Lease.Wait tells how the wait
// went.
//
// Options (WithTTL, WithOwner) apply to this acquisition only. A Lock
// whose options differ from the Locker's defaults (a TTL other than
// Config.TTL, owner metadata other than Config.Owner) does not queue at
// the in-process gate, and its lease is never handed on there: a lease
// handed on keeps its value and TTL, which would carry the first
// holder's metadata and lifetime to the next.
func (l *Locker) Lock(ctx context.Context, resource string, opts ...LockOption) (*Lease, error) {
	o, err := l.resolve("lock", resource, opts)
	if err != nil {
		return nil, err
	}
	if l.cfg.Observer != nil {
		return l.lockObserved(ctx, resource, o)
	}
	var w WaitInfo
	return l.lock(ctx, resource, &w, o)
}

func (l *Locker) lock(ctx context.Context, resource string, w *WaitInfo, o acquireOpts) (*Lease, error) {
	l.remote.Add(1)
	defer l.remote.Add(-1)
	start := time.Now()
	if err := l.checkResource("lock", resource); err != nil {
		return nil, err
	}
	gated := false
	if l.gate != nil && l.isDefault(o) {
		waited, inherited, err := l.gate.enter(ctx, resource)
		l.observeGate(resource, start, waited, inherited != nil, err)
		switch {
		case errors.Is(err, ErrClosed):
			return nil, fmt.Errorf("engine: lock %q: %w", resource, ErrClosed)
		case err != nil:
			// Held by another goroutine of this Locker until the context
			// ended: contention, as when the holder is another process.
			return nil, errorf("lock %q: %v: queued %s behind another goroutine of this Locker, which holds it or waits for it: %v",
				resource, ErrNotAcquired, time.Since(start).Round(time.Millisecond), err)
		}
		if inherited != nil {
			w.Gated, w.Cause, w.Waited = true, WakeHandoff, time.Since(start)
			inherited.wait = *w
			inherited.arm()
			return inherited, nil
		}
		gated, w.Gated = true, waited
	}
	le, err := l.lockRemote(ctx, resource, start, w, o)
	if err != nil {
		if gated {
			l.gate.leave(resource)
		}
		return nil, err
	}
	w.Waited = time.Since(start)
	le.wait = *w
	le.gated = gated
	le.arm()
	return le, nil
}

// lockRemote is the head of the gate's wait on the masters: attempts
// until one acquires or ctx ends, and sleeps between them until a
// release notification, a fallback or a back-off wakes it.
func (l *Locker) lockRemote(ctx context.Context, resource string, start time.Time, info *WaitInfo, o acquireOpts) (le *Lease, err error) {
	w := &waiter{sleeper: sleeper{ctx: ctx, info: info}, l: l, resource: resource, start: start}
	defer func() { w.leave(err) }()
	// A resource this Locker waited for lately (its subscription lingers)
	// is likely held: the first attempt already queues, which spares a
	// plain attempt's round trip and a subscription.
	if l.notify != nil && l.notify.listening(l.key(resource)) {
		w.join()
	}
	for {
		info.Attempts++
		le, err := l.try(ctx, resource, w.tk, o)
		if err == nil {
			w.acquired(le)
			return le, nil
		}
		if stop := w.noRetry(err); stop != nil {
			return nil, stop
		}
		d, cause, now := w.nextWait(err)
		if now {
			continue
		}
		if err := w.sleep(d, cause); err != nil {
			return nil, err
		}
	}
}

// waiter is one Lock call's wait on the masters: its place in the
// resource's queue and its subscription once it has them, its timers,
// and the last attempt's error.
type waiter struct {
	sleeper
	l        *Locker
	resource string
	start    time.Time
	tk       *ticket
	last     error // the last attempt that was decided, not cut short
	// all are a LockAll waiter's resources; nil for Lock's.
	all *resourceSet
}

// join queues the waiter on the masters and subscribes it to the
// resource's releases: its next attempt marks the holder's value, which
// makes the holder's release publish.
func (w *waiter) join() {
	if w.all != nil {
		w.tk, w.sub = w.l.queueAll(w.ctx, w.all, w.start)
		return
	}
	w.tk, w.sub = w.l.queue(w.ctx, w.resource, w.start)
}

// acquired takes the waiter that holds le out of the queue on the masters
// where its attempt queued it but did not set its key: they are not sent
// its release, which would. Its place stays registered with the lease
// until the lease is released or lost (see Lease.tk).
func (w *waiter) acquired(le *Lease) {
	if w.tk == nil {
		return
	}
	le.mu.Lock()
	rest := (uint64(1)<<len(le.votes) - 1) &^ le.held
	le.kept, le.tk = rest, w.tk
	le.mu.Unlock()
	l := w.l
	l.tmu.Lock()
	if _, ok := l.tickets[w.tk]; ok {
		w.tk.held = true
		l.leaveQueue(w.resource, w.tk, rest, true)
		if faults.GhostInQueue.On() {
			delete(l.tickets, w.tk) // Close then leaves the lease's place
		}
	}
	l.tmu.Unlock()
}

// noRetry returns the error that ends the wait after a failed attempt:
// the context ended, or the failure is one another attempt cannot cure
// (keys of the wrong type that make the quorum impossible, Close); nil to
// go on. A minority of masters with such a key (which the error matches
// too) leaves the quorum to the others: contention or an outage there is
// waited out as usual.
func (w *waiter) noRetry(err error) error {
	if w.ctx.Err() != nil {
		if w.last == nil || errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNoQuorum) {
			w.last = err
		}
		return gaveUp(w.resource, w.ctx, w.info, w.last)
	}
	w.last = err
	if !(errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNoQuorum)) {
		return err
	}
	return nil
}

// nextWait chooses the wait after a refused attempt, and what its end
// counts as; now is true when the next attempt must go at once.
func (w *waiter) nextWait(err error) (d time.Duration, cause WakeCause, now bool) {
	cfg := &w.l.cfg
	var ve *VotesError
	held := errors.As(err, &ve) && ve.Kind == ErrNotAcquired && ve.heldByOne()
	fallback := w.l.jitter(cfg.Wait.FallbackMin, min(cfg.Wait.FallbackMax, cfg.TTL))
	switch {
	case held && w.l.notify != nil && w.sub == nil:
		// Subscribe, then try again at once, marking the holder's value:
		// the release may have come between the refusal and the
		// subscription, and an unmarked release publishes nothing.
		w.join()
		return 0, WakeNone, true
	case held && ve.onlyTurns():
		// The waiters given the turn may be gone (a killed process): back
		// off until their tokens have expired, rather than wait for the
		// fallback, unless a release wakes us first.
		return min(turnGrace+w.l.jitter(cfg.Wait.RetryDelayMin, cfg.Wait.RetryDelayMax), fallback), WakeBackoff, false
	case held:
		return fallback, WakeFallback, false
	}
	backoff := w.l.jitter(cfg.Wait.RetryDelayMin, cfg.Wait.RetryDelayMax)
	if ve != nil {
		// Masters in the restart quarantine vote at a known time: wait
		// until then instead of asking them every few milliseconds. Not
		// longer than a fallback where masters failed for other reasons
		// too: one that is down may come back first, and the quorum
		// with it.
		if until := ve.QuarantinedUntil(); !until.IsZero() {
			d := max(time.Until(until), 0)
			if !ve.quarantineAlone() {
				d = min(d, fallback)
			}
			return d + backoff, WakeBackoff, false
		}
	}
	// A split vote or an outage: nobody may be holding it, so nothing will
	// be published; back off so competitors drift apart.
	return backoff, WakeBackoff, false
}

// sleeper is what a waiter of any lock sleeps on between attempts.
type sleeper struct {
	ctx   context.Context
	info  *WaitInfo
	sub   *subscription
	timer *time.Timer
	// settle bounds how long a woken waiter waits for the rest of the
	// masters to give it the turn (see awaitTurns).
	settle *time.Timer
}

// sleep waits d, or until a release notifies the subscription (then until
// a quorum of masters gave the turn, briefly: see awaitTurns), and records
// what ended the wait. It returns the error that ends the wait of op on
// name: gaveUp's when the context ended, ErrClosed when the Locker closed.
func (s *sleeper) sleep(l *Locker, op, name string, d time.Duration, cause WakeCause, gaveUp func() error) error {
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	var notified <-chan struct{}
	if s.sub != nil {
		notified = s.sub.C
	}
	info := s.info
	asleep := l.waitStart()
	select {
	case <-s.ctx.Done():
		l.observeWait(name, asleep, WakeNone, s.ctx.Err())
		return gaveUp()
	case <-l.done:
		l.observeWait(name, asleep, WakeNone, ErrClosed)
		return fmt.Errorf("engine: %s %q: %w", op, name, ErrClosed)
	case <-notified:
		info.Notified++
		info.Cause = WakeNotified
		if !s.sub.awaitTurns(s.ctx, l.Quorum(), &s.settle) {
			l.observeWait(name, asleep, WakeNotified, s.ctx.Err())
			return gaveUp()
		}
	case <-s.timer.C:
		info.Cause = cause
		if cause == WakeFallback {
			info.Fallbacks++
		} else {
			info.Backoffs++
		}
	}
	l.observeWait(name, asleep, info.Cause, nil)
	return nil
}

// stop stops the timers and the subscription.
func (s *sleeper) stop() {
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.settle != nil {
		s.settle.Stop()
	}
	s.sub.close()
}

// sleep waits d, or until a release names the waiter (a waiter in the
// queue also listens after a split vote: the undos of the split attempts
// wake the first waiter). It returns the error that ends the Lock: the
// context ended, or Close.
func (w *waiter) sleep(d time.Duration, cause WakeCause) error {
	return w.sleeper.sleep(w.l, "lock", w.resource, d, cause, func() error {
		return gaveUp(w.resource, w.ctx, w.info, w.last)
	})
}

// leave ends the wait: it stops the timers and the subscription, and a
// waiter that did not acquire (err set) leaves the masters' queue.
func (w *waiter) leave(err error) {
	w.stop()
	if w.tk != nil && err != nil {
		w.l.quitQueue(w.resource, w.tk)
	}
}

// gaveUp is the error of a Lock whose context ended: one line, matching
// both the context's error and the last attempt's (ErrNotAcquired for a
// resource held until then).
func gaveUp(resource string, ctx context.Context, w *WaitInfo, last error) error {
	if last == nil {
		return errorf("lock %q: gave up after %d attempts: %v", resource, w.Attempts, ctx.Err())
	}
	return errorf("lock %q: gave up after %d attempts (%v); the last: %v", resource, w.Attempts, ctx.Err(), last)
}

// WakeCause is what ended a Lock waiter's last wait before the attempt
// that acquired.
type WakeCause uint8

const (
	// WakeNone: acquired without waiting on the masters.
	WakeNone WakeCause = iota
	// WakeNotified: woken by the holder's release notification.
	WakeNotified
	// WakeFallback: woken by the fallback timer while the resource was held.
	WakeFallback
	// WakeBackoff: woken after backing off from a split vote or an outage.
	WakeBackoff
	// WakeHandoff: handed the lease by the previous holder in this
	// process, without asking the masters.
	WakeHandoff
)

func (c WakeCause) String() string {
	return [...]string{"none", "notified", "fallback", "backoff", "handoff"}[c]
}

// WaitInfo describes how Lock obtained a lease.
type WaitInfo struct {
	// Attempts is the number of attempts on the masters.
	Attempts int
	// Notified, Fallbacks and Backoffs count the waits by how they ended.
	Notified, Fallbacks, Backoffs int
	// Cause ended the last wait.
	Cause WakeCause
	// Gated is true if the caller queued behind another goroutine of this
	// Locker at the in-process gate.
	Gated bool
	// Waited is the time from the Lock call to acquisition.
	Waited time.Duration
}
