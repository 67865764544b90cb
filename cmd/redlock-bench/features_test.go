package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/results"
)

// The flags of issues 5 and 6: contention, long holds, fencing, faults.
func TestParseRunFlagsFeatures(t *testing.T) {
	start := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
	for _, c := range []struct {
		args  []string
		check func(bench.Config) bool
	}{
		{nil, func(c bench.Config) bool {
			return !c.Extend && !c.Fencing && !c.DisableGate && !c.DisableNotify && len(c.Faults) == 0 && c.StartAt.IsZero()
		}},
		{[]string{"--extend", "--ttl", "300ms", "--hold", "700ms"}, func(c bench.Config) bool {
			return c.Extend && c.TTL == 300*time.Millisecond && c.Hold.D == 700*time.Millisecond
		}},
		{[]string{"--fencing"}, func(c bench.Config) bool { return c.Fencing }},
		{[]string{"--node-timeout", "250ms"}, func(c bench.Config) bool {
			return c.NodeTimeout == 250*time.Millisecond && c.RunConfig().NodeTimeout == "250ms"
		}},
		{nil, func(c bench.Config) bool { return c.NodeTimeout == 0 && c.RunConfig().NodeTimeout == "" }},
		{[]string{"--gate=false", "--notify=false"}, func(c bench.Config) bool { return c.DisableGate && c.DisableNotify }},
		{[]string{"--gate=true"}, func(c bench.Config) bool { return !c.DisableGate }},
		{[]string{"--fault", "kill:2@5s,restart:2@6s,pause:3@10s+4s,slow:1=20ms@0s+10s,cut:4@15s+5s"}, func(c bench.Config) bool {
			return len(c.Faults) == 5 && c.Faults.String() == "kill:2@5s,restart:2@6s,pause:3@10s+4s,slow:1=20ms@0s+10s,cut:4@15s+5s"
		}},
		{[]string{"--fault", "stall:0@1s+2s", "--masters", "a:1,a:2,a:3"}, func(c bench.Config) bool { return len(c.Faults) == 1 }},
		{[]string{"--start-at", start.Format(time.RFC3339)}, func(c bench.Config) bool { return c.StartAt.Equal(start) }},
		{[]string{"--quarantine", "off"}, func(c bench.Config) bool { return c.Quarantine.String() == "off" }},
		{[]string{"--cpuprofile", "cpu.out"}, func(c bench.Config) bool { return true }},
		{nil, func(c bench.Config) bool { return c.Engine.String() == "redlock" }},
		{[]string{"--coalesce=false"}, func(c bench.Config) bool { return c.Engine.Base == engines.RedlockPerCommand }},
		{[]string{"--engine", engines.RedlockPerCommand.String(), "--fencing"}, func(c bench.Config) bool { return c.Engine.Base == engines.RedlockPerCommand && c.Fencing }},
	} {
		cfg, _, err := parseRunFlags(c.args)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if !c.check(cfg) {
			t.Errorf("%q: unexpected config %+v", c.args, cfg)
		}
	}
}

