package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// A Semaphore admits at most Permits holders at once across every process
// that uses its name on the same masters. Each permit is a *Lease, with
// the lock's guarantees: validity, Extend, auto-extension, Done, a
// fencing token with Config.Fencing, the restart quarantine; a holder that
// dies gives its permit back when the TTL runs out.
//
// Why slots, not counts. Counting permits on each master and asking a
// majority is unsafe once there are two permits or more: with five
// masters and two permits, A may hold one on masters {1,2,3} and B on
// {3,4,5}; masters 1, 2, 4 and 5 then each have one free, so C wins one
// on {1,2,4}, and three hold two permits. A Semaphore of P permits is
// instead P locks, its slots: a permit is slot i held on a quorum of
// masters, exactly as a Lease holds a lock, so two holders of slot i
// share a master that gave it to both, which a key cannot do. At most P
// slots, so at most P holders; and each slot keeps the lock's fault
// tolerance, where a counting scheme needs more than P·N/(P+1) votes per
// holder.
//
// One round trip. The client draws where to start (a random slot) and
// sends one script to every master: it takes the first free slot from
// there (SET NX with the permit's value) and answers its index. Masters
// that see the same holders choose the same slot; if a quorum chose one,
// the client holds it, and undoes the slots other masters took, late
// answers included. Otherwise (a split: the masters' holders differ, or
// competitors raced) it undoes everything; TryAcquire then tries again
// at once, at most twice, from the slot most masters chose. While the
// semaphore has room, TryAcquire first probes the drawn slot alone with
// the lock's plain SET NX, which costs the masters a third of the script:
// a probe that misses is undone and followed at once by the script, and
// the handle's next attempts run the script until one finds the slot it
// drew free (see probing). An Observer sees a semaphore's acquisitions
// as TryLock and Lock of its name.
//
// Waiting. Acquire, like Lock, waits for a release instead of polling:
// after an attempt that found every slot taken on a quorum, it
// subscribes to the semaphore's channel and tries again marking every
// holder's value, so that the release of a marked permit publishes there,
// and it sleeps until a publish or its fallback retry (which covers
// expiries, which publish nothing). It sleeps only where one set of
// holders refused it on a quorum (a refusal answers a hash of the slots'
// holders): waiters woken together may split a slot's masters, each
// refused on a quorum by the others' values, and then back off and try
// again, as a lock's waiters do. So the undo of an attempt publishes
// nothing: waking every waiter for a slot that no quorum has free would
// make each of their attempts, undone in turn, wake the others again.
// One channel for the whole
// semaphore rather than one per slot: a waiter wants whichever slot frees
// first, and P subscriptions per waiter would cost up to 1024 channels.
// Every waiting Locker wakes and tries; the masters' FIFO hand-off of the
// lock (turn tokens) is not reproduced, so waiting Lockers race for a
// freed slot, and a split backs off for a random delay. Goroutines of one
// Locker waiting for one semaphore queue at an in-process gate: only the
// first waits on the masters, and the next one tries as soon as it has
// a permit, so that a process wakes one waiter per release, not all.
//
// The permit count is kept on the masters while the semaphore is in use:
// a handle's attempts until a quorum of the masters has answered one's
// check (those made while the first is on its way included), one every
// MaxTTL/2 after, and every attempt that finds all permits taken check
// it, and fail with ErrPermitCount if it differs. Create a handle once
// and share it: its later attempts skip the check while permits are free. The count is one small key per
// semaphore on every master, kept 2 MaxTTL after its last check or a
// permit's last extension (which keeps a read/write lock of the name
// out while the permit is held, see RWMutex): many
// thousands of semaphores in use make every command on the masters
// somewhat dearer (see BenchmarkSemaphoreAcquireReleaseParallel). What the check cannot see (a count
// whose keys expired while a permit of it is still extended) is bounded
// all the same: every count uses the same slots from 0, so holders never
// outnumber the larger count.
type Semaphore struct {
	l       *Locker
	name    string
	permits int
	pstr    string   // permits, formatted
	base    string   // the slots' keys up to their index (see semPrefix)
	keys    []string // slot i's key
	metaTTL string   // ms the permit count lives on a master (2 MaxTTL)
	// checked is when a quorum last answered this handle's check of the
	// permit count (see checkClock).
	checked checkClock
	// scan: the last probe of one slot missed, so attempts run the
	// script, until one finds the slot it starts at free (see probing).
	scan atomic.Bool
}

// probing reports whether the next TryAcquire probes one slot first: a
// plain SET NX PX of the drawn slot, the lock's own acquire, which costs
// the masters a third of the script. Not with fencing (whose script reads
// the counter), nor while the permit count is due a check, nor after a
// probe missed: then the script's attempts go first, one round trip
// each, until one finds the slot it drew free, a sign that the semaphore
// has room again.
func (s *Semaphore) probing() bool {
	due := s.checked.due(s.l.mono(time.Now()), s.l.cfg.MaxTTL/2)
	return !s.l.cfg.Fencing && !s.scan.Load() && !due
}

