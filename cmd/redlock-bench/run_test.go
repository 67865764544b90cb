package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/bench/chaos"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/results"
)

func TestParseRunFlagsGood(t *testing.T) {
	for _, c := range []struct {
		args  []string
		check func(bench.Config) bool
	}{
		{nil, func(c bench.Config) bool {
			d := bench.DefaultConfig()
			return c.Workers == d.Workers && c.Resources == d.Resources && c.Engine.String() == "redlock" &&
				c.Check && c.Duration == 10*time.Second && c.Label == "redlock-w64-r1000-try"
		}},
		{[]string{"--masters", "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002"}, func(c bench.Config) bool { return len(c.Masters) == 3 }},
		{[]string{"--engine", "nolock", "--workers", "8", "--clients", "2"}, func(c bench.Config) bool {
			return c.Engine.String() == "nolock" && c.Workers == 8 && c.Clients == 2
		}},
		{[]string{"--distribution", "zipf:1.2", "--mode", "wait", "--hold", "exp:1ms"}, func(c bench.Config) bool {
			return c.Distribution.Zipf && c.Distribution.S == 1.2 && c.Mode == bench.ModeWait && c.Hold.Kind == bench.HoldExp
		}},
		{[]string{"--hold", "uniform:1ms-2ms", "--ttl", "2s", "--warmup", "0"}, func(c bench.Config) bool {
			return c.Hold.Kind == bench.HoldUniform && c.TTL == 2*time.Second && c.Warmup == 0
		}},
		{[]string{"--ops", "1000"}, func(c bench.Config) bool { return c.Ops == 1000 }},
		{[]string{"--rate", "5000", "--label", "my-run_1.0"}, func(c bench.Config) bool { return c.Rate == 5000 && c.Label == "my-run_1.0" }},
		{[]string{"--check=false", "--local-masters", "3"}, func(c bench.Config) bool { return !c.Check && c.LocalMasters == 3 }},
		{[]string{"--workers=10000", "--resources=1"}, func(c bench.Config) bool { return c.Workers == 10000 && c.Resources == 1 }},
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

func TestParseRunFlagsBad(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // the whole error line
	}{
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"--workers", "0"}, "--workers: must be > 0, got 0"},
		{[]string{"--workers", "-5"}, "--workers: must be > 0, got -5"},
		{[]string{"--workers", "many"}, `--workers: want an integer, got "many"`},
		{[]string{"--rate", "fast"}, `--rate: want a number, got "fast"`},
		{[]string{"--check=maybe"}, `--check: want true or false, got "maybe"`},
		{[]string{"--workers"}, "flag needs an argument: --workers"},
		{[]string{"--clients", "0"}, "--clients: must be > 0, got 0"},
		{[]string{"--resources", "0"}, "--resources: must be > 0, got 0"},
		{[]string{"--local-masters", "0"}, "--local-masters: must be > 0, got 0"},
		{[]string{"--ops", "0"}, "--ops: must be > 0, got 0"},
		{[]string{"--ops", "-1"}, "--ops: must be > 0, got -1"},
		{[]string{"--ops", "10", "--duration", "5s"}, "--duration: cannot be combined with --ops, got 5s"},
		{[]string{"--duration", "0"}, "--duration: must be > 0, got 0s"},
		{[]string{"--duration", "ten"}, `--duration: want a duration such as 500ms or 10s, got "ten"`},
		{[]string{"--ttl", "-1s"}, "--ttl: must be > 0, got -1s"},
		{[]string{"--warmup", "-1s"}, "--warmup: must be >= 0, got -1s"},
		{[]string{"--rate", "-2"}, "--rate: must be 0 (closed loop) or a positive rate, got -2"},
		{[]string{"--distribution", "zipf:0.9"}, "--distribution: zipf exponent S must be > 1 (and at most 1e6), got zipf:0.9"},
		{[]string{"--distribution", "normal"}, "--distribution: must be uniform or zipf:S with S > 1, got normal"},
		{[]string{"--hold", "forever"}, "--hold: want 0, a duration (1ms), exp:MEAN or uniform:MIN-MAX, got forever"},
		{[]string{"--hold", "uniform:5ms-1ms"}, "--hold: uniform bounds need 0 <= MIN <= MAX, got uniform:5ms-1ms"},
		{[]string{"--mode", "block"}, "--mode: must be try or wait, got block"},
		{[]string{"--engine", "zk"}, "--engine: unknown engine (known: redlock, redlock-percmd, redlock-sequential, redlock-mutex, nolock, redsync-rueidis, redsync-goredis, rueidislock, bsm-redislock; a quorum engine as NAME@N votes on the first N masters only, e.g. redlock@1), got zk"},
		{[]string{"--masters", "localhost"}, `--masters: address "localhost": want host:port, got localhost`},
		{[]string{"--masters", "a:1,a:1"}, `--masters: address "a:1" is listed twice, got a:1,a:1`},
		{[]string{"--masters", "a:99999"}, `--masters: address "a:99999": port must be 1-65535, got a:99999`},
		{[]string{"--masters", "a:1", "--local-masters", "3"}, "--local-masters: cannot be combined with --masters, got 3"},
		{[]string{"--label", "../x"}, "--label: must not start with '.' or '-', got ../x"},
		{[]string{"--label", "a b"}, `--label: may hold only letters, digits, '.', '_' and '-', got "a b"`},
		{[]string{"--clients", "65"}, "--clients: must be <= --workers (64): a client without a worker measures nothing, got 65"},
		{[]string{"extra"}, `run: unexpected argument "extra" (flags only)`},
		{[]string{"--ttl", "1ms"}, "--ttl: the engine refuses it: Config.TTL (1ms) leaves no validity after drift (2.01ms), got 1ms"},
		{[]string{"--ttl", "1500us"}, "--ttl: the engine refuses it: Config.TTL must be whole milliseconds (PX), got 1.5ms"},
		{[]string{"--local-masters", "64"}, "--local-masters: the engine refuses it: Config.Masters, Clusters and Sentinels have 64 votes, at most 63 are supported, got 64"},
		{[]string{"--metrics-addr", "foo"}, "--metrics-addr: want [HOST]:PORT such as :9464 or 127.0.0.1:9464, got foo"},
		{[]string{"--metrics-addr", ":99999"}, "--metrics-addr: port must be 0-65535 (0: any free port), got :99999"},
		{[]string{"--metrics-addr", "localhost:x"}, "--metrics-addr: port must be 0-65535 (0: any free port), got localhost:x"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"run"}, c.args...), &stdout, &stderr)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", c.args, code, stderr.String())
		}
		want := "redlock-bench: " + c.want + "\n"
		if stderr.String() != want {
			t.Errorf("%q:\n got %q\nwant %q", c.args, stderr.String(), want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%q: wrote to stdout: %q", c.args, stdout.String())
		}
	}
}

func TestUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"run", "--help"}, &stdout, &stderr); code != 0 {
		t.Errorf("run --help: exit %d", code)
	}
	for _, f := range []string{"--masters", "--local-masters", "--engine", "--workers", "--clients", "--resources",
		"--distribution", "--mode", "--hold", "--ttl", "--duration", "--ops", "--warmup", "--rate", "--out", "--label", "--check"} {
		if !strings.Contains(stdout.String(), f) {
			t.Errorf("run --help lacks %s", f)
		}
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"frobnicate"}, &stdout, &stderr); code != 2 ||
		!strings.HasPrefix(stderr.String(), "redlock-bench: unknown command \"frobnicate\" (known: run, scenario, ") {
		t.Errorf("unknown command: exit %d, %q", code, stderr.String())
	}
	if code := run(context.Background(), nil, &stdout, &stderr); code != 2 {
		t.Errorf("no command: exit %d", code)
	}
	// "help CMD" is CMD's help, as with go and git.
	for _, cmd := range []string{"run", "sweep", "compare", "chaos", "report", "merge", "scenario"} {
		var help, direct bytes.Buffer
		if code := run(context.Background(), []string{"help", cmd}, &help, io.Discard); code != 0 {
			t.Errorf("help %s: exit %d", cmd, code)
		}
		run(context.Background(), []string{cmd, "--help"}, &direct, io.Discard)
		if help.String() != direct.String() || help.Len() == 0 {
			t.Errorf("help %s:\n%s\nwant what %s --help prints:\n%s", cmd, help.String(), cmd, direct.String())
		}
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"help", "frobnicate"}, io.Discard, &stderr); code != 2 ||
		!strings.HasPrefix(stderr.String(), "redlock-bench: help: unknown command \"frobnicate\" (known: run, scenario, ") {
		t.Errorf("help of an unknown command: exit %d, %q", code, stderr.String())
	}
}

func TestMakeRunDir(t *testing.T) {
	t.Chdir(t.TempDir())
	now := time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
	a, created, err := makeRunDir("", "x", now)
	if err != nil || !created || a != filepath.Join("results", "runs", "20250607T080910Z-x") {
		t.Fatalf("makeRunDir = %q, %v, %v", a, created, err)
	}
	b, _, err := makeRunDir("", "x", now)
	if err != nil || b != a+"-2" {
		t.Errorf("second run in the same second: %q, %v", b, err)
	}
	os.WriteFile(filepath.Join(a, results.SummaryJSON), []byte("{}"), 0o644)
	if _, _, err := makeRunDir(a, "x", now); err == nil {
		t.Error("--out on a directory holding a run must be refused")
	}
}

