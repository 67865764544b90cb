package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redistest"
)

func TestParseClusterFlags(t *testing.T) {
	cfg, _, err := parseRunFlags([]string{"--masters", "m:1", "--clusters", "a:1,a:2/b:1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Masters) != 1 || len(cfg.Clusters) != 2 || strings.Join(cfg.Clusters[0], ",") != "a:1,a:2" || cfg.Clusters[1][0] != "b:1" {
		t.Errorf("--masters m:1 --clusters a:1,a:2/b:1: masters %v clusters %v", cfg.Masters, cfg.Clusters)
	}
	if got := cfg.RunConfig().Clusters; got != "a:1,a:2/b:1" {
		t.Errorf("summary config clusters %q, want it as given", got)
	}
	cfg, _, err = parseRunFlags([]string{"--local-masters", "3", "--cluster-shards", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LocalMasters != 3 || cfg.ClusterShards != 2 || cfg.Clusters != nil {
		t.Errorf("--local-masters 3 --cluster-shards 2: local %d shards %d clusters %v", cfg.LocalMasters, cfg.ClusterShards, cfg.Clusters)
	}
}

func TestParseClusterFlagsBad(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--clusters", ""}, `--clusters: give one or more clusters, host:port,host:port/host:port,... ("/" between votes), got ""`},
		{[]string{"--clusters", "a"}, `--clusters: cluster 1: address "a": want host:port, got a`},
		{[]string{"--clusters", "a:1//b:1"}, `--clusters: cluster 2 is empty: give some of its nodes, host:port,host:port, with "/" between clusters, got a:1//b:1`},
		{[]string{"--clusters", "a:1,a:1"}, `--clusters: cluster 1: address "a:1" is listed twice, got a:1,a:1`},
		{[]string{"--clusters", "a:1/a:1"}, `--clusters: the engine refuses it: Config.Clusters[1][0] "a:1" duplicates Config.Clusters[0][0]: votes must be distinct, got a:1/a:1`},
		{[]string{"--clusters", "a:1", "--masters", "a:1"}, `--clusters: the engine refuses it: Config.Clusters[0][0] "a:1" duplicates Config.Masters[0]: votes must be distinct, got a:1`},
		{[]string{"--clusters", "a:1", "--local-masters", "3"}, "--local-masters: cannot be combined with --clusters, got 3"},
		{[]string{"--clusters", "a:1", "--cluster-shards", "2"}, "--cluster-shards: applies to --local-masters only: the votes of --masters and --clusters are given, not started, got 2"},
		{[]string{"--masters", "a:1", "--cluster-shards", "2"}, "--cluster-shards: applies to --local-masters only: the votes of --masters and --clusters are given, not started, got 2"},
		{[]string{"--cluster-shards", "-1"}, "--cluster-shards: must be in 0..16 (0: plain masters), got -1"},
		{[]string{"--cluster-shards", "17"}, "--cluster-shards: must be in 0..16 (0: plain masters), got 17"},
		{[]string{"--cluster-shards", "2", "--engine", "redsync-rueidis"}, "--engine: cannot vote on Redis Clusters (--clusters, --cluster-shards): only redlock, redlock-percmd, redlock-sequential and rueidislock (on the first vote) can, got redsync-rueidis"},
		{[]string{"--clusters", "a:1", "--engine", "nolock"}, "--engine: cannot vote on Redis Clusters (--clusters, --cluster-shards): only redlock, redlock-percmd, redlock-sequential and rueidislock (on the first vote) can, got nolock"},
		{[]string{"--cluster-shards", "2", "--engine", "bsm-redislock"}, "--engine: cannot vote on Redis Clusters (--clusters, --cluster-shards): only redlock, redlock-percmd, redlock-sequential and rueidislock (on the first vote) can, got bsm-redislock"},
		{[]string{"--cluster-shards", "2", "--local-masters", "2", "--engine", "redlock@3"}, "--engine: votes on the first 3 masters, and the run has 2, got redlock@3"},
		{[]string{"--cluster-shards", "2", "--fault", "kill:1@1s"}, "--fault: acts on plain masters only, not on Redis Clusters, got kill:1@1s"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"run"}, c.args...), &stdout, &stderr)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", c.args, code, stderr.String())
		}
		if want := "redlock-bench: " + c.want + "\n"; stderr.String() != want {
			t.Errorf("%q:\n got %q\nwant %q", c.args, stderr.String(), want)
		}
	}
}

