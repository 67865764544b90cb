package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// The tests run the built binary, the way a cron job does, against real
// masters started once for all of them; each test locks its own resource.

var (
	binary  string
	masters []string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "redlock-cmd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "redlock")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build redlock:", err)
		return 1
	}
	cluster, err := redisproc.Start(context.Background(), 3, redisproc.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	masters = cluster.Addrs()
	// The default restart quarantine ignores a master younger than the
	// TTL (1s with execShortTTL); uptime_in_seconds counts whole seconds.
	time.Sleep(2 * time.Second)
	return m.Run()
}

// buffer is an io.Writer that tests may read while the process writes.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *buffer
	exited         chan struct{}
	err            error
	at             time.Time // when it exited
}

// start runs redlock with args; with masters set, --masters goes first.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary, args...), stdout: &buffer{}, stderr: &buffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.Env = append(os.Environ(), "REDLOCK_MASTERS=")
	p.cmd.WaitDelay = 2 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.at = time.Now()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			// A failed test: redlock stops its command as on Ctrl-C.
			p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(3 * time.Second):
				p.cmd.Process.Kill()
				<-p.exited
			}
		}
	})
	return p
}

// wait returns the exit status, failing the test after timeout.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		t.Fatalf("redlock still running after %s\nstdout: %s\nstderr: %s", timeout, p.stdout, p.stderr)
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("redlock: %v", p.err)
	}
	return 0
}

// waitOutput waits until stdout holds s.
func (p *proc) waitOutput(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(p.stdout.String(), s) {
		select {
		case <-p.exited:
			t.Fatalf("redlock exited (%v) before printing %q\nstdout: %s\nstderr: %s", p.err, s, p.stdout, p.stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q on stdout after a minute\nstdout: %s\nstderr: %s", s, p.stdout, p.stderr)
		}
	}
}

func runRedlock(t *testing.T, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	p := start(t, args...)
	status = p.wait(t, time.Minute)
	return status, p.stdout.String(), p.stderr.String()
}

// execTTL is exec1's TTL, the CLI's default: its node timeout (300ms)
// and extension period (10s) let a holder ride out a machine stall of a
// few hundred ms, where with a 1s TTL (50ms, 333ms) an extension round
// timed out on every master and the holder lost its lock mid-test. The
// masters are seconds old, younger than it: --quarantine observed.
const execTTL = 30 * time.Second

// exec1 is the arguments of an exec on the test masters that holds its
// lock through stalls; the lock is released by the holder, never left
// to expire.
func exec1(args ...string) []string {
	return append([]string{"exec", "--masters", strings.Join(masters, ","), "--ttl", execTTL.String(), "--quarantine", "observed"}, args...)
}

// execShortTTL is exec with a 1s TTL and the default quarantine, for the
// tests whose point is the TTL: a lock that expires after its holder was
// killed or stopped, the quarantine of masters younger than --max-ttl.
// Its holders are stall-sensitive (their node timeout is 50ms): only
// these tests use it.
func execShortTTL(args ...string) []string {
	return append([]string{"exec", "--masters", strings.Join(masters, ","), "--ttl", "1s"}, args...)
}

// keys counts the masters where key exists.
func keys(t *testing.T, key string) int {
	t.Helper()
	n := 0
	for _, a := range masters {
		r, err := redisproc.Do(context.Background(), a, 10*time.Second, "EXISTS", key)
		if err != nil {
			t.Fatalf("EXISTS on %s: %v", a, err)
		}
		if r == ":1" {
			n++
		}
	}
	return n
}

func TestStatusPassesThrough(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		script string
		want   int
	}{
		{`test "$REDLOCK_RESOURCE" = pass && test -z "$REDLOCK_FENCING_TOKEN" && exit 7`, 7},
		{`exit 0`, 0},
		{`kill -USR1 $$`, 128 + int(syscall.SIGUSR1)},
	} {
		status, stdout, stderr := runRedlock(t, exec1("pass", "--", "sh", "-c", c.script)...)
		if status != c.want {
			t.Errorf("%s: status %d, want %d\nstdout: %s\nstderr: %s", c.script, status, c.want, stdout, stderr)
		}
		if stderr != "" {
			t.Errorf("%s: stderr %q, want nothing", c.script, stderr)
		}
		if n := keys(t, "pass"); n != 0 {
			t.Errorf("%s: the lock's key is left on %d masters", c.script, n)
		}
	}
}

func TestMastersFromEnvironment(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "exec", "--ttl", execTTL.String(), "--quarantine", "observed", "env", "--", "sh", "-c", "echo held")
	cmd.Env = append(os.Environ(), "REDLOCK_MASTERS="+strings.Join(masters, ","))
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "held\n" {
		t.Errorf("REDLOCK_MASTERS: %v, output %q", err, out)
	}
}

