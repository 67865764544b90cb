// Package mutation holds switches that each undo one of the engine's
// fixes, named for the bug it lets back in. The engine's tests and the
// simulator (bench/sim) turn one on to show that they find that bug on
// their own: a checker that cannot fail proves nothing. Nothing else may
// set them; every switch is off unless a test turns it on.
//
// engine and multiplex read the switches only in builds with the
// redlock_faults tag (their faults_on.go), which make test, make sim and
// make controls use; in every other build their fault points are
// constants the compiler removes, and this package is not linked, so the
// shipped binaries carry none of it (etcd's gofail and pingcap's failpoint
// keep fault points out of release builds the same way).
package mutation

import (
	"sync/atomic"
	"testing"
)

// Require skips a test that turns a switch on unless the fault points are
// compiled in (Enabled): in a build without them the switch would change
// nothing, and a control could not fail.
func Require(t testing.TB) {
	t.Helper()
	if !Enabled {
		t.Skip(notCompiled)
	}
}

const notCompiled = "the engine's fault points are compiled out: run the tests with -tags redlock_faults (make test does)"

// A Switch undoes one fix while it is on.
type Switch struct {
	name string
	on   atomic.Bool
}

// On reports whether the fix is undone.
func (s *Switch) On() bool { return s.on.Load() }