// checkDue is when the attempt about to go is made (Locker.mono) if it checks
// the permit count on the masters and sets it for 2 MaxTTL, else 0: every
// attempt until a quorum answered a check, then one every MaxTTL/2 (see
// checkClock), so that the count stays while a handle is in use. The
// other attempts leave it alone unless they find every slot taken:
// taking a free slot costs the masters one SET NX.
func (s *Semaphore) checkDue() int64 {
	now := s.l.mono(time.Now())
	if faults.SemCheckStampedOnSend.On() {
		at := s.checked.at.Load()
		if s.checked.due(now, s.l.cfg.MaxTTL/2) && s.checked.at.CompareAndSwap(at, now) {
			return now
		}
		return 0
	}
	if s.checked.due(now, s.l.cfg.MaxTTL/2) {
		return now
	}
	return 0
}

// MaxPermits is the most permits a Semaphore may have: each master's
// answer carries the slot in 10 bits beside a fencing counter, and a full
// semaphore's attempt reads every slot.
const MaxPermits = 1 << permitBits

const (
	permitBits = 10
	permitMask = MaxPermits - 1
)

// semTries bounds TryAcquire's attempts: after a split where a quorum of
// masters found a free slot, it tries again from the slot most of them
// took, which masters that differ only by leftovers agree on.
const semTries = 3

// Semaphore returns the semaphore name of permits permits (1 to
// MaxPermits). It is a handle that holds nothing on the masters: cheap,
// safe for concurrent use; every process must use the same count for the
// same name (see ErrPermitCount). Its keys live in the engine's internal
// namespace, under KeyPrefix, so that no lock's name reaches them.
func (l *Locker) Semaphore(name string, permits int) (*Semaphore, error) {
	switch {
	case name == "":
		return nil, fmt.Errorf("engine: semaphore: %w", ErrEmptyResource)
	case permits < 1 || permits > MaxPermits:
		return nil, fmt.Errorf("engine: semaphore %q: permits must be in 1..%d, got %d", name, MaxPermits, permits)
	}
	base := l.semBase(name)
	s := &Semaphore{l: l, name: name, permits: permits, pstr: itoa(int64(permits)), base: base,
		keys: make([]string, permits), metaTTL: itoa((2 * l.cfg.MaxTTL).Milliseconds())}
	for i := range s.keys {
		s.keys[i] = base + itoa(int64(i))
	}
	return s, nil
}

// Name is the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits is the number of permits.
func (s *Semaphore) Permits() int { return s.permits }

// Permit is the slot a semaphore's permit holds, in [0, Permits): two
// permits held at once never share it, so it can name a worker's share of
// a resource. −1 for a lock's lease (and a nil one).
func (le *Lease) Permit() int {
	if le == nil {
		return -1
	}
	return le.permit - 1
}

// TryAcquire takes a permit if one is free, without waiting: ErrNotAcquired
// when every permit is held (or the masters split over which one is free),
// ErrNoQuorum only when failed masters made a quorum impossible. The
// permit is a Lease: Release gives it back. It may make up to three
// attempts, the later ones only after a split vote.
//
// Options (WithTTL, WithOwner) apply to this permit only.
func (s *Semaphore) TryAcquire(ctx context.Context, opts ...LockOption) (*Lease, error) {
	o, err := s.l.resolve("acquire", s.name, opts)
	if err != nil {
		return nil, err
	}
	var start time.Time
	if s.l.cfg.Observer != nil {
		start = time.Now()
	}
	le, tries, err := s.tryAcquire(ctx, o)
	if err == nil {
		le.arm()
	}
	if s.l.cfg.Observer != nil {
		s.l.observeAcquire(ctx, OpTryLock, s.name, start, le, err, tries)
	}
	return le, err
}

// Acquire takes a permit, waiting as long as ctx allows: for a release's
// notification when every permit is held (or the fallback retry, which
// covers expiries), for a random back-off after a split vote or an
// outage. Lease.Wait tells how the wait went. Goroutines of this Locker
// that wait for the same semaphore queue at an in-process gate.
//
// Options (WithTTL, WithOwner) apply to this permit only.
func (s *Semaphore) Acquire(ctx context.Context, opts ...LockOption) (*Lease, error) {
	o, err := s.l.resolve("acquire", s.name, opts)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var w WaitInfo
	le, err := s.acquire(ctx, start, &w, o)
	if err == nil {
		w.Waited = time.Since(start)
		le.wait = w
		le.arm()
	}
	if s.l.cfg.Observer != nil {
		s.l.observeAcquire(ctx, OpLock, s.name, start, le, err, w.Attempts)
	}
	return le, err
}

