package bench

import (
	"context"
	"strings"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/masters"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

// The masters a series of runs (a sweep, a comparison) shares: started
// once, pointed at by every run as given votes that the series started
// (Config.sharedLocal), and stopped by the series.

// shareLocalMasters starts the local masters once for a series of runs
// and points cfg at them; the caller stops the cluster. As in Run, the
// quarantine defaults to observed: masters this process started hold no
// locks.
func shareLocalMasters(ctx context.Context, cfg *Config, series string, logf func(string, ...any)) (*redisproc.Cluster, error) {
	if cfg.ClusterShards > 0 {
		return nil, cfgErr("cluster-shards", cfg.ClusterShards, "applies to run only: a %s starts plain masters", series)
	}
	cluster, err := masters.Start(ctx, cfg.LocalMasters)
	if err != nil {
		return nil, err
	}
	cfg.Masters = cluster.Addrs()
	logf("started %d local redis-server for the whole %s: %s", len(cfg.Masters), series, strings.Join(cfg.Masters, ","))
	cfg.Quarantine = cfg.Quarantine.For(true)
	return cluster, nil
}

// shareLocalClusters starts cfg.LocalMasters local Redis Clusters of
// cfg.ClusterShards shards once for a series of runs (a comparison) and
// points cfg at them as given clusters that the series started; the
// caller stops them (masters.StopClusters). As in Run, the quarantine
// defaults to observed.
func shareLocalClusters(ctx context.Context, cfg *Config, series string, logf func(string, ...any)) ([]*redisproc.RedisCluster, error) {
	clusters, err := startLocalClusters(ctx, cfg.LocalMasters, cfg.ClusterShards)
	if err != nil {
		return nil, err
	}
	cfg.Clusters = masters.Seeds(clusters)
	cfg.sharedLocal, cfg.sharedShards, cfg.ClusterShards = true, cfg.ClusterShards, 0
	logf("started %d local Redis Clusters of %d shards for the whole %s: %s", len(clusters), cfg.sharedShards, series, engines.FormatClusters(cfg.Clusters))
	cfg.Quarantine = cfg.Quarantine.For(true)
	return clusters, nil
}
