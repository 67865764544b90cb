//go:build !redlock_faults

package engine

// faults are the fault points: each undoes one of the package's fixes,
// for the tests that show they find the bug it lets back in
// (internal/mutation). In a build without the redlock_faults tag, which
// is every build but the tests', each is a constant false that the
// compiler removes with the code it guards, and internal/mutation is not
// linked.
var faults struct {
	AcquireAllPartial        fault
	AcquireIgnoresValidity   fault
	ClockErrorIgnored        fault
	ClusterGuessOnce         fault
	ClusterKeysUntagged      fault
	ClusterMigrationNoResend fault
	ClusterNotifyStaleShard  fault
	ClusterReplicaNoResend   fault
	ExpiredLeaseKeepsKey     fault
	FenceCounterExpiresEarly fault
	FenceRefusalIsContention fault
	FencingWithoutClockFloor fault
	GhostInQueue             fault
	HandOffEndedLease        fault
	LateReleaseWakesNext     fault
	LateReleaseWakesOlder    fault
	LockAllHogsTurns         fault
	LossNoticedLate          fault
	QuitKeepsTurn            fault
	RWIntentIgnored          fault
	RWJoinIgnoresIntent      fault
	RWReaderUndoSilent       fault
	RWReaderIgnoresWriter    fault
	RWReadersExclude         fault
	RWRemoteValidityAsPlain  fault
	RWSplitWaitsFallback     fault
	RWTrackedAsPlain         fault
	RWTrackedByPresence      fault
	RWUndoWakes              fault
	RWWonUndoSilent          fault
	RWWriterIgnoresReaders   fault
	ReleaseKeepsTurn         fault
	SemCheckStampedOnSend    fault
	SemSplitWaitsFallback    fault
	SemUndoWakes             fault
	SemaphoreSplitVote       fault
	SplitVoteStaleEntry      fault
	StaleShorterExtend       fault
	ValidityIgnoresDrift     fault
}

type fault struct{}

func (fault) On() bool { return false }