func TestHeldByAnother(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	first := start(t, exec1("held", "--", "sh", "-c",
		`echo ready; while [ ! -e "$0/go" ]; do sleep 0.02; done; echo first >>"$0/log"`, dir)...)
	first.waitOutput(t, "ready")

	status, _, stderr := runRedlock(t, exec1("held", "--", "sh", "-c", "echo must-not-run >>"+log)...)
	if status != exitNotAcquired || !strings.Contains(stderr, `not acquired: "held" is held by another owner`) {
		t.Errorf("second exec while held: status %d, want %d; stderr %q", status, exitNotAcquired, stderr)
	}
	// A --wait shorter than a round trip still makes the first attempt.
	status, _, stderr = runRedlock(t, exec1("--wait", "1ns", "held", "--", "sh", "-c", "echo must-not-run >>"+log)...)
	if status != exitNotAcquired || !strings.Contains(stderr, `not acquired: "held" is held by another owner`) {
		t.Errorf("--wait 1ns while held: status %d, want %d; stderr %q", status, exitNotAcquired, stderr)
	}
	begin := time.Now()
	status, _, stderr = runRedlock(t, exec1("--wait", "300ms", "held", "--", "sh", "-c", "echo must-not-run >>"+log)...)
	if status != exitNotAcquired || !strings.Contains(stderr, "waited 300ms") || time.Since(begin) < 300*time.Millisecond {
		t.Errorf("--wait 300ms while held: status %d after %s; stderr %q", status, time.Since(begin), stderr)
	}

	// A waiter runs once the first releases, not before.
	waiter := start(t, exec1("--wait", "10s", "held", "--", "sh", "-c", "echo second >>"+log)...)
	time.Sleep(300 * time.Millisecond)
	if b, _ := os.ReadFile(log); len(b) != 0 {
		t.Fatalf("ran while the lock was held: %q", b)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if s := first.wait(t, 30*time.Second); s != 0 {
		t.Errorf("first: status %d; stderr %s", s, first.stderr)
	}
	if s := waiter.wait(t, 30*time.Second); s != 0 {
		t.Errorf("waiter: status %d; stderr %s", s, waiter.stderr)
	}
	if b, _ := os.ReadFile(log); string(b) != "first\nsecond\n" {
		t.Errorf("log %q, want the first holder's line, then the waiter's", b)
	}
}

// The lock is extended while the command runs: past its TTL, every
// other attempt finds it held, and the holder ends with its own status
// (fails with auto-extension off: the lock expires after the 2s TTL).
// The TTL is short, for the probes to outlast it, and so its extensions'
// node timeout is 50ms (as at any TTL up to 5s): a stall that outlasts
// it in an extension round still loses the lock (the test is
// stall-sensitive). 2s extended every 1s: 1s of validity (less the
// acquire's own time) is left when an extension starts, where 1s every
// 333ms left 0.7s, which a stall on a loaded machine used up ("lease
// expired"); and three rounds in the probes' 3.2s, not five in 1.6s.
func TestHoldsPastTTL(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	dir := t.TempDir()
	holder := start(t, "exec", "--masters", strings.Join(masters, ","), "--ttl", ttl.String(), "--extend-every", (ttl / 2).String(),
		"--quarantine", "observed", "extended", "--", "sh", "-c", `echo ready; while [ ! -e "$0/go" ]; do sleep 0.02; done`, dir)
	holder.waitOutput(t, "ready")
	probes := 0
	// Paced, so that the probes do not starve the holder's extensions of
	// CPU on a loaded machine (their node timeout is 50ms).
	for end := time.Now().Add(ttl * 8 / 5); time.Now().Before(end); probes++ {
		status, stdout, stderr := runRedlock(t, exec1("extended", "--", "echo", "must-not-run")...)
		if status != exitNotAcquired || stdout != "" {
			t.Fatalf("probe %d while held: status %d, stdout %q, stderr %q", probes, status, stdout, stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if status := holder.wait(t, 30*time.Second); status != 0 {
		t.Errorf("holder: status %d after %d probes; stderr %s", status, probes, holder.stderr)
	}
}

// --wait bounds the wait for a holder, not the first attempt: one shorter
// than a round trip takes a free resource, instead of reporting the
// masters unavailable.
func TestTinyWaitOnFreeResource(t *testing.T) {
	t.Parallel()
	for _, wait := range []string{"1ns", "100us"} {
		status, stdout, stderr := runRedlock(t, exec1("--wait", wait, "tinywait", "--", "echo", "ran")...)
		if status != 0 || stdout != "ran\n" {
			t.Errorf("--wait %s on a free resource: status %d, stdout %q, stderr %q", wait, status, stdout, stderr)
		}
	}
}

// deleteKey deletes key on every master, as a majority losing its keys
// would: the holder's tracker sees it at once (its next extension, at
// the latest, misses the quorum).
func deleteKey(t *testing.T, key string) {
	t.Helper()
	for _, a := range masters {
		if _, err := redisproc.Do(context.Background(), a, 10*time.Second, "DEL", key); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLostLockStopsCommand(t *testing.T) {
	t.Parallel()
	p := start(t, exec1("--grace", "10s", "lost", "--", "sh", "-c",
		`trap 'echo term; exit 3' TERM; echo ready; while :; do sleep 0.02; done`)...)
	p.waitOutput(t, "ready")
	deleteKey(t, "lost")
	status := p.wait(t, time.Minute)
	if status != exitLost || !strings.Contains(p.stdout.String(), "term") {
		t.Errorf("status %d, want %d; stdout %q", status, exitLost, p.stdout)
	}
	// The command exits on SIGTERM (its status 3), before the grace
	// period would end it with SIGKILL.
	if e := p.stderr.String(); !strings.Contains(e, `lock on "lost" lost`) || !strings.Contains(e, "COMMAND stopped (exit status 3)") || strings.Contains(e, "SIGKILL") {
		t.Errorf("stderr: %s", e)
	}
}

// A command that ignores SIGTERM, and a child of it that ignores SIGTERM
// too, are killed after the grace period.
func TestLostLockKillsAfterGrace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, exec1("--grace", "500ms", "lostkill", "--", "sh", "-c",
		`trap 'echo term' TERM
		 sh -c 'trap "" TERM; exec sleep 300' >/dev/null 2>&1 &
		 echo $! >"$0/child"; echo ready
		 while :; do sleep 0.02; done`, dir)...)
	p.waitOutput(t, "ready")
	b, err := os.ReadFile(filepath.Join(dir, "child"))
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || child <= 0 {
		t.Fatalf("child pid %q: %v", b, err)
	}
	deleteKey(t, "lostkill")
	status := p.wait(t, 30*time.Second)
	if status != exitLost {
		t.Errorf("status %d, want %d; stderr %s", status, exitLost, p.stderr)
	}
	if e := p.stderr.String(); !strings.Contains(e, "sending SIGKILL") || !strings.Contains(e, "killed by SIGKILL") {
		t.Errorf("stderr: %s", e)
	}
	if !strings.Contains(p.stdout.String(), "term") {
		t.Errorf("the command did not see SIGTERM first: stdout %q", p.stdout)
	}
	waitGone(t, child)
}

// waitGone waits for pid to be gone or a zombie (nobody may reap an orphan
// in a container).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the command's child %d outlived it: %s", pid, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ctrl-C, a hang-up and Ctrl-\ reach the command, and the lock is
// released at once, not left to expire: the TTL is 10s. Unhandled, SIGQUIT
// would make the Go runtime dump its goroutines and exit 2, leaving the
// lock behind and the command's children running.
func TestSignalStopsCommandAndReleases(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		if signal.Ignored(sig) {
			// Inherited (nohup, a background job): redlock keeps it
			// ignored, as TestIgnoredHangupStaysIgnored checks.
			t.Logf("%s is ignored by the test: not tried", signalName(sig))
			continue
		}
		resource := "signal-" + signalName(sig)
		dir := t.TempDir()
		p := start(t, "exec", "--masters", strings.Join(masters, ","), "--ttl", "10s", "--quarantine", "observed",
			resource, "--", "sh", "-c", `echo $$ >"$0/pid"; echo ready; exec sleep 300`, dir)
		p.waitOutput(t, "ready")
		// The signal must find sleep running: dash catches SIGINT under
		// -c, and a SIGINT it caught before the exec is lost with it,
		// while sleep runs on (as one caught by a forked child was).
		command := readPid(t, filepath.Join(dir, "pid"))
		waitFor(t, "the command's sleep running", func() bool {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", command))
			return string(comm) == "sleep\n"
		})
		// The acquire returned at a quorum: the last master's SET may
		// still be on its way.
		waitFor(t, fmt.Sprintf("%s held on all %d masters", resource, len(masters)), func() bool { return keys(t, resource) == len(masters) })
		p.cmd.Process.Signal(sig)
		if status := p.wait(t, 30*time.Second); status != 128+int(sig) {
			t.Errorf("%s: status %d, want %d; stderr %s", signalName(sig), status, 128+int(sig), p.stderr)
		}
		if n := keys(t, resource); n != 0 {
			t.Errorf("the lock's key is left on %d masters after %s", n, signalName(sig))
		}
	}
}

// SIGTERM to redlock is forwarded; a command that ignores it is killed
// after the grace period, and the lock is released all the same.
func TestTerminateKillsAfterGraceAndReleases(t *testing.T) {
	t.Parallel()
	p := start(t, "exec", "--masters", strings.Join(masters, ","), "--ttl", "10s", "--quarantine", "observed",
		"--grace", "300ms", "terminate", "--", "sh", "-c", `trap 'echo term' TERM; echo ready; while :; do sleep 0.02; done`)
	p.waitOutput(t, "ready")
	p.cmd.Process.Signal(syscall.SIGTERM)
	if status := p.wait(t, 30*time.Second); status != 128+int(syscall.SIGKILL) {
		t.Errorf("status %d, want %d; stderr %s", status, 128+int(syscall.SIGKILL), p.stderr)
	}
	if !strings.Contains(p.stdout.String(), "term") {
		t.Errorf("the command did not get the SIGTERM: stdout %q", p.stdout)
	}
	if n := keys(t, "terminate"); n != 0 {
		t.Errorf("the lock's key is left on %d masters", n)
	}
}

func TestFencingTokenIncreases(t *testing.T) {
	t.Parallel()
	var last int64
	for i := 0; i < 3; i++ {
		status, stdout, stderr := runRedlock(t, exec1("--fencing", "fenced", "--", "sh", "-c", `echo "$REDLOCK_FENCING_TOKEN"`)...)
		token, err := strconv.ParseInt(strings.TrimSpace(stdout), 10, 64)
		if status != 0 || err != nil {
			t.Fatalf("status %d, token %q: %v; stderr %s", status, stdout, err, stderr)
		}
		if token <= last {
			t.Errorf("run %d: token %d, not above the previous %d", i, token, last)
		}
		last = token
	}
}

func TestUnreachableMasters(t *testing.T) {
	t.Parallel()
	down := []string{redistest.DeadAddr(t), redistest.DeadAddr(t)}
	status, stdout, stderr := runRedlock(t, "exec", "--masters", masters[0]+","+strings.Join(down, ","), "--ttl", "1s",
		"unreachable", "--", "sh", "-c", "echo must-not-run")
	if status != exitUnavailable || stdout != "" {
		t.Errorf("status %d, want %d; stdout %q", status, exitUnavailable, stdout)
	}
	if !strings.HasPrefix(stderr, "redlock: exec: too many masters unreachable for a quorum: ") || !strings.Contains(stderr, down[0]) ||
		!strings.Contains(stderr, down[1]) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr %q: want one line naming both unreachable masters", stderr)
	}
}

// Masters younger than the TTL are in the restart quarantine: no quorum.
// The SETs ran all the same, the last reply after the attempt failed;
// none may outlive redlock, or the next run finds the resource held for
// the TTL (an hour here).
func TestQuarantinedMastersAreNoQuorum(t *testing.T) {
	t.Parallel()
	for i := 0; i < 3; i++ {
		status, _, stderr := runRedlock(t, "exec", "--masters", strings.Join(masters, ","), "--ttl", "1h", "quarantine", "--", "true")
		if status != exitUnavailable || !strings.Contains(stderr, `no quorum for "quarantine"`) {
			t.Errorf("run %d: status %d, want %d; stderr %q", i, status, exitUnavailable, stderr)
		}
		if n := keys(t, "quarantine"); n != 0 {
			t.Fatalf("run %d: the failed attempt's key is left on %d masters", i, n)
		}
	}
}

// The restart quarantine lasts --max-ttl, the longest TTL that any run on
// the masters takes, so that a master that restarted and forgot a lock of
// a longer TTL than this run's does not vote for this run meanwhile. The
// masters here are seconds old: too young for --max-ttl 1h.
func TestMaxTTLQuarantines(t *testing.T) {
	t.Parallel()
	status, _, stderr := runRedlock(t, execShortTTL("maxttl", "--", "true")...)
	if status != 0 {
		t.Fatalf("--ttl 1s alone: status %d; stderr %q", status, stderr)
	}
	status, _, stderr = runRedlock(t, execShortTTL("--max-ttl", "1h", "maxttl", "--", "true")...)
	if status != exitUnavailable || !strings.Contains(stderr, `no quorum for "maxttl"`) {
		t.Errorf("--max-ttl 1h: status %d, want %d; stderr %q", status, exitUnavailable, stderr)
	}
	if n := keys(t, "maxttl"); n != 0 {
		t.Errorf("the lock's key is left on %d masters", n)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	m := strings.Join(masters, ",")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "--masters", m, "r", "true"}, "missing -- between RESOURCE and COMMAND"},
		{[]string{"exec", "--masters", m, "r", "--"}, "missing COMMAND after --"},
		{[]string{"exec", "--masters", m, "--", "true"}, "missing RESOURCE before --"},
		{[]string{"exec", "--masters", m, "a", "b", "--", "true"}, "one RESOURCE before --, got 2"},
		{[]string{"exec", "--masters", m}, "missing RESOURCE -- COMMAND"},
		{[]string{"exec", "r", "--", "true"}, "no masters: give --masters"},
		{[]string{"exec", "--masters", "localhost", "r", "--", "true"}, `--masters: address "localhost": want host:port`},
		{[]string{"exec", "--masters", "127.0.0.1:70000", "r", "--", "true"}, "port must be 1-65535"},
		{[]string{"exec", "--masters", "a:1,a:1", "r", "--", "true"}, "listed twice"},
		{[]string{"exec", "--masters", m, "--ttl", "0s", "r", "--", "true"}, "--ttl 0s is out of range"},
		{[]string{"exec", "--masters", m, "--ttl", "48h", "r", "--", "true"}, "--ttl 48h0m0s is out of range"},
		{[]string{"exec", "--masters", m, "--ttl", "1500100us", "r", "--", "true"}, "want whole milliseconds"},
		{[]string{"exec", "--masters", m, "--extend-every", "1m", "r", "--", "true"}, "--extend-every 1m0s"},
		{[]string{"exec", "--masters", m, "--ttl", "1s", "--extend-every", "1ns", "r", "--", "true"}, "--extend-every 1ns: want 10ms (--ttl/100) to less than --ttl 1s"},
		{[]string{"exec", "--masters", m, "--grace", "-1s", "r", "--", "true"}, "--grace must be >= 0"},
		{[]string{"exec", "--masters", m, "--max-ttl", "1s", "--ttl", "2s", "r", "--", "true"}, "--max-ttl 1s is below --ttl 2s"},
		{[]string{"exec", "--masters", m, "--max-ttl", "25h", "r", "--", "true"}, "--max-ttl 25h0m0s is out of range"},
		{[]string{"exec", "--masters", m, "--quarantine", "never", "r", "--", "true"}, "--quarantine"},
		{[]string{"exec", "--nope", "r", "--", "true"}, "unknown flag: --nope"},
		{[]string{"exect"}, `unknown command "exect"`},
	} {
		status, stdout, stderr := runRedlock(t, c.args...)
		if status != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "redlock: ") ||
			!strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d and one line with %q", c.args, status, stdout, stderr, exitUsage, c.want)
		}
	}
}

