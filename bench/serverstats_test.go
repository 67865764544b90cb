package bench

import (
	"slices"
	"testing"

	"github.com/redlock-bench/redlock/internal/redistest"
)

func TestParseServerInfo(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9.0\r\n" +
		"# Stats\r\ntotal_reads_processed:42\r\n# Commandstats\r\ncmdstat_set:calls=10,usec=5,usec_per_call=0.5,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=7,usec=70,usec_per_call=10.0\r\ncmdstat_cluster|nodes:calls=1,usec=1\r\n"
	r, err := parseServerInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	if r.cpuS != 3.75 || r.calls != 18 || r.reads != 42 || r.commands["set"] != 10 || r.commands["evalsha"] != 7 || r.commands["cluster|nodes"] != 1 {
		t.Errorf("%+v", r)
	}
	if _, err := parseServerInfo("# Commandstats\r\ncmdstat_set:calls=1\r\n"); err == nil {
		t.Error("no INFO cpu read as 0 CPU time")
	}
}

// CLUSTER NODES: the primaries that serve slots and are not failing; a
// node without an IP of its own takes the seed's host.
func TestParseClusterPrimaries(t *testing.T) {
	text := "a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460\n" +
		"a2 127.0.0.1:7002@17002,host2 master - 0 0 2 connected 5461-10922\n" +
		"a3 127.0.0.1:7003@17003 slave a1 0 0 1 connected\n" +
		"a4 127.0.0.1:7004@17004 master,fail - 0 0 4 disconnected 10923-16383\n" +
		"a5 127.0.0.1:7005@17005 master - 0 0 5 connected\n" +
		"a6 :7006@17006 master - 0 0 6 connected 16000\n"
	got := parseClusterPrimaries(text, "10.0.0.1")
	if want := []string{"127.0.0.1:7001", "127.0.0.1:7002", "10.0.0.1:7006"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// A run records what every primary of its votes spent on the measured
// window: on local clusters, each shard's primary under its vote; on
// given clusters, the primaries CLUSTER NODES names (the seed is one of
// them); on plain masters, each master. The lock cycles' commands are
// there, and the nodes and the load generator spent CPU time on them.
func TestRunRecordsServerStats(t *testing.T) {
	noLeaks(t)
	cfg := shortConfig("redlock", nil)
	cfg.LocalMasters, cfg.ClusterShards = 2, 2
	cfg.Resources = 1000
	// By count: under load a window of a second can see next to nothing.
	loadProof(&cfg)
	s := run(t, cfg).Summary
	st := s.Server
	if st == nil {
		t.Fatal("no server readings")
	}
	if st.WindowS <= 0 || st.ClientCPUS <= 0 || len(st.Nodes) != 4 {
		t.Fatalf("window %v client CPU %v, %d nodes: want 4 nodes", st.WindowS, st.ClientCPUS, len(st.Nodes))
	}
	var addrs []string
	for i, n := range st.Nodes {
		addrs = append(addrs, n.Addr)
		if n.Vote != i/2 || n.CPUS <= 0 || n.Reads <= 0 || n.Commands["set"] == 0 || n.Commands["evalsha"] == 0 || n.Commands["info"] != 0 {
			t.Errorf("node %d: %+v", i, n)
		}
	}
	if want := slices.Concat(s.Clusters...); !slices.Equal(addrs, want) {
		t.Errorf("nodes %v, want the clusters' primaries %v", addrs, want)
	}

	// A given cluster named by one seed: its other primary is read too.
	clusters := redistest.StartClustersT(t, 1, redistest.ClusterOptions{Shards: 2})
	primaries := clusters[0].Seeds()
	cfg = shortConfig("redlock", nil)
	cfg.Clusters = [][]string{primaries[:1]}
	loadProof(&cfg)
	s = run(t, cfg).Summary
	if s.Server == nil {
		t.Fatal("no server readings on a given cluster")
	}
	addrs = nil
	for _, n := range s.Server.Nodes {
		addrs = append(addrs, n.Addr)
		if n.Vote != 0 || n.Commands["set"] == 0 {
			t.Errorf("given cluster: node %+v", n)
		}
	}
	slices.Sort(addrs)
	slices.Sort(primaries)
	if !slices.Equal(addrs, primaries) {
		t.Errorf("given cluster: nodes %v, want its primaries %v", addrs, primaries)
	}
}
