package engine

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// Readers of one Locker share one remote read entry per lock. A reader
// admitted by the masters (rwAcquireScript) becomes the base of a share:
// the entry's *Lease, which no caller holds, and the reader gets a joined
// lease on it. While the share is live, with validity well above a floor
// (see rwShare.roomLocked), a later RLock or TryRLock of the same lock in
// this Locker, with the same TTL and owner, joins it instead of running
// the acquire script: it asks the masters, in one round of two native
// commands each, whether the entry is still there (ZRANK) and whether a
// waiting writer's intent is (EXISTS on the writers' intents key), and
// joins when a quorum of the masters that set the entry's validity still
// hold it and a quorum answered "none" (local counts); otherwise it goes
// the normal way, as it does when its attempt would mark the name's kind
// (see RWMutex.checkDue). The last joined lease's Release releases the
// entry on the masters. Config.Wait.DisableGate turns sharing off with
// the gate.
//
// Why it is safe:
//
//   - Mutual exclusion with writers. A joined lease is trusted only while
//     the base is: its validity is the base's, never more (it is copied,
//     and moved with every change of the base's, under the base's mu), and
//     it ends when the base ends. The base is a reader's lease like any
//     other, with the lock's guarantee: while it is valid its entry is live
//     on a quorum, and a master admits no writer while a live entry of a
//     reader is there, so no writer holds. That guarantee assumes the
//     entry stays, and a join must not extend it to a reader that begins
//     after the entry went (an operator's Unlock of a stuck reader,
//     FLUSHDB, eviction), which the base may not see: the join counts a
//     master only if it found the entry there and is one of those
//     (rwShare.live) whose admission or extension set the validity the
//     join takes. There the entry was set to live past that validity and
//     was still there during the round; it is never re-created once gone
//     (rwExtendScript), and a writer's attempt takes an expired entry out
//     before it is admitted, so no writer held there at the round and
//     none is admitted there before the validity ends. A master that
//     missed the last extension may hold the entry expired, which a
//     writer would clear: it is not counted. The join writes nothing and
//     needs no admission.
//   - Writer preference. A waiting writer's intent stops joins as it stops
//     new readers: a master that holds an intent answers EXISTS 1 (an
//     expired intent whose key is still there counts too: the check errs
//     towards the normal way), and a join needs a quorum of masters that
//     answered 0, which shares a master with any quorum that held the
//     intent throughout the join. The writer then waits only for the
//     leases admitted or joined before, whose last Release frees the
//     entry and publishes, as a reader's release does.
//   - Validity, Done, Extend. The joined lease's validity follows the
//     base's (Extend and auto-extension of the base, a shorter Extend or a
//     RemoteValidity that shortens it). Done closes when the base ends
//     (lost, expired), with the base's error, or when the joined lease is
//     released. Extend of a joined lease extends the shared entry, for
//     every holder; auto-extension is the base's, MaxExtensions counted
//     from the entry's acquisition: a join needs one left.
//   - Release. The count of joined leases not yet released, and of joins
//     asking the masters, is kept under the base's mu; the Release (or
//     refused join) that takes it to zero closes the share to joins before
//     it releases the entry, so that a join racing it finds the share
//     closed and goes the normal way.
//   - Readers that find no share while another reader of this Locker
//     acquires the lock on the masters wait for that attempt (see flight),
//     then join what it acquired, asking for intents as any join does: the
//     attempt's own admission is not taken as their check, since it may
//     have run on the masters before they were called.
//   - No lost wake-up. A waiting reader whose flight's marked attempt was
//     refused by what publishes when it goes takes that refusal as its
//     own, and sleeps, only if its subscription was among the topic's
//     waiters before any message was delivered after the attempt was sent
//     (rwFlight.adopts), and its mark lives as long as the attempt's: the
//     release that takes the attempt's mark publishes after the attempt
//     ran, so it reaches this reader as it reaches the attempt's maker.
//     Any other reader makes its own attempt.
//   - One name, one kind. A join sends no attempt, so it cannot mark the
//     Semaphore's permit count: a reader whose attempt would mark it
//     (until a quorum answered a mark, then every MaxTTL/2) makes the
//     attempt, and becomes the new base. A join thus comes within MaxTTL/2
//     of a mark, which lives 2 MaxTTL, as an attempt that skips it does.
//   - Memory. A share leaves the Locker when its last joined lease is
//     released, its base ends (auto-extension's watch), or, for a base no
//     auto-extension watches, when its validity ends (rwShare.expiry):
//     readers dropped without Release leave nothing behind.
//   - Turns, queue, hand-off. Readers take no turn in the masters' queue
//     and are never handed on at the gate (writers queue at semGate):
//     joining changes neither.
//   - Close. A join runs as an attempt does (counted in Locker.remote) and
//     is refused once Close began; a joined lease's Release after Close
//     sends nothing, as any lease's.
//   - Cancellation. The intent check runs under the caller's context; an
//     ended context fails its quorum, and the normal way then reports it.
//   - A master restart or quarantine. A quarantined master's answer does
//     not count (the pool fails its vote), so a master that lost its
//     intents cannot make up a quorum of "none"; the base's entry is
//     judged by the quarantine as any lease's.
//   - Cluster votes. The intents key shares the lock key's slot; each vote
//     answers for the slot's primary, as an acquire's does.
type rwShare struct {
	base   *Lease
	suffix string // the owner suffix of the base's value
	// closed: no more joins (the last Release began, or the base ended).
	closed atomic.Bool
	// Under base.mu: the joined leases not yet released (and joins asking
	// the masters, in n), in no order.
	n       int
	sharers []*Lease
	// live, under base.mu: the masters that admitted or extended the
	// entry in the round that set the base's validity (shortenings
	// aside, which keep it): where the entry, if still there, lives at
	// least as long as that validity (see join).
	live uint64
	// expiry drops the share from its Locker once the base's validity
	// has ended, for a base that no auto-extension watches; nil for one
	// that is.
	expiry *time.Timer
}