func TestCommandNotFound(t *testing.T) {
	t.Parallel()
	status, _, stderr := runRedlock(t, exec1("nf", "--", "/nonexistent/cmd")...)
	if status != exitNotFound || !strings.Contains(stderr, "/nonexistent/cmd: command not found") {
		t.Errorf("status %d, want %d; stderr %q", status, exitNotFound, stderr)
	}
	status, _, stderr = runRedlock(t, exec1("nf", "--", "/dev/null")...)
	if status != exitCannotRun {
		t.Errorf("non-executable: status %d, want %d; stderr %q", status, exitCannotRun, stderr)
	}
}

func TestHelpListsExitStatuses(t *testing.T) {
	t.Parallel()
	status, stdout, _ := runRedlock(t, "exec", "--help")
	for _, s := range []string{"--masters", "--ttl", "--wait", "--grace", "--fencing", "REDLOCK_FENCING_TOKEN",
		strconv.Itoa(exitNotAcquired), strconv.Itoa(exitUnavailable), strconv.Itoa(exitLost), strconv.Itoa(exitUsage)} {
		if !strings.Contains(stdout, s) {
			t.Errorf("exec --help does not mention %s", s)
		}
	}
	if status != 0 {
		t.Errorf("exec --help: status %d", status)
	}
}

