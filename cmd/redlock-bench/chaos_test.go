package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/bench/chaos"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// runChaos runs the built command and returns its exit status, stdout and
// chaos.json.
func runChaos(t *testing.T, args ...string) (int, string, *chaos.Result) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "chaos")
	cmd := command(t, append([]string{"chaos", "--out", out}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := exitStatus(err)
	b, rerr := os.ReadFile(filepath.Join(out, chaos.JSONFile))
	if rerr != nil {
		t.Fatalf("exit %d, no chaos.json: %v\nstdout: %s\nstderr: %s", code, rerr, stdout.String(), stderr.String())
	}
	var r chaos.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if code == 1 {
		if _, err := os.Stat(filepath.Join(out, chaos.HistoryFile)); err != nil {
			t.Errorf("a failed soak must leave its history: %v", err)
		}
	}
	return code, stdout.String(), &r
}

func totalFaults(r *chaos.Result) int {
	n := 0
	for _, v := range r.Faults {
		n += v
	}
	return n
}

// In model, under faults, the engine keeps every hold exclusive, every
// token increasing, and the store refuses the frozen clients' late writes.
// The seed is printed, recorded, and replays the same schedule.
func TestChaosInModel(t *testing.T) {
	code, stdout, r := runChaos(t, "--duration", "5s", "--seed", "7", "--ttl", "500ms")
	if code != 0 || !r.Passed {
		t.Fatalf("exit %d, verdict %s\n%s", code, r.Verdict, stdout)
	}
	if r.Violations != 0 || r.StaleTokens != 0 || r.Store.StaleAccepted != 0 {
		t.Errorf("violations %d stale tokens %d stale accepted %d", r.Violations, r.StaleTokens, r.Store.StaleAccepted)
	}
	if r.Acquired < 20 || r.TokensChecked != r.Acquired || totalFaults(r) == 0 || len(r.FaultErrors) > 0 {
		t.Errorf("too little was checked: %d locks, %d tokens, faults %v, errors %v", r.Acquired, r.TokensChecked, r.Faults, r.FaultErrors)
	}
	if !strings.HasPrefix(stdout, "seed: 7\n") || r.Seed != 7 || !strings.Contains(stdout, "--seed 7 ") {
		t.Errorf("seed 7 not printed and recorded: seed %d\n%s", r.Seed, stdout)
	}
	// The same seed draws the same schedule: a shorter run's is a prefix.
	_, _, again := runChaos(t, "--duration", "2s", "--seed", "7", "--ttl", "500ms")
	if len(again.Schedule) == 0 || !slices.Equal(again.Schedule, r.Schedule[:len(again.Schedule)]) {
		t.Errorf("seed 7 replayed a different schedule:\n%v\n%v", again.Schedule, r.Schedule)
	}
	// No seed: one is picked, printed and recorded.
	_, stdout, picked := runChaos(t, "--duration", "1s", "--engine", "nolock")
	if picked.Seed == 0 || !strings.HasPrefix(stdout, "seed: "+strconv.FormatUint(picked.Seed, 10)+"\n") {
		t.Errorf("picked seed %d not printed first:\n%s", picked.Seed, stdout)
	}
}

// The control: an engine that grants every request must be caught, in
// model (overlaps) and out of it (stale writes accepted: no tokens).
func TestChaosNolockFails(t *testing.T) {
	for _, class := range []string{"in-model", "out-of-model"} {
		code, stdout, r := runChaos(t, "--duration", "2s", "--engine", "nolock", "--class", class)
		if code != 1 || r.Passed {
			t.Errorf("%s: nolock exit %d passed %v, want 1\n%s", class, code, r.Passed, stdout)
		}
		if class == "in-model" && r.Violations == 0 {
			t.Errorf("nolock: no violations in %d locks", r.Acquired)
		}
		if r.Store.StaleAccepted == 0 {
			t.Errorf("%s: nolock: no stale write accepted (%+v)", class, r.Store)
		}
	}
}

// Out of model the lock lets holds overlap; fencing must still reject
// every stale write, and there must have been stale writes to reject:
// each delete on a majority is made under a hold of the soak's own, which
// writes after a later holder has (this seed's first is due at 1.3 s).
func TestChaosOutOfModelFencing(t *testing.T) {
	code, stdout, r := runChaos(t, "--duration", "3s", "--class", "out-of-model", "--ttl", "500ms", "--seed", "13")
	if code != 0 || !r.Passed {
		t.Fatalf("exit %d verdict %s\n%s", code, r.Verdict, stdout)
	}
	if r.Store.StaleAccepted != 0 || r.Store.Stale == 0 {
		t.Errorf("store %+v: want stale writes, none accepted", r.Store)
	}
	if r.Faults["delete-majority"] == 0 || len(r.FaultErrors) > 0 || len(r.FaultsSkipped) > 0 {
		t.Errorf("faults %v, errors %v, skipped %v: want the deletes in, each under its hold", r.Faults, r.FaultErrors, r.FaultsSkipped)
	}
	if !strings.Contains(stdout, "expected   Redlock alone cannot prevent") {
		t.Errorf("the expected outcome is not stated:\n%s", stdout)
	}
}

func TestChaosBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--class", "sideways"}, "--class: must be in-model or out-of-model, got sideways"},
		{[]string{"--engine", "redsync-rueidis"}, "--engine: must be redlock or nolock, got redsync-rueidis"},
		{[]string{"--clients", "0"}, "--clients: must be in 1..64, got 0"},
		{[]string{"--ttl", "1ms"}, "--ttl: must be in 50ms..1m, got 1ms"},
		{[]string{"--duration", "0s"}, "--duration: must be positive, got 0s"},
		{[]string{"--quarantine", "maybe"}, "--quarantine: must be off, observed or always, got maybe"},
		{[]string{"--masters", "nohost"}, `--masters: address "nohost": want host:port, got nohost`},
		{[]string{"--seed", "x"}, `--seed: want an integer, got "x"`},
		{[]string{"--workers", "-1"}, "--workers: must be in 1..256, got -1"},
		{[]string{"--jump", "-1s"}, "--jump: must be positive, got -1s"},
		{[]string{"--metrics-addr", "foo"}, "--metrics-addr: want [HOST]:PORT such as :9464 or 127.0.0.1:9464, got foo"},
		{[]string{"--metrics-addr", "127.0.0.1:-1"}, "--metrics-addr: port must be 0-65535 (0: any free port), got 127.0.0.1:-1"},
		{[]string{"--engine", "nolock", "--metrics-addr", "127.0.0.1:0", "--duration", "100ms"},
			"--metrics-addr: applies to --engine redlock only (its metrics are the engine's), not nolock, got 127.0.0.1:0"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"extra"}, `chaos: unexpected argument "extra" (flags only)`},
	} {
		var stdout, stderr bytes.Buffer
		t.Chdir(t.TempDir())
		code := runRefused(append([]string{"chaos"}, c.args...), &stdout, &stderr)
		// The refusal alone: a soak that started anything would have said
		// so on stderr ("started 5 local redis-server: ...").
		if code != 2 || stderr.String() != "redlock-bench: "+c.want+"\n" {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, code, stderr.String(), c.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%q: bad flags must fail before anything starts: stdout %q", c.args, stdout.String())
		}
		if entries, _ := os.ReadDir("."); len(entries) != 0 {
			t.Errorf("%q: bad flags left files behind: %v", c.args, entries)
		}
	}
}

