package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/results"
)

func TestParseCompareFlagsGood(t *testing.T) {
	for _, c := range []struct {
		args  []string
		check func(bench.CompareConfig) bool
	}{
		{nil, func(cc bench.CompareConfig) bool {
			return engines.JoinNames(cc.Engines) == "redlock,redsync-rueidis,redsync-goredis" && cc.Rounds == 3 &&
				!cc.Limit && cc.Label == "w64-r1000-try" && cc.Base.Workers == 64
		}},
		{[]string{"--engines", "redsync-goredis,redlock", "--rounds=5", "--limit", "--workers", "256", "--resources", "100000"},
			func(cc bench.CompareConfig) bool {
				return cc.Engines[0].String() == "redsync-goredis" && cc.Rounds == 5 && cc.Limit &&
					cc.Base.Workers == 256 && cc.Label == "w256-r100000-try"
			}},
		{[]string{"--limit=false", "--label", "uncontended", "--mode", "wait", "--limit-requests", "1000"}, func(cc bench.CompareConfig) bool {
			return !cc.Limit && cc.Label == "uncontended" && cc.Base.Mode == bench.ModeWait && cc.CeilingRequests == 1000
		}},
	} {
		cc, _, err := parseCompareFlags(c.args)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if !c.check(cc) {
			t.Errorf("%q: unexpected config %+v", c.args, cc)
		}
	}
}

func TestParseCompareFlagsBad(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rounds", "2"}, "--rounds: must be >= 3: a median of fewer runs is one noisy run, got 2"},
		{[]string{"--rounds", "x"}, `--rounds: want an integer, got "x"`},
		{[]string{"--rounds"}, "flag needs an argument: --rounds"},
		{[]string{"--engines", "redlock,zk"}, `--engines: unknown engine "zk" (known: redlock, redlock-percmd, redlock-sequential, redlock-mutex, nolock, redsync-rueidis, redsync-goredis, rueidislock, bsm-redislock; a quorum engine as NAME@N votes on the first N masters only, e.g. redlock@1), got redlock,zk`},
		{[]string{"--engines", "redlock,redlock"}, `--engines: engine "redlock" is listed twice, got redlock,redlock`},
		{[]string{"--engines", "redlock,bsm-redislock@2"}, `--engines: engine "bsm-redislock@2": bsm-redislock runs on one master, the first, and takes no @N, got redlock,bsm-redislock@2`},
		{[]string{"--engines", "redlock@6"}, `--engines: redlock@6 votes on the first 6 masters, and the comparison has 5, got redlock@6`},
		{[]string{"--engines="}, `--engines: empty list, got ""`},
		{[]string{"--engine", "redlock"}, `--engine: compare takes --engines, a comma-separated list, got "redlock"`},
		{[]string{"--limit=maybe"}, `--limit: want true or false, got "maybe"`},
		{[]string{"--engines", "nolock", "--limit"}, "--limit: needs Redis masters, and none of --engines nolock uses them, got true"},
		{[]string{"--limit-requests", "0"}, "--limit-requests: must be > 0, got 0"},
		{[]string{"--label", "a/b"}, "--label: may hold only letters, digits, '.', '_' and '-', got a/b"},
		{[]string{"--workers", "0"}, "--workers: must be > 0, got 0"},
		{[]string{"--engines", "nolock", "--metrics-addr", "127.0.0.1:0", "--duration", "100ms", "--warmup", "0", "--out", t.TempDir() + "/c"},
			"--metrics-addr: needs the redlock engine among --engines (its metrics are the engine's), got 127.0.0.1:0"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"extra"}, `compare: unexpected argument "extra" (flags only)`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"compare"}, c.args...), &stdout, &stderr)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", c.args, code, stderr.String())
		}
		if want := "redlock-bench: " + c.want + "\n"; stderr.String() != want {
			t.Errorf("%q:\n got %q\nwant %q", c.args, stderr.String(), want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%q: wrote to stdout: %q", c.args, stdout.String())
		}
	}
}

func TestCompareHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"compare", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("compare --help: exit %d", code)
	}
	for _, f := range []string{"--engines", "--rounds", "--limit", "--out", "--workers", "--resources", "--duration", "--masters"} {
		if !strings.Contains(stdout.String(), f) {
			t.Errorf("compare --help lacks %s", f)
		}
	}
	if strings.Contains(stdout.String(), "--engine string") {
		t.Error("compare --help offers --engine")
	}
}

