package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

// MaxClusterShards bounds --cluster-shards: every shard of every local
// cluster is a redis-server process of its own.
const MaxClusterShards = 16

// clusterSep separates the votes of --clusters. Neither a host name nor an
// address holds it, and a shell or make reads it as it is.
const clusterSep = "/"

// ParseClusters reads --clusters: one Redis Cluster per vote, the votes
// separated by "/", each given by some of its nodes' addresses,
// host:port,host:port (the engine learns the rest from them).
func ParseClusters(list string) ([][]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("give one or more clusters, host:port,host:port/host:port,... (\"/\" between votes)")
	}
	var out [][]string
	for i, vote := range strings.Split(list, clusterSep) {
		if strings.TrimSpace(vote) == "" {
			return nil, fmt.Errorf("cluster %d is empty: give some of its nodes, host:port,host:port, with \"/\" between clusters", i+1)
		}
		seeds, err := engine.ParseMasters(vote)
		if err != nil {
			return nil, fmt.Errorf("cluster %d: %v", i+1, err)
		}
		out = append(out, seeds)
	}
	return out, nil
}

// FormatClusters writes clusters as --clusters reads them; "" for none.
func FormatClusters(clusters [][]string) string {
	votes := make([]string, len(clusters))
	for i, seeds := range clusters {
		votes[i] = strings.Join(seeds, ",")
	}
	return strings.Join(votes, clusterSep)
}

// validateClusters checks --clusters and --cluster-shards against the rest
// of the run: only the redlock engines vote on clusters, every vote counts
// (no NAME@N), and faults act on plain masters only.
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
	case !IsRedlock(c.Engine):
		return cfgErr("engine", c.Engine, "cannot vote on Redis Clusters (--clusters, --cluster-shards): only redlock, %s and %s can", EnginePerCommand, EngineSequential)
	case engineVoters(c.Engine) > 0:
		return cfgErr("engine", c.Engine, "votes on the first masters only: with Redis Clusters every vote counts (drop the @N)")
	case len(c.Faults) > 0:
		return cfgErr("fault", c.Faults, "acts on plain masters only, not on Redis Clusters")
	}
	return nil
}

// startLocalClusters starts n Redis Clusters of shards primaries each on
// free loopback ports, all at once; on error it stops those it started.
// The caller stops them (stopClusters) on every exit path; the processes
// also die with this one (Pdeathsig).
func startLocalClusters(ctx context.Context, n, shards int) ([]*redisproc.RedisCluster, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out := make([]*redisproc.RedisCluster, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = redisproc.StartRedisCluster(ctx, redisproc.ClusterOptions{Shards: shards}, redisproc.Options{})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		stopClusters(out)
		return nil, fmt.Errorf("start %d local Redis Clusters of %d shards: %w", n, shards, err)
	}
	return out, nil
}

// stopClusters stops every cluster started; nil entries are skipped.
func stopClusters(cs []*redisproc.RedisCluster) {
	for _, c := range cs {
		if c != nil {
			c.Stop()
		}
	}
}

// clusterSeeds are the clusters' addresses as the engine takes them: every
// primary of each.
func clusterSeeds(cs []*redisproc.RedisCluster) [][]string {
	out := make([][]string, len(cs))
	for i, c := range cs {
		out[i] = c.Seeds()
	}
	return out
}

// flatten lists the addresses of every cluster, for the probe.
func flatten(clusters [][]string) []string {
	var out []string
	for _, seeds := range clusters {
		out = append(out, seeds...)
	}
	return out
}
