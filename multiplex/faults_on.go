//go:build redlock_faults

package multiplex

import "github.com/redlock-bench/redlock/internal/mutation"

// faults are the fault points, switched by the tests (see faults.go).
var faults = struct {
	ClockErrorIgnored          *mutation.Switch
	ClockJudgedLate            *mutation.Switch
	ClockReadOnce              *mutation.Switch
	ClusterClockUnjudged       *mutation.Switch
	ClusterDemotedConnKept     *mutation.Switch
	ClusterFailoverTrusted     *mutation.Switch
	ClusterInfoAnyNode         *mutation.Switch
	ClusterMigrationUnguarded  *mutation.Switch
	ClusterRestartSlotsAsSeen  *mutation.Switch
	ClusterVotesShareNode      *mutation.Switch
	CoalesceAcrossSlots        *mutation.Switch
	CoalesceFirstKeyOnly       *mutation.Switch
	SentinelPromotionUnchecked *mutation.Switch
}{
	ClockErrorIgnored:          mutation.ClockErrorIgnored,
	ClockJudgedLate:            mutation.ClockJudgedLate,
	ClockReadOnce:              mutation.ClockReadOnce,
	ClusterClockUnjudged:       mutation.ClusterClockUnjudged,
	ClusterDemotedConnKept:     mutation.ClusterDemotedConnKept,
	ClusterFailoverTrusted:     mutation.ClusterFailoverTrusted,
	ClusterInfoAnyNode:         mutation.ClusterInfoAnyNode,
	ClusterMigrationUnguarded:  mutation.ClusterMigrationUnguarded,
	ClusterRestartSlotsAsSeen:  mutation.ClusterRestartSlotsAsSeen,
	ClusterVotesShareNode:      mutation.ClusterVotesShareNode,
	CoalesceAcrossSlots:        mutation.CoalesceAcrossSlots,
	CoalesceFirstKeyOnly:       mutation.CoalesceFirstKeyOnly,
	SentinelPromotionUnchecked: mutation.SentinelPromotionUnchecked,
}
