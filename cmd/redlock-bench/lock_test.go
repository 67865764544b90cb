package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/bench/engines"
)

// --lock reaches every command that takes run's flags.
func TestParseLockFlag(t *testing.T) {
	c, _, err := parseRunFlags([]string{"--lock", "semaphore:8"})
	if err != nil || c.Lock != (engines.Lock{Kind: engines.LockSemaphore, Permits: 8}) || c.Label != "redlock-w64-r1000-semaphore8-try" {
		t.Errorf("run --lock semaphore:8: %+v %q, %v", c.Lock, c.Label, err)
	}
	c, _, err = parseRunFlags(nil)
	if err != nil || c.Lock != (engines.Lock{}) {
		t.Errorf("run without --lock: %+v, %v; want the mutex", c.Lock, err)
	}
	sc, _, err := parseSweepFlags([]string{"--workers", "1,4", "--lock", "multi:3"})
	if err != nil || sc.Base.Lock != (engines.Lock{Kind: engines.LockMulti, K: 3}) {
		t.Errorf("sweep --lock multi:3: %+v, %v", sc.Base.Lock, err)
	}
	for _, c := range []struct {
		args    []string
		engines string
	}{
		{nil, "redlock,redsync-rueidis,redsync-goredis"},
		{[]string{"--lock", "semaphore:8"}, "redlock,redlock-percmd"},
		{[]string{"--lock", "rw:0.9"}, "redlock,redlock-mutex"},
		{[]string{"--lock", "multi:3"}, "redlock,redlock-sequential,redsync-rueidis,redsync-goredis"},
		{[]string{"--lock", "multi:3", "--engines", "redlock,redsync-goredis"}, "redlock,redsync-goredis"},
	} {
		cc, _, err := parseCompareFlags(c.args)
		if err != nil || engines.JoinNames(cc.Engines) != c.engines {
			t.Errorf("compare %q: engines %v, %v; want %s", c.args, cc.Engines, err, c.engines)
		}
	}
}

// A bad --lock exits 2 with one line naming the flag, the value and what
// is wrong, before anything starts.
func TestLockFlagBad(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--lock", "rw:0.9", "--engine", "redsync-rueidis"},
			"--lock: engine redsync-rueidis has no read/write lock: only redlock has one over N masters (no baseline here does); redlock-mutex runs the same operations on our mutex, every one exclusive, got rw:0.9"},
		{[]string{"run", "--lock", "rw:1.1"}, "--lock: the share of reads F of rw:F must be 0 to 1, got rw:1.1"},
		{[]string{"run", "--engine", "redlock-mutex"}, "--lock: engine redlock-mutex differs from redlock in rw:F only (every operation its mutex, reads too), got mutex"},
		{[]string{"run", "--lock", "rw:0.5", "--resources", "1000000", "--clients", "4"},
			"--lock: --resources × --clients must be at most 2000000 (each client keeps a handle per read/write lock, about 220 bytes), got rw:0.5"},
		{[]string{"run", "--lock", "semaphore:0"}, "--lock: the permits P of semaphore:P must be 1 to 1024, got semaphore:0"},
		{[]string{"run", "--lock", "multi:0"}, "--lock: the resources K of multi:K must be 1 to 64, got multi:0"},
		{[]string{"run", "--lock", "multi:4", "--resources", "3"}, "--lock: a lease on K distinct resources needs K <= --resources (3), got multi:4"},
		{[]string{"run", "--lock", "mutexes"}, `--lock: unknown lock "mutexes" (want mutex, semaphore:P (P permits), multi:K (K resources per lease) or rw:F (F the share of reads)), got mutexes`},
		{[]string{"run", "--lock", "semaphore:4", "--engine", "bsm-redislock"}, "--lock: engine bsm-redislock has no semaphore: only redlock has one over N masters (no baseline here does), got semaphore:4"},
		{[]string{"run", "--engine", "redlock-sequential"}, "--lock: engine redlock-sequential differs from redlock in multi:K only (K mutexes one after another), got mutex"},
		{[]string{"sweep", "--workers", "1,2", "--lock", "rw:0.5", "--engine", "rueidislock"},
			"--lock: engine rueidislock has no read/write lock: only redlock has one over N masters (no baseline here does); redlock-mutex runs the same operations on our mutex, every one exclusive, got rw:0.5"},
		{[]string{"compare", "--lock", "semaphore:8", "--engines", "redlock,redsync-rueidis"},
			"redsync-rueidis: --lock: engine redsync-rueidis has no semaphore: only redlock has one over N masters (no baseline here does), got semaphore:8"},
		{[]string{"compare", "--lock", "rw:0.9", "--engines", "redlock,bsm-redislock"},
			"bsm-redislock: --lock: engine bsm-redislock has no read/write lock: only redlock has one over N masters (no baseline here does); redlock-mutex runs the same operations on our mutex, every one exclusive, got rw:0.9"},
		{[]string{"chaos", "--lock", "rw:-0.5"}, "--lock: the share of reads F of rw:F must be 0 to 1, got rw:-0.5"},
		{[]string{"chaos", "--lock", "multi:4", "--resources", "3"}, "--lock: a lease on K distinct resources needs K <= --resources (3), got multi:4"},
		{[]string{"chaos", "--lock", "semaphore:2", "--class", "out-of-model"},
			"--lock: a semaphore is not available with --class out-of-model: its faults act on the lock keys by name, and a semaphore's slots are the engine's internal keys, got semaphore:2"},
		{[]string{"scenario", "restart-amnesia", "--lock", "semaphore:2"},
			"--lock: the scenarios reproduce the mutex's failure modes and take no --lock (run, sweep, compare and chaos do), got semaphore:2"},
	} {
		var stdout, stderr bytes.Buffer
		t.Chdir(t.TempDir())
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != 2 || stderr.String() != "redlock-bench: "+c.want+"\n" {
			t.Errorf("%q: exit %d, stderr %q\nwant %q", c.args, code, stderr.String(), c.want)
		}
		if entries, _ := os.ReadDir("."); len(entries) != 0 || stdout.Len() != 0 {
			t.Errorf("%q: bad flags left files %v or output %q", c.args, entries, stdout.String())
		}
	}
}