func TestParseRunFlagsFeaturesBad(t *testing.T) {
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		args []string
		want string // the start of the error line
	}{
		{[]string{"--fault", "kill:0@1s", "--masters", "a:1,a:2,a:3"},
			`--fault: item 1 "kill:0@1s": kill needs control of the master's process, which redlock-bench has only for masters it starts itself; with --masters only stall (DEBUG SLEEP) is offered, e.g. stall:0@1s+5s, got kill:0@1s`},
		{[]string{"--fault", "cut:1@1s+1s", "--masters", "a:1,a:2,a:3"}, `--fault: item 1 "cut:1@1s+1s": cut needs the proxy in front of the master`},
		{[]string{"--fault", "pause:5@1s+1s"}, `--fault: item 1 "pause:5@1s+1s": node 5 out of range: 5 masters (0-4)`},
		{[]string{"--fault", "explode:1@1s"}, `--fault: item 1 "explode:1@1s": unknown action "explode"`},
		{[]string{"--fault", "pause:1@1s"}, `--fault: item 1 "pause:1@1s":`},
		{[]string{"--fault", "kill:0@1s", "--engine", "nolock"}, "--fault: engine nolock uses no Redis masters to inject faults into, got kill:0@1s"},
		{[]string{"--start-at", "tomorrow"}, "--start-at: want an RFC 3339 time such as 2025-01-02T15:04:05Z, got tomorrow"},
		{[]string{"--start-at", past}, "--start-at: is more than a second in the past"},
		{[]string{"--fencing", "--engine", "nolock"}, "--fencing: applies to --engine redlock only, not nolock, got true"},
		{[]string{"--gate=false", "--engine", "nolock"}, "--gate: applies to --engine redlock only, not nolock, got false"},
		{[]string{"--coalesce=false", "--engine", "nolock"}, "--coalesce: applies to --engine redlock only, not nolock, got false"},
		// The baselines have no metrics to serve: an empty page would pass
		// for an idle engine.
		{[]string{"--metrics-addr", "127.0.0.1:0", "--engine", "redsync-goredis", "--duration", "200ms", "--warmup", "0", "--out", t.TempDir() + "/r"},
			"--metrics-addr: applies to --engine redlock only (its metrics are the engine's), not redsync-goredis, got 127.0.0.1:0"},
		{[]string{"--metrics-addr", "127.0.0.1:0", "--engine", "nolock", "--duration", "200ms", "--warmup", "0", "--out", t.TempDir() + "/r"},
			"--metrics-addr: applies to --engine redlock only (its metrics are the engine's), not nolock, got 127.0.0.1:0"},
		{[]string{"--notify=maybe"}, `--notify: want true or false, got "maybe"`},
		{[]string{"--quarantine", "sometimes"}, "--quarantine: must be off, observed or always, got sometimes"},
		{[]string{"--node-timeout", "-1s"}, "--node-timeout: must be >= 0 (0: the engine's default), got -1s"},
		{[]string{"--node-timeout", "5s", "--ttl", "10s"}, "--node-timeout: the engine refuses it: Config.NodeTimeout (5s) must be below half the TTL (10s), got 5s"},
		{[]string{"--node-timeout", "50ms", "--engine", "nolock"}, "--node-timeout: applies to the redlock engines and rueidislock (its TryNextAfter) only, not nolock, got 50ms"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"run"}, c.args...), &stdout, &stderr)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", c.args, code, stderr.String())
		}
		if want := "redlock-bench: " + c.want; !strings.HasPrefix(stderr.String(), want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q:\n got %q\nwant %q...", c.args, stderr.String(), want)
		}
	}
}

func TestUsageNamesTheNewFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"run", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("run --help: exit %d", code)
	}
	for _, f := range []string{"--extend", "--fencing", "--gate", "--notify", "--fault", "--start-at", "--quarantine", "--node-timeout"} {
		if !strings.Contains(stdout.String(), f) {
			t.Errorf("run --help lacks %s", f)
		}
	}
	if strings.Contains(stdout.String(), "--cpuprofile") {
		t.Error("--cpuprofile is a hidden flag")
	}
}

// --fault kill on masters the run did not start: exit 2 before anything
// runs, one line, nothing written.
func TestKillOnGivenMastersExitsTwo(t *testing.T) {
	dead := redistest.DeadAddrs(t, 3)
	cmd := command(t, "run", "--masters", strings.Join(dead, ","), "--fault", "kill:0@1s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if exitStatus(err) != 2 || !strings.HasPrefix(stderr.String(), `redlock-bench: --fault: item 1 "kill:0@1s": kill needs control`) {
		t.Errorf("exit %d, stderr %q", exitStatus(err), stderr.String())
	}
	if entries, _ := os.ReadDir(cmd.Dir); len(entries) != 0 {
		t.Errorf("bad input left files behind: %v", entries)
	}
}