// joined reports whether le is a joined lease on a share's base.
func (le *Lease) joined() bool { return le.share != nil && le.share.base != le }

// isBase reports whether le is a share's base, held by no caller.
func (le *Lease) isBase() bool { return le.share != nil && le.share.base == le }

// shareBase makes base, a reader's lease just admitted on the masters, the
// base of a new share, and returns the caller's joined lease on it. The
// share becomes the lock's in this Locker (a newer base has more validity
// than an older one).
func (m *RWMutex) shareBase(base *Lease, o acquireOpts) *Lease {
	l := m.l
	s := &rwShare{base: base, suffix: o.suffix}
	base.share = s
	base.mu.Lock()
	s.live = base.held
	h := s.joinLocked(base.start)
	if !l.cfg.AutoExtend {
		// Its readers may expire unwatched and be dropped without
		// Release: nothing else would take the share out of the map.
		s.expiry = time.AfterFunc(time.Until(base.validUntil), s.expired)
	}
	base.mu.Unlock()
	base.arm()
	l.shareMu.Lock()
	l.shares[m.key] = s
	l.shareMu.Unlock()
	return h
}

// expired is the expiry timer's: it drops the share once the base's
// validity has ended (an auto-extended base ends then, and baseEnded
// drops it), and waits again if an Extend moved the validity on.
func (s *rwShare) expired() {
	b := s.base
	b.mu.Lock()
	left := time.Until(b.validUntil)
	wait := left > 0 && b.endErr == nil && !s.closed.Load()
	if wait {
		s.expiry.Reset(left)
	}
	b.mu.Unlock()
	if !wait {
		s.closed.Store(true)
		b.l.dropShare(s)
	}
}

// joinLocked makes a joined lease on s's base. The caller holds base.mu.
func (s *rwShare) joinLocked(start time.Time) *Lease {
	b := s.base
	h := &Lease{l: b.l, resource: b.resource, key: b.key, value: b.value, start: start, rw: true, ttlMS: b.ttlMS,
		share: s, validUntil: b.validUntil}
	h.initVotes(len(b.votes))
	s.n++
	s.sharers = append(s.sharers, h)
	return h
}