// The controls through the command: the one-line result names the lock,
// and the error the rule that broke.
func TestRunLockControls(t *testing.T) {
	for _, c := range []struct {
		lock, line, err string
	}{
		{"semaphore:2", "nolock semaphore:2: ", "safety violations: more holders of a semaphore at once than its 2 permits"},
		{"multi:2", "nolock multi:2: ", "safety violations: two holders of one resource overlapped"},
		{"rw:0.5", "nolock rw:0.5: ", "safety violations: a writer held a resource beside another holder"},
	} {
		cmd := command(t, "run", "-q", "--engine", "nolock", "--lock", c.lock, "--workers", "8", "--resources", "3",
			"--hold", "100us", "--duration", "500ms", "--warmup", "0")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if exitStatus(err) != 1 || !strings.HasPrefix(stdout.String(), c.line) || !strings.Contains(stdout.String(), "VIOLATIONS: UNSAFE") ||
			!strings.Contains(stderr.String(), c.err) {
			t.Errorf("%s: exit %d\nstdout %s\nstderr %s", c.lock, exitStatus(err), stdout.String(), stderr.String())
		}
	}
}

// A comparison of multi-resource leases runs our lease beside K mutexes
// one after another, and says so.
func TestCompareMulti(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cmp")
	cmd := command(t, "compare", "-q", "--lock", "multi:2", "--engines", "redlock,redlock-sequential", "--local-masters", "3",
		"--workers", "4", "--resources", "1000", "--ops", "200", "--warmup", "0", "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %d\nstderr: %s", exitStatus(err), stderr.String())
	}
	c := readComparison(t, out)
	if c.Lock != "multi:2" || len(c.Notes) != 2 || !strings.Contains(c.Notes[0], "redlock-sequential take multi:2 as 2 mutexes one after another") {
		t.Errorf("compare.json lock %q notes %q", c.Lock, c.Notes)
	}
	for _, r := range c.Results {
		if r.Runs != 3 || r.Median == nil || r.Median.AcquiredPerSec <= 0 || r.Violations != 0 {
			t.Errorf("%s: %+v", r.Engine, r)
		}
	}
	if !strings.HasPrefix(stdout.String(), "redlock multi:2: ") || !strings.Contains(stdout.String(), "\nredlock-sequential multi:2: ") {
		t.Errorf("-q lines:\n%s", stdout.String())
	}
	txt, _ := os.ReadFile(filepath.Join(out, "compare.txt"))
	if !bytes.Contains(txt, []byte("lock         multi:2\nnote         redlock-sequential take multi:2")) {
		t.Errorf("compare.txt:\n%s", txt)
	}
}