// A run on local clusters stops every node of every cluster when it is
// interrupted, as a run on plain masters stops its masters, and its
// summary records the shape: three votes of two shards each.
func TestInterruptStopsLocalClusters(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	cmd := command(t, "run", "--local-masters", "3", "--cluster-shards", "2", "--workers", "8", "--duration", "1m", "--warmup", "0", "--out", out)
	// Interrupted once the clusters are up and the run has acquired.
	lines := stderrLines(start(t, cmd))
	m := awaitLines(t, cmd, lines, regexp.MustCompile(`^redlock-bench: started 3 local Redis Clusters of 2 shards: (.*)$`), measuredProgress)
	drain(lines)
	var nodes []string
	for _, vote := range strings.Split(m[0][1], "/") {
		nodes = append(nodes, strings.Split(vote, ",")...)
	}
	if len(nodes) != 6 {
		cmd.Process.Kill()
		t.Fatalf("cluster nodes not announced: %v", nodes)
	}
	awaitStop(t, cmd, syscall.SIGINT)
	for _, a := range nodes {
		if err := redistest.Ping(a, 200*time.Millisecond); err == nil {
			t.Errorf("cluster node %s still answers after the run", a)
		}
		port := a[strings.LastIndexByte(a, ':')+1:]
		if pids := serversOnPort(port); len(pids) > 0 {
			t.Errorf("redis-server on port %s still running: pids %v", port, pids)
		}
	}
	s := readSummary(t, out)
	if cl, _ := s["clusters"].([]any); len(cl) != 3 || s["cluster_shards"] != 2.0 || s["local_masters"] != true {
		t.Errorf("summary.json clusters %v cluster_shards %v local_masters %v, want 3 clusters of 2 shards, local", s["clusters"], s["cluster_shards"], s["local_masters"])
	}
	txt, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "votes        3: 0 masters, 3 Redis Clusters of 2 shards each (started locally)\n"; !strings.Contains(string(txt), want) {
		t.Errorf("summary.txt lacks %q:\n%s", want, txt)
	}
}

// make bench-cluster is make bench on 3 local clusters: the same lines,
// the labels ending in -clusterS, exit 0 on safe runs.
func TestMakeBenchCluster(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir()
	cmd := exec.Command("make", "-s", "--no-print-directory", "bench-cluster", "RUNS="+runs,
		"CLUSTER_SHARDS=2", "BENCH_DURATION=500ms", "BENCH_FLAGS=--workers 4 --warmup 0")
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	out := string(b)
	line := regexp.MustCompile(`(?m)^   redlock: [0-9]+\.[0-9] acquisitions/s, p50=[0-9.]+ ms p99=[0-9.]+ ms, [0-9]+ errors.*, 0 violations`)
	if code := exitStatus(err); code != 0 || len(line.FindAllString(out, -1)) != 3 {
		t.Fatalf("exit %d, want 0 and three run lines:\n%s", code, out)
	}
	for _, label := range []string{"uncontended-cluster2", "contended-cluster2", "hotkeys-cluster2"} {
		dirs, _ := filepath.Glob(filepath.Join(runs, "*-"+label))
		if len(dirs) != 1 {
			t.Errorf("%s: %d result directories, want 1:\n%s", label, len(dirs), out)
			continue
		}
		if s := readSummary(t, dirs[0]); s["cluster_shards"] != 2.0 {
			t.Errorf("%s: cluster_shards %v, want 2", label, s["cluster_shards"])
		}
	}
}

// make bench-cluster S=1,2 runs the standard set once per shard count,
// each labelled with its own, and each run records its nodes' readings.
func TestMakeBenchClusterShardList(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir()
	cmd := exec.Command("make", "-s", "--no-print-directory", "bench-cluster", "RUNS="+runs,
		"S=1,2", "BENCH_DURATION=300ms", "BENCH_FLAGS=--workers 4 --warmup 0")
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if code := exitStatus(err); code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, b)
	}
	for _, s := range []float64{1, 2} {
		label := fmt.Sprintf("uncontended-cluster%d", int(s))
		dirs, _ := filepath.Glob(filepath.Join(runs, "*-"+label))
		if len(dirs) != 1 {
			t.Errorf("%s: %d result directories, want 1:\n%s", label, len(dirs), b)
			continue
		}
		if sum := readSummary(t, dirs[0]); sum["cluster_shards"] != s || sum["server"] == nil {
			t.Errorf("%s: cluster_shards %v, server %v", label, sum["cluster_shards"], sum["server"])
		}
	}
}
