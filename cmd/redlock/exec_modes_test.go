package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
)

// holdUntil is a COMMAND that prints its environment's lease variables
// on one line ("ready VALUE TOKEN PERMIT"), then holds until the file
// dir/name exists.
func holdUntil(dir, name string) []string {
	return []string{"sh", "-c",
		`echo "ready $REDLOCK_LEASE_VALUE ${REDLOCK_FENCING_TOKEN:--} ${REDLOCK_PERMIT:--}"; while [ ! -e "$0/$1" ]; do sleep 0.02; done`,
		dir, name}
}

// readyOnAll is readyLine for a lock on resource, once every master
// holds it: exec runs COMMAND when a quorum does, and the last master's
// SET may land after.
func readyOnAll(t *testing.T, p *proc, resource string) (value, token string) {
	t.Helper()
	value, token, _ = readyLine(t, p)
	waitFor(t, "the lock on every master", func() bool {
		for _, a := range masters {
			r, err := redisproc.Do(context.Background(), a, 10*time.Second, "EVAL",
				`local v = redis.call("GET", KEYS[1]); return v and string.sub(v, 1, #ARGV[1]) == ARGV[1] and 1 or 0`, "1", resource, value)
			if err != nil {
				t.Fatalf("GET on %s: %v", a, err)
			}
			if r != ":1" {
				return false
			}
		}
		return true
	})
	return value, token
}

