package results

import (
	"strings"
	"testing"
)

// clusterRun is a synthetic run on 3 clusters of 2 shards whose nodes'
// readings give round figures per acquisition (2000 acquisitions, 1000/s): 2 µs on
// every node but one of vote 2, 3 µs; 10 µs in the load generator.
func clusterRun(label string) synthRun {
	node := func(addr string, vote int, cpuS float64) map[string]any {
		return map[string]any{"addr": addr, "vote": vote, "cpu_s": cpuS, "calls": 6000, "reads": 1500,
			"commands": map[string]any{"set": 2000, "evalsha": 2000, "get": 1000, "del": 1000}}
	}
	return synthRun{label: label, workers: 64, start: synthStart, warmupS: 1, seconds: 2,
		perSec: func(int) int64 { return 1000 }, latencyUs: exponential(500, 2000), holdUs: 0,
		extra: map[string]any{
			"masters":        []string{},
			"clusters":       [][]string{{"127.0.0.1:7001", "127.0.0.1:7002"}, {"127.0.0.1:7003", "127.0.0.1:7004"}, {"127.0.0.1:7005", "127.0.0.1:7006"}},
			"cluster_shards": 2,
			"server": map[string]any{"window_s": 2.0, "client_cpu_s": 0.02, "nodes": []any{
				node("127.0.0.1:7001", 0, 0.004), node("127.0.0.1:7002", 0, 0.004),
				node("127.0.0.1:7003", 1, 0.004), node("127.0.0.1:7004", 1, 0.006),
				node("127.0.0.1:7005", 2, 0.004), node("127.0.0.1:7006", 2, 0.004),
			}},
		}}
}

// A run with cluster votes and its nodes' readings gets the scaling
// section: the cost per acquisition of each node and vote, the model's
// bounds computed from them, and the projection over shards.
func TestCapacityScalingModel(t *testing.T) {
	t.Parallel()
	md := capacityOfRuns(t, clusterRun("clustered"))
	wantIn(t, md,
		"## Server CPU and scaling with shards",
		"3 votes: 0 masters, 3 Redis Clusters of 2 shards): 1,000 acquisitions/s measured; per acquisition the servers spent 13.0 µs of CPU in all, the load generator 10.0 µs; 18.00 commands (6.00 script calls",
		"vote 2 (cluster of 2 shards): 5.0 µs of CPU per acquisition (per node: 2.0, 3.0 µs); commands per acquisition per node: 3.00, 3.00; commands per socket read (the batch a wake-up serves): 4.0, 4.0.",
		// The busiest node, 3 µs: 1/3µs; the 2 cores shared: 2/(13+10) µs.
		"the busiest node's thread allows 333,333 acquisitions/s",
		"on this machine's 2 cores, shared by every server and the load generator, 86,956 acquisitions/s (measured: 1% of it)",
		// The worst vote, 5 µs, spread over S shards: S/5µs.
		"S=1: 200,000/s on 3 server cores and 2.0 client cores; S=2: 400,000/s on 6 server cores",
		"S=16: 3,200,000/s on 48 server cores",
		"**Hot slot:**", "**Assumptions:**")
}

// Without cluster votes, or without readings, the plan has no scaling
// section.
func TestCapacityScalingOnlyWithClusters(t *testing.T) {
	t.Parallel()
	plain := clusterRun("plain")
	plain.extra = map[string]any{"server": plain.extra["server"]}
	noReadings := clusterRun("unread")
	delete(noReadings.extra, "server")
	for _, r := range []synthRun{plain, noReadings} {
		if md := capacityOfRuns(t, r); strings.Contains(md, "Server CPU and scaling") {
			t.Errorf("%s: a scaling section:\n%s", r.label, md)
		}
	}
}

// onOneShard is clusterRun on 3 clusters of one shard each, every node
// (a whole vote) spending cpuS per 2000 acquisitions.
func onOneShard(label string, cpuS float64) synthRun {
	r := clusterRun(label)
	node := func(addr string, vote int) map[string]any {
		return map[string]any{"addr": addr, "vote": vote, "cpu_s": cpuS, "calls": 6000}
	}
	r.extra = map[string]any{
		"masters":        []string{},
		"clusters":       [][]string{{"127.0.0.1:7001"}, {"127.0.0.1:7003"}, {"127.0.0.1:7005"}},
		"cluster_shards": 1,
		"server": map[string]any{"window_s": 2.0, "client_cpu_s": 0.02, "nodes": []any{
			node("127.0.0.1:7001", 0), node("127.0.0.1:7003", 1), node("127.0.0.1:7005", 2)}},
	}
	return r
}

// Runs of one workload at several shard counts are set side by side, and
// the plan says whether a vote's cost held as the model assumes: from
// 4.0 µs per vote on one shard to 4.3 on two, it held; from 2.0, it did
// not.
func TestCapacityScalingAcrossShards(t *testing.T) {
	t.Parallel()
	md := capacityOfRuns(t, onOneShard("one", 0.008), clusterRun("two"))
	wantIn(t, md, "**Across shard counts** (redlock, 3 votes, 64 workers, 1000 resources (uniform), mode try, hold exp:1ms; medians of each count's runs):",
		"S=1 (1 run): 1,000 acquisitions/s; 4.0 µs of server CPU per acquisition per vote, 4.0 per node.",
		"S=2 (1 run): 1,000 acquisitions/s; 4.3 µs of server CPU per acquisition per vote, 2.2 per node; 4.0 commands per socket read, 0.750 reads per acquisition per node.",
		"went from 4.0 µs on the fewest shards to 4.3 µs on S=2 (1.08×); the model assumes it stays: it held, within 20%")
	// onOneShard's nodes report no reads: the reason stays a guess.
	md = capacityOfRuns(t, onOneShard("one", 0.004), clusterRun("two"))
	wantIn(t, md, "went from 2.0 µs on the fewest shards to 4.3 µs on S=2 (2.17×); the model assumes it stays: it did not hold here",
		"(likely: each node's share of the commands")
	// With as many reads per acquisition per node on one shard as on two
	// (0.750), the reason is measured.
	one := onOneShard("one", 0.004)
	for _, n := range one.extra["server"].(map[string]any)["nodes"].([]any) {
		n.(map[string]any)["reads"] = 1500
	}
	md = capacityOfRuns(t, one, clusterRun("two"))
	wantIn(t, md, "Each node was woken about as often per acquisition (0.750 reads, then 0.750)")
}

// summary.txt sums the readings up in one line per run.
func TestSummaryTextServerLine(t *testing.T) {
	s := &Summary{Acquired: 2000, Errors: map[string]int64{}, Clusters: [][]string{{"a:1", "a:2"}},
		Server: &ServerStats{WindowS: 2, ClientCPUS: 0.02, Nodes: []ServerNode{
			{Addr: "a:1", CPUS: 0.004, Calls: 6000}, {Addr: "a:2", CPUS: 0.006, Calls: 6000}}}}
	var b strings.Builder
	if err := WriteText(&b, s); err != nil {
		t.Fatal(err)
	}
	want := "server       2 nodes: 5.0 µs of CPU (busiest node 3.0 µs) and 6.00 commands per acquisition; load generator 10.0 µs\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("summary.txt lacks %q:\n%s", want, b.String())
	}
}