// The tests below run the built command as a separate process, the way a
// person does.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "redlock-bench-cmd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "redlock-bench")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build redlock-bench:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func command(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = t.TempDir()
	return cmd
}

// start starts cmd with its stdout discarded, and returns its stderr.
func start(t *testing.T, cmd *exec.Cmd) io.Reader {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stderr
}

// readChaos reads the result a chaos run left in dir.
func readChaos(t *testing.T, dir string) *chaos.Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, chaos.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var r chaos.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// interruptAndWait sends cmd SIGINT, as Ctrl-C does, and waits for it to
// exit with the interrupted status, killing it after 20 s.
func interruptAndWait(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	awaitStop(t, cmd, syscall.SIGINT)
}

// awaitStop sends sig to cmd and waits for it to exit with status 130.
// Stopping must not wait for the run's minute: awaitTimeout is less.
func awaitStop(t *testing.T, cmd *exec.Cmd, sig syscall.Signal) {
	t.Helper()
	cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if exitStatus(err) != exitInterrupted {
			t.Errorf("exit %d after %v, want %d", exitStatus(err), sig, exitInterrupted)
		}
	case <-time.After(awaitTimeout / 2):
		cmd.Process.Kill()
		t.Fatalf("still running %s after %v", awaitTimeout/2, sig)
	}
}

func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func readSummary(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, results.SummaryJSON))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBadInputExitsTwoWithOneLine(t *testing.T) {
	cmd := command(t, "run", "--workers", "0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if exitStatus(err) != 2 || stderr.String() != "redlock-bench: --workers: must be > 0, got 0\n" {
		t.Errorf("exit %d, stderr %q", exitStatus(err), stderr.String())
	}
	if entries, _ := os.ReadDir(cmd.Dir); len(entries) != 0 {
		t.Errorf("bad input left files behind: %v", entries)
	}
}

func TestNolockRunWritesResultsAndFails(t *testing.T) {
	cmd := command(t, "run", "--engine", "nolock", "--workers", "8", "--resources", "2", "--hold", "100us",
		"--duration", "1s", "--warmup", "200ms", "--label", "control")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if exitStatus(err) != 1 {
		t.Fatalf("nolock with contention: exit %d, want 1 (violations)\nstderr: %s", exitStatus(err), stderr.String())
	}
	if !strings.Contains(stderr.String(), "safety violations") {
		t.Errorf("stderr does not report the violations: %s", stderr.String())
	}
	runs, _ := filepath.Glob(filepath.Join(cmd.Dir, "results", "runs", "*-control"))
	if len(runs) != 1 {
		t.Fatalf("run directories: %v", runs)
	}
	dir := runs[0]
	for _, f := range []string{"summary.txt", "summary.json", "acquire.hgrm", "release.hgrm", "intervals.hlog", "histograms.hlog"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	s := readSummary(t, dir)
	if s["violations"].(float64) == 0 || s["engine"] != "nolock" || s["label"] != "control" || s["interrupted"] != false {
		t.Errorf("summary.json: %v", s)
	}
	if !strings.Contains(stdout.String(), "results: results/runs/") {
		t.Errorf("stdout does not say where the results are:\n%s", stdout.String())
	}
	// Not a terminal: plain progress lines, no carriage returns.
	if strings.Contains(stderr.String(), "\r") || !strings.Contains(stderr.String(), "acquired/s") {
		t.Errorf("progress on a non-terminal:\n%q", stderr.String())
	}
	// The cumulative histograms on disk are the ones summarised.
	f, _ := os.Open(filepath.Join(dir, results.HistogramsLog))
	defer f.Close()
	set, err := results.ReadSet(f)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := set[results.Acquire].TotalCount(), int64(s["acquired"].(float64)); got != want {
		t.Errorf("histograms.hlog holds %d acquisitions, summary %d", got, want)
	}
}

// Ctrl-C (or a SIGTERM from a supervisor): the run stops promptly, writes
// partial results marked interrupted, exits 130, and leaves no
// redis-server behind.
func TestInterruptStopsMastersAndWritesPartialResults(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) { interruptRun(t, sig) })
	}
}

