//go:build !redlock_faults

package multiplex

// faults are the fault points: each undoes one of the package's fixes,
// for the tests that show they find the bug it lets back in
// (internal/mutation). In a build without the redlock_faults tag, which
// is every build but the tests', each is a constant false that the
// compiler removes with the code it guards, and internal/mutation is not
// linked.
var faults struct {
	ClockErrorIgnored          fault
	ClockJudgedLate            fault
	ClockReadOnce              fault
	ClusterClockUnjudged       fault
	ClusterDemotedConnKept     fault
	ClusterFailoverTrusted     fault
	ClusterInfoAnyNode         fault
	ClusterMigrationUnguarded  fault
	ClusterRestartSlotsAsSeen  fault
	ClusterVotesShareNode      fault
	CoalesceAcrossSlots        fault
	CoalesceFirstKeyOnly       fault
	SentinelPromotionUnchecked fault
}

type fault struct{}

func (fault) On() bool { return false }
