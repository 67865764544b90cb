package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// These tests run the short versions of the scenarios that decide the
// lock's safety against real redis-server processes, and check that
// nothing they started is left behind. The full versions run under
// `make scenarios` (redlock-bench scenario NAME).

// runShort runs a scenario in its short form and checks what it left.
func runShort(t *testing.T, name string, o Options) *Result {
	t.Helper()
	o.Short = true
	o.Out = t.TempDir()
	var log bytes.Buffer
	o.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	goroutines := runtime.NumGoroutine()
	r, e, err := run(ctx, name, o)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("progress:\n%s", log.String())
		}
	})
	checkLeftovers(t, e)
	checkGoroutines(t, goroutines)
	if err != nil {
		t.Fatalf("Run(%s): %v", name, err)
	}
	js, err := os.ReadFile(filepath.Join(o.Out, "scenario.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatalf("scenario.json: %v", err)
	}
	for _, k := range []string{"name", "expected", "observed", "passed", "violations", "figures"} {
		if _, ok := back[k]; !ok {
			t.Errorf("scenario.json has no %q", k)
		}
	}
	if _, err := os.Stat(filepath.Join(o.Out, "scenario.txt")); err != nil {
		t.Error(err)
	}
	return r
}

// checkLeftovers fails the test if a redis-server started by this process
// still runs, or a proxy the scenario started still listens.
func checkLeftovers(t *testing.T, e *env) {
	t.Helper()
	if pids := childServers(t); len(pids) > 0 {
		t.Errorf("redis-server still running after the scenario: pids %v", pids)
	}
	if e == nil {
		return
	}
	for _, a := range e.proxyAddrs {
		if c, err := net.DialTimeout("tcp", a, 200*time.Millisecond); err == nil {
			c.Close()
			t.Errorf("proxy %s still listening after the scenario", a)
		}
	}
}

// checkGoroutines fails the test if more goroutines run than before the
// scenario, once the ones on their way out have ended. The wait outlasts
// rueidis's cluster client, which closes the connections a topology
// refresh replaced 5 s later, in a goroutine its Close does not wait for
// (cluster-failover), on however loaded a machine; it ends as soon as they
// have.
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines left running by the scenario:\n%s", n-before, buf[:runtime.Stack(buf, true)])
	}
}

// childServers lists the redis-server processes whose parent is this test
// process (redistest starts them directly).
func childServers(t *testing.T) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to check for leftover processes: %v", err)
	}
	self := os.Getpid()
	var out []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		if ppid == self && s[open+1:end] == "redis-server" && fields[0] != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

func TestRestartAmnesia(t *testing.T) {
	for _, c := range []struct {
		q          engine.QuarantinePolicy
		violations bool
	}{
		{engine.QuarantineOff, true}, // the control: the double grant must show
		{engine.QuarantineObserved, false},
		{engine.QuarantineAlways, false},
	} {
		t.Run(c.q.String(), func(t *testing.T) {
			r := runShort(t, "restart-amnesia", Options{Quarantine: c.q})
			if !r.Passed {
				t.Fatalf("verdict FAIL: %s", r.Observed)
			}
			if got := r.Violations > 0; got != c.violations {
				t.Fatalf("violations = %d with quarantine %s: %s", r.Violations, c.q, r.Observed)
			}
		})
	}
}

func TestMajorityDown(t *testing.T) {
	r := runShort(t, "majority-down", Options{})
	if !r.Passed {
		t.Fatalf("verdict FAIL: %s", r.Observed)
	}
	t.Log(r.Observed)
	obs := r.Figures.(outageObs)
	if out, _ := phase(obs.Phases, "outage"); out.NoQuorum == 0 {
		t.Fatalf("no ErrNoQuorum during the outage: %+v", out)
	}
}

func TestOOMNode(t *testing.T) {
	if r := runShort(t, "oom-node", Options{}); !r.Passed {
		t.Fatalf("verdict FAIL: %s", r.Observed)
	}
}

func TestPausedHolderFenced(t *testing.T) {
	r := runShort(t, "paused-holder", Options{Fencing: true})
	if !r.Passed || r.Violations != 0 {
		t.Fatalf("verdict passed=%v violations=%d: %s", r.Passed, r.Violations, r.Observed)
	}
}

