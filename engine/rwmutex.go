package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// An RWMutex is a read/write lock over the masters: any number of readers
// at once, or one writer. Each holder is a *Lease, with the lock's
// guarantees: validity, Extend, auto-extension, Done, the restart
// quarantine; a holder that dies lets go when its TTL runs out. A
// writer's lease carries a fencing token with Config.Fencing.
//
// On each master the lock is one sorted set at the lock key (KeyPrefix +
// name): each reader's value scored by when it expires, each writer's by
// minus that, in microseconds of the master's clock, as PX expires a key
// (see rwAcquireScript). A master admits a writer only if it holds no
// live reader or writer, and a reader only if it holds no live writer
// and no writer waits (below). A holder needs a quorum of admissions,
// as a lock does, so a writer and any other holder would share a master
// that admitted both, which its script does not do.
//
// Writers go first. A writer that waits (Lock) registers its intent on
// every master that refuses it, from its second attempt on; while a master holds a live
// intent it admits no new reader, so a stream of readers cannot keep a
// waiting writer out: once its intent is on a quorum, no reader that
// begins later is granted until the writer has held the lock (or given
// up), and the writer waits only for the readers admitted before. An
// intent lives a TTL and the writer's longest fallback sleep (at most
// another TTL) from its last attempt: the writer renews it before it can
// lapse, even on a master whose clock runs fast, and a writer that dies
// blocks new readers for that long at most.
// Waiting writers can keep readers out for as long as writers keep
// coming: readers are not guaranteed a turn under a steady stream of
// writers.
//
// Waiting. RLock and Lock wait for a release instead of polling: after an
// attempt refused on a quorum they subscribe and try again, a reader
// leaving a mark on the masters, a writer its intent; a reader of a lock
// this Locker's readers waited for lately (their subscription lingers)
// subscribes before its first attempt, which marks. The release (or
// expiry clean-up of a watched lease) that leaves a master with no live
// holder publishes there: on the writers' channel while a writer's
// intent lives, which wakes the waiting writers of every Locker and
// leaves the readers, whom the intent would refuse, asleep; else, if a
// reader marked the lock, on the readers' channel, which wakes every
// waiting reader. A writer's giving up wakes the readers too; a fallback
// retry covers expiries.
// Goroutines of one Locker that Lock the same RWMutex queue at an
// in-process gate: one writer waits on the masters per process. Readers
// do not queue: they can all hold at once, and share one entry on the
// masters: a reader that finds this Locker's entry for the lock live
// joins it after asking the masters whether the entry is still there and
// whether a writer waits (a reader due to mark the name's kind, below,
// makes an attempt instead), and the last of them to release takes it
// off (see rwShare). A joined reader's lease
// is the entry's: its Value, its validity (Extend extends it for every
// reader on it, auto-extension counts MaxExtensions from the entry's
// acquisition), its loss. Config.Wait.DisableGate turns sharing off.
//
// Fencing. A writer's token is larger than the token of every earlier
// writer (and holder of a plain lock of the same name): the acquire
// reads the name's fencing counter, and the fence round raises it on a
// quorum where the writer still holds, as for a lock (see fence.go).
// Readers write nothing that a fence protects: their Token is 0, and
// their acquire reads no counter and has no fence round.
//
// One name, one kind. A plain lock (Lock, TryLock) of the same name meets
// the sorted set where it expects a string, and is refused with
// ErrWrongKind (which also matches ErrWrongType), as is an RWMutex that
// finds a plain lock's key. A Semaphore of the same name is refused too,
// through its permit count: a handle's attempts until a quorum of the
// masters has answered one (those made while the first is on its way
// included), and one every MaxTTL/2 after, mark the count's key as a
// read/write lock's for 2 MaxTTL, or find it a semaphore's and are
// refused; each extension of a reader or writer marks it again where it
// extended, so that a lease held longer keeps the semaphore out, as a
// permit's extension keeps the semaphore's count.
//
// An Observer sees an RWMutex's acquisitions as TryLock and Lock of its
// name.
type RWMutex struct {
	l    *Locker
	name string
	key  string // the lock key (Locker.key): its holders on each master
	// intents is the waiting writers' sorted set; also the writers' key
	// at the in-process gate.
	intents string
	semKey  string // the permit count a Semaphore of the same name keeps
	metaTTL string // ms the mark at semKey lives (2 MaxTTL)
	// checked is when a quorum last answered this handle's mark of
	// semKey (see checkClock).
	checked checkClock
}

// rwSemMark is what an RWMutex keeps at a Semaphore's permit count key: no
// permit count, so that the semaphore's check refuses it.
const rwSemMark = "rw"

// rwMember stands in the sorted set, scored 0, for as long as the key
// lives: it tells the lock's key from another program's sorted set. Lease
// values are base64url and never contain '#'.
const rwMember = "#rwlock"

// RWMutex returns the read/write lock name. It is a handle that holds
// nothing on the masters: cheap, safe for concurrent use. Create it once
// and share it: its first attempt checks that no Semaphore uses the name.
func (l *Locker) RWMutex(name string) (*RWMutex, error) {
	if err := l.checkResource("rwmutex", name); err != nil {
		return nil, err
	}
	key := l.key(name)
	return &RWMutex{l: l, name: name, key: key, intents: rwPrefix + key,
		semKey:  l.semBase(name) + "permits",
		metaTTL: itoa((2 * l.cfg.MaxTTL).Milliseconds())}, nil
}

// Name is the lock's name.
func (m *RWMutex) Name() string { return m.name }

// TryRLock makes one attempt to hold the lock for reading: refused
// (ErrNotAcquired) while a writer holds it or waits for it.
func (m *RWMutex) TryRLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.tryLock(ctx, false, opts)
}

// TryLock makes one attempt to hold the lock for writing: refused
// (ErrNotAcquired) while a reader or a writer holds it. It registers no
// intent: only Lock waits.
func (m *RWMutex) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.tryLock(ctx, true, opts)
}

