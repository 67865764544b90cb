package bench

import (
	"slices"
	"testing"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// A contended run on three local Redis Clusters of two shards each, one
// vote per cluster: the oracle finds no overlapping holds, and the summary
// records the shape.
func TestRunOnLocalClustersIsSafe(t *testing.T) {
	noLeaks(t)
	cfg := shortConfig("redlock", nil)
	cfg.LocalMasters, cfg.ClusterShards = 3, 2
	loadProof(&cfg)
	s := run(t, cfg).Summary
	if s.Violations != 0 {
		t.Fatalf("%d violations on clusters: %v", s.Violations, s.ViolationExamples)
	}
	if s.Acquired == 0 || s.Contended == 0 {
		t.Errorf("acquired %d contended %d: want both under contention", s.Acquired, s.Contended)
	}
	if n := s.Errors["no_quorum"] + s.Errors["other"]; n != 0 {
		t.Errorf("errors %v: %v", s.Errors, s.ErrorExamples)
	}
	if len(s.Masters) != 0 || len(s.Clusters) != 3 || s.ClusterShards != 2 || !s.LocalMasters || len(s.Nodes) != 3 {
		t.Errorf("masters %v clusters %v shards %d local %v nodes %d: want 3 local clusters of 2 shards",
			s.Masters, s.Clusters, s.ClusterShards, s.LocalMasters, len(s.Nodes))
	}
	for i, seeds := range s.Clusters {
		if len(seeds) != 2 {
			t.Errorf("cluster %d seeds %v, want its 2 primaries", i, seeds)
		}
	}
}

// Given votes mix: two plain masters and one cluster (--masters,
// --clusters) make three votes, the cluster's after the masters'.
func TestRunOnGivenMastersAndClusterIsSafe(t *testing.T) {
	noLeaks(t)
	masters := redistest.StartT(t, 2)
	clusters := redistest.StartClustersT(t, 1, redistest.ClusterOptions{Shards: 2})
	cfg := shortConfig("redlock", masters.Addrs())
	cfg.Clusters = [][]string{clusters[0].Seeds()}
	loadProof(&cfg)
	s := run(t, cfg).Summary
	if s.Violations != 0 {
		t.Fatalf("%d violations: %v", s.Violations, s.ViolationExamples)
	}
	if s.Acquired == 0 {
		t.Errorf("acquired nothing: errors %v", s.Errors)
	}
	if !slices.Equal(s.Masters, masters.Addrs()) || len(s.Clusters) != 1 || !slices.Equal(s.Clusters[0], clusters[0].Seeds()) ||
		s.ClusterShards != 0 || s.LocalMasters || len(s.Nodes) != 3 {
		t.Errorf("masters %v clusters %v shards %d local %v nodes %d: want the given 2 masters and 1 cluster",
			s.Masters, s.Clusters, s.ClusterShards, s.LocalMasters, len(s.Nodes))
	}
	if s.Config.Clusters != engines.FormatClusters(cfg.Clusters) {
		t.Errorf("config clusters %q", s.Config.Clusters)
	}
}
