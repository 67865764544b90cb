package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/results"
)

// compare --cluster-shards S runs, in one comparison on local clusters
// started once: our engine on every cluster, our engine on the first
// alone and rueidislock on that one in its own model. Every run is safe,
// each engine voted where the table's notes say, and the clusters are
// stopped at the end.
func TestCompareOnLocalClusters(t *testing.T) {
	noLeaks(t)
	base := shortConfig("redlock", nil)
	base.Quarantine = engines.QuarantineDefault
	base.LocalMasters, base.ClusterShards = 3, 2
	base.Resources = 64
	// Each run ends after its operations, not after a time: on a loaded
	// machine a short window may see no acquisition.
	base.Ops, base.Duration, base.Warmup = 300, 0, 0
	cc := CompareConfig{Base: base, Dir: t.TempDir(), Label: "t"}
	cmp, err := RunCompare(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"redlock", "redlock@1", engines.Rueidislock.String()}; !slices.Equal(cmp.Engines, want) {
		t.Fatalf("engines %v, want %v by default on clusters", cmp.Engines, want)
	}
	if len(cmp.Clusters) != 3 || cmp.ClusterShards != 2 || !cmp.LocalMasters || len(cmp.Masters) != 0 {
		t.Errorf("clusters %v shards %d local %v masters %v: want 3 local clusters of 2 shards",
			cmp.Clusters, cmp.ClusterShards, cmp.LocalMasters, cmp.Masters)
	}
	if len(cmp.Runs) != 9 {
		t.Fatalf("%d runs, want 9", len(cmp.Runs))
	}
	wantVotes := map[string]int{"redlock": 3, "redlock@1": 1, engines.Rueidislock.String(): 1}
	for _, r := range cmp.Runs {
		s := readSummaryFile(t, filepath.Join(cc.Dir, r.Dir))
		if s.Violations != 0 || s.Acquired == 0 {
			t.Errorf("%s: %d violations, %d acquired", r.Dir, s.Violations, s.Acquired)
		}
		if len(s.Masters) != 0 || len(s.Clusters) != wantVotes[r.Engine] || s.ClusterShards != 2 || !s.LocalMasters {
			t.Errorf("%s: masters %v clusters %v shards %d local %v: want the first %d of the comparison's clusters",
				r.Dir, s.Masters, s.Clusters, s.ClusterShards, s.LocalMasters, wantVotes[r.Engine])
		}
		for i, seeds := range s.Clusters {
			if !slices.Equal(seeds, cmp.Clusters[i]) {
				t.Errorf("%s: cluster %d is %v, the comparison's is %v", r.Dir, i, seeds, cmp.Clusters[i])
			}
		}
		if s.Config.ClusterShards != 2 || s.Config.Clusters != "" {
			t.Errorf("%s: config cluster_shards %d clusters %q: want the flags that start them", r.Dir, s.Config.ClusterShards, s.Config.Clusters)
		}
	}
	for _, r := range cmp.Results {
		if r.Median == nil || r.Masters != wantVotes[r.Engine] {
			t.Errorf("%s: median %v, votes %d", r.Engine, r.Median, r.Masters)
		}
	}
	txt, err := os.ReadFile(filepath.Join(cc.Dir, results.CompareText))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"note         rueidislock runs on the first cluster alone, in its own model",
		"note         redlock@1 votes on the first cluster alone",
		"note         redlock votes on all 3 clusters: a quorum of 2",
		"masters      none, then 3 Redis Clusters of 2 shards each (started locally): ",
		"redlock@1, rueidislock on the first only; redlock on all 3",
	} {
		if !strings.Contains(string(txt), want) {
			t.Errorf("compare.txt lacks %q:\n%s", want, txt)
		}
	}
	for _, seeds := range cmp.Clusters {
		for _, a := range seeds {
			if redistest.Ping(a, 200*time.Millisecond) == nil {
				t.Errorf("cluster node %s still answers after the comparison", a)
			}
		}
	}
}

// On clusters, the engines that cannot run there and --limit are refused
// before anything starts, naming the flag.
func TestCompareOnClustersValidate(t *testing.T) {
	base := DefaultConfig()
	base.LocalMasters, base.ClusterShards = 3, 2
	for _, c := range []struct {
		engines []string
		limit   bool
		want    string
	}{
		{[]string{"redlock", engines.RedsyncRueidis.String()}, false, "redsync-rueidis: --engine: cannot vote on Redis Clusters"},
		{[]string{"redlock", engines.BsmRedislock.String()}, false, "bsm-redislock: --engine: cannot vote on Redis Clusters"},
		{nil, true, "--limit: measures plain masters only"},
	} {
		cc := CompareConfig{Base: base, Engines: engineList(c.engines...), Limit: c.limit, Dir: t.TempDir()}
		if err := cc.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("engines %v limit %v: %v, want %q...", c.engines, c.limit, err, c.want)
		}
	}
	given := DefaultConfig()
	given.Clusters = [][]string{{"127.0.0.1:1"}, {"127.0.0.1:2"}, {"127.0.0.1:3"}}
	cc := CompareConfig{Base: given}
	if err := cc.Validate(); err != nil {
		t.Fatal(err)
	}
	if want := engineList("redlock", "redlock@1", "rueidislock"); !slices.Equal(cc.Engines, want) {
		t.Errorf("engines %v on --clusters, want %v", cc.Engines, want)
	}
}

func readSummaryFile(t *testing.T, dir string) *results.Summary {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, results.SummaryJSON))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := results.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