func interruptRun(t *testing.T, sig syscall.Signal) {
	out := filepath.Join(t.TempDir(), "run")
	cmd := command(t, "run", "--local-masters", "3", "--workers", "8", "--duration", "1m", "--warmup", "0", "--out", out)
	// Interrupted once the masters are up and the run has acquired.
	lines := stderrLines(start(t, cmd))
	m := awaitLines(t, cmd, lines, regexp.MustCompile(`^redlock-bench: started 3 local redis-server: (.*)$`), measuredProgress)
	drain(lines)
	masters := strings.Split(m[0][1], ",")
	awaitStop(t, cmd, sig)
	s := readSummary(t, out)
	if s["interrupted"] != true {
		t.Errorf("summary.json interrupted = %v", s["interrupted"])
	}
	for _, a := range masters {
		if err := redistest.Ping(a, 200*time.Millisecond); err == nil {
			t.Errorf("master %s still answers after the run", a)
		}
		port := a[strings.LastIndexByte(a, ':')+1:]
		if pids := serversOnPort(port); len(pids) > 0 {
			t.Errorf("redis-server on port %s still running: pids %v", port, pids)
		}
	}
}

// serversOnPort finds redis-server processes of port: started with
// --port port, or titled "redis-server HOST:PORT" (a running Redis
// rewrites its command line to that title, so that --port is no longer
// there to read).
func serversOnPort(port string) []string {
	var pids []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || !strings.Contains(args[0], "redis-server") {
			continue
		}
		match := false
		if title := strings.Fields(args[0]); len(title) >= 2 && strings.HasSuffix(title[1], ":"+port) {
			match = true
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--port" && args[i+1] == port {
				match = true
			}
		}
		if match {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}

// Unreachable masters fail the run at the pre-flight probe, all named in
// one line. Fast is shown by the path, not a clock: the error is the
// probe's, so no engine client waited out its connect timeout, and its
// cause is the refusal, so the probe did not wait out its own.
func TestUnreachableMastersFailFast(t *testing.T) {
	dead := redistest.DeadAddrs(t, 3)
	cmd := command(t, "run", "--masters", strings.Join(dead, ","), "--duration", "1s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if exitStatus(err) != 1 {
		t.Errorf("exit %d, want 1", exitStatus(err))
	}
	if want := "redlock-bench: 3 of 3 masters unreachable: " + strings.Join(dead, ", ") + " (connect: connection refused)"; lastLine(stderr.String()) != want {
		t.Errorf("stderr %q, want its last line %q", stderr.String(), want)
	}
	if runs, _ := filepath.Glob(filepath.Join(cmd.Dir, "results", "runs", "*")); len(runs) != 0 {
		t.Errorf("a run that never started left %v", runs)
	}
}

// A combination the engine refuses exits 2 with one line before any master
// starts (before: five redis-server started, then exit 1).
func TestEngineRefusalExitsTwoBeforeMastersStart(t *testing.T) {
	cmd := command(t, "run", "--ttl", "1ms", "--duration", "1s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := runWithin(t, cmd)
	// The refusal alone: no "started 5 local redis-server" before it.
	want := "redlock-bench: --ttl: the engine refuses it: Config.TTL (1ms) leaves no validity after drift (2.01ms), got 1ms\n"
	if exitStatus(err) != 2 || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want 2, %q", exitStatus(err), stderr.String(), want)
	}
	if entries, _ := os.ReadDir(cmd.Dir); len(entries) != 0 || stdout.Len() != 0 {
		t.Errorf("a refused run left %v, stdout %q", entries, stdout.String())
	}
}

// freshMasters starts masters the way a user does before a first run:
// just now, so younger than any TTL.
func freshMasters(t *testing.T, n int) *redistest.Cluster {
	return redistest.StartT(t, n)
}

// A user starts masters and runs against them at once: the default
// quarantine (always) keeps them all out of the vote for a TTL. Before,
// every second showed acquired/s 0 and the run exited 0; now it says why
// and until when, waits, and measures.
func TestFreshMastersRunWaitsOutTheQuarantine(t *testing.T) {
	begun := time.Now()
	c := freshMasters(t, 5)
	// Young means younger than the TTL when the run asks: a TTL of the
	// time the masters took to start (seconds on a loaded machine, which
	// would make fixed 2 s masters old before the run began) and 5 s more
	// for the command to start and ask.
	ttl := time.Since(begun).Truncate(time.Second) + 5*time.Second
	out := filepath.Join(t.TempDir(), "run")
	cmd := command(t, "run", "--masters", strings.Join(c.Addrs(), ","), "--ttl", ttl.String(), "--duration", "1s", "--warmup", "0",
		"--workers", "4", "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %d\nstderr: %s", exitStatus(err), stderr.String())
	}
	for _, want := range []string{"redlock-bench: quorum in quarantine until ", "5 of 5 masters have been up for less than the TTL (" + ttl.String() + ")",
		"[quarantine] ", "redlock-bench: quarantine over"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if s := readSummary(t, out); s["acquired"].(float64) == 0 {
		t.Errorf("acquired nothing after the quarantine:\n%s", stderr.String())
	}
}