// A pause on a local master: recorded in summary.json with its times, and
// in the intervals it was active in; safety holds. The times are the
// machine's: applied and lifted never before the schedule's times (the
// lift is timed from the schedule, not from the late application), but
// how late the fault's timers fired is the load's.
func TestPauseFaultIsRecorded(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	cmd := command(t, "run", "--local-masters", "3", "--workers", "8", "--resources", "8", "--ttl", "2s",
		"--warmup", "0", "--duration", "2s", "--fault", "pause:1@300ms+300ms", "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %d\nstderr: %s", exitStatus(err), stderr.String())
	}
	s := readSummary(t, out)
	if s["violations"].(float64) != 0 {
		t.Errorf("violations %v", s["violations"])
	}
	faults, _ := s["faults"].([]any)
	if len(faults) != 1 {
		t.Fatalf("faults: %v", s["faults"])
	}
	f := faults[0].(map[string]any)
	applied, ended := f["applied_s"].(float64), f["ended_s"].(float64)
	// Applied and lifted within the 2 s run, 1.4 s of it to spare for
	// late timers: seconds, not milliseconds, and not lifted at the end.
	if f["fault"] != "pause:1@300ms+300ms" || f["ended"] != true || f["error"] != nil ||
		applied < 0.3 || ended < 0.3+0.3 || ended <= applied || ended > 2 {
		t.Errorf("fault event %v", f)
	}
	if nodes, _ := s["nodes"].([]any); len(nodes) != 3 {
		t.Errorf("nodes: %v", s["nodes"])
	}
	b, err := os.ReadFile(filepath.Join(out, results.IntervalsJSON))
	if err != nil {
		t.Fatal(err)
	}
	ivs, err := results.ReadIntervals(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	// The interval the pause began in shows it.
	shown := false
	for _, iv := range ivs {
		if iv.TS <= applied && applied < iv.TS+iv.LengthS {
			shown = len(iv.FaultsActive) == 1 && iv.FaultsActive[0] == "pause:1@300ms+300ms"
		}
	}
	if !shown {
		t.Errorf("the interval of %.3fs must show the pause applied then: %+v", applied, ivs)
	}
	if !strings.Contains(stderr.String(), "faults pause:1@300ms+300ms") {
		t.Errorf("the progress line does not show the fault:\n%s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "pause:1@300ms+300ms") || !strings.Contains(stdout.String(), "nodes at the end of the run") {
		t.Errorf("summary.txt lacks the fault or the nodes:\n%s", stdout.String())
	}
}

// Mode wait on hot resources with several clients: handoff and
// notification wake-ups are reported, and handoff.hgrm is written.
func TestWaitRunReportsHandoff(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	cmd := command(t, "run", "--local-masters", "3", "--workers", "16", "--clients", "4", "--resources", "10",
		"--mode", "wait", "--hold", "1ms", "--warmup", "200ms", "--duration", "1s", "--fencing", "--out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %d\nstderr: %s", exitStatus(err), stderr.String())
	}
	s := readSummary(t, out)
	h := s["handoff_latency_us"].(map[string]any)
	if h["count"].(float64) == 0 || s["woken_by_notification"].(float64) == 0 || s["violations"].(float64) != 0 {
		t.Errorf("handoff %v, woken %v, violations %v", h, s["woken_by_notification"], s["violations"])
	}
	if s["stale_tokens"].(float64) != 0 || s["tokens_checked"].(float64) == 0 {
		t.Errorf("fencing: stale %v of %v", s["stale_tokens"], s["tokens_checked"])
	}
	fair := s["fairness"].(map[string]any)
	if j := fair["jain"].(float64); j <= 0 || j > 1 {
		t.Errorf("fairness %v", fair)
	}
	for _, f := range []string{"handoff.hgrm", "wait.hgrm", results.IntervalsJSON} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
}