// Ctrl-C while waiting for the lock gives up at once: nothing runs, and
// the holder keeps its lock.
func TestInterruptWhileWaiting(t *testing.T) {
	t.Parallel()
	holder := start(t, exec1("waiting", "--", "sh", "-c", `echo ready; sleep 300`)...)
	holder.waitOutput(t, "ready")
	// The holder's acquire returned at a quorum: were its last SET still
	// on its way, the waiter could take that master first.
	waitFor(t, "the holder's key on every master", func() bool { return keys(t, "waiting") == len(masters) })
	waiter := start(t, exec1("--wait", "20s", "waiting", "--", "sh", "-c", "echo must-not-run")...)
	waitFor(t, "the waiter queued", func() bool { return keys(t, "\xffredlock:queue:waiting") == len(masters) })
	waiter.cmd.Process.Signal(syscall.SIGINT)
	status := waiter.wait(t, 30*time.Second)
	if status != 128+int(syscall.SIGINT) || waiter.stdout.String() != "" ||
		!strings.Contains(waiter.stderr.String(), `SIGINT while acquiring "waiting": COMMAND not run`) {
		t.Errorf("status %d, stdout %q, stderr %q", status, waiter.stdout, waiter.stderr)
	}
	if n := keys(t, "waiting"); n != len(masters) {
		t.Errorf("the holder's key is on %d masters, want %d", n, len(masters))
	}
	// The waiter left its place in the resource's queue (engine's
	// queuePrefix), or the holder's release would hand the turn to it.
	if n := keys(t, "\xffredlock:queue:waiting"); n != 0 {
		t.Errorf("the waiter's queue is left on %d masters", n)
	}
	holder.cmd.Process.Signal(syscall.SIGINT)
	holder.wait(t, 30*time.Second)
	if n := keys(t, "waiting"); n != 0 {
		t.Errorf("a key is left on %d masters", n)
	}
}