// tryAcquire is TryAcquire's attempts, with their number: a probe of
// the drawn slot (see probing), then script attempts from the next one.
func (s *Semaphore) tryAcquire(ctx context.Context, o acquireOpts) (le *Lease, tries int, err error) {
	first := s.draw()
	probed := s.probing()
	if probed {
		tries++
		le, err = s.try(ctx, first, false, true, o)
		if err == nil || ctx.Err() != nil || !errors.Is(err, ErrNotAcquired) {
			return le, tries, err
		}
		s.scan.Store(true)
		first = (first + 1) % s.permits
	}
	for scripts := 1; ; scripts++ {
		tries++
		le, err = s.try(ctx, first, false, false, o)
		if err == nil && !probed && scripts == 1 && le.Permit() == first {
			// The slot it drew was free: probes may hit again.
			s.scan.Store(false)
		}
		if err == nil || scripts == semTries || ctx.Err() != nil {
			return le, tries, err
		}
		next, split := splitSlot(err)
		if !split {
			return nil, tries, err
		}
		first = next
	}
}

// draw is a random slot to start an attempt at, so that competitors
// spread over the free slots.
func (s *Semaphore) draw() int {
	if s.permits == 1 {
		return 0
	}
	return int(s.l.jitter(0, time.Duration(s.permits)))
}

// splitSlot reports whether err is a split vote where a quorum of masters
// found a free slot, and the slot most of them took.
func splitSlot(err error) (int, bool) {
	ve := findVotes(err)
	if ve == nil || ve.Kind != ErrNotAcquired || ve.OK < ve.Quorum {
		return 0, false
	}
	t := multiplex.Tally{Votes: make([]multiplex.Vote, len(ve.Votes))}
	for i, v := range ve.Votes {
		t.Votes[i] = multiplex.Vote{Outcome: multiplex.Outcome(v.Outcome), Value: v.value}
	}
	slot, _ := t.Agreed(permitMask)
	return int(slot), true
}

// semAttempt is one attempt: the permit's Lease once a quorum agreed on a
// slot, and which slot each master took, for the undo of the others.
type semAttempt struct {
	le Lease
	s  *Semaphore
	// probe is the one slot a probe sets, −1 for the script, which
	// answers the slot it took.
	probe int
	// Under le.mu.
	decided bool
	won     int // the permit's slot, −1 for none
	// check is when the attempt was made (unix ns) if it checks the
	// permit count (see checkDue), else 0.
	check int64
	// choice is each master's slot + 1, 0 while unknown or none.
	choice [MaxMasters]int16
}

// try makes one attempt, starting at slot first; waiter: marks the
// holders' values where every slot is taken (see Semaphore); probe: sets
// slot first alone (see probing).
func (s *Semaphore) try(ctx context.Context, first int, waiter, probe bool, o acquireOpts) (*Lease, error) {
	l := s.l
	// Close waits for attempts under way, so that their undo is sent.
	l.remote.Add(1)
	defer l.remote.Add(-1)
	if l.closed.Load() {
		return nil, fmt.Errorf("engine: acquire %q: %w", s.name, ErrClosed)
	}
	a := &semAttempt{s: s, won: -1, probe: -1}
	le := &a.le
	le.l, le.resource, le.value = l, s.name, newValue()
	if o.suffix != "" {
		le.value += o.suffix
	}
	le.ttlMS = o.ttlMS
	le.initVotes(l.votes)
	var cmd multiplex.Command
	classify := classifySem
	if probe && !waiter {
		a.probe = first
		cmd, classify = s.probeCommand(le.value, first, le.ttlArg())
	} else {
		a.check = s.checkDue()
		cmd = s.acquireCommand(le.value, first, waiter, a.check != 0, le.ttlArg())
	}
	le.start = time.Now()
	t := l.pool.Fanout(ctx, cmd, classify, (*semReplies)(a), le.votes)
	return a.decide(ctx, t)
}

// semModes is the acquire script's mode: [refresh][old][waiter][fencing]:
// refresh the permit count, old for masters without SET NX GET, fencing
// being 0 (off), 1 (with the clock floor) or 2 (the counter alone,
// mutation.FencingWithoutClockFloor).
var semModes = func() (m [2][2][2][3]string) {
	for r, rs := range []string{"", "m"} {
		for o, ol := range []string{"", "o"} {
			for w, ws := range []string{"", "w"} {
				for f, fs := range []string{"", "f", "c"} {
					m[r][o][w][f] = rs + ol + ws + fs
				}
			}
		}
	}
	return m
}()

// probeCommand sets slot alone, as a lock's acquire does (SET NX GET PX,
// or SET NX PX on masters older than Redis 7.0).
func (s *Semaphore) probeCommand(value string, slot int, ttl string) (multiplex.Command, multiplex.Classifier) {
	if s.l.setGet {
		cmd := plainCall("SET", s.keys[slot], value, "NX", "GET", "PX", ttl)
		cmd.SkipIfFailed = true
		return cmd, classifyAcquireGet
	}
	cmd := plainCall("SET", s.keys[slot], value, "NX", "PX", ttl)
	cmd.SkipIfFailed = true
	return cmd, classifyAcquireSet
}