// roomLocked: the base can take a join at now: not ended, at least half
// its lifetime of validity left, and with auto-extension, an extension
// left. The caller holds base.mu.
func (s *rwShare) roomLocked(now time.Time) bool {
	b := s.base
	cfg := &b.l.cfg
	if s.closed.Load() || b.endErr != nil || b.released {
		return false
	}
	if cfg.AutoExtend && cfg.MaxExtensions > 0 && b.extensions >= cfg.MaxExtensions {
		return false
	}
	return b.validUntil.Sub(now) >= b.lifetime()/2
}

// join tries to join the lock's share in this Locker: nil when there is
// none to join, or the attempt would mark the name's kind, or the entry
// may be gone or a waiting writer's intent there, or the check did not
// reach a quorum; the caller then goes the normal way.
// The join counts on the share while it asks, so that the entry stays
// for it; refused, it gives that back, and releases the entry on the
// masters if the others let go meanwhile.
func (m *RWMutex) join(ctx context.Context, o acquireOpts) *Lease {
	l := m.l
	if m.markDue() {
		// The attempt would mark the name as a read/write lock's (see
		// checkDue), which a join cannot: joins alone would let the mark
		// expire while readers hold.
		return nil
	}
	l.shareMu.Lock()
	s := l.shares[m.key]
	l.shareMu.Unlock()
	if s == nil || s.suffix != o.suffix || s.base.ttlMS != o.ttlMS {
		return nil
	}
	start := time.Now()
	b := s.base
	b.mu.Lock()
	room := s.roomLocked(start)
	if room {
		s.n++
	}
	live := s.live
	b.mu.Unlock()
	if !room {
		return nil
	}
	present, ok := m.confirm(ctx, b.value, live)
	b.mu.Lock()
	// The masters counted are those where the entry was there during the
	// round and that admitted or extended it in the round that set the
	// validity the join takes, read now with it (see rwShare).
	ok = ok && bits.OnesCount64(present&s.live) >= l.Quorum()
	if ok && s.roomLocked(time.Now()) && !l.closed.Load() {
		h := s.joinLocked(start)
		s.n-- // joinLocked counted it again
		b.mu.Unlock()
		return h
	}
	s.n--
	last := s.n == 0
	if last {
		s.closed.Store(true)
	}
	b.mu.Unlock()
	if last {
		l.dropShare(s)
		b.release(ctx, false)
	}
	return nil
}

// rwFlight is a reader's attempt on the masters that other readers of
// its Locker wait for (see RWMutex.flight).
type rwFlight struct {
	done chan struct{} // closed when the attempt is decided
	// For a marked attempt (its maker subscribed), set before it is sent:
	// the subscription's topic and its delivered count then (see
	// notifier.since); nil for an attempt that does not mark.
	topic *topic
	count uint64
	// life is the maker's (rwWaiter.life): how long its mark lives.
	life string
	// refused is the attempt's error, when it was refused on a quorum by
	// what will publish when it goes (rwHeld); set before done closes.
	refused error
}

// flight has the caller wait while another reader of this Locker
// acquires the lock on the masters, and then try to join what it
// acquired: it returns the joined lease; or nil and, if no other reader
// was acquiring, the caller's own flight, on which it calls send before
// its attempt goes and land once its share (if any) is registered; or
// the other's refusal, which a waiting reader w takes as its own
// attempt's (see adopts).
func (m *RWMutex) flight(ctx context.Context, o acquireOpts, w *rwWaiter) (*Lease, *rwFlight, error) {
	l := m.l
	l.shareMu.Lock()
	f, other := l.flights[m.key]
	if !other {
		f = &rwFlight{done: make(chan struct{})}
		l.flights[m.key] = f
	}
	l.shareMu.Unlock()
	if !other {
		return nil, f, nil
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, nil, nil
	}
	if f.adopts(w) {
		return nil, nil, f.refused
	}
	return m.join(ctx, o), nil, nil
}

