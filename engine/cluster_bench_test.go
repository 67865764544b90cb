package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// TryLock+Release cycles over three clusters of one shard, with fencing
// (its acquire is a script too), with the slot guard every cluster script
// declares (see multiplex/migration.go) and without it
// (cluster-migration-unguarded): the guard's cost, one key more per call
// and a copy of KEYS in the script. Serial: the round trips; parallel:
// the masters' work, coalesced.
func BenchmarkClusterTryLockRelease(b *testing.B) {
	clusters := redistest.StartClustersT(b, 3, redistest.ClusterOptions{Shards: 1})
	for _, off := range []bool{false, true} {
		name := map[bool]string{false: "guarded", true: "unguarded"}[off]
		locker := func(b *testing.B) *engine.Locker {
			cfg := engine.DefaultConfig()
			for _, c := range clusters {
				cfg.Clusters = append(cfg.Clusters, c.Seeds())
			}
			cfg.Quarantine, cfg.Fencing, cfg.NodeTimeout = engine.QuarantineObserved, true, time.Second
			l, err := engine.New(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			return l
		}
		b.Run("serial/"+name, func(b *testing.B) {
			if off {
				mutation.Require(b)
			}
			defer mutation.ClusterMigrationUnguarded.Set(off)()
			cycleSerial(b, locker(b))
		})
		b.Run("parallel/"+name, func(b *testing.B) {
			if off {
				mutation.Require(b)
			}
			defer mutation.ClusterMigrationUnguarded.Set(off)()
			cycleParallel(b, locker(b), 64)
		})
	}
}