// acquireCommand is an attempt's semAcquireScript call; check: it checks
// the permit count (see checkDue).
func (s *Semaphore) acquireCommand(value string, first int, waiter, check bool, ttl string) multiplex.Command {
	r, o, w, f := 0, 0, 0, 0
	if check {
		r = 1
	}
	if !s.l.setGet {
		o = 1
	}
	if waiter {
		w = 1
	}
	if s.l.cfg.Fencing {
		f = 1
		if faults.FencingWithoutClockFloor.On() {
			f = 2
		}
	}
	cmd := scriptCall(semAcquireScript, s.base, value, ttl, s.pstr, itoa(int64(first)), semModes[r][o][w][f], s.metaTTL)
	// A permit needs a quorum on one slot.
	cmd.Agree = permitMask
	if faults.SemaphoreSplitVote.On() {
		cmd.Agree = 0
	}
	// A waiter's attempt goes to every master, so that it marks the
	// holders everywhere.
	cmd.SkipIfFailed = !waiter
	return cmd
}

// decide reads the attempt's votes: the permit is held if a quorum took
// one slot (fenced if fencing is on, with validity left, Close not
// begun). Every other slot a master took is undone, now or when its
// answer arrives.
func (a *semAttempt) decide(ctx context.Context, t multiplex.Tally) (*Lease, error) {
	le, s := &a.le, a.s
	l := s.l
	slot, agreed := t.Agreed(permitMask)
	if a.probe >= 0 {
		slot, agreed = int64(a.probe), t.OK // one key: every yes is for it
	}
	ok := agreed >= t.Quorum
	if faults.SemaphoreSplitVote.On() {
		ok = t.OK >= t.Quorum // a yes on any slot counts: counting per master
	}
	have := permitMismatch(t.Votes)
	ok = ok && t.Err == nil && have == "" && int(slot) < s.permits
	var choice [MaxMasters]int16
	le.mu.Lock()
	for i, v := range t.Votes {
		a.record(i, v)
	}
	a.decided = true
	if ok {
		a.won = int(slot)
		le.key, le.permit = s.keys[a.won], a.won+1
		le.validUntil = le.start.Add(l.validityFor(le.ttlMS))
	} else {
		le.failed = true
	}
	for i := range t.Votes {
		switch c := int(a.choice[i]) - 1; {
		case c < 0:
		case c == a.won:
			le.held |= 1 << i
		default:
			choice[i] = a.choice[i]
		}
	}
	unsure, broken := le.unsure, le.broken
	le.mu.Unlock()
	if a.check != 0 && have == "" && checkAnswered(&t) && !faults.SemCheckStampedOnSend.On() {
		s.checked.answered(a.check)
	}
	a.undoOthers(choice[:len(t.Votes)])
	if unsure != 0 {
		a.sweep(unsure, broken)
	}
	if !ok {
		if have != "" {
			// The next attempt checks again, rather than take a slot the
			// other count's holders may be counting on.
			if !faults.SemCheckStampedOnSend.On() {
				s.checked.refused(l.mono(le.start))
			}
			if have == rwSemMark {
				return nil, s.usedAsRW(t)
			}
			return nil, fmt.Errorf("engine: acquire %q: %w: asked with %d permits, the masters keep %s for it", s.name, ErrPermitCount, s.permits, have)
		}
		return nil, s.acquireError(t, agreed)
	}
	if l.cfg.Fencing {
		if err := le.fence(ctx, a.fenceVotes(t)); err != nil {
			l.undo(le)
			return nil, err
		}
	}
	// The lease is not handed out yet: nothing else writes validUntil.
	if !time.Now().Before(le.validUntil) {
		l.undo(le)
		return nil, s.acquireError(t, agreed)
	}
	if l.closed.Load() {
		l.undo(le)
		return nil, fmt.Errorf("engine: acquire %q: %w during the attempt, which was undone", s.name, ErrClosed)
	}
	return le, nil
}

// record notes master i's answer: the slot it took, or, through the
// lock's record, that it may have run the script unanswered. The caller
// holds le.mu.
func (a *semAttempt) record(i int, v multiplex.Vote) {
	le := &a.le
	if v.Outcome == multiplex.OK {
		a.choice[i] = int16(v.Value&permitMask) + 1
		if a.probe >= 0 {
			a.choice[i] = int16(a.probe) + 1
		}
		le.answered |= 1 << i
		return
	}
	le.record(i, v)
}

// fenceVotes is the round as fence reads it: the votes for the permit's
// slot, each with its master's fencing counter.
func (a *semAttempt) fenceVotes(t multiplex.Tally) multiplex.Tally {
	ft := multiplex.Tally{Votes: make([]multiplex.Vote, len(t.Votes)), Quorum: t.Quorum}
	for i, v := range t.Votes {
		if v.Outcome == multiplex.OK && int(v.Value&permitMask) == a.won {
			ft.Votes[i] = multiplex.Vote{Outcome: multiplex.OK, Value: v.Value >> permitBits}
			ft.OK++
		}
	}
	return ft
}