// RLock holds the lock for reading, waiting as long as ctx allows while a
// writer holds it or waits for it. Lease.Wait tells how the wait went.
func (m *RWMutex) RLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.lock(ctx, false, opts)
}

// Lock holds the lock for writing, waiting as long as ctx allows; from
// its second attempt on, no new reader is admitted until it has held the
// lock or given up (see RWMutex). Lease.Wait tells how the wait went.
//
// Each of the four takes options (WithTTL, WithOwner) for this
// acquisition only.
func (m *RWMutex) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.lock(ctx, true, opts)
}

func (m *RWMutex) tryLock(ctx context.Context, writer bool, opts []LockOption) (*Lease, error) {
	o, err := m.l.resolve(rwOp(writer), m.name, opts)
	if err != nil {
		return nil, err
	}
	var start time.Time
	if m.l.cfg.Observer != nil {
		start = time.Now()
	}
	le, err := m.try(ctx, writer, nil, o)
	if err == nil {
		le.arm()
	}
	if m.l.cfg.Observer != nil {
		m.l.observeAcquire(ctx, OpTryLock, m.name, start, le, err, 1)
	}
	return le, err
}

func (m *RWMutex) lock(ctx context.Context, writer bool, opts []LockOption) (*Lease, error) {
	o, err := m.l.resolve(rwOp(writer), m.name, opts)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var w WaitInfo
	le, err := m.wait(ctx, writer, start, &w, o)
	if err == nil {
		w.Waited = time.Since(start)
		le.wait = w
		le.arm()
	}
	if m.l.cfg.Observer != nil {
		m.l.observeAcquire(ctx, OpLock, m.name, start, le, err, w.Attempts)
	}
	return le, err
}

// rwOp names a read/write lock's acquire in errors.
func rwOp(writer bool) string {
	if writer {
		return "write-lock"
	}
	return "read-lock"
}

// try makes one attempt; w is a waiter that has joined (its attempts
// mark the masters, and a writer's register its intent), or nil.
func (m *RWMutex) try(ctx context.Context, writer bool, w *rwWaiter, o acquireOpts) (_ *Lease, err error) {
	l := m.l
	// Close waits for attempts under way, so that their undo is sent.
	l.remote.Add(1)
	defer l.remote.Add(-1)
	if l.closed.Load() {
		return nil, fmt.Errorf("engine: %s %q: %w", rwOp(writer), m.name, ErrClosed)
	}
	var f *rwFlight
	if !writer && l.shares != nil {
		if h := m.join(ctx, o); h != nil {
			return h, nil
		}
		h, own, refused := m.flight(ctx, o, w)
		switch {
		case h != nil:
			return h, nil
		case refused != nil:
			return nil, refused
		case own != nil:
			f = own
			defer func() { f.land(m, err) }()
		case l.closed.Load():
			// Close began while this attempt waited for another's.
			return nil, fmt.Errorf("engine: %s %q: %w", rwOp(writer), m.name, ErrClosed)
		}
	}
	le := &Lease{l: l, resource: m.name, key: m.key, value: newValue(), rw: true, ttlMS: o.ttlMS}
	if o.suffix != "" {
		le.value += o.suffix
	}
	le.initVotes(l.votes)
	check := m.checkDue()
	cmd := m.acquireCommand(le.value, writer, w, check != 0, le.ttlArg())
	if f != nil {
		f.send(w)
	}
	le.start = time.Now()
	t := l.pool.Fanout(ctx, cmd, classifyRW, (*acquireReplies)(le), le.votes)
	if check != 0 {
		switch {
		case semaphoreNamed(t.Votes):
			m.checked.refused(check) // the next attempt checks again
		case checkAnswered(&t):
			m.checked.answered(check)
		}
	}
	if err := m.decide(ctx, le, t, writer); err != nil {
		l.undo(le)
		return nil, err
	}
	if !writer && l.shares != nil {
		return m.shareBase(le, o), nil
	}
	return le, nil
}

// rwModes is the acquire script's mode, by rwMode's bits and fencing (0
// off, 1 with the clock floor, 2 the counter alone).
var rwModes = func() (m [16][3]string) {
	for bits := range 16 {
		for f, fs := range []string{"", "f", "c"} {
			s := "r"
			if bits&rwWriter != 0 {
				s = "w"
			}
			for _, b := range []struct {
				bit int
				c   string
			}{{rwIntent, "q"}, {rwMark, "n"}, {rwRefresh, "m"}} {
				if bits&b.bit != 0 {
					s += b.c
				}
			}
			m[bits][f] = s + fs
		}
	}
	return m
}()

// The bits of an attempt's mode.
const (
	rwWriter  = 1 << iota
	rwIntent  // a waiting writer's: register its intent where refused
	rwMark    // a subscribed waiter's: mark where refused
	rwRefresh // mark the name as a read/write lock's (see refresh)
)

// acquireCommand is the attempt's rwAcquireScript call; check: it marks
// the name as a read/write lock's (see checkDue).
func (m *RWMutex) acquireCommand(value string, writer bool, w *rwWaiter, check bool, ttl string) multiplex.Command {
	bits, fence, id := 0, 0, ""
	if writer {
		bits |= rwWriter
		if m.l.cfg.Fencing {
			fence = 1
			if faults.FencingWithoutClockFloor.On() {
				fence = 2
			}
		}
	}
	if w != nil {
		if w.id != "" {
			bits |= rwIntent
			id = w.id
		}
		// A reader marks the lock; a writer's intent is its mark (see
		// rwReleaseBody).
		if w.sub != nil && !writer {
			bits |= rwMark
			id = w.life
		}
	}
	if check {
		bits |= rwRefresh
	}
	cmd := scriptCall(rwAcquire(), m.key, value, ttl, rwModes[bits][fence], id, m.semKey, m.metaTTL)
	// A waiter's attempt reaches every master, so that its mark and
	// intent are on all of them; but a reader's first attempt, made
	// subscribed ahead (see wait), is mostly admitted at once, and skips
	// a master left behind as any first attempt does, lest such a master
	// be sent every read.
	cmd.SkipIfFailed = w == nil || w.ahead
	return cmd
}