func readComparison(t *testing.T, dir string) *results.Comparison {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, results.CompareJSON))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := results.ReadCompareJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A whole comparison, as a person runs it: our engine against a baseline,
// on local masters, with the ceiling.
func TestCompareEndToEnd(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cmp")
	cmd := command(t, "compare", "--engines", "redlock,redsync-rueidis", "--local-masters", "3", "--workers", "8",
		"--ops", "500", "--warmup", "0", "--limit", "--limit-requests", "2000", "--label", "e2e", "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %d\nstderr: %s", exitStatus(err), stderr.String())
	}
	c := readComparison(t, out)
	if len(c.Runs) != 6 || c.Interrupted || c.Ceiling == nil || len(c.Ceiling.Masters) != 3 || !c.LocalMasters {
		t.Fatalf("compare.json: %d runs, interrupted %v, ceiling %+v, local %v", len(c.Runs), c.Interrupted, c.Ceiling, c.LocalMasters)
	}
	for _, r := range c.Results {
		if r.Runs != 3 || r.Median == nil || r.Median.AcquiredPerSec <= 0 || r.Violations != 0 || r.OfCeiling == nil {
			t.Errorf("%s: %+v", r.Engine, r)
		}
	}
	if c.Results[1].Ratio == nil || c.Results[1].Ratio.AcquiredPerSec == nil {
		t.Errorf("no ratio to redlock: %+v", c.Results[1])
	}
	for _, dir := range []string{"1-redlock", "1-redsync-rueidis", "3-redsync-rueidis"} {
		for _, f := range []string{"summary.json", "summary.txt", "acquire.hgrm", "intervals.hlog", "histograms.hlog"} {
			if _, err := os.Stat(filepath.Join(out, dir, f)); err != nil {
				t.Errorf("missing %s/%s", dir, f)
			}
		}
	}
	txt, _ := os.ReadFile(filepath.Join(out, results.CompareText))
	if !bytes.Contains(stdout.Bytes(), txt) || !strings.Contains(stdout.String(), "results: "+out) {
		t.Errorf("stdout is not compare.txt and where it is:\n%s", stdout.String())
	}
	for _, a := range c.Masters {
		if err := redistest.Ping(a, 200*time.Millisecond); err == nil {
			t.Errorf("master %s still answers after the comparison", a)
		}
	}
}

// The trade a user choosing a library sees in one table: our engine on
// every master, and on the first one beside the single-Redis baselines
// there, each through the same oracle; the header says which masters each
// engine voted on.
func TestCompareOneMasterBaselines(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cmp")
	cmd := command(t, "compare", "--engines", "redlock,redlock@1,rueidislock,bsm-redislock", "--local-masters", "3",
		"--workers", "8", "--resources", "16", "--ops", "300", "--warmup", "0", "--label", "one", "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %d\nstderr: %s", exitStatus(err), stderr.String())
	}
	c := readComparison(t, out)
	want := map[string]int{"redlock": 3, "redlock@1": 1, "rueidislock": 1, "bsm-redislock": 1}
	for _, r := range c.Results {
		if r.Runs != 3 || r.Median == nil || r.Median.AcquiredPerSec <= 0 || r.Violations != 0 || r.Masters != want[r.Engine] {
			t.Errorf("%s: %+v, want 3 runs on %d masters without violations", r.Engine, r, want[r.Engine])
		}
	}
	for _, dir := range []string{"1-redlock_1", "3-rueidislock", "2-bsm-redislock"} {
		if _, err := os.Stat(filepath.Join(out, dir, results.SummaryJSON)); err != nil {
			t.Error(err)
		}
	}
	header := "(started locally); redlock@1, rueidislock, bsm-redislock on the first only; redlock on all 3\n"
	if !strings.Contains(stdout.String(), header) {
		t.Errorf("compare.txt does not say which masters each engine used:\n%s", stdout.String())
	}
}

// Ctrl-C: the comparison stops promptly, keeps the runs so far (the one cut
// short marked interrupted), writes compare.json, and leaves no
// redis-server behind.
func TestCompareInterrupt(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cmp")
	cmd := command(t, "compare", "--engines", "redlock,redsync-goredis", "--local-masters", "3", "--workers", "8",
		"--duration", "1m", "--warmup", "0", "--out", out)
	// Interrupted once the masters are up and the first run has acquired.
	lines := stderrLines(start(t, cmd))
	m := awaitLines(t, cmd, lines, regexp.MustCompile(`local redis-server for the whole comparison: (.*)$`), measuredProgress)
	drain(lines)
	masters := strings.Split(m[0][1], ",")
	awaitStop(t, cmd, syscall.SIGINT)
	c := readComparison(t, out)
	if !c.Interrupted || len(c.Runs) != 1 || !c.Runs[0].Interrupted || c.Runs[0].Figures.AcquiredPerSec <= 0 {
		t.Errorf("compare.json after SIGINT: interrupted %v, runs %+v", c.Interrupted, c.Runs)
	}
	if _, err := os.Stat(filepath.Join(out, "1-redlock", results.SummaryJSON)); err != nil {
		t.Errorf("the interrupted run was not written: %v", err)
	}
	for _, a := range masters {
		if err := redistest.Ping(a, 200*time.Millisecond); err == nil {
			t.Errorf("master %s still answers after the comparison", a)
		}
		if pids := serversOnPort(a[strings.LastIndexByte(a, ':')+1:]); len(pids) > 0 {
			t.Errorf("redis-server on %s still running: pids %v", a, pids)
		}
	}
}