// semReplies is the attempt seen as the acquire's multiplex.LateHandler.
type semReplies semAttempt

func (r *semReplies) Late(node int, v multiplex.Vote) { (*semAttempt)(r).late(node, v) }

// late handles a master's answer that came after the round was decided:
// a yes for the permit's slot joins the permit (or is undone at once if
// the permit failed or was released), a yes for another slot is undone,
// and an unanswered script is swept. One that comes before decide has
// read the round is left to it.
func (a *semAttempt) late(i int, v multiplex.Vote) {
	le := &a.le
	bit := uint64(1) << i
	le.mu.Lock()
	wasUnsure := le.unsure&bit != 0
	a.record(i, v)
	le.trackAnswerLocked(i)
	if !a.decided {
		le.mu.Unlock()
		return
	}
	c, won := int(a.choice[i])-1, a.won
	ended := le.failed || le.released
	if v.Outcome == multiplex.OK && c == won {
		le.held |= bit
	}
	sweep := !wasUnsure && le.unsure&bit != 0
	broken := le.broken & bit
	le.mu.Unlock()
	switch {
	case v.Outcome == multiplex.OK && c == won:
		if ended {
			le.l.undoNodes(le, bit)
		}
	case v.Outcome == multiplex.OK:
		a.undoSlot(c, bit)
	case sweep:
		if won >= 0 && ended {
			le.l.undoNodes(le, bit)
		}
		a.sweep(bit, broken)
	}
}

// undoOthers deletes our value from the slot each master took, where
// choice (slot + 1, 0 for none) says one, one call per slot.
func (a *semAttempt) undoOthers(choice []int16) {
	for i, c := range choice {
		if c == 0 {
			continue
		}
		nodes := uint64(0)
		for j := i; j < len(choice); j++ {
			if choice[j] == c {
				nodes |= 1 << j
				choice[j] = 0
			}
		}
		a.undoSlot(int(c)-1, nodes)
	}
}

// undoSlot deletes our value from slot on nodes, without waiting.
func (a *semAttempt) undoSlot(slot int, nodes uint64) {
	if slot >= len(a.s.keys) {
		return // no master answers a slot past the count it keeps
	}
	u := &semUndo{a: a, cmd: scriptCall(semUndoForm(), a.s.keys[slot], a.le.value)}
	u.send(nodes)
}

// semUndoForm is the undo of an attempt's slot: semUndoScript, silent.
// (Under mutation.SemUndoWakes, semReleaseScript, which publishes where
// a waiter marked our value.)
func semUndoForm() *multiplex.Script {
	if faults.SemUndoWakes.On() {
		return semReleaseScript
	}
	return semUndoScript
}

// sweep deletes our value from every slot but the permit's on nodes,
// whose answer was lost: the script may have taken any slot. Where the
// acquire's connection broke (broken), the script may still run after the
// sweep, so they are swept once more a little later.
func (a *semAttempt) sweep(nodes, broken uint64) {
	keep := "-1"
	a.le.mu.Lock()
	won := a.won
	a.le.mu.Unlock()
	if a.probe >= 0 {
		// A probe sets its slot only: the permit's release covers it,
		// or its undo.
		if won < 0 {
			u := &semUndo{a: a, cmd: scriptCall(semUndoForm(), a.s.keys[a.probe], a.le.value), again: broken & nodes}
			u.send(nodes)
		}
		return
	}
	if won >= 0 {
		keep = itoa(int64(won))
	}
	u := &semUndo{a: a, cmd: scriptCall(semSweepScript, a.s.base, a.le.value, a.s.pstr, keep), again: broken & nodes}
	u.send(nodes)
}

// semUndo is an undo of an attempt's slots, sent until each master has
// answered it, as Lease's undo is (see undoNodes).
type semUndo struct {
	a     *semAttempt
	cmd   multiplex.Command
	again uint64 // masters owed one more pass; under a.le.mu
}

func (u *semUndo) send(nodes uint64) {
	if nodes == 0 {
		return
	}
	cmd := u.cmd
	cmd.Nodes = nodes
	u.a.s.l.pool.Post(cmd, classifyInt, u)
}

// Late receives each undo's reply; an unanswered one is sent again.
func (u *semUndo) Late(node int, v multiplex.Vote) {
	u.a.s.l.retryUndo(&u.a.le, &u.again, node, v, u.send)
}

// acquireError is a failed attempt, its kind judged by the agreeing votes
// (agreed), not every yes: a split is contention, not an outage.
func (s *Semaphore) acquireError(t multiplex.Tally, agreed int) error {
	k := t
	k.OK = agreed
	e := newVotesError("acquire", s.name, acquireKind(&k), &t, s.l.addrs)
	e.key = s.base
	return e
}