// checkDue is when the attempt about to go is made (Locker.mono) if it marks
// the name as a read/write lock's at the permit count key a Semaphore of
// the name would use, refusing if one does, else 0: every attempt until
// a quorum answered one, then one every MaxTTL/2 (see checkClock), so
// that the mark lives while the handle is used.
func (m *RWMutex) checkDue() int64 {
	if now := m.l.mono(time.Now()); m.checked.due(now, m.l.cfg.MaxTTL/2) {
		return now
	}
	return 0
}

// markDue reports whether an attempt made now would carry the mark (see
// checkDue), without taking the moment.
func (m *RWMutex) markDue() bool {
	return m.checked.due(m.l.mono(time.Now()), m.l.cfg.MaxTTL/2)
}

// semaphoreNamed reports whether a master refused the attempt because a
// Semaphore uses the name there (see rwAcquireScript).
func semaphoreNamed(votes []multiplex.Vote) bool {
	for _, v := range votes {
		if v.Outcome != multiplex.Failed || v.Err == nil {
			continue
		}
		if re, ok := rueidis.IsRedisErr(v.Err); ok && re.Error() == rwInUse+"semaphore" {
			return true
		}
	}
	return false
}

// decide reads the attempt's votes, as Lease.decide does for a lock: held
// on a quorum, fenced if a writer and fencing is on, with validity left,
// Close not begun. On an error the caller undoes the attempt.
func (m *RWMutex) decide(ctx context.Context, le *Lease, t multiplex.Tally, writer bool) error {
	l := m.l
	ok := t.Reached() && t.Err == nil
	le.mu.Lock()
	for i, v := range t.Votes {
		le.record(i, v)
	}
	if ok {
		le.validUntil = le.start.Add(l.validityFor(le.ttlMS))
	}
	le.mu.Unlock()
	if !ok {
		return m.acquireError(t, writer)
	}
	if writer && l.cfg.Fencing {
		if err := le.fence(ctx, t); err != nil {
			return err
		}
	}
	// The lease is not handed out yet: nothing else writes validUntil.
	if !time.Now().Before(le.validUntil) {
		return m.acquireError(t, writer)
	}
	if l.closed.Load() {
		return fmt.Errorf("engine: %s %q: %w during the attempt, which was undone", rwOp(writer), m.name, ErrClosed)
	}
	return nil
}

// Refusals: what a master found in the way (see classifyRW). A writer
// that holds the lock is named by its value's hash (holderHash, odd);
// these are even, and not turnHash.
const (
	rwByReaders = 4 // readers hold it (a writer's attempt)
	rwByIntent  = 6 // a writer waits for it (a reader's attempt)
)

// classifyRW reads rwAcquireScript's answer: an integer when admitted
// (the fencing counter for a fenced writer, else 1), the word for what
// was in the way when refused.
func classifyRW(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	msg, err := res.ToMessage()
	if err != nil {
		return multiplex.Failed, 0, err
	}
	if msg.IsInt64() {
		n, _ := msg.ToInt64()
		return multiplex.OK, n, nil
	}
	s, err := msg.ToString()
	if err != nil {
		return multiplex.Failed, 0, err
	}
	if w, ok := strings.CutPrefix(s, "writer:"); ok {
		return multiplex.Refused, holderHash(w), nil
	}
	switch s {
	case "readers":
		return multiplex.Refused, rwByReaders, nil
	case "intent":
		return multiplex.Refused, rwByIntent, nil
	}
	return multiplex.Failed, 0, fmt.Errorf("redlock: unexpected answer %q", s)
}

// acquireError is a failed attempt: a *VotesError, with what held the
// lock named when refused, and the other use named when the masters found
// the name used as another kind of lock.
func (m *RWMutex) acquireError(t multiplex.Tally, writer bool) error {
	e := newVotesError("acquire", m.name, acquireKind(&t), &t, m.l.addrs)
	e.key = m.key
	switch e.Kind {
	case ErrWrongType:
		if use, n := otherUse(e); use != "" {
			return kindError(rwOp(writer), m.name, use, useRW, n, len(e.Votes), e)
		}
	case ErrNotAcquired:
		if why := refusedBy(e); why != "" {
			return errorf("%s %q: %s: %v", rwOp(writer), m.name, why, e)
		}
	}
	return e
}

// refusedBy says what the refusing masters found in the way, most of them.
func refusedBy(e *VotesError) string {
	var n [4]int
	best := 0
	for _, v := range e.Votes {
		if v.Outcome != OutcomeRefused || v.value == 0 {
			continue
		}
		by := 1 // a writer, by its hash
		switch v.value {
		case rwByReaders:
			by = 2
		case rwByIntent:
			by = 3
		}
		n[by]++
		if n[by] > n[best] {
			best = by
		}
	}
	return [...]string{"", "a writer holds it", "readers hold it", "a writer waits for it, and writers go first"}[best]
}

// The uses of a name, as errors name them.
const (
	usePlain = "a plain lock (Lock, TryLock)"
	useRW    = "a read/write lock (RWMutex)"
	useSem   = "a semaphore (Semaphore)"
)

// otherUse is the use the masters' error replies name (see
// rwAcquireScript), with how many of them named it.
func otherUse(e *VotesError) (string, int) {
	plain, sem := 0, 0
	for _, v := range e.Votes {
		if v.Outcome != OutcomeFailed || v.Err == nil {
			continue
		}
		if re, ok := rueidis.IsRedisErr(v.Err); ok {
			switch re.Error() {
			case rwInUse + "plain lock":
				plain++
			case rwInUse + "semaphore":
				sem++
			}
		}
	}
	switch {
	case plain > 0 && plain >= sem:
		return usePlain, plain
	case sem > 0:
		return useSem, sem
	}
	return "", 0
}

// rwInUse starts the acquire script's refusal of a name used otherwise.
const rwInUse = "WRONGTYPE redlock: in use as a "