// Ctrl-C stops the soak: partial results, status 130, no master left.
// It comes once the soak has acquired and its first fault (this seed's
// is a master restarted) is in.
func TestChaosInterrupt(t *testing.T) {
	out := filepath.Join(t.TempDir(), "chaos")
	cmd := command(t, "chaos", "--duration", "1m", "--ttl", "500ms", "--seed", "2", "--metrics-addr", "127.0.0.1:0", "--out", out)
	lines := stderrLines(start(t, cmd))
	m := awaitLines(t, cmd, lines, regexp.MustCompile(`^redlock-bench: started 5 local redis-server: (.*)$`), servingMetrics)
	drain(lines)
	masters := strings.Split(m[0][1], ",")
	scrapeUntil(t, cmd, m[1][1], func(body string) bool { return metricCount(acquiredSeries, body) > 0 })
	awaitFault(t, cmd, masters)
	interruptAndWait(t, cmd)
	r := readChaos(t, out)
	if !r.Interrupted || r.Acquired == 0 {
		t.Errorf("partial result: interrupted %v, %d locks", r.Interrupted, r.Acquired)
	}
	for _, a := range masters {
		if err := redistest.Ping(a, 200*time.Millisecond); err == nil {
			t.Errorf("master %s still answers after the soak", a)
		}
		port := a[strings.LastIndexByte(a, ':')+1:]
		if pids := serversOnPort(port); len(pids) > 0 {
			t.Errorf("redis-server on port %s still running: pids %v", port, pids)
		}
	}
}

// --json prints chaos.json on stdout and nothing else (the seed goes to
// stderr), -q one line with the verdict and the seed, as run's flags do;
// the two together are refused.
func TestChaosJSONAndQuiet(t *testing.T) {
	out := filepath.Join(t.TempDir(), "chaos")
	cmd := command(t, "chaos", "--engine", "nolock", "--duration", "1s", "--seed", "3", "--out", out, "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if code := exitStatus(cmd.Run()); code != 1 {
		t.Fatalf("the control: exit %d, want 1\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, chaos.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var r chaos.Result
	if stdout.String() != string(b) || json.Unmarshal(stdout.Bytes(), &r) != nil || r.Seed != 3 {
		t.Errorf("stdout is not chaos.json:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "seed: 3") {
		t.Errorf("stderr lacks the seed:\n%s", stderr.String())
	}

	cmd = command(t, "chaos", "--engine", "nolock", "--duration", "1s", "--seed", "3", "--out", t.TempDir(), "-q")
	stdout.Reset()
	cmd.Stdout = &stdout
	cmd.Run()
	line := stdout.String()
	if strings.Count(line, "\n") != 1 || !strings.HasPrefix(line, "chaos in-model, nolock mutex: ") || !strings.Contains(line, "seed 3: FAIL") {
		t.Errorf("-q: %q", line)
	}

	cmd = command(t, "chaos", "--json", "-q")
	stderr.Reset()
	cmd.Stderr = &stderr
	if code := exitStatus(cmd.Run()); code != 2 || !strings.Contains(stderr.String(), "--quiet: cannot be combined with --json") {
		t.Errorf("--json -q: exit %d: %s", code, stderr.String())
	}
}

// chaos --quarantine defaults to always where run defaults to observed
// on local masters; the help says why.
func TestChaosHelpExplainsTheQuarantineDefault(t *testing.T) {
	help := chaosUsage()
	if !regexp.MustCompile(`--quarantine string\s+restart quarantine: off, observed or always; always, the engine's own default, also on the local masters the soak starts, where run defaults to observed`).MatchString(help) {
		t.Errorf("chaos --help does not explain its quarantine default:\n%s", help)
	}
}