// readyLine is the fields of the line holdUntil prints: value, token and
// permit ("-" where unset).
func readyLine(t *testing.T, p *proc) (value, token, permit string) {
	t.Helper()
	p.waitOutput(t, "ready ")
	for deadline := time.Now().Add(time.Minute); ; {
		// The line may be on its way: wait for its end.
		out := p.stdout.String()
		if i := strings.Index(out, "ready "); i >= 0 {
			if line, _, ok := strings.Cut(out[i:], "\n"); ok {
				f := strings.Fields(line)
				if len(f) != 4 {
					t.Fatalf("ready line %q: want 4 fields", line)
				}
				return f[1], f[2], f[3]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no whole ready line: %q", out)
		}
		select {
		case <-p.exited:
			t.Fatalf("exited before a whole ready line: %q", p.stdout)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func touch(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// COMMAND gets the lease's value, which the masters keep at the lock's
// key, so that an operator can name the holder to 'redlock unlock'.
func TestLeaseValueExported(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, exec1(append([]string{"--fencing", "valued", "--"}, holdUntil(dir, "go")...)...)...)
	value, token, permit := readyLine(t, p)
	if permit != "-" {
		t.Errorf("REDLOCK_PERMIT %q for a lock, want it unset", permit)
	}
	if n, err := strconv.ParseInt(token, 10, 64); err != nil || n <= 0 {
		t.Errorf("REDLOCK_FENCING_TOKEN %q", token)
	}
	for _, a := range masters {
		r, err := redisproc.Do(context.Background(), a, 10*time.Second, "EVAL",
			"return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0", "1", "valued", value)
		if err != nil || r != ":1" {
			t.Errorf("the key on %s does not hold the exported value %q: %q, %v", a, value, r, err)
		}
	}
	touch(t, dir, "go")
	if s := p.wait(t, 30*time.Second); s != 0 {
		t.Errorf("status %d; stderr %s", s, p.stderr)
	}
}

// --permits P: at most P COMMANDs at once, each on its own slot; the next
// is refused (75) or, with --wait, runs once a permit is released.
func TestPermitsAdmitP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := func(extra ...string) []string {
		return exec1(append([]string{"--permits", "2", "--fencing"}, extra...)...)
	}
	a := start(t, append(args("permits", "--"), holdUntil(dir, "a")...)...)
	b := start(t, append(args("permits", "--"), holdUntil(dir, "b")...)...)
	va, ta, pa := readyLine(t, a)
	vb, tb, pb := readyLine(t, b)
	if va == vb || va == "" {
		t.Errorf("lease values %q and %q: want two distinct", va, vb)
	}
	if ta == tb || ta == "-" || tb == "-" {
		t.Errorf("fencing tokens %q and %q: want two distinct", ta, tb)
	}
	if slots := pa + "," + pb; slots != "0,1" && slots != "1,0" {
		t.Errorf("REDLOCK_PERMIT %s: want slots 0 and 1", slots)
	}

	status, stdout, stderr := runRedlock(t, args("permits", "--", "echo", "must-not-run")...)
	if status != exitNotAcquired || stdout != "" || !strings.Contains(stderr, `not acquired: all 2 permits of "permits" are held`) {
		t.Errorf("third while two hold: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	// Another permit count for the same name is a mistake, not contention.
	status, _, stderr = runRedlock(t, exec1("--permits", "3", "permits", "--", "echo", "must-not-run")...)
	if status != exitConfig || !strings.Contains(stderr, "--permits 3: ") || !strings.Contains(stderr, "another permit count") {
		t.Errorf("--permits 3 on a semaphore of 2: status %d, want %d; stderr %q", status, exitConfig, stderr)
	}

	waiter := start(t, append(args("--wait", "30s", "permits", "--"), holdUntil(dir, "c")...)...)
	touch(t, dir, "a")
	if s := a.wait(t, 30*time.Second); s != 0 {
		t.Errorf("a: status %d; stderr %s", s, a.stderr)
	}
	_, tc, pc := readyLine(t, waiter)
	if pc != pa {
		t.Errorf("the waiter holds slot %s, want the released %s", pc, pa)
	}
	// Tokens increase per slot.
	if atoi(tc) <= atoi(ta) {
		t.Errorf("the waiter's token %s is not above %s, the slot's last", tc, ta)
	}
	touch(t, dir, "b")
	touch(t, dir, "c")
	for _, p := range []*proc{b, waiter} {
		if s := p.wait(t, 30*time.Second); s != 0 {
			t.Errorf("status %d; stderr %s", s, p.stderr)
		}
	}
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// --shared: readers hold together; --exclusive excludes them and waits
// for them; a plain lock of the same name is another kind (78).
func TestSharedAndExclusive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r1 := start(t, append(exec1("--shared", "rw", "--"), holdUntil(dir, "r1")...)...)
	r2 := start(t, append(exec1("--shared", "rw", "--"), holdUntil(dir, "r2")...)...)
	v1, tok, _ := readyLine(t, r1)
	v2, _, _ := readyLine(t, r2)
	if v1 == v2 || tok != "-" {
		t.Errorf("readers: values %q and %q, token %q; want distinct values and no token", v1, v2, tok)
	}

	status, stdout, stderr := runRedlock(t, exec1("--exclusive", "rw", "--", "echo", "must-not-run")...)
	if status != exitNotAcquired || stdout != "" || !strings.Contains(stderr, `not acquired: "rw" is held by readers or a writer`) {
		t.Errorf("writer while readers hold: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	status, _, stderr = runRedlock(t, exec1("rw", "--", "echo", "must-not-run")...)
	if status != exitConfig || !strings.Contains(stderr, "another kind of lock") {
		t.Errorf("plain lock on a read/write lock's name: status %d, want %d; stderr %q", status, exitConfig, stderr)
	}

	writer := start(t, append(exec1("--exclusive", "--fencing", "--wait", "30s", "rw", "--"), holdUntil(dir, "w")...)...)
	touch(t, dir, "r1")
	touch(t, dir, "r2")
	for _, p := range []*proc{r1, r2} {
		if s := p.wait(t, 30*time.Second); s != 0 {
			t.Errorf("reader: status %d; stderr %s", s, p.stderr)
		}
	}
	_, wtok, _ := readyLine(t, writer)
	if atoi(wtok) <= 0 {
		t.Errorf("writer's REDLOCK_FENCING_TOKEN %q", wtok)
	}
	status, _, stderr = runRedlock(t, exec1("--shared", "rw", "--", "echo", "must-not-run")...)
	if status != exitNotAcquired || !strings.Contains(stderr, `"rw" is held by a writer, or a writer waits for it`) {
		t.Errorf("reader while a writer holds: status %d; stderr %q", status, stderr)
	}
	touch(t, dir, "w")
	if s := writer.wait(t, 30*time.Second); s != 0 {
		t.Errorf("writer: status %d; stderr %s", s, writer.stderr)
	}
}

func TestModeUsageErrors(t *testing.T) {
	t.Parallel()
	m := strings.Join(masters, ",")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "--masters", m, "--permits", "0", "r", "--", "true"}, "--permits 0 is out of range: want 1 to 1024"},
		{[]string{"exec", "--masters", m, "--permits", "1025", "r", "--", "true"}, "--permits 1025 is out of range"},
		{[]string{"exec", "--masters", m, "--permits", "x", "r", "--", "true"}, `invalid argument "x" for "--permits"`},
		{[]string{"exec", "--masters", m, "--permits", "2", "--shared", "r", "--", "true"}, "--permits and --shared: give one at most"},
		{[]string{"exec", "--masters", m, "--shared", "--exclusive", "r", "--", "true"}, "--shared and --exclusive: give one at most"},
		{[]string{"exec", "--masters", m, "--shared", "--fencing", "r", "--", "true"}, "--fencing with --shared: readers get no fencing token"},
		{[]string{"exec", "--masters", m, "--owner", strings.Repeat("x", 257), "r", "--", "true"}, "--owner: want at most 256 bytes of UTF-8, got 257 bytes"},
		{[]string{"exec", "--masters", m, "--owner", "\xff", "r", "--", "true"}, "--owner: want at most 256 bytes of UTF-8"},
	} {
		status, stdout, stderr := runRedlock(t, c.args...)
		if status != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "redlock: ") ||
			!strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d and one line with %q", c.args, status, stdout, stderr, exitUsage, c.want)
		}
	}
}

// A permit or a reader is a lease like the lock: a lost one stops
// COMMAND (124), and a signal is forwarded, then the lease released.
func TestModesLoseAndRelease(t *testing.T) {
	t.Parallel()
	p := start(t, exec1("--permits", "1", "lostpermit", "--", "sh", "-c",
		`trap 'echo term; exit 3' TERM; echo "ready $REDLOCK_PERMIT"; while :; do sleep 0.02; done`)...)
	p.waitOutput(t, "ready 0\n")
	// The permit's slot key (engine's semPrefix, the name in braces, the
	// slot), as a majority losing its keys would.
	deleteKey(t, "\xffredlock:sem:{lostpermit}:0")
	if status := p.wait(t, 30*time.Second); status != exitLost || !strings.Contains(p.stdout.String(), "term") ||
		!strings.Contains(p.stderr.String(), `lock on "lostpermit" lost`) {
		t.Errorf("lost permit: status %d, want %d; stdout %q, stderr %s", status, exitLost, p.stdout, p.stderr)
	}

	dir := t.TempDir()
	r := start(t, append(exec1("--shared", "sigshared", "--"), holdUntil(dir, "never")...)...)
	readyLine(t, r)
	if in := inspect(t, "sigshared")[0]; len(in.Holders) != 1 || in.Holders[0].Mode != "read" {
		t.Fatalf("reader: %+v", in)
	}
	r.cmd.Process.Signal(syscall.SIGINT)
	if status := r.wait(t, 30*time.Second); status != 128+int(syscall.SIGINT) {
		t.Errorf("reader after SIGINT: status %d; stderr %s", status, r.stderr)
	}
	if in := inspect(t, "sigshared")[0]; len(in.Holders) != 0 {
		t.Errorf("the reader is left after its exec ended: %+v", in.Holders)
	}
}