// adopts reports whether a waiting reader w takes the flight's refusal as
// its own attempt's, and sleeps on it without an attempt of its own. The
// attempt was refused on a quorum by what publishes when it goes, it
// marked the masters that refused it, and w's subscription was among its
// topic's waiters before any message delivered after the attempt was
// sent (the topic's delivered count no higher then): every release that
// publishes for that mark reaches w as it reaches the attempt's maker.
// The mark lives as long as w's own would (the same life), so it outlasts
// w's sleep as it outlasts the maker's. w's own marked attempt would have
// been refused as well, but for a release in between, which publishes to
// w, or a change that publishes nothing (an expiry nobody cleaned up, a
// writer's silent undo), which the maker sleeps through too, until the
// fallback that covers such changes.
func (f *rwFlight) adopts(w *rwWaiter) bool {
	if f.refused == nil || f.topic == nil || w == nil || w.writer || w.sub == nil {
		return false
	}
	return w.sub.topic == f.topic && w.sub.joined <= f.count && w.life == f.life
}

// send notes, before the flight's attempt goes, whether it marks: made by
// a waiter w subscribed to the lock's releases.
func (f *rwFlight) send(w *rwWaiter) {
	if w != nil && !w.writer && w.sub != nil {
		f.topic, f.count = w.m.l.notify.since(w.sub)
		f.life = w.life
	}
}

// land ends the flight: err is its attempt's error, kept for the readers
// waiting on it if the attempt was refused by what publishes when it
// goes.
func (f *rwFlight) land(m *RWMutex, err error) {
	if ve := findVotes(err); ve != nil && ve.Kind == ErrNotAcquired && rwHeld(ve) {
		f.refused = err
	}
	l := m.l
	l.shareMu.Lock()
	delete(l.flights, m.key)
	l.shareMu.Unlock()
	close(f.done)
}

// confirm asks the masters, in one round of two native commands sent at
// once, whether the share's entry (value) is still there and whether a
// waiting writer's intent is: ZRANK of the entry in the lock key, on the
// masters of live only, and EXISTS of the intents key, on every master.
// It returns the masters that found the entry, and whether a quorum
// answered that no intent is there.
func (m *RWMutex) confirm(ctx context.Context, value string, live uint64) (present uint64, noIntent bool) {
	l := m.l
	if live == 0 {
		return 0, false // a Command's Nodes 0 would be every master
	}
	var buf [10]multiplex.Vote
	var votes []multiplex.Vote
	if 2*l.votes <= len(buf) {
		votes = buf[:2*l.votes]
	} else {
		votes = make([]multiplex.Vote, 2*l.votes)
	}
	pv, iv := votes[:l.votes], votes[l.votes:]
	ask := !faults.RWJoinIgnoresIntent.On()
	done := make(chan struct{})
	if ask {
		go func() {
			defer close(done)
			cmd := plainCall("EXISTS", m.intents)
			cmd.SkipIfFailed = true
			t := l.pool.Fanout(ctx, cmd, classifyNoIntent, nil, iv)
			noIntent = t.Reached() && t.Err == nil
		}()
	} else {
		noIntent = true
		close(done)
	}
	cmd := plainCall("ZRANK", m.key, value)
	cmd.SkipIfFailed, cmd.Nodes = true, live
	t := l.pool.Fanout(ctx, cmd, classifyPresent, nil, pv)
	if t.Err == nil {
		for i, v := range t.Votes {
			if v.Outcome == multiplex.OK {
				present |= 1 << i
			}
		}
	}
	<-done
	return present, noIntent
}

// classifyPresent reads ZRANK of an entry: OK when it is there. ZRANK,
// not ZSCORE: the score is not read, and an integer reply costs the
// master less than a double's (BenchmarkMasterCostRW, join-entry).
func classifyPresent(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	_, err := res.AsInt64()
	switch {
	case rueidis.IsRedisNil(err):
		return multiplex.Refused, 0, nil
	case err != nil:
		return multiplex.Failed, 0, err
	}
	return multiplex.OK, 0, nil
}

// classifyNoIntent reads EXISTS on the intents key: OK when none is there.
func classifyNoIntent(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	n, err := res.AsInt64()
	switch {
	case err != nil:
		return multiplex.Failed, 0, err
	case n == 0:
		return multiplex.OK, 0, nil
	}
	return multiplex.Refused, n, nil
}

// dropShare forgets s as its lock's share, if it still is, and stops its
// expiry timer, which would hold it until the validity ends.
func (l *Locker) dropShare(s *rwShare) {
	if s.expiry != nil {
		s.expiry.Stop()
	}
	l.shareMu.Lock()
	if l.shares[s.base.key] == s {
		delete(l.shares, s.base.key)
	}
	l.shareMu.Unlock()
}