// --no-wait-quarantine: a clear one-line refusal, a non-zero exit, and
// no results. The TTL is an hour so that the masters are young however
// long they and the command took to start.
func TestNoWaitQuarantineExitsNonZero(t *testing.T) {
	c := freshMasters(t, 3)
	cmd := command(t, "run", "--masters", strings.Join(c.Addrs(), ","), "--ttl", "1h", "--duration", "1s", "--no-wait-quarantine")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if exitStatus(err) != 1 {
		t.Errorf("exit %d, want 1", exitStatus(err))
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	last := lines[len(lines)-1]
	for _, want := range []string{"quorum in quarantine until", "3 of 3 masters have been up for less than the TTL (1h0m0s)", "not waiting (--no-wait-quarantine)"} {
		if !strings.Contains(last, want) {
			t.Errorf("last line lacks %q: %q", want, last)
		}
	}
	if runs, _ := filepath.Glob(filepath.Join(cmd.Dir, "results", "runs", "*")); len(runs) != 0 {
		t.Errorf("a run that never started left %v", runs)
	}
}

// A run that acquires nothing exits 1 with the reason in one line, and
// still writes its results: here every resource is held by someone else,
// so every attempt is refused.
func TestRunThatAcquiresNothingExitsOne(t *testing.T) {
	c := freshMasters(t, 3)
	for _, a := range c.Addrs() {
		for _, k := range []string{"rlb:0", "rlb:1"} {
			if _, err := redistest.Do(a, 10*time.Second, "SET", k, "someone-else", "PX", "60000"); err != nil {
				t.Fatal(err)
			}
		}
	}
	out := filepath.Join(t.TempDir(), "run")
	cmd := command(t, "run", "--masters", strings.Join(c.Addrs(), ","), "--quarantine", "observed", "--resources", "2",
		"--workers", "4", "--duration", "1s", "--warmup", "0", "--out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	last := lastLine(stderr.String())
	if exitStatus(err) != 1 || !strings.HasPrefix(last, "redlock-bench: the run acquired nothing in ") ||
		!strings.Contains(last, "were refused (contended)") {
		t.Errorf("exit %d, last line %q", exitStatus(err), last)
	}
	if s := readSummary(t, out); s["acquired"].(float64) != 0 || s["contended"].(float64) == 0 {
		t.Errorf("summary: acquired %v contended %v", s["acquired"], s["contended"])
	}
}

// A run whose attempts are errors exits 1 naming the commonest kind and
// its first message: here the lock key is of the wrong type.
func TestRunOfErrorsExitsOne(t *testing.T) {
	c := freshMasters(t, 3)
	for _, a := range c.Addrs() {
		if _, err := redistest.Do(a, 10*time.Second, "LPUSH", "rlb:0", "x"); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "run")
	cmd := command(t, "run", "--masters", strings.Join(c.Addrs(), ","), "--quarantine", "observed", "--resources", "1",
		"--workers", "2", "--duration", "1s", "--warmup", "0", "--out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	last := lastLine(stderr.String())
	if exitStatus(err) != 1 || !strings.HasPrefix(last, "redlock-bench: the run acquired nothing in ") ||
		!strings.Contains(last, " errors, most ") || !strings.Contains(last, "WRONGTYPE") {
		t.Errorf("exit %d, last line %q", exitStatus(err), last)
	}
	if _, err := os.Stat(filepath.Join(out, results.SummaryText)); err != nil {
		t.Errorf("results not written: %v", err)
	}
}

// A hold beyond the TTL without --extend loses every lease: said at start.
func TestHoldBeyondTTLWarnsAtStart(t *testing.T) {
	cmd := command(t, "run", "--engine", "nolock", "--hold", "20ms", "--ttl", "10ms", "--workers", "2", "--duration", "300ms",
		"--warmup", "0", "--resources", "100")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Run()
	first := strings.SplitN(stderr.String(), "\n", 2)[0]
	want := "redlock-bench: warning: --hold 20ms is not below --ttl 10ms and --extend is off: every lease expires before its release"
	if !strings.HasPrefix(first, want) {
		t.Errorf("first line %q, want %q...", first, want)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