// Under nohup, SIGHUP stays ignored: redlock neither forwards it nor
// stops, and the command runs to its end with the lock.
func TestIgnoredHangupStaysIgnored(t *testing.T) {
	t.Parallel()
	p := &proc{cmd: exec.Command("nohup", append([]string{binary}, exec1("nohup", "--", "sh", "-c", `echo ready; sleep 0.5; echo end`)...)...),
		stdout: &buffer{}, stderr: &buffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	p.waitOutput(t, "ready")
	p.cmd.Process.Signal(syscall.SIGHUP)
	if status := p.wait(t, 30*time.Second); status != 0 || !strings.Contains(p.stdout.String(), "end") {
		t.Errorf("status %d, stdout %q, stderr %q", status, p.stdout, p.stderr)
	}
}

// procState is the state letter of pid in /proc ("" once it is gone).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 {
		return f[0]
	}
	return ""
}

// groupStopped reports whether the process group pgid is stopped: every
// member stopped (T), but for a shell that vfork()ed and waits, in D, for
// its child stopped before exec; and at least one member.
func groupStopped(pgid int) bool {
	entries, _ := os.ReadDir("/proc")
	stopped := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		switch f[0] {
		case "T":
			stopped++
		case "D", "Z":
		default:
			return false
		}
	}
	return stopped > 0
}

