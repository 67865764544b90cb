// Package mutation holds switches that each undo one of the engine's
// fixes, named for the bug it lets back in. The engine's tests and the
// simulator (bench/sim) turn one on to show that they find that bug on
// their own: a checker that cannot fail proves nothing. Nothing else may
// set them; every switch is off unless a test turns it on.
//
// Each switch is read on a path that is not hot, or once per operation
// where it is (an atomic load).
package mutation

import "sync/atomic"

// A Switch undoes one fix while it is on.
type Switch struct {
	name string
	on   atomic.Bool
}

// On reports whether the fix is undone.
func (s *Switch) On() bool { return s.on.Load() }

// Set turns the switch on or off, and returns a function that restores
// what it was.
func (s *Switch) Set(on bool) (restore func()) {
	was := s.on.Swap(on)
	return func() { s.on.Store(was) }
}

// Name is the bug the switch lets back in, as its flag names it.
func (s *Switch) Name() string { return s.name }

// The switches.
var (
	// HandOffEndedLease: a lease that ended (its extension found the keys
	// gone) is still handed on at the gate: two holders.
	HandOffEndedLease = &Switch{name: "handoff-ended-lease"}
	// StaleShorterExtend: no cap after an Extend that a master did not
	// answer: its PEXPIRE, delivered late through a broken connection,
	// shortens the keys under a later, longer Extend that is trusted.
	StaleShorterExtend = &Switch{name: "stale-shorter-extend"}
	// LateReleaseWakesNext: a waiter that acquired leaves the queue at
	// once everywhere, also where the holder's release is still on its
	// way, which then wakes the next waiter for nothing.
	LateReleaseWakesNext = &Switch{name: "late-release-wakes-next"}
	// SplitVoteStaleEntry: a release does not take the lease's place out
	// of the queues where its attempt did not set the key: a later
	// release there gives the turn to a waiter that waits for nothing.
	SplitVoteStaleEntry = &Switch{name: "split-vote-stale-entry"}
	// QuitKeepsTurn: a waiter that gives up leaves the queue without
	// passing on a turn it was given: the next waiter sleeps until its
	// fallback.
	QuitKeepsTurn = &Switch{name: "quit-keeps-turn"}
	// GhostInQueue: a lease that expired, was lost or outlived its Locker
	// stays in the queues: the next release gives the turn to the ghost.
	GhostInQueue = &Switch{name: "ghost-in-queue"}
	// FencingWithoutClockFloor: fencing tokens come from the counters
	// alone, not max(counter, the master's clock): after masters restart
	// and forget their counters, tokens go backwards.
	FencingWithoutClockFloor = &Switch{name: "fencing-without-clock-floor"}
	// AcquireAllPartial: the multi-resource lock's script sets those of
	// its keys that are free and answers yes although another of them is
	// held: a lease on several resources that does not hold them all.
	AcquireAllPartial = &Switch{name: "acquire-all-partial"}
	// ExpiredLeaseKeepsKey: a lease that expired or was lost leaves its
	// keys to expire on the masters, with the marks of the waiters queued
	// on it: a newcomer then sets the key unmarked, its release wakes
	// nobody, and the waiters sleep until their fallback.
	ExpiredLeaseKeepsKey = &Switch{name: "expired-lease-keeps-key"}
	// LateReleaseWakesOlder: a waiter that acquired keeps its place where
	// a late release is on its way, but at its ticket: a waiter with an
	// older ticket that joins there first is woken by that release, to be
	// refused by the new holder's quorum.
	LateReleaseWakesOlder = &Switch{name: "late-release-wakes-older"}
	// SemaphoreSplitVote: a semaphore grants a permit on a quorum of
	// masters that each took a slot, whichever: it counts permits per
	// master, and with two or more permits more holders than permits
	// can each find a majority with one free.
	SemaphoreSplitVote = &Switch{name: "semaphore-split-vote"}
	// LossNoticedLate: the tracker reads a watched lease's keys after
	// every change but never ends the lease: a loss on a quorum is learnt
	// at the next extension, up to ExtendEvery later, or not at all
	// without auto-extension.
	LossNoticedLate = &Switch{name: "loss-noticed-late"}
)

// All is every switch, for flags and tables.
var All = []*Switch{HandOffEndedLease, StaleShorterExtend, LateReleaseWakesNext, SplitVoteStaleEntry,
	QuitKeepsTurn, GhostInQueue, FencingWithoutClockFloor, AcquireAllPartial, ExpiredLeaseKeepsKey,
	LateReleaseWakesOlder, SemaphoreSplitVote, LossNoticedLate}

// ByName finds a switch by its name, or nil.
func ByName(name string) *Switch {
	for _, s := range All {
		if s.name == name {
			return s
		}
	}
	return nil
}