// kindError is op's error on name, which n of total masters found in use
// as other, when asked as asked: ErrWrongKind and ErrWrongType, and e's
// votes when known.
func kindError(op, name, other, asked string, n, total int, e *VotesError) error {
	msg := fmt.Sprintf("engine: %s %q: %s: %q is in use as %s, and %s cannot share its name (%d of %d masters said so)",
		op, name, ErrWrongKind, name, other, asked, n, total)
	errs := []error{ErrWrongKind, ErrWrongType}
	if e != nil {
		errs = append(errs, e)
	}
	return &engineError{msg: msg, errs: errs}
}

// nameOtherKind is a plain lock's acquire error: when keys of the wrong
// type on a quorum refused it, it asks the masters whether they are a
// read/write lock's, and then says so. One more round, on this path only.
func (l *Locker) nameOtherKind(ctx context.Context, resource string, err error) error {
	e, ok := err.(*VotesError)
	if !ok || e.Kind != ErrWrongType {
		return err
	}
	votes := make([]multiplex.Vote, l.votes)
	t := l.pool.Fanout(ctx, scriptCall(rwKindScript, l.key(resource)), classifyInt, nil, votes)
	if t.OK == 0 {
		return err
	}
	return kindError("acquire", resource, useRW, usePlain, t.OK, len(votes), e)
}

// usedAsRW is the error of a semaphore's attempt that found its permit
// count marked by a read/write lock of its name.
func (s *Semaphore) usedAsRW(t multiplex.Tally) error {
	n := 0
	for _, v := range t.Votes {
		if v.Outcome == multiplex.Failed && v.Err != nil && permitMismatch([]multiplex.Vote{v}) == rwSemMark {
			n++
		}
	}
	return kindError("acquire", s.name, useRW, useSem, n, len(t.Votes), nil)
}

// rwWaiter is one RLock's or Lock's wait on the masters, as semWaiter is
// Acquire's.
type rwWaiter struct {
	sleeper
	m      *RWMutex
	writer bool
	// joined: the waiter's attempts mark the masters (with a
	// subscription) and a writer's register its intent under id.
	joined bool
	id     string
	last   error // the last attempt that was decided
	// fallback is the longest sleep between attempts while the lock is
	// held: FallbackMax, capped at the Locker's TTL and the attempts'. A
	// writer's intent, and a reader's mark, live the attempts' TTL plus
	// fallback from each attempt, so that the next one renews it even
	// where a master's clock runs fast and the attempt is a round trip
	// late. life is that in ms and a "/": a reader's id, and the front
	// of a writer's, "life/start/locker:seq", start in µs (see
	// rwAcquireBody, and waiterID, which reads start for Inspect).
	fallback time.Duration
	life     string
	start    time.Time // when the wait began, which a writer's id carries
	// ahead: the next attempt is a reader's first, made subscribed ahead
	// of it (see wait).
	ahead bool
}

// wait is RLock and Lock: an attempt at once, then, if the lock is held
// or a writer waits, a wait on the masters (a writer's behind the other
// writers of this Locker at the in-process gate).
func (m *RWMutex) wait(ctx context.Context, writer bool, start time.Time, info *WaitInfo, o acquireOpts) (le *Lease, err error) {
	l := m.l
	l.remote.Add(1)
	defer l.remote.Add(-1)
	var w *rwWaiter
	defer func() {
		if w != nil {
			w.leave(err)
		}
	}()
	// A reader of a lock this Locker's readers waited for lately (their
	// subscription lingers) expects a writer in the way: it subscribes
	// first, so that its first attempt, if refused, is the marked one it
	// then sleeps on, not a refusal that only leads to it.
	early := !writer && l.notify != nil && l.notify.listening(m.key)
	if early {
		w = m.newWaiter(ctx, writer, start, info, o)
		w.join()
		w.ahead = true
	}
	info.Attempts++
	le, err = m.try(ctx, writer, w, o)
	if w != nil {
		w.ahead = false
	}
	if err == nil {
		if w != nil {
			w.sub.pass() // admitted at once: it never waited
		}
		return le, nil
	}
	if w == nil {
		w = m.newWaiter(ctx, writer, start, info, o)
	}
	if stop := w.noRetry(err); stop != nil {
		return nil, stop
	}
	now := false
	if g := l.semGate; writer && g != nil {
		waited, _, gerr := g.enter(ctx, m.intents)
		l.observeGate(m.name, start, waited, false, gerr)
		switch {
		case errors.Is(gerr, ErrClosed):
			return nil, fmt.Errorf("engine: %s %q: %w", rwOp(writer), m.name, ErrClosed)
		case gerr != nil:
			return nil, w.gaveUp()
		}
		// The next writer in line tries as soon as this one leaves.
		defer g.leave(m.intents)
		info.Gated, now = waited, waited
	}
	// A lock waited for lately (its subscription lingers) is likely
	// held: the next attempt goes at once, and marks (and registers a
	// writer's intent), as after a first refusal.
	if !early && l.notify != nil && l.notify.listening(w.channel()) {
		w.join()
		now = true
	}
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
		info.Attempts++
		le, err = m.try(ctx, writer, w, o)
		if err == nil {
			w.acquired()
			return le, nil
		}
		if stop := w.noRetry(err); stop != nil {
			return nil, stop
		}
	}
}

// newWaiter is a wait of RLock's or Lock's on the masters, not yet
// joined.
func (m *RWMutex) newWaiter(ctx context.Context, writer bool, start time.Time, info *WaitInfo, o acquireOpts) *rwWaiter {
	l := m.l
	w := &rwWaiter{sleeper: sleeper{ctx: ctx, info: info}, m: m, writer: writer, start: start}
	switch {
	case o.ttlMS != 0:
		w.fallback, w.life = rwWaitLife(&l.cfg, time.Duration(o.ttlMS)*time.Millisecond)
	case l.rwLife != "":
		w.fallback, w.life = l.rwFallback, l.rwLife
	default:
		w.fallback, w.life = rwWaitLife(&l.cfg, l.cfg.TTL)
	}
	return w
}