// waitFor polls cond until it holds, failing the test after 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after 30s", what)
		}
	}
}

// readPid reads the pid the command wrote to file.
func readPid(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Fatalf("pid %q: %v", b, err)
	}
	return pid
}

// Ctrl-Z (SIGTSTP) stops redlock, which then extends nothing. The command,
// in a process group of its own, gets no SIGTSTP from the terminal; it must
// be stopped with redlock, or it runs on while the lock expires and
// another redlock takes it. When redlock is continued with the lock lost,
// the command gets SIGTERM (and SIGCONT, to act on it).
func TestSuspendStopsCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, execShortTTL("--grace", "10s", "suspend", "--", "sh", "-c",
		`trap 'echo term; exit 3' TERM; echo $$ >"$0/pid"; echo ready; while :; do sleep 0.02; done`, dir)...)
	p.waitOutput(t, "ready")
	command := readPid(t, filepath.Join(dir, "pid"))
	p.cmd.Process.Signal(syscall.SIGTSTP)
	waitFor(t, "redlock stopped", func() bool { return procState(p.cmd.Process.Pid) == "T" })
	waitFor(t, "the lock expired", func() bool { return keys(t, "suspend") == 0 })
	if !groupStopped(command) {
		t.Errorf("the command is in state %q while its lock has expired, want its group stopped", procState(command))
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	if status := p.wait(t, 30*time.Second); status != exitLost || !strings.Contains(p.stdout.String(), "term") {
		t.Errorf("status %d, want %d; stdout %q; stderr %s", status, exitLost, p.stdout, p.stderr)
	}
}

// A suspended redlock continued within the TTL keeps its lock, and
// continues the command.
func TestSuspendAndContinue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, "exec", "--masters", strings.Join(masters, ","), "--ttl", "10s", "--quarantine", "observed",
		"resume", "--", "sh", "-c", `echo $$ >"$0/pid"; echo ready; while [ ! -e "$0/go" ]; do sleep 0.02; done; echo end`, dir)
	p.waitOutput(t, "ready")
	command := readPid(t, filepath.Join(dir, "pid"))
	p.cmd.Process.Signal(syscall.SIGTSTP)
	waitFor(t, "redlock stopped", func() bool { return procState(p.cmd.Process.Pid) == "T" })
	waitFor(t, "the command stopped", func() bool { return groupStopped(command) })
	p.cmd.Process.Signal(syscall.SIGCONT)
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if status := p.wait(t, 30*time.Second); status != 0 || !strings.Contains(p.stdout.String(), "end") {
		t.Errorf("status %d; stdout %q; stderr %s", status, p.stdout, p.stderr)
	}
	if n := keys(t, "resume"); n != 0 {
		t.Errorf("the lock's key is left on %d masters", n)
	}
}

// A closed stderr (redlock exec ... 2>&1 | head -1, or a logger that
// died) must not kill redlock with SIGPIPE when it reports the lost lock:
// it still stops the command and exits with 124. The command's own SIGPIPE
// stays at its default, not ignored (the command here writes no stderr,
// or the shell's "Terminated" would end it with SIGPIPE).
func TestClosedStderr(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	p := &proc{cmd: exec.Command(binary, exec1("--grace", "10s", "stderr", "--", "sh", "-c",
		`exec 2>/dev/null; trap 'echo term; exit 3' TERM; grep SigIgn /proc/$$/status; echo ready; while :; do sleep 0.02; done`)...),
		stdout: &buffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.exited
	})
	p.waitOutput(t, "ready")
	// Only SIGPIPE's bit: a test run under nohup ignores SIGHUP throughout.
	m := regexp.MustCompile(`SigIgn:\s+([0-9a-f]+)\n`).FindStringSubmatch(p.stdout.String())
	if m == nil {
		t.Fatalf("no SigIgn: %q", p.stdout)
	}
	if ign, err := strconv.ParseUint(m[1], 16, 64); err != nil || ign&(1<<(syscall.SIGPIPE-1)) != 0 {
		t.Errorf("the command ignores SIGPIPE: %q", p.stdout)
	}
	deleteKey(t, "stderr")
	if status := p.wait(t, 30*time.Second); status != exitLost || !strings.Contains(p.stdout.String(), "term") {
		t.Errorf("status %d (%v), want %d; stdout %q", status, p.err, exitLost, p.stdout)
	}
}

// A redlock killed with SIGKILL cannot release or stop anything itself:
// the command gets SIGTERM from the parent-death signal, and the lock's
// keys expire within the TTL.
func TestKilledRedlockStopsCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, execShortTTL("killed", "--", "sh", "-c",
		`trap 'echo term >"$0/term"; exit 3' TERM; echo $$ >"$0/pid"; echo ready; while :; do sleep 0.02; done`, dir)...)
	p.waitOutput(t, "ready")
	command := readPid(t, filepath.Join(dir, "pid"))
	t.Cleanup(func() {
		if s := procState(command); s != "" && s != "Z" {
			syscall.Kill(command, syscall.SIGKILL) // left running: the test failed
		}
	})
	p.cmd.Process.Kill()
	p.wait(t, 30*time.Second)
	waitFor(t, "the command stopped", func() bool { s := procState(command); return s == "" || s == "Z" })
	if b, err := os.ReadFile(filepath.Join(dir, "term")); err != nil || string(b) != "term\n" {
		t.Errorf("the command did not get SIGTERM: %q, %v", b, err)
	}
	waitFor(t, "the lock expired", func() bool { return keys(t, "killed") == 0 })
}