// Set turns the switch on or off, and returns a function that restores
// what it was. Turning it on in a build without the fault points panics:
// the caller would rely on a switch that changes nothing (see Require).
func (s *Switch) Set(on bool) (restore func()) {
	if on && !Enabled {
		panic("mutation: " + s.name + ": " + notCompiled)
	}
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
	// ReleaseKeepsTurn: a release takes the lease's kept places out of the
	// queues without passing on a turn that a late release of the lock
	// before it gave it there: the next waiter there sleeps until its
	// fallback.
	ReleaseKeepsTurn = &Switch{name: "release-keeps-turn"}
	// FenceRefusalIsContention: a fence round that fails calls any refusal
	// contention (ErrNotAcquired), even with masters failed and no higher
	// counter seen: a master that came back empty, or never had the key,
	// refuses without anyone else holding it.
	FenceRefusalIsContention = &Switch{name: "fence-refusal-is-contention"}
	// ClusterVotesShareNode: a cluster vote's nodes are not compared with
	// the other votes' servers: one server, reached through two votes,
	// casts two.
	ClusterVotesShareNode = &Switch{name: "cluster-votes-share-node"}
	// ClusterKeysUntagged: with cluster votes, a lock key keeps its name
	// without a hash tag: the queue, fence counter and channel derived
	// from it land in other slots, and the scripts fail on the cluster.
	ClusterKeysUntagged = &Switch{name: "cluster-keys-untagged"}
	// CoalesceAcrossSlots: a cluster vote's coalesced script calls take
	// keys of any slot: the cluster refuses them (CROSSSLOT).
	CoalesceAcrossSlots = &Switch{name: "coalesce-across-slots"}
	// CoalesceFirstKeyOnly: a coalesced call over several keys is placed
	// in its batch by its first key alone: a later call on one of its
	// further keys joins a group that runs before it.
	CoalesceFirstKeyOnly = &Switch{name: "coalesce-first-key-only"}
	// ClusterFailoverTrusted: a cluster's replica promoted by a failover
	// (or a primary new to the vote) votes at once, although it may lack
	// the locks its primary granted: a second holder.
	ClusterFailoverTrusted = &Switch{name: "cluster-failover-trusted"}
	// ClusterRestartSlotsAsSeen: a cluster's node seen restarted keeps
	// out of the vote only the slots its view shows now, not those it
	// served before: a slot whose migration it was the source of, handed
	// over after the restart without the keys the node lost, votes at
	// once from its new owner.
	ClusterRestartSlotsAsSeen = &Switch{name: "cluster-restart-slots-as-seen"}
	// RWReaderIgnoresWriter: a read/write lock's master admits a reader
	// while a writer holds it: a reader and the writer both hold.
	RWReaderIgnoresWriter = &Switch{name: "rw-reader-ignores-writer"}
	// RWWriterIgnoresReaders: a read/write lock's master admits a writer
	// while readers hold it: the writer and readers both hold.
	RWWriterIgnoresReaders = &Switch{name: "rw-writer-ignores-readers"}
	// RWIntentIgnored: a read/write lock's master admits new readers while
	// a writer waits for it: a stream of readers starves the writer.
	RWIntentIgnored = &Switch{name: "rw-intent-ignored"}
	// RWJoinIgnoresIntent: a reader joins its Locker's shared read entry
	// without asking the masters for a waiting writer's intent, so that
	// readers of one Locker keep a waiting writer out for as long as they
	// keep overlapping.
	RWJoinIgnoresIntent = &Switch{name: "rw-join-ignores-intent"}
	// RWReadersExclude: a read/write lock's master refuses a reader while
	// other readers hold it: readers no longer share.
	RWReadersExclude = &Switch{name: "rw-readers-exclude"}
	// ClusterMigrationUnguarded: a cluster vote's scripts declare their
	// key alone, without the slot's guard: while the slot migrates, the
	// target runs a script whose other keys are still on the source, and
	// a semaphore grants a slot held there.
	ClusterMigrationUnguarded = &Switch{name: "cluster-migration-unguarded"}
	// ClusterDemotedConnKept: a connection to a cluster's primary that a
	// failover demoted stays open: promoted again (a failback), the node
	// votes on it at once, unchecked, though it may lack what its
	// replacement granted.
	ClusterDemotedConnKept = &Switch{name: "cluster-demoted-conn-kept"}
	// ClusterClockUnjudged: a cluster's nodes' clocks are not judged one
	// by one (MaxClockSkew): a shard whose primary is far off votes, and
	// once it has forgotten its counters its clock alone orders the
	// fencing tokens of its slots.
	ClusterClockUnjudged = &Switch{name: "cluster-clock-unjudged"}
	// ClusterNotifyStaleShard: a waiter's sharded subscription that the
	// shard ended (its slot moved to another shard, or its connection
	// broke in a failover) is taken for still open: the releases on the
	// new owner wake nobody, and the waiters wait for their fallback.
	ClusterNotifyStaleShard = &Switch{name: "cluster-notify-stale-shard"}
	// ClusterMigrationNoResend: a quit, leave or release that a cluster
	// vote refused while the resource's slot migrated is not sent again:
	// a gone waiter stays queued there and is given turns it cannot use,
	// and a released lock stays until it expires.
	ClusterMigrationNoResend = &Switch{name: "cluster-migration-no-resend"}
	// ClusterReplicaNoResend: a quit, leave or release that a cluster
	// vote's client routed to a replica (the demoted primary, right after
	// a failover, until the client refreshes its slot map), whose
	// connection the vote refuses, is not sent again: a gone waiter stays
	// queued on the promoted replica, and a released lock stays there
	// until it expires.
	ClusterReplicaNoResend = &Switch{name: "cluster-replica-no-resend"}
	// ClusterGuessOnce: a slot's first SSUBSCRIBE goes to one node the
	// cluster client knows, at random, replicas included: a replica's
	// connection is refused, and the slot waits for the retry, a pause in
	// which a release wakes nobody.
	ClusterGuessOnce = &Switch{name: "cluster-guess-once"}
	// ClusterInfoAnyNode: New reads a cluster vote's INFO server through
	// the cluster client alone, which sends it to any node it knows: to a
	// replica, refused, New fails with "is a replica".
	ClusterInfoAnyNode = &Switch{name: "cluster-info-any-node"}
	// LossNoticedLate: the tracker reads a watched lease's keys after
	// every change but never ends the lease: a loss on a quorum is learnt
	// at the next extension, up to ExtendEvery later, or not at all
	// without auto-extension.
	LossNoticedLate = &Switch{name: "loss-noticed-late"}
	// RWTrackedAsPlain: the tracker reads a read/write lock's key with
	// MGET, as a plain lock's, instead of its holder's member with
	// ZSCORE: the sorted set reads as nil, and every watched reader or
	// writer ends as lost.
	RWTrackedAsPlain = &Switch{name: "rw-tracked-as-plain"}
	// RWUndoWakes: an undone read/write attempt publishes as a release
	// does: waiters that collide on the masters a holder on a bare quorum
	// left free are refused, undo and wake each other, attempt after
	// attempt, until it releases.
	RWUndoWakes = &Switch{name: "rw-undo-wakes"}
	// RWSplitWaitsFallback: a read/write waiter refused on a quorum by
	// writers that split the masters takes it for one holder and sleeps
	// until a release or its fallback: nobody releases, and the lock,
	// free once they undo, waits for their fallback.
	RWSplitWaitsFallback = &Switch{name: "rw-split-waits-fallback"}
	// RWTrackedByPresence: the tracker counts a read/write holder's
	// member as held while it is in the set, expired or not: a writer
	// whose entry expired on a quorum stays trusted while readers, which
	// skip expired entries, are admitted there.
	RWTrackedByPresence = &Switch{name: "rw-tracked-by-presence"}
	// SemSplitWaitsFallback: a semaphore's waiter takes any refusal on a
	// quorum for every permit held, even where the refusals name different
	// holders (a split of waiters woken together): each sleeps until its
	// fallback, the permit free, since the undos publish nothing.
	SemSplitWaitsFallback = &Switch{name: "sem-split-waits-fallback"}
	// SemUndoWakes: the undo of a semaphore attempt's slot publishes where
	// a waiter marked our value, as a release does: waiters that collide
	// on the masters a holder on a bare quorum leaves free wake each
	// other, attempt after attempt, for as long as it holds.
	SemUndoWakes = &Switch{name: "sem-undo-wakes"}
	// RWWonUndoSilent: the undo of a read/write attempt that won a quorum
	// and failed after it (its fence round, its validity) publishes
	// nothing: the waiters that it refused, taking it for the holder,
	// sleep until their fallback, the lock free.
	RWWonUndoSilent = &Switch{name: "rw-won-undo-silent"}
	// RWReaderUndoSilent: the undo of a reader's attempt that frees a
	// master where a writer's intent lives publishes nothing: a writer
	// refused on a quorum by readers whose attempts then failed sleeps
	// until its fallback, the lock free.
	RWReaderUndoSilent = &Switch{name: "rw-reader-undo-silent"}
	// LockAllHogsTurns: a LockAll waiter refused by a lock on one key keeps
	// its places in the queues of its other keys, where it takes each turn
	// it cannot use and passes it back and forth with the other waiters: a
	// waiter that could take the resource never collects a quorum of turns.
	LockAllHogsTurns = &Switch{name: "lockall-hogs-turns"}
	// FenceCounterExpiresEarly: a fencing counter expires the moment its
	// master's clock reaches its value, with no MaxTTL to spare: a clock
	// that then steps back (within the model) reports a floor below a
	// token already handed out, and tokens go backwards.
	FenceCounterExpiresEarly = &Switch{name: "fence-counter-expires-early"}
	// ValidityIgnoresDrift: a lease's validity is TTL − elapsed −
	// DriftFloor, without the clock drift (Config.DriftFactor's share of
	// the TTL): masters whose clocks run fast within the model expire its
	// keys while it is still trusted.
	ValidityIgnoresDrift = &Switch{name: "validity-ignores-drift"}
	// AcquireIgnoresValidity: an attempt that reached its quorum after
	// its validity ran out (it waited that long to be sent, behind other
	// rounds) is handed out, already expired, instead of undone: its keys
	// keep the resource from everyone for up to a TTL, held by nobody.
	AcquireIgnoresValidity = &Switch{name: "acquire-ignores-validity"}
	// SemCheckStampedOnSend: a semaphore handle counts its permit count
	// as checked from the moment the checking attempt is sent, before any
	// master answered it, and keeps it so after a refusal: for MaxTTL/2
	// its other attempts (made meanwhile, or after one that failed) skip
	// the check and take a slot the masters' count does not have.
	SemCheckStampedOnSend = &Switch{name: "sem-check-stamped-on-send"}
	// RWRemoteValidityAsPlain: RemoteValidity asks a read/write lease's
	// masters with the plain lock's script (GET of the key), which the
	// sorted set fails everywhere: the lease is ended as lost, and its
	// entry, unwatched, keeps writers out until its TTL.
	RWRemoteValidityAsPlain = &Switch{name: "rw-remote-validity-as-plain"}
	// ClockErrorIgnored: the masters' clocks are judged (New's check with
	// Fencing, MaxClockSkew on a new connection) by their readings'
	// offsets alone, without the readings' uncertainty: a master whose
	// round trip was slow at connect (a loaded host) is refused, or kept
	// out, for what its reading cannot tell, its clock in agreement.
	ClockErrorIgnored = &Switch{name: "clock-error-ignored"}
	// ClockReadOnce: a clock reading too uncertain to tell whether the
	// clock is too far is judged as it is, not read again: a clock too far
	// behind, read through a slow round trip, is let through.
	ClockReadOnce = &Switch{name: "clock-read-once"}
	// ClockJudgedLate: a master's new connection is judged only in the
	// background, against the others' clocks read again: until then a
	// master first seen on a reconnect (down when New checked the
	// clocks) votes with a clock however far off, and its token lands on
	// its quorum's counters.
	ClockJudgedLate = &Switch{name: "clock-judged-late"}
	// SentinelPromotionUnchecked: a Sentinel vote's master is judged by
	// its run_id and uptime alone, not by when the sentinels saw it become
	// master: a process that starts after a failover counts the promoted
	// replica's yes at once, though it may lack locks the old master
	// granted that are still valid.
	SentinelPromotionUnchecked = &Switch{name: "sentinel-promotion-unchecked"}
)