// rwWaitLife is a waiter's longest fallback sleep while the lock is held,
// for attempts of TTL ttl, and how long its mark or intent lives, as
// rwAcquireScript takes it (see rwWaiter).
func rwWaitLife(cfg *Config, ttl time.Duration) (time.Duration, string) {
	fallback := min(cfg.Wait.FallbackMax, cfg.TTL, ttl)
	return fallback, strconv.FormatInt((ttl+fallback).Milliseconds(), 10) + "/"
}

// join makes the waiter's next attempts mark the masters, subscribed to
// the lock's releases, and register a writer's intent.
func (w *rwWaiter) join() {
	l := w.m.l
	if l.notify != nil && w.sub == nil {
		w.sub = l.notify.subscribe(w.ctx, w.channel(), "")
	}
	if w.writer && w.id == "" {
		w.id = w.life + strconv.FormatInt(w.start.UnixMicro(), 10) + "/" + l.id + ":" + strconv.FormatUint(l.seq.Add(1), 36)
	}
	w.joined = true
}

// channel is what the waiter's subscription names: the lock key for a
// reader, the intents' key for a writer. A release that frees the lock
// while a writer waits wakes the writers alone; the readers, whom the
// writer's intent would refuse, sleep on until the last writer is done
// (see rwReleaseBody).
func (w *rwWaiter) channel() string {
	if w.writer {
		return w.m.intents
	}
	return w.m.key
}