// A stopped command (one that read the terminal from its background
// process group, or was sent SIGSTOP) gets a forwarded signal with a
// SIGCONT, so that it acts on it at once instead of being killed after
// --grace.
func TestSignalReachesStoppedCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, exec1("--grace", "10s", "stopped", "--", "sh", "-c", `echo $$ >"$0/pid"; echo ready; kill -STOP $$; echo resumed`, dir)...)
	p.waitOutput(t, "ready")
	command := readPid(t, filepath.Join(dir, "pid"))
	waitFor(t, "the command stopped", func() bool { return procState(command) == "T" })
	p.cmd.Process.Signal(syscall.SIGINT)
	if status := p.wait(t, 30*time.Second); status != 128+int(syscall.SIGINT) || strings.Contains(p.stdout.String(), "resumed") {
		t.Errorf("status %d, want %d; stdout %q; stderr %s", status, 128+int(syscall.SIGINT), p.stdout, p.stderr)
	}
}

// A key of another type at RESOURCE (some other program's list) is a
// configuration error, not contention: 78, the command not run, and the
// list left as it was.
func TestWrongTypeKey(t *testing.T) {
	t.Parallel()
	for _, a := range masters {
		if _, err := redisproc.Do(context.Background(), a, 10*time.Second, "RPUSH", "wrongtype", "item"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { deleteKey(t, "wrongtype") })
	status, stdout, stderr := runRedlock(t, exec1("wrongtype", "--", "echo", "must-not-run")...)
	if status != exitConfig || stdout != "" || !strings.HasPrefix(stderr, `redlock: exec: "wrongtype" cannot be a lock: `) ||
		!strings.Contains(stderr, "WRONGTYPE") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("status %d, want %d; stdout %q; stderr %q", status, exitConfig, stdout, stderr)
	}
	for _, a := range masters {
		if r, err := redisproc.Do(context.Background(), a, 10*time.Second, "LLEN", "wrongtype"); err != nil || r != ":1" {
			t.Errorf("%s: the list is %q (%v), want it untouched", a, r, err)
		}
	}
}

// A lock lost while a forwarded signal is stopping the command says so,
// instead of claiming a SIGTERM it does not send; the status is 124.
func TestLostWhileStopping(t *testing.T) {
	t.Parallel()
	p := start(t, exec1("--grace", "10s", "lost-stopping", "--", "sh", "-c",
		`trap 'echo term' TERM; echo ready; while :; do sleep 0.02; done`)...)
	p.waitOutput(t, "ready")
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.waitOutput(t, "term")
	deleteKey(t, "lost-stopping")
	waitFor(t, "the loss reported", func() bool { return strings.Contains(p.stderr.String(), `lock on "lost-stopping" lost`) })
	p.cmd.Process.Signal(syscall.SIGINT) // a second signal: SIGKILL at once
	if status := p.wait(t, 30*time.Second); status != exitLost {
		t.Errorf("status %d, want %d; stderr %s", status, exitLost, p.stderr)
	}
	if e := p.stderr.String(); strings.Contains(e, "stopping COMMAND with SIGTERM") || !strings.Contains(e, "while COMMAND is being stopped") {
		t.Errorf("stderr: %s", e)
	}
}

// A redlock started with SIGTSTP ignored (by a parent that wants no job
// control stops) keeps it ignored: SIGTSTP stops neither it nor the
// command. The Go runtime installs no handler for SIGTSTP on its own, so
// only the process's own disposition tells.
func TestIgnoredSuspendStaysIgnored(t *testing.T) {
	t.Parallel()
	args := append([]string{"-c", `trap '' TSTP; exec "$0" "$@"`, binary}, exec1("tstp-ignored", "--", "sh", "-c", `echo ready; sleep 0.5; echo end`)...)
	p := &proc{cmd: exec.Command("sh", args...), stdout: &buffer{}, stderr: &buffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.exited
	})
	p.waitOutput(t, "ready")
	p.cmd.Process.Signal(syscall.SIGTSTP)
	if status := p.wait(t, 30*time.Second); status != 0 || !strings.Contains(p.stdout.String(), "end") {
		t.Errorf("status %d, stdout %q, stderr %q", status, p.stdout, p.stderr)
	}
}