// baseEnded ends every joined lease with the base's error: the entry is no
// longer trusted (lost, expired, or released after the last of them).
func (s *rwShare) baseEnded(err error) {
	s.closed.Store(true)
	b := s.base
	b.l.dropShare(s)
	b.mu.Lock()
	hs := slices.Clone(s.sharers)
	b.mu.Unlock()
	for _, h := range hs {
		h.end(err, false)
	}
}

// extendedLocked notes the masters that extended the entry in the round
// that sets the base's validity. The caller holds base.mu.
func (s *rwShare) extendedLocked(votes []multiplex.Vote) {
	s.live = 0
	for i, v := range votes {
		if v.Outcome == multiplex.OK {
			s.live |= 1 << i
		}
	}
}

// followLocked moves every joined lease's validity to the base's t. The
// caller holds base.mu; a joined lease's mu is taken inside it, never the
// other way round.
func (s *rwShare) followLocked(t time.Time) {
	for _, h := range s.sharers {
		h.mu.Lock()
		if h.endErr == nil {
			h.setValidUntil(t)
		}
		h.mu.Unlock()
	}
}

// releaseJoined is Release of a joined lease: it ends the lease; the last
// one not yet released closes the share and releases the entry on the
// masters, with that release's result. Another's Release reports the
// base's end if the entry is no longer trusted.
func (le *Lease) releaseJoined(ctx context.Context) (err error) {
	if le.l.cfg.Observer != nil {
		defer le.observeRelease(ctx, time.Now(), &err)
	}
	s := le.share
	b := s.base
	le.mu.Lock()
	if le.released {
		le.mu.Unlock()
		return fmt.Errorf("engine: release %q: %w: already released", le.resource, ErrNotHeld)
	}
	le.released = true
	ended := le.endErr
	if ended == nil && !time.Now().Before(le.validUntil) {
		ended = ErrLeaseExpired
	}
	le.mu.Unlock()
	le.end(ErrReleased, false)
	b.mu.Lock()
	if i := slices.Index(s.sharers, le); i >= 0 {
		last := len(s.sharers) - 1
		s.sharers[i] = s.sharers[last]
		s.sharers[last] = nil
		s.sharers = s.sharers[:last]
	}
	s.n--
	last := s.n == 0
	if last {
		s.closed.Store(true)
	}
	b.mu.Unlock()
	if last {
		b.l.dropShare(s)
		return b.release(ctx, false)
	}
	switch {
	case ended == nil:
		return nil
	case errors.Is(ended, ErrLeaseExpired):
		return fmt.Errorf("engine: release %q: %w", le.resource, ErrLeaseExpired)
	}
	return errorf("release %q: %v: %v", le.resource, ErrNotHeld, ended)
}

// extendJoined is Extend of a joined lease: it extends the shared entry,
// which moves every joined lease's validity.
func (le *Lease) extendJoined(ctx context.Context, ttl time.Duration) error {
	if err := le.checkTTL(ttl); err != nil {
		return err
	}
	if _, _, err := le.extendable(time.Now()); err != nil {
		return err
	}
	return le.share.base.extend(ctx, ttl, false)
}

// remoteValidityJoined is RemoteValidity of a joined lease: the shared
// entry's.
func (le *Lease) remoteValidityJoined(ctx context.Context) (time.Duration, error) {
	if _, err := le.remoteValidityAsked(time.Now()); err != nil {
		return 0, err
	}
	if _, err := le.share.base.RemoteValidity(ctx); err != nil {
		return 0, err
	}
	if v := le.Validity(); v > 0 {
		return v, nil
	}
	if err := le.Err(); err != nil {
		return 0, errorf("remote validity %q: %v", le.resource, err)
	}
	return 0, fmt.Errorf("engine: remote validity %q: %w", le.resource, ErrLeaseExpired)
}

// trackBase has the tracker watch a joined lease's base (a loss of the
// entry ends the base, and every joined lease with it). Not under le.mu:
// the base's mu is taken first, never inside a joined lease's.
func (le *Lease) trackBase() {
	b := le.share.base
	b.inspect(b.trackLocked)
}