func TestPartition(t *testing.T) {
	if r := runShort(t, "partition", Options{}); !r.Passed {
		t.Fatalf("verdict FAIL: %s", r.Observed)
	}
}

// A scenario cut short by its context stops what it started, returns the
// context's error, and still says what happened.
func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	dir := t.TempDir()
	start := time.Now()
	goroutines := runtime.NumGoroutine()
	r, e, err := run(ctx, "majority-down", Options{Short: true, Out: dir})
	checkLeftovers(t, e)
	checkGoroutines(t, goroutines)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	// A hang guard: that the scenario stopped on the context, not at its
	// end, is its error and its failed result below.
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("took %s to stop after the context ended", took)
	}
	if r == nil || r.Passed || r.Error == "" {
		t.Fatalf("result = %+v, want a failed result with the error", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "scenario.json")); err != nil {
		t.Fatalf("the cut-short result was not written: %v", err)
	}
}

func TestRunUnknown(t *testing.T) {
	_, err := Run(context.Background(), "no-such", Options{})
	if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "restart-amnesia") {
		t.Fatalf("err = %v, want ErrUnknown naming the known scenarios", err)
	}
}

func TestList(t *testing.T) {
	want := []string{"restart-amnesia", "minority-down", "majority-down", "slow-node", "paused-holder", "partition", "oom-node", "failover", "clock-jump", "cluster-failover", "sentinel-failover"}
	got := List()
	if len(got) != len(want) {
		t.Fatalf("List has %d scenarios, want %d", len(got), len(want))
	}
	for i, in := range got {
		if in.Name != want[i] {
			t.Errorf("List()[%d] = %q, want %q", i, in.Name, want[i])
		}
		if in.Summary == "" {
			t.Errorf("%s has no summary", in.Name)
		}
		for _, o := range []Options{{}, {Quarantine: engine.QuarantineOff, Fencing: true, Short: true}} {
			if in.Expected(o) == "" {
				t.Errorf("%s has no expected outcome for %+v", in.Name, o)
			}
		}
	}
	// The expectation follows the options that matter, and only those.
	amnesia, paused := got[0], got[4]
	if amnesia.Expected(Options{Quarantine: engine.QuarantineOff}) == amnesia.Expected(Options{}) {
		t.Error("restart-amnesia expects the same with the quarantine off and on")
	}
	if paused.Expected(Options{Fencing: true}) == paused.Expected(Options{}) {
		t.Error("paused-holder expects the same with fencing on and off")
	}
}

// TestWriteGolden pins the layout of scenario.txt and the keys of
// scenario.json. Run with -update to rewrite testdata/.
func TestWriteGolden(t *testing.T) {
	r := &Result{
		Name:       "restart-amnesia",
		Expected:   expectRestartAmnesia(Options{Quarantine: engine.QuarantineOff, Short: true}),
		Observed:   "As expected with the quarantine off, the oracle saw 1 double grant(s).",
		Passed:     true,
		Violations: 1,
		Options:    RunOptions{Quarantine: "off", Short: true},
		Figures: func() amnesiaObs {
			o := amnesiaGranted()
			o.Quarantine, o.TTLMs, o.RestartMs, o.SecondClient = "off", 2000, 17.75, "before the restart"
			o.RestartedState, o.Attempts[0].AtMs = "up", 0.912
			o.Overlaps = []Overlap{{Resource: "scenario:restart-amnesia", First: "holder", Second: "second", AtMs: 136.072, FirstLeftMs: 1900}}
			return o
		}(),
		Timeline:  []Step{{AtMs: 1.5, What: "started 5 masters"}, {AtMs: 20, What: "restarted master 0"}},
		Started:   time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC),
		DurationS: 0.25,
		Machine:   Machine{Go: "go1.26", OS: "linux/amd64", CPUs: 2, GOMAXPROCS: 2, Redis: "7.0.15"},
	}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"scenario.txt", "scenario.json"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", name+".golden")
		if *update {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (run go test -update if the change is intended):\n%s", name, golden, got)
		}
	}
}