// noRetry is waiter.noRetry's rule: nil to go on after err, else the
// error that ends the wait.
func (w *rwWaiter) noRetry(err error) error {
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

// nextWait chooses the wait after the last attempt, and what its end
// counts as; at: go at once.
func (w *rwWaiter) nextWait() (d time.Duration, cause WakeCause, at bool) {
	l := w.m.l
	cfg := &l.cfg
	ve := findVotes(w.last)
	held := ve != nil && ve.Kind == ErrNotAcquired && rwHeld(ve)
	if faults.RWSplitWaitsFallback.On() {
		held = ve != nil && ve.Kind == ErrNotAcquired && ve.Refused >= ve.Quorum
	}
	switch {
	case held && !w.joined:
		// Subscribe, then try again at once, marking (and registering a
		// writer's intent): a release between the refusal and the
		// subscription published nothing.
		w.join()
		return 0, WakeNone, true
	case held:
		lo := cfg.Wait.FallbackMin
		if lo > w.fallback {
			lo = w.fallback / 2 // capped below FallbackMin: keep a spread
		}
		return l.jitter(lo, w.fallback), WakeFallback, false
	}
	backoff := l.jitter(cfg.Wait.RetryDelayMin, cfg.Wait.RetryDelayMax)
	if d, ok := l.quarantineWait(ve, backoff); ok {
		return d, WakeBackoff, false
	}
	// A split vote or an outage: nobody may hold it, and nothing will be
	// published; back off so that competitors drift apart.
	return backoff, WakeBackoff, false
}

// rwHeld: what refused the attempt on a quorum will publish when it goes:
// one writer (by its value) refused on a quorum, or readers and waiting
// writers' intents did. Writers that split the masters refused each
// other: their entries are undone, and an undo is silent (one that
// published would have waiters that collide where a holder on a bare
// quorum left masters free wake each other until it releases), so the
// waiter backs off and tries again.
func rwHeld(ve *VotesError) bool {
	if ve.heldByOne() {
		return true
	}
	if ve.Refused < ve.Quorum {
		return false
	}
	for _, v := range ve.Votes {
		if v.Outcome == OutcomeRefused && v.value != rwByReaders && v.value != rwByIntent {
			return false
		}
	}
	return true
}

// sleep waits d, or until a release of the lock publishes (then until a
// quorum of masters did, briefly, see awaitTurns).
func (w *rwWaiter) sleep(d time.Duration, cause WakeCause) error {
	return w.sleeper.sleep(w.m.l, rwOp(w.writer), w.m.name, d, cause, w.gaveUp)
}

// gaveUp is the error of a wait whose context ended, matching both the
// context's error and the last attempt's.
func (w *rwWaiter) gaveUp() error {
	o := rwOp(w.writer)
	if w.last == nil {
		return errorf("%s %q: gave up after %d attempts: %v", o, w.m.name, w.info.Attempts, w.ctx.Err())
	}
	return errorf("%s %q: gave up after %d attempts (%v); the last: %v", o, w.m.name, w.info.Attempts, w.ctx.Err(), w.last)
}

// acquired takes the writer's intent out where its attempt was refused
// (where it was admitted, the script did): left, it would keep readers
// out after the writer's release.
func (w *rwWaiter) acquired() {
	if w.id == "" {
		return
	}
	l := w.m.l
	cmd := plainCall("ZREM", w.m.intents, w.id)
	cmd.Nodes = uint64(1)<<l.votes - 1
	l.post(cmd)
	w.id = ""
}

// leave ends the wait: it stops the timers and the subscription, and a
// writer that gives up takes its intent out, waking the readers it kept
// out (rwQuitScript). Sent before Close closes the pool: the wait counts
// in Locker.remote.
func (w *rwWaiter) leave(err error) {
	w.stop()
	if err != nil && w.id != "" {
		l := w.m.l
		cmd := scriptCall(rwQuitScript, w.m.key, w.id)
		cmd.Nodes = uint64(1)<<l.votes - 1
		l.post(cmd)
	}
}

// rwForm is the read/write lock's form of a lock's script, for a lease
// that holds a read/write lock (see Lease.call): its release, undo,
// extension and fence act on the lease's entry in the sorted set.
func rwForm(s *multiplex.Script) *multiplex.Script {
	switch s {
	case releaseScript, releaseScriptGhost:
		return rwReleaseScript
	case undoScript:
		// Silent for a writer's entry: writers that split the masters back
		// off and try again (see rwWaiter.nextWait), and an undo that woke
		// the waiters would have those that collide where a holder on a
		// bare quorum left masters free wake each other until it releases.
		// A reader's entry that frees a master where a writer's intent
		// lives wakes the writers, as a release does: a writer refused
		// there by it registered its intent and sleeps for its going
		// (rwHeld); it wakes writers alone, never readers, so no two
		// waiters wake each other.
		switch {
		case faults.RWUndoWakes.On():
			return rwReleaseScript
		case faults.RWReaderUndoSilent.On():
			return rwUndoSilentScript
		}
		return rwUndoScript
	case semReleaseScript:
		return rwUndoScript
	case extendScript:
		return rwExtendScript
	case fenceScript:
		return rwFenceScript
	}
	panic("engine: no read/write lock form of script " + s.SHA)
}

// rwScripts are the read/write lock's scripts. They are not loaded at
// connect: a Locker sends each as EVAL the first time a master answers
// NOSCRIPT, and by SHA after, so that Lockers that take no read/write
// lock load nothing for it, and the simulator's masters (bench/sim),
// which model the commands the loaded scripts use, need no sorted-set
// counts.
var rwScripts = []*multiplex.Script{rwAcquireScript, rwReleaseScript, rwUndoScript, rwUndoSilentScript, rwExtendScript, rwFenceScript, rwQuitScript, rwKindScript}

// rwAcquire is the acquire script, or a mutation's.
func rwAcquire() *multiplex.Script {
	switch {
	case faults.RWReaderIgnoresWriter.On():
		return rwAcquireReaderIgnoresWriter
	case faults.RWWriterIgnoresReaders.On():
		return rwAcquireWriterIgnoresReaders
	case faults.RWIntentIgnored.On():
		return rwAcquireIntentIgnored
	case faults.RWReadersExclude.On():
		return rwAcquireReadersExclude
	}
	return rwAcquireScript
}

// The scripts share these pieces of Lua. The sorted set scores a reader's
// value by when it expires and a writer's by minus that, in µs of the
// master's clock (TIME): an entry is live while its expiry is ahead of
// the clock, as a key set with PX is, and rwMember, scored 0, marks the
// key as a read/write lock's. The key itself expires no sooner than its
// entries, and goes with the last live one's release, so that nothing is
// left behind. Times pass to Redis as strings: a Lua number costs a
// conversion per argument.
const (
	// rwNowLua reads the master's clock in µs: now, and ns as a string.
	rwNowLua = `local tm = redis.call("TIME")
local ns = tm[1] .. string.sub("00000" .. tm[2], -6)
local now = tonumber(ns)
`
	// rwHoldLua keeps the key for at least ttl ms from now, in case the
	// entry just set or moved is its longest-lived: a relative PEXPIRE,
	// which counts from no earlier than the attempt's start, plus a
	// millisecond for the clock's truncation to one.
	rwHoldLua = `local function hold(k, ttl)
  if redis.call("PTTL", k) <= tonumber(ttl) then
    redis.call("PEXPIRE", k, tonumber(ttl) + 1)
  end
end
`
)

// rwAcquireScript admits a reader or a writer, for ttl ms, on one master.
// ARGV: the lease's value, ttl, the mode (rwModes), a waiter's id (see
// rwWaiter: it starts with how long its mark or intent lives, in ms, and
// a "/"; without, ttl), the permit count key of a Semaphore of the name,
// and how long (ms) a refresh keeps the name marked there. Mode: "r" a
// reader, "w" a writer; "q" a waiting writer, which registers its intent
// (id) where refused and takes it out where admitted; "n" a subscribed waiter, which marks
// the lock where refused, so that the release that frees it publishes;
// "m" marks the name as a read/write lock's at the permit count key, and
// refuses a semaphore's; "f" a fenced writer, answered max(the fencing
// counter, the master's clock in µs) as acquireFenceScript answers, "c"
// the counter alone. A writer is admitted where no live reader or writer
// holds, a reader where no live writer holds and no writer's intent
// lives. It answers 1 (or the counter) when admitted, and what was in the
// way when refused: "writer", "readers" or "intent". Every check that can
// fail comes before the first write.
var rwAcquireScript = multiplex.NewScript(rwAcquireBody(true, true, true, true)).Coalesce()

// The guards undone, one each, and sharing (internal/mutation).
var (
	rwAcquireReaderIgnoresWriter  = multiplex.NewScript(rwAcquireBody(false, true, true, true)).Coalesce()
	rwAcquireWriterIgnoresReaders = multiplex.NewScript(rwAcquireBody(true, false, true, true)).Coalesce()
	rwAcquireIntentIgnored        = multiplex.NewScript(rwAcquireBody(true, true, false, true)).Coalesce()
	rwAcquireReadersExclude       = multiplex.NewScript(rwAcquireBody(true, true, true, false)).Coalesce()
)

// rwAcquireBody is rwAcquireScript's Lua; each guard may be undone: a
// reader waits for a writer that holds, a writer for readers that hold,
// a reader for a writer that waits; share: readers do not wait for
// readers.
func rwAcquireBody(readerGuard, writerGuard, intentGuard, share bool) string {
	writerHolds := `redis.call("ZCOUNT", k, "-inf", "(-" .. ns) > 0`
	if !readerGuard {
		writerHolds = `writer and ` + writerHolds
	}
	readersHold := `redis.call("ZCOUNT", k, "(" .. ns, "+inf") > 0`
	if !writerGuard {
		readersHold = "false"
	}
	intents := `redis.call("ZCOUNT", q, "(" .. ns, "+inf") > 0`
	if !intentGuard {
		intents = "false"
	}
	readersBlock := "false"
	fast := ""
	if !share {
		readersBlock = `redis.call("ZCOUNT", k, "(" .. ns, "+inf") > 0`
	}
	if readerGuard && intentGuard && share {
		fast = rwFastReadLua
	}
	return `local value, ttl, mode, id, semkey, keep = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
` + fast + `local function has(c)
  return string.find(mode, c, 1, true) ~= nil
end
local writer, intent, mark, refresh, floor = has("w"), has("q"), has("n"), has("m"), has("f")
local fence = floor or has("c")
local k = KEYS[1]
local t = "zset"
local ours = redis.pcall("ZSCORE", k, "` + rwMember + `")
if type(ours) == "table" then
  if redis.call("TYPE", k).ok == "string" then
    return redis.error_reply("` + rwInUse + `plain lock")
  end
  return redis.error_reply("WRONGTYPE Operation against a key holding the wrong kind of value")
elseif not ours then
  if redis.call("EXISTS", k) == 1 then
    return redis.error_reply("WRONGTYPE Operation against a key holding the wrong kind of value")
  end
  t = "none"
end
if refresh then
  local have = redis.pcall("GET", semkey)
  if type(have) == "table" then
    return redis.error_reply("WRONGTYPE redlock: the semaphore's permit count holds the wrong type")
  end
  if have and have ~= "` + rwSemMark + `" then
    return redis.error_reply("` + rwInUse + `semaphore")
  end
end
local c = 0
if fence then
  c = redis.pcall("GET", "` + fencePrefixLua + `" .. k)
  if type(c) == "table" then
    return redis.error_reply("WRONGTYPE redlock: the fencing counter holds the wrong type")
  end
  c = tonumber(c or "0")
  if not c then
    return redis.error_reply("ERR redlock: the fencing counter is not an integer")
  end
end
if refresh then
  redis.call("SET", semkey, "` + rwSemMark + `", "PX", keep)
end
` + rwNowLua + rwHoldLua + `local q = "` + rwPrefixLua + `" .. k
if t == "zset" and writer then
  -- Entries that expired go: readers scored (0, now], writers [-now, 0).
  -- Only a writer's attempt clears them: the counts below skip them,
  -- and the release that leaves no live holder deletes the key, so a
  -- reader's attempt, the common one, is spared two calls.
  redis.call("ZREMRANGEBYSCORE", k, "(0", ns)
  redis.call("ZREMRANGEBYSCORE", k, "-" .. ns, "(0")
end
local refused
if t == "zset" and ` + writerHolds + ` then
  -- Named, so that a waiter tells one writer on a quorum from writers
  -- that split the masters (see VotesError.heldByOne): the live writer
  -- scores lowest (minus its expiry, past now's), before expired ones.
  refused = "writer:" .. (redis.call("ZRANGE", k, 0, 0)[1] or "")
elseif writer then
  if t == "zset" and ` + readersHold + ` then
    refused = "readers"
  end
elseif t == "zset" and ` + readersBlock + ` then
  refused = "readers"
elseif ` + intents + ` then
  refused = "intent"
end
if refused then
  -- A waiter's mark or intent outlives its fallback: its life (ms) starts
  -- ARGV[4] (see rwWaiter).
  local life = tonumber(string.match(id, "^(%d+)/") or ttl)
  if mark then
    -- Waiting readers share the mark: never cut it short.
    local m = "` + rwMarkPrefixLua + `" .. k
    if redis.call("PTTL", m) < life then
      redis.call("SET", m, "1", "PX", life)
    end
  end
  if intent then
    -- The key lives as long as its latest intent: a writer with a
    -- shorter one must not cut another's short.
    redis.call("ZADD", q, string.format("%.0f", now + life * 1000), id)
    local last = redis.call("ZRANGE", q, -1, -1, "WITHSCORES")[2]
    redis.call("PEXPIRE", q, math.ceil((tonumber(last) - now) / 1000) + 1)
  end
  return refused
end
local score = string.format("%.0f", now + tonumber(ttl) * 1000)
if writer then
  score = "-" .. score
end
if t == "none" then
  redis.call("ZADD", k, "0", "` + rwMember + `", score, value)
else
  redis.call("ZADD", k, score, value)
end
if intent then
  redis.call("ZREM", q, id)
end
hold(k, ttl)
if not fence then
  return 1
end
if floor and now > c then
  return now
end
return c`
}

// rwFastReadLua is rwAcquireScript's way for a reader that finds no
// writer, the common attempt: one ZRANGE tells the key is the lock's (or
// absent) and holds no writer's entry, live or expired (those score below
// rwMember's 0), and an EXISTS that no writer's intent is registered,
// before the entry is added; anything else (a writer's entry, an intent,
// another kind's key, the name's kind to mark) takes the script's whole
// way, which decides as before. It spares the master the kind check's
// second call and the counts' range scans.
const rwFastReadLua = `if mode == "r" or mode == "rn" then
  local k = KEYS[1]
  local low = redis.pcall("ZRANGE", k, 0, 0)
  if low.err == nil and (low[1] == nil or low[1] == "` + rwMember + `") and redis.call("EXISTS", "` + rwPrefixLua + `" .. k) == 0 then
` + rwNowLua + rwHoldLua + `    local score = string.format("%.0f", now + tonumber(ttl) * 1000)
    if low[1] == nil then
      redis.call("ZADD", k, "0", "` + rwMember + `", score, value)
      redis.call("PEXPIRE", k, tonumber(ttl) + 1)
    else
      redis.call("ZADD", k, score, value)
      hold(k, ttl)
    end
    return 1
  end
end
`

// rwReleaseScript takes the lease's entry out (ARGV[1], its value); if
// that leaves no live holder, the key goes, and it publishes on the
// intents' channel while a writer's intent lives (the writers go first),
// else, if a reader marked the lock, on the lock's channel. It
// answers 1 if the entry was live, else 0 (gone, expired, or the key is
// another kind's).
var rwReleaseScript = multiplex.NewScript(rwReleaseBody(rwWakeAll)).Coalesce()

// rwUndoScript undoes an attempt, whose maker tries again anyway, as
// semUndoScript does: rwReleaseScript that publishes only for a live
// reader's entry, and only to the writers, while an intent lives.
var rwUndoScript = multiplex.NewScript(rwReleaseBody(rwWakeWriters)).Coalesce()

// rwUndoSilentScript is rwUndoScript that never publishes
// (internal/mutation's RWReaderUndoSilent).
var rwUndoSilentScript = multiplex.NewScript(rwReleaseBody(rwWakeNone)).Coalesce()

// Whom rwReleaseBody's removal wakes when it frees the master.
const (
	rwWakeNone    = iota
	rwWakeWriters // the writers, if the entry was a live reader's and an intent lives
	rwWakeAll     // the writers while an intent lives, else the readers that marked
)

func rwReleaseBody(wakes int) string {
	// The key goes with the last live holder; a release also takes the
	// readers' mark with it (one DEL), unless a writer's intent lives.
	// The key is there to delete (rwMember stays while it lives), so a
	// DEL that answers 2 found the mark.
	wake := `  redis.call("DEL", k)
`
	switch wakes {
	case rwWakeWriters:
		// s is the entry's score: a live reader's is above now.
		wake = `  redis.call("DEL", k)
  local q = "` + rwPrefixLua + `" .. k
  if tonumber(s) > now and redis.call("ZCOUNT", q, "(" .. ns, "+inf") > 0 then
    redis.call("PUBLISH", "` + releasedPrefix + `" .. q, "")
  end
`
	case rwWakeAll:
		wake = `  local q = "` + rwPrefixLua + `" .. k
  if redis.call("ZCOUNT", q, "(" .. ns, "+inf") > 0 then
    redis.call("DEL", k)
    redis.call("PUBLISH", "` + releasedPrefix + `" .. q, "")
  elseif redis.call("DEL", k, "` + rwMarkPrefixLua + `" .. k) == 2 then
    redis.call("PUBLISH", "` + releasedPrefix + `" .. k, "")
  end
`
	}
	return `local value = ARGV[1]
local k = KEYS[1]
local s = redis.pcall("ZSCORE", k, value)
if type(s) ~= "string" then
  return 0
end
redis.call("ZREM", k, value)
` + rwNowLua + `local free = redis.call("ZCARD", k) <= 1
if not free then
  -- A live reader scores highest, above now; else a live writer, lowest,
  -- scores below minus now.
  local high = redis.call("ZRANGE", k, -1, -1, "WITHSCORES")
  free = tonumber(high[2]) <= now and redis.call("ZCOUNT", k, "-inf", "(-" .. ns) == 0
end
if free then
` + wake + `end
s = tonumber(s)
if s > now or s < -now then
  return 1
end
return 0`
}

// rwExtendScript moves the lease's live entry (ARGV[1], its value) to
// expire ARGV[2] ms from now, and the key with it; it never revives an
// entry that expired, nor re-creates one that is gone. Where it extended,
// it marks the name as a read/write lock's at the permit count key
// (ARGV[5]) for ARGV[6] ms, as an attempt's refresh does, unless a
// semaphore's count is there, and keeps a fenced writer's counter as
// extendScript keeps a lock's (ARGV[3], ARGV[4]). It answers 1 when it
// extended, else 0.
var rwExtendScript = multiplex.NewScript(`local value, ttl, token, keep, semkey, ckeep = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local k = KEYS[1]
local s = redis.pcall("ZSCORE", k, value)
if type(s) ~= "string" then
  return 0
end
s = tonumber(s)
` + rwNowLua + rwHoldLua + `local score = string.format("%.0f", now + tonumber(ttl) * 1000)
if s < -now then
  score = "-" .. score
elseif s <= now then
  return 0
end
redis.call("ZADD", k, "XX", score, value)
hold(k, ttl)
local have = redis.pcall("GET", semkey)
if have == false or have == "` + rwSemMark + `" then
  -- pcall: the entry is extended, and the answer must say so.
  redis.pcall("SET", semkey, "` + rwSemMark + `", "PX", ckeep)
end
` + fenceHoldLua("k") + `return 1`).Coalesce()

// rwFenceScript is fenceScript for a writer: it raises the name's fencing
// counter to the token (ARGV[1]) only where the writer (ARGV[2], its
// value) still holds, live, and answers the counter's new value; else 0
// where another holds it live, fenceGone where nobody does. A raise sets
// the counter's deadline as fenceScript's does (ARGV[3], MaxTTL in ms).
var rwFenceScript = multiplex.NewScript(`local token, value, keep = ARGV[1], ARGV[2], ARGV[3]
local k = KEYS[1]
local s = redis.pcall("ZSCORE", k, value)
if type(s) == "table" then
  return 0
end
` + rwNowLua + `if not s or tonumber(s) >= -now then
  if redis.call("ZCOUNT", k, "(" .. ns, "+inf") + redis.call("ZCOUNT", k, "-inf", "(-" .. ns) > 0 then
    return 0
  end
  return ` + itoa(fenceGone) + `
end
local f = "` + fencePrefixLua + `" .. k
local c = tonumber(redis.call("GET", f) or "0")
local t = tonumber(token)
if t > c then
  redis.call("SET", f, token)
` + fenceExpiryLua("f") + `  return t
end
return c`).Coalesce()

// rwQuitScript takes a waiting writer's intent (ARGV[1], its id) out,
// and if it was there and a waiter marked the lock while no writer holds
// it, publishes on the lock's channel: the readers the intent kept out
// may go.
var rwQuitScript = multiplex.NewScript(`local id = ARGV[1]
local k = KEYS[1]
if redis.call("ZREM", "` + rwPrefixLua + `" .. k, id) == 0 then
  return 0
end
local m = "` + rwMarkPrefixLua + `" .. k
if redis.call("EXISTS", m) == 1 then
` + rwNowLua + `  local w = redis.pcall("ZCOUNT", k, "-inf", "(-" .. ns)
  if type(w) ~= "number" or w == 0 then
    redis.call("DEL", m)
    redis.call("PUBLISH", "` + releasedPrefix + `" .. k, "")
  end
end
return 1`).Coalesce()

// rwKindScript answers 1 where the key is a read/write lock's, else 0.
var rwKindScript = multiplex.NewScript(`if redis.call("TYPE", KEYS[1]).ok == "zset" and redis.call("ZSCORE", KEYS[1], "` + rwMember + `") then
  return 1
end
return 0`)