// All is every switch, for flags and tables.
var All = []*Switch{HandOffEndedLease, StaleShorterExtend, LateReleaseWakesNext, SplitVoteStaleEntry,
	QuitKeepsTurn, GhostInQueue, FencingWithoutClockFloor, AcquireAllPartial, ExpiredLeaseKeepsKey,
	LateReleaseWakesOlder, SemaphoreSplitVote, ReleaseKeepsTurn, ClusterVotesShareNode, ClusterKeysUntagged,
	CoalesceAcrossSlots, CoalesceFirstKeyOnly, ClusterFailoverTrusted, RWReaderIgnoresWriter, RWWriterIgnoresReaders,
	RWIntentIgnored, RWReadersExclude, ClusterMigrationUnguarded, ClusterDemotedConnKept, ClusterClockUnjudged,
	LossNoticedLate, RWTrackedAsPlain, RWUndoWakes, RWSplitWaitsFallback, RWTrackedByPresence, SemSplitWaitsFallback, SemUndoWakes, FenceRefusalIsContention, ClusterNotifyStaleShard, RWWonUndoSilent, RWReaderUndoSilent, LockAllHogsTurns,
	ClusterMigrationNoResend, ClusterReplicaNoResend, ClusterGuessOnce, ClusterInfoAnyNode, FenceCounterExpiresEarly, ValidityIgnoresDrift,
	AcquireIgnoresValidity, SemCheckStampedOnSend, RWRemoteValidityAsPlain, ClockErrorIgnored, ClockReadOnce, ClockJudgedLate,
	SentinelPromotionUnchecked, RWJoinIgnoresIntent, ClusterRestartSlotsAsSeen}

// ByName finds a switch by its name, or nil.
func ByName(name string) *Switch {
	for _, s := range All {
		if s.name == name {
			return s
		}
	}
	return nil
}