// permitMismatch is the permit count a master keeps for the semaphore
// when it refused the attempt's, or "".
func permitMismatch(votes []multiplex.Vote) string {
	for _, v := range votes {
		if v.Outcome != multiplex.Failed || v.Err == nil {
			continue
		}
		if re, ok := rueidis.IsRedisErr(v.Err); ok {
			msg := strings.TrimPrefix(re.Error(), "ERR ")
			if have, found := strings.CutPrefix(msg, semCountErr); found {
				return have
			}
		}
	}
	return ""
}

// semCountErr starts the acquire script's refusal of another permit count.
const semCountErr = "redlock: permits "

// classifySem reads the acquire script's answer: the slot it took (with
// fencing, the slot and the counter, as counter<<permitBits | slot), or,
// refused, the holders' hash (see semHolders).
func classifySem(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	m, err := res.ToMessage()
	switch {
	case rueidis.IsRedisNil(err):
		return multiplex.Refused, 0, nil
	case err != nil:
		return multiplex.Failed, 0, err
	case m.IsInt64():
		n, _ := m.ToInt64()
		return multiplex.OK, n & permitMask, nil
	case m.IsString():
		hex, _ := m.ToString()
		h, err := semHolders(hex)
		if err != nil {
			return multiplex.Failed, 0, err
		}
		return multiplex.Refused, h, nil
	}
	a, err := m.ToArray()
	if err != nil || len(a) != 2 {
		return multiplex.Failed, 0, fmt.Errorf("semaphore acquire: unexpected reply (%v)", err)
	}
	slot, err1 := a[0].ToInt64()
	c, err2 := a[1].ToInt64()
	if err1 != nil || err2 != nil || c < 0 || c >= 1<<(63-permitBits) {
		return multiplex.Failed, 0, fmt.Errorf("semaphore acquire: unexpected reply (slot %v, counter %d)", err1, c)
	}
	return multiplex.OK, c<<permitBits | slot&permitMask, nil
}

// semHolders is a refusal's vote value from the script's SHA-1 of the
// slots' holders: its first 64 bits, odd, so never 0 (unknown) nor
// turnHash, which heldByOne reads as a turn token.
func semHolders(hex string) (int64, error) {
	if len(hex) != 40 {
		return 0, fmt.Errorf("semaphore acquire: unexpected refusal %q", hex)
	}
	h, err := strconv.ParseUint(hex[:16], 16, 64)
	if err != nil {
		return 0, fmt.Errorf("semaphore acquire: unexpected refusal %q", hex)
	}
	return int64(h | 1), nil
}

// semWaiter is one Acquire's wait on the masters, as waiter is Lock's.
type semWaiter struct {
	sleeper
	s     *Semaphore
	first int
	last  error       // the last attempt that was decided
	o     acquireOpts // the acquisition's options
}

// acquire is Acquire: attempts at once as TryAcquire's, then, with every
// permit held, a wait at the gate and on the masters.
func (s *Semaphore) acquire(ctx context.Context, start time.Time, info *WaitInfo, o acquireOpts) (*Lease, error) {
	l := s.l
	l.remote.Add(1)
	defer l.remote.Add(-1)
	le, tries, err := s.tryAcquire(ctx, o)
	info.Attempts += tries
	if err == nil {
		return le, nil
	}
	w := &semWaiter{sleeper: sleeper{ctx: ctx, info: info}, s: s, first: s.draw(), o: o}
	defer w.stop()
	if stop := w.noRetry(err); stop != nil {
		return nil, stop
	}
	now := false
	if g := l.semGate; g != nil {
		waited, _, err := g.enter(ctx, s.base)
		l.observeGate(s.name, start, waited, false, err)
		switch {
		case errors.Is(err, ErrClosed):
			return nil, fmt.Errorf("engine: acquire %q: %w", s.name, ErrClosed)
		case err != nil:
			return nil, w.gaveUp()
		}
		// The next goroutine in line tries as soon as this one leaves.
		defer g.leave(s.base)
		info.Gated, now = waited, waited
	}
	// A semaphore waited for lately (its subscription lingers) is likely
	// full: the next attempt marks the holders at once.
	if l.notify != nil && l.notify.listening(s.base) {
		w.sub = l.notify.subscribe(ctx, s.base, "")
	}
	return w.wait(now)
}

// wait attempts until one acquires or the wait ends, sleeping between
// attempts; now: the first attempt goes at once.
func (w *semWaiter) wait(now bool) (*Lease, error) {
	for {
		if !now {
			d, cause, at := w.nextWait()
			if !at {
				if err := w.sleep(d, cause); err != nil {
					return nil, err
				}
			}
		}
		now = false
		w.info.Attempts++
		le, err := w.s.try(w.ctx, w.first, w.sub != nil, false, w.o)
		if err == nil {
			return le, nil
		}
		if stop := w.noRetry(err); stop != nil {
			return nil, stop
		}
	}
}

