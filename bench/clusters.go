package bench

import (
	"context"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/masters"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

// MaxClusterShards bounds --cluster-shards: every shard of every local
// cluster is a redis-server process of its own.
const MaxClusterShards = masters.MaxClusterShards

// validateClusters checks --clusters and --cluster-shards against the rest
// of the run: only the redlock engines vote on clusters (NAME@N on the
// first N votes, masters first) and rueidislock on the first vote, a
// cluster of its own model; faults act on plain masters only.
func (c *Config) validateClusters() error {
	if c.ClusterShards < 0 || c.ClusterShards > MaxClusterShards {
		return cfgErr("cluster-shards", c.ClusterShards, "must be in 0..%d (0: plain masters)", MaxClusterShards)
	}
	if c.ClusterShards > 0 && c.givenVotes() {
		return cfgErr("cluster-shards", c.ClusterShards, "applies to --local-masters only: the votes of --masters and --clusters are given, not started")
	}
	if len(c.Clusters) == 0 && c.ClusterShards == 0 {
		return nil
	}
	switch {
	case !c.Engine.Clusters():
		return cfgErr("engine", c.Engine, "cannot vote on Redis Clusters (--clusters, --cluster-shards): only redlock, %s, %s and %s (on the first vote) can",
			engines.RedlockPerCommand, engines.RedlockSequential, engines.Rueidislock)
	case len(c.Faults) > 0:
		return cfgErr("fault", c.Faults, "acts on plain masters only, not on Redis Clusters")
	}
	return nil
}

// startLocalClusters starts n Redis Clusters of shards primaries each on
// free loopback ports, all at once; on error it stops those it started.
// The caller stops them (masters.StopClusters) on every exit path.
func startLocalClusters(ctx context.Context, n, shards int) ([]*redisproc.RedisCluster, error) {
	return masters.StartClusters(ctx, n, redisproc.ClusterOptions{Shards: shards}, 60*time.Second)
}

// clusterVotes reports whether some of the run's votes are Redis
// Clusters, given (--clusters) or started (--cluster-shards).
func (c *Config) clusterVotes() bool { return len(c.Clusters) > 0 || c.ClusterShards > 0 }