// With the masters stalled (SIGSTOP) when the command ends, redlock does
// not wait for them beyond releaseTimeout: the command's status comes
// promptly, and the release's failure is reported, with the TTL that
// bounds the keys' life. Before the bound, closing the connections to
// stalled masters took the connection timeout (3s) on top of the release.
func TestExitPromptlyWithStalledMasters(t *testing.T) {
	t.Parallel()
	c := redistest.StartT(t, 3)
	t.Cleanup(func() {
		for _, n := range c.Nodes {
			n.Resume()
		}
	})
	dir := t.TempDir()
	p := start(t, "exec", "--masters", strings.Join(c.Addrs(), ","), "--ttl", "30s", "--quarantine", "observed",
		"stalled", "--", "sh", "-c", `echo ready; while [ ! -e "$0/go" ]; do sleep 0.02; done; echo done $(date +%s%N); exit 5`, dir)
	p.waitOutput(t, "ready")
	for _, n := range c.Nodes {
		if err := n.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if status := p.wait(t, time.Minute); status != 5 {
		t.Errorf("status %d, want the command's 5; stderr %s", status, p.stderr)
	}
	// From the command's last words (its own clock reading, not when this
	// test saw them) to redlock's exit: at most releaseTimeout (1s), where
	// waiting for the stalled masters takes the connection timeout (3s).
	// The bound sits between the two: 1.5s of margin for a loaded machine
	// above the first, and the second cannot come in under it.
	m := regexp.MustCompile(`done (\d+)\n`).FindStringSubmatch(p.stdout.String())
	if m == nil {
		t.Fatalf("stdout %q: want the command's exit time", p.stdout)
	}
	ns, _ := strconv.ParseInt(m[1], 10, 64)
	if d := p.at.Sub(time.Unix(0, ns)); d > releaseTimeout+1500*time.Millisecond {
		t.Errorf("redlock exited %s after its command, want about releaseTimeout (%s): not the connection timeout besides", d, releaseTimeout)
	}
	if e := p.stderr.String(); !strings.Contains(e, `release of "stalled" failed`) || !strings.Contains(e, "expire within --ttl 30s") ||
		strings.Count(e, "\n") != 1 || strings.Contains(e, "engine: ") {
		t.Errorf("stderr: want one line on the failed release; got %q", e)
	}
}

// clockTime is a time of day as the quarantine messages give it.
var clockTime = regexp.MustCompile(`\b\d\d:\d\d:\d\d\.\d\d\d\b`)

// On masters younger than --max-ttl (seconds old, and an hour here), the
// message says in exec's flags what holds the lock back, until when, and
// how to choose otherwise: once, in one line, without the library's terms.
// A --wait that ends before the quarantine does fails at once.
func TestQuarantineSpeaksExecFlags(t *testing.T) {
	t.Parallel()
	// --ttl 24h: the quarantine ends 24h after the masters started, and
	// the advice rounds the time left up to the hour, 24h, for the first
	// hour of the masters' life (with --ttl 1h, it was 1h for their first
	// minute only, which a slow run of the tests could outlast).
	for _, extra := range [][]string{nil, {"--wait", "1m"}} {
		args := append([]string{"exec", "--masters", strings.Join(masters, ","), "--ttl", "24h"}, extra...)
		p := start(t, append(args, "young", "--", "echo", "must-not-run")...)
		// Well before --wait 1m ends.
		status := p.wait(t, 20*time.Second)
		e := p.stderr.String()
		if status != exitUnavailable || p.stdout.String() != "" || strings.Count(e, "\n") != 1 || !strings.HasPrefix(e, `redlock: exec: no quorum for "young"`) {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d and one line", extra, status, p.stdout, e, exitUnavailable)
		}
		for _, want := range []string{"restart quarantine", "until " + clockTime.FindString(e), "--max-ttl 24h", "--quarantine observed", "--wait 24h"} {
			if !clockTime.MatchString(e) || strings.Count(e, want) != 1 {
				t.Errorf("%q: stderr %q: want %q once", extra, e, want)
			}
		}
		for _, not := range []string{"engine: ", "Config.", "QuarantineObserved", "MaxTTL", "Locker"} {
			if strings.Contains(e, not) {
				t.Errorf("%q: stderr %q speaks of %q", extra, e, not)
			}
		}
		if extra != nil && !strings.Contains(e, "--wait 1m ends before then") {
			t.Errorf("%q: stderr %q: want it to say --wait ends before the quarantine", extra, e)
		}
	}
}

// A --wait that covers the quarantine of masters started moments ago
// waits it out, saying once what it waits for and until when, then runs
// the command.
func TestWaitThroughQuarantine(t *testing.T) {
	t.Parallel()
	begun := time.Now()
	c := redistest.StartT(t, 3)
	// Started moments ago means younger than the TTL when redlock asks: a
	// TTL of the time the masters took to start (seconds on a loaded
	// machine) and 3 s more for redlock to start and ask; the wait covers
	// it with 10 s to spare.
	ttl := time.Since(begun).Truncate(time.Second) + 3*time.Second
	status, stdout, stderr := runRedlock(t, "exec", "--masters", strings.Join(c.Addrs(), ","), "--ttl", ttl.String(),
		"--wait", (ttl + 10*time.Second).String(), "fresh", "--", "echo", "ran")
	if status != 0 || stdout != "ran\n" {
		t.Errorf("status %d, stdout %q; want 0 and the command's output; stderr %q", status, stdout, stderr)
	}
	if !strings.HasPrefix(stderr, `redlock: exec: waiting until `) || !clockTime.MatchString(stderr) ||
		!strings.Contains(stderr, "restart quarantine") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr %q: want one line saying it waits for the quarantine, and until when", stderr)
	}
}