// noRetry is waiter.noRetry's rule: nil to go on after err, else the
// error that ends the wait.
func (w *semWaiter) noRetry(err error) error {
	if w.ctx.Err() != nil {
		if w.last == nil || errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNoQuorum) {
			w.last = err
		}
		return w.gaveUp()
	}
	w.last = err
	if !(errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNoQuorum)) {
		return err
	}
	return nil
}

// nextWait chooses the wait after the last attempt, where the next one
// starts, and what the wait's end counts as; at: go at once.
func (w *semWaiter) nextWait() (d time.Duration, cause WakeCause, at bool) {
	s := w.s
	l := s.l
	cfg := &l.cfg
	w.first = s.draw()
	ve := findVotes(w.last)
	// Every permit is held only where one set of holders refused on a
	// quorum: waiters woken together may split a slot's masters so that
	// each is refused on a quorum by the others' values, the permit free
	// once they undo, which publishes nothing (a publish would wake
	// waiters that collide beside a holder on a bare quorum, over and
	// over): a split backs off and tries again, as a lock's waiter does.
	full := ve != nil && ve.Kind == ErrNotAcquired && ve.heldByOne()
	if faults.SemSplitWaitsFallback.On() {
		full = ve != nil && ve.Kind == ErrNotAcquired && ve.Refused >= ve.Quorum
	}
	switch {
	case full && l.notify != nil && w.sub == nil:
		// Subscribe, then try again at once, marking the holders: a
		// release between the refusal and the subscription published
		// nothing.
		w.sub = l.notify.subscribe(w.ctx, s.base, "")
		return 0, WakeNone, true
	case full:
		return l.jitter(cfg.Wait.FallbackMin, min(cfg.Wait.FallbackMax, cfg.TTL)), WakeFallback, false
	}
	if slot, split := splitSlot(w.last); split {
		w.first = slot
	}
	backoff := l.jitter(cfg.Wait.RetryDelayMin, cfg.Wait.RetryDelayMax)
	if d, ok := l.quarantineWait(ve, backoff); ok {
		return d, WakeBackoff, false
	}
	return backoff, WakeBackoff, false
}

// sleep waits d, or until a release of the semaphore publishes (then
// until a quorum of masters did, briefly, see awaitTurns).
func (w *semWaiter) sleep(d time.Duration, cause WakeCause) error {
	return w.sleeper.sleep(w.s.l, "acquire", w.s.name, d, cause, w.gaveUp)
}

// gaveUp is the error of an Acquire whose context ended, matching both
// the context's error and the last attempt's.
func (w *semWaiter) gaveUp() error {
	if w.last == nil {
		return errorf("acquire %q: gave up after %d attempts: %v", w.s.name, w.info.Attempts, w.ctx.Err())
	}
	return errorf("acquire %q: gave up after %d attempts (%v); the last: %v", w.s.name, w.info.Attempts, w.ctx.Err(), w.last)
}

// semAcquireScript takes the first free slot from ARGV first, with the
// permit's value for ttl ms, and answers its index; when every slot is
// taken, it answers who holds them: the SHA-1 (hex) of the slots' values
// in slot order, each without its wait mark (which some masters carry
// and others not), so that a waiter tells the same holders on a quorum
// from a split (see semWaiter.nextWait), in 40 bytes for any count.
// KEYS[1] is the slots' keys up to the index. Mode: "w" a
// waiter, which marks every holder's value where all are taken, so that
// its release publishes; "f" fencing, which also answers the slot's
// counter (max(counter, the master's clock in µs), as acquireFenceScript
// does; "c": the counter alone); "o" a master older than Redis 7.0,
// without SET NX GET; "m" (see Semaphore.refresh) checks the permit count
// kept beside the slots, refusing another, and sets it for keep ms. An
// attempt that finds every slot taken checks it too. A free slot is
// probed and taken in one SET NX GET; a write that a refusal made is
// undone before it answers, so that an error reply took nothing.
var semAcquireScript = multiplex.NewScript(`local value, ttl, permits, first, mode, keep = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local waiter, fence, floor, old, refresh = false, false, false, false, false
if mode ~= "" then
  waiter = string.find(mode, "w", 1, true)
  floor = string.find(mode, "f", 1, true)
  fence = floor or string.find(mode, "c", 1, true)
  old = string.find(mode, "o", 1, true)
  refresh = string.find(mode, "m", 1, true)
end
local function count()
  local meta = KEYS[1] .. "permits"
  local have
  if old then
    have = redis.pcall("GET", meta)
  else
    -- A missing count is set in the same call that reads it; a count
    -- there (another type: an error) is left alone.
    have = redis.pcall("SET", meta, permits, "NX", "GET", "PX", keep)
  end
  if type(have) == "table" then
    return redis.error_reply("WRONGTYPE redlock: the semaphore's permit count holds the wrong type")
  end
  if have and have ~= permits then
    return redis.error_reply("ERR ` + semCountErr + `" .. have)
  end
  if have and refresh then
    redis.call("PEXPIRE", meta, keep)
  elseif old and (refresh or not have) then
    redis.call("SET", meta, permits, "PX", keep)
  end
end
if refresh then
  local err = count()
  if err then
    return err
  end
end
local p, o = tonumber(permits), tonumber(first)
local slot, key
local values = {}
for k = 0, p - 1 do
  local i = (o + k) % p
  local kk = KEYS[1] .. i
  local v
  if old then
    v = redis.pcall("GET", kk)
    if v == false then
      redis.call("SET", kk, value, "PX", ttl)
    end
  else
    v = redis.pcall("SET", kk, value, "NX", "GET", "PX", ttl)
  end
  if type(v) == "table" then
    return redis.error_reply("WRONGTYPE redlock: a semaphore slot holds the wrong type")
  end
  if not v then
    slot, key = i, kk
    break
  end
  values[i + 1] = v
end
if not slot then
  if not refresh then
    local err = count()
    if err then
      return err
    end
  end
  for k = 1, p do
    local v = values[k]
    if string.sub(v, -1) == "` + waitMark + `" then
      values[k] = string.sub(v, 1, -2)
    elseif waiter then
      redis.call("APPEND", KEYS[1] .. (k - 1), "` + waitMark + `")
    end
  end
  return redis.sha1hex(table.concat(values, " "))
end
if not fence then
  return slot
end
local c = redis.pcall("GET", "` + fencePrefixLua + `" .. key)
local bad
if type(c) == "table" then
  bad = "WRONGTYPE redlock: the fencing counter holds the wrong type"
else
  c = tonumber(c or "0")
  if not c then
    bad = "ERR redlock: the fencing counter is not an integer"
  end
end
if bad then
  redis.call("DEL", key)
  return redis.error_reply(bad)
end
if floor then
  local now = redis.call("TIME")
  local t = tonumber(now[1]) * 1000000 + tonumber(now[2])
  if t > c then
    c = t
  end
end
return {slot, c}`).Coalesce()

