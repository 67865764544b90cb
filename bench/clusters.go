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
	case !IsRedlock(c.Engine) && baseEngine(c.Engine) != engineRueidislock:
		return cfgErr("engine", c.Engine, "cannot vote on Redis Clusters (--clusters, --cluster-shards): only redlock, %s, %s and %s (on the first vote) can", EnginePerCommand, EngineSequential, engineRueidislock)
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

// givenVoted are the given votes (--masters, then --clusters) the engine
// votes on: the first voters() of them.
func (c *Config) givenVoted() (masters []string, clusters [][]string) {
	n := c.voters()
	if n <= len(c.Masters) {
		return c.Masters[:n], nil
	}
	// Sentinel votes (--sentinel) come after, all of them (validateSentinels).
	return c.Masters, c.Clusters[:min(n-len(c.Masters), len(c.Clusters))]
}

// clusterVotes reports whether some of the run's votes are Redis
// Clusters, given (--clusters) or started (--cluster-shards).
func (c *Config) clusterVotes() bool { return len(c.Clusters) > 0 || c.ClusterShards > 0 }

// DefaultCompareEnginesOnClusters are compared by default when the votes
// are Redis Clusters, on lock: for a mutex, ours on every cluster, ours on
// the first alone, and rueidislock on that one in its own model (the other
// baselines cannot run on a cluster); for a multi-resource lease, ours and
// ours as K mutexes in turn; otherwise as DefaultCompareEnginesFor.
func DefaultCompareEnginesOnClusters(l Lock) []string {
	switch l.Kind {
	case LockMutex:
		return []string{"redlock", "redlock@1", engineRueidislock}
	case LockMulti:
		return []string{"redlock", EngineSequential}
	}
	return DefaultCompareEnginesFor(l)
}

// clusterCompareNotes say, in a comparison whose first vote is a Redis
// Cluster, which clusters each engine used and how it spreads a lock over
// their shards.
func clusterCompareNotes(base Config, engines []string) []string {
	if !base.clusterVotes() || len(base.Masters) > 0 {
		return nil
	}
	votes := base.masterCount()
	var notes []string
	for _, e := range engines {
		n := engineVoters(e)
		switch {
		case baseEngine(e) == engineRueidislock:
			notes = append(notes, fmt.Sprintf("%s runs on the first cluster alone, in its own model: one cluster client, a lock is %d of %d keys "+
				"(KeyMajority %d, its default), each key on the shard of its slot, so that a lock spans shards of one cluster; "+
				"it has no vote over independent clusters", e, rueidislockClusterMajority, 2*rueidislockClusterMajority-1, rueidislockClusterMajority))
		case !IsRedlock(e):
		case n == 1 || votes == 1:
			notes = append(notes, fmt.Sprintf("%s votes on the first cluster alone: a lock is one key, on the shard of its slot", e))
		case n > 0 && n < votes:
			notes = append(notes, fmt.Sprintf("%s votes on the first %d of the %d clusters: a quorum of %d, one key on the shard of its slot in each", e, n, votes, n/2+1))
		default:
			notes = append(notes, fmt.Sprintf("%s votes on all %d clusters: a quorum of %d, one key on the shard of its slot in each", e, votes, votes/2+1))
		}
	}
	return notes
}

// shareLocalClusters starts cfg.LocalMasters local Redis Clusters of
// cfg.ClusterShards shards once for a series of runs (a comparison) and
// points cfg at them as given clusters that the series started; the
// caller stops them (stopClusters). As in Run, the quarantine defaults
// to observed.
func shareLocalClusters(ctx context.Context, cfg *Config, series string, logf func(string, ...any)) ([]*redisproc.RedisCluster, error) {
	clusters, err := startLocalClusters(ctx, cfg.LocalMasters, cfg.ClusterShards)
	if err != nil {
		return nil, err
	}
	cfg.Clusters = clusterSeeds(clusters)
	cfg.sharedLocal, cfg.sharedShards, cfg.ClusterShards = true, cfg.ClusterShards, 0
	logf("started %d local Redis Clusters of %d shards for the whole %s: %s", len(clusters), cfg.sharedShards, series, FormatClusters(cfg.Clusters))
	if cfg.Quarantine == "" {
		cfg.Quarantine = "observed"
	}
	return clusters, nil
}
