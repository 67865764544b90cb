//go:build redlock_faults

package engine

import "github.com/redlock-bench/redlock/internal/mutation"

// faults are the fault points, switched by the tests (see faults.go).
var faults = struct {
	AcquireAllPartial        *mutation.Switch
	ClusterGuessOnce         *mutation.Switch
	ClusterKeysUntagged      *mutation.Switch
	ClusterMigrationNoResend *mutation.Switch
	ClusterNotifyStaleShard  *mutation.Switch
	ExpiredLeaseKeepsKey     *mutation.Switch
	FenceRefusalIsContention *mutation.Switch
	FencingWithoutClockFloor *mutation.Switch
	GhostInQueue             *mutation.Switch
	HandOffEndedLease        *mutation.Switch
	LateReleaseWakesNext     *mutation.Switch
	LateReleaseWakesOlder    *mutation.Switch
	LockAllHogsTurns         *mutation.Switch
	LossNoticedLate          *mutation.Switch
	QuitKeepsTurn            *mutation.Switch
	RWIntentIgnored          *mutation.Switch
	RWReaderIgnoresWriter    *mutation.Switch
	RWReadersExclude         *mutation.Switch
	RWSplitWaitsFallback     *mutation.Switch
	RWTrackedAsPlain         *mutation.Switch
	RWTrackedByPresence      *mutation.Switch
	RWUndoWakes              *mutation.Switch
	RWWonUndoSilent          *mutation.Switch
	RWWriterIgnoresReaders   *mutation.Switch
	ReleaseKeepsTurn         *mutation.Switch
	SemSplitWaitsFallback    *mutation.Switch
	SemUndoWakes             *mutation.Switch
	SemaphoreSplitVote       *mutation.Switch
	SplitVoteStaleEntry      *mutation.Switch
	StaleShorterExtend       *mutation.Switch
}{
	AcquireAllPartial:        mutation.AcquireAllPartial,
	ClusterGuessOnce:         mutation.ClusterGuessOnce,
	ClusterKeysUntagged:      mutation.ClusterKeysUntagged,
	ClusterMigrationNoResend: mutation.ClusterMigrationNoResend,
	ClusterNotifyStaleShard:  mutation.ClusterNotifyStaleShard,
	ExpiredLeaseKeepsKey:     mutation.ExpiredLeaseKeepsKey,
	FenceRefusalIsContention: mutation.FenceRefusalIsContention,
	FencingWithoutClockFloor: mutation.FencingWithoutClockFloor,
	GhostInQueue:             mutation.GhostInQueue,
	HandOffEndedLease:        mutation.HandOffEndedLease,
	LateReleaseWakesNext:     mutation.LateReleaseWakesNext,
	LateReleaseWakesOlder:    mutation.LateReleaseWakesOlder,
	LockAllHogsTurns:         mutation.LockAllHogsTurns,
	LossNoticedLate:          mutation.LossNoticedLate,
	QuitKeepsTurn:            mutation.QuitKeepsTurn,
	RWIntentIgnored:          mutation.RWIntentIgnored,
	RWReaderIgnoresWriter:    mutation.RWReaderIgnoresWriter,
	RWReadersExclude:         mutation.RWReadersExclude,
	RWSplitWaitsFallback:     mutation.RWSplitWaitsFallback,
	RWTrackedAsPlain:         mutation.RWTrackedAsPlain,
	RWTrackedByPresence:      mutation.RWTrackedByPresence,
	RWUndoWakes:              mutation.RWUndoWakes,
	RWWonUndoSilent:          mutation.RWWonUndoSilent,
	RWWriterIgnoresReaders:   mutation.RWWriterIgnoresReaders,
	ReleaseKeepsTurn:         mutation.ReleaseKeepsTurn,
	SemSplitWaitsFallback:    mutation.SemSplitWaitsFallback,
	SemUndoWakes:             mutation.SemUndoWakes,
	SemaphoreSplitVote:       mutation.SemaphoreSplitVote,
	SplitVoteStaleEntry:      mutation.SplitVoteStaleEntry,
	StaleShorterExtend:       mutation.StaleShorterExtend,
}