// A compare of a read/write lock runs ours beside the same operations on
// our mutex, and says so: no baseline has a read/write lock.
func TestCompareRW(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cmp")
	cmd := command(t, "compare", "-q", "--lock", "rw:0.9", "--local-masters", "3", "--mode", "wait", "--resources", "4",
		"--workers", "8", "--hold", "200us", "--ops", "300", "--warmup", "0", "--fencing", "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %d\nstderr: %s", exitStatus(err), stderr.String())
	}
	c := readComparison(t, out)
	if c.Lock != "rw:0.9" || strings.Join(c.Engines, ",") != "redlock,redlock-mutex" || len(c.Notes) != 2 ||
		!strings.Contains(c.Notes[0], "redlock-mutex takes rw:0.9 on redlock's mutex") || !strings.Contains(c.Notes[1], "has a read/write lock") {
		t.Errorf("compare.json engines %v lock %q notes %q", c.Engines, c.Lock, c.Notes)
	}
	for _, r := range c.Results {
		if r.Runs != 3 || r.Median == nil || r.Median.AcquiredPerSec <= 0 || r.Violations != 0 {
			t.Errorf("%s: %+v", r.Engine, r)
		}
	}
	if !strings.HasPrefix(stdout.String(), "redlock rw:0.9: ") || !strings.Contains(stdout.String(), "\nredlock-mutex rw:0.9: ") {
		t.Errorf("-q lines:\n%s", stdout.String())
	}
	txt, _ := os.ReadFile(filepath.Join(out, "compare.txt"))
	if !bytes.Contains(txt, []byte("lock         rw:0.9\nnote         redlock-mutex takes rw:0.9 on redlock's mutex")) {
		t.Errorf("compare.txt:\n%s", txt)
	}
}

// A chaos soak of each kind against local masters: in model, every rule
// holds; the control breaks the semaphore's and the read/write lock's.
func TestChaosLockKinds(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"--lock", "semaphore:3", "--workers", "2", "--seed", "3"}, 0},
		{[]string{"--lock", "multi:2", "--seed", "3"}, 0},
		{[]string{"--lock", "rw:0.7", "--seed", "3"}, 0},
		{[]string{"--lock", "rw:0.7", "--seed", "3", "--class", "out-of-model"}, 0},
		{[]string{"--lock", "semaphore:3", "--engine", "nolock"}, 1},
		{[]string{"--lock", "rw:0.5", "--engine", "nolock"}, 1},
	} {
		code, stdout, r := runChaos(t, append([]string{"--duration", "3s", "--ttl", "500ms"}, c.args...)...)
		lock := c.args[1]
		if code != c.code || r.Lock != lock || !strings.Contains(stdout, "lock "+lock) {
			t.Errorf("%q: exit %d (want %d), lock %q\n%s", c.args, code, c.code, r.Lock, stdout)
		}
		if r.Acquired == 0 {
			t.Errorf("%q: nothing acquired", c.args)
		}
		sem, rw := strings.HasPrefix(lock, "semaphore:"), strings.HasPrefix(lock, "rw:")
		if c.code == 1 && (r.Violations == 0 || sem && r.ViolationExamples[0].Holders <= 3) {
			t.Errorf("%q: the control made no crowd: %d violations %+v", c.args, r.Violations, r.ViolationExamples)
		}
		if rw && (r.Reads == 0 || r.Reads == r.Acquired || !strings.Contains(stdout, fmt.Sprintf("(%d reads, %d writes)", r.Reads, r.Acquired-r.Reads))) {
			t.Errorf("%q: %d reads of %d locks\n%s", c.args, r.Reads, r.Acquired, stdout)
		}
		if rw && c.code == 0 && (r.TokensChecked == 0 || r.Store.Writes == 0) {
			t.Errorf("%q: writers fenced nothing: %d tokens checked, %d writes", c.args, r.TokensChecked, r.Store.Writes)
		}
		if c.code == 0 && !strings.Contains(r.Replay(), "--lock "+lock) {
			t.Errorf("%q: replay %q does not take the lock", c.args, r.Replay())
		}
	}
}