// semPublishLua publishes on the semaphore's channel, KEYS[1] being a
// slot's key (any other key publishes on its own name's).
const semPublishLua = `redis.call("PUBLISH", "` + releasedPrefix + `" .. (string.match(KEYS[1], "^(.*:)%d+$") or KEYS[1]), "")
`

// semReleaseScript deletes a permit's slot where it holds our value; if a
// waiter marked it, it also publishes on the semaphore's channel, which
// wakes its waiters. It is the permit's Release, and the undo of a slot
// that a permit held (its late yes after the Release, a failed fence).
var semReleaseScript = multiplex.NewScript(`local value = ARGV[1]
local v = redis.call("GET", KEYS[1])
if v == value then
  return redis.call("DEL", KEYS[1])
end
if v == value .. "` + waitMark + `" then
  redis.call("DEL", KEYS[1])
  ` + semPublishLua + `  return 1
end
return 0`).Coalesce()

// semUndoScript deletes a slot where it holds our value, marked or not,
// and publishes nothing: it undoes an attempt that did not win the slot,
// whose maker is awake and tries again, while a publish would wake every
// waiter for a slot that no quorum has free (each of whose attempts, undone
// in turn, would wake the others again).
var semUndoScript = multiplex.NewScript(`local value = ARGV[1]
local v = redis.call("GET", KEYS[1])
if v == value or v == value .. "` + waitMark + `" then
  return redis.call("DEL", KEYS[1])
end
return 0`).Coalesce()

// semSweepScript deletes our value, marked or not, from every slot but
// keep (−1: none), KEYS[1] being the slots' common part: the undo on a
// master whose answer was lost, which may have taken any slot. Like
// semUndoScript, it publishes nothing.
var semSweepScript = multiplex.NewScript(`local value, permits, keep = ARGV[1], ARGV[2], ARGV[3]
local n = 0
for i = 0, tonumber(permits) - 1 do
  if tostring(i) ~= keep then
    local k = KEYS[1] .. i
    local v = redis.pcall("GET", k)
    if v == value or v == value .. "` + waitMark + `" then
      redis.call("DEL", k)
      n = n + 1
    end
  end
end
return n`).Coalesce()

// quarantineWait is how long a permit's or a read/write lock's waiter
// backs off after an attempt that quarantined masters failed: until the
// quarantine ends, or at most a fallback where other masters failed too
// (one that is down may come back first), plus backoff.
func (l *Locker) quarantineWait(ve *VotesError, backoff time.Duration) (time.Duration, bool) {
	if ve == nil {
		return 0, false
	}
	until := ve.QuarantinedUntil()
	if until.IsZero() {
		return 0, false
	}
	d := max(time.Until(until), 0)
	if !ve.quarantineAlone() {
		cfg := &l.cfg
		d = min(d, l.jitter(cfg.Wait.FallbackMin, min(cfg.Wait.FallbackMax, cfg.TTL)))
	}
	return d + backoff, true
}
