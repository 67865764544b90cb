package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redistest"
)

// chaosClusterSeed draws, in 20 s at a TTL of 500 ms over 3 clusters of 2
// shards, every fault inside a cluster (a primary killed, a primary
// paused, a failover, a slot migration) and, on whole votes, a restart, a
// drop, a slow-down and client pauses.
const chaosClusterSeed = "73"

// Over cluster votes, under faults on whole votes and inside the
// clusters, the engine keeps every hold exclusive and every token
// increasing; every fault applies and lifts, and no node is left running.
func TestChaosClusters(t *testing.T) {
	code, stdout, r := runChaos(t, "--cluster-shards", "2", "--duration", "20s", "--ttl", "500ms", "--seed", chaosClusterSeed)
	if code != 0 || !r.Passed {
		t.Fatalf("exit %d, verdict %s\n%s", code, r.Verdict, stdout)
	}
	if r.Violations != 0 || r.StaleTokens != 0 || r.Store.StaleAccepted != 0 {
		t.Errorf("violations %d stale tokens %d stale accepted %d", r.Violations, r.StaleTokens, r.Store.StaleAccepted)
	}
	if r.ClusterShards != 2 || len(r.Clusters) != 3 || len(r.Masters) != 0 {
		t.Fatalf("shape: %d shards, clusters %v, masters %v; want 3 votes of 2 shards", r.ClusterShards, r.Clusters, r.Masters)
	}
	for _, k := range []string{"cluster-kill", "cluster-pause", "cluster-failover", "cluster-migrate"} {
		if r.Faults[k] == 0 {
			t.Errorf("no %s injected: %v (skipped %v)", k, r.Faults, r.FaultsSkipped)
		}
	}
	if len(r.FaultErrors) > 0 {
		t.Errorf("faults failed to apply or lift: %v", r.FaultErrors)
	}
	if r.Acquired < 20 || r.TokensChecked != r.Acquired {
		t.Errorf("too little was checked: %d locks, %d tokens", r.Acquired, r.TokensChecked)
	}
	if want := "--cluster-shards 2 --local-masters 3"; !strings.Contains(stdout, want) {
		t.Errorf("the replay lacks %q:\n%s", want, stdout)
	}
	for v, nodes := range r.Clusters {
		if len(nodes) != 4 {
			t.Errorf("vote %d: nodes %v, want 2 primaries and 2 replicas", v, nodes)
		}
		for _, a := range nodes {
			if err := redistest.Ping(a, 200*time.Millisecond); err == nil {
				t.Errorf("node %s of vote %d still answers after the soak", a, v)
			}
		}
	}
}

// The control over cluster votes: the engine that grants every request is
// caught.
func TestChaosClustersNolockFails(t *testing.T) {
	code, stdout, r := runChaos(t, "--duration", "2s", "--engine", "nolock", "--cluster-shards", "2")
	if code != 1 || r.Passed || r.Violations == 0 {
		t.Errorf("nolock over clusters: exit %d passed %v violations %d, want 1, false, > 0\n%s", code, r.Passed, r.Violations, stdout)
	}
}

func TestChaosClusterBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster-shards", "17"}, "--cluster-shards: must be in 0..16 (0: plain masters), got 17"},
		{[]string{"--cluster-shards", "2", "--masters", "a:1"}, "--cluster-shards: applies to local votes only, not --masters, got 2"},
		{[]string{"--cluster-shards", "2", "--class", "out-of-model"}, "--cluster-shards: applies to --class in-model only, got 2"},
		{[]string{"--cluster-shards", "2", "--local-masters", "9"}, "--local-masters: must be in 1..7 with --cluster-shards: every shard is two processes, got 9"},
		{[]string{"--local-masters", "3", "--masters", "a:1"}, "--local-masters: cannot be combined with --masters, got 3"},
	} {
		var stdout, stderr bytes.Buffer
		t.Chdir(t.TempDir())
		code := run(context.Background(), append([]string{"chaos"}, c.args...), &stdout, &stderr)
		if code != 2 || stderr.String() != "redlock-bench: "+c.want+"\n" {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// Ctrl-C stops a soak over clusters: partial results, status 130, no node
// of any cluster left running, paused nodes included. It comes once the
// soak has acquired and a fault is in (a node stopped or restarted).
func TestChaosClustersInterrupt(t *testing.T) {
	out := filepath.Join(t.TempDir(), "chaos")
	cmd := command(t, "chaos", "--cluster-shards", "2", "--duration", "1m", "--ttl", "500ms", "--seed", chaosClusterSeed,
		"--metrics-addr", "127.0.0.1:0", "--out", out)
	lines := stderrLines(start(t, cmd))
	m := awaitLines(t, cmd, lines, regexp.MustCompile(`started 3 local Redis Clusters of 2 shards with a replica each: (.*)$`), servingMetrics)
	drain(lines)
	nodes := strings.FieldsFunc(m[0][1], func(r rune) bool { return r == ',' || r == '/' })
	if len(nodes) != 12 {
		cmd.Process.Kill()
		t.Fatalf("cluster nodes not announced: %v", nodes)
	}
	scrapeUntil(t, cmd, m[1][1], func(body string) bool { return metricCount(acquiredSeries, body) > 0 })
	awaitFault(t, cmd, nodes)
	interruptAndWait(t, cmd)
	r := readChaos(t, out)
	if !r.Interrupted || r.Acquired == 0 {
		t.Errorf("partial result: interrupted %v, %d locks", r.Interrupted, r.Acquired)
	}
	for _, a := range nodes {
		if err := redistest.Ping(a, 200*time.Millisecond); err == nil {
			t.Errorf("node %s still answers after the soak", a)
		}
		port := a[strings.LastIndexByte(a, ':')+1:]
		if pids := serversOnPort(port); len(pids) > 0 {
			t.Errorf("redis-server on port %s still running: pids %v", port, pids)
		}
	}
}
