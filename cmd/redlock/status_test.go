package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// ops is the arguments of an operator's command cmd on the test masters.
func ops(cmd string, args ...string) []string {
	return append([]string{cmd, "--masters", strings.Join(masters, ",")}, args...)
}

// inspect runs 'redlock status --json' on resources.
func inspect(t *testing.T, resources ...string) []engine.Inspection {
	t.Helper()
	status, stdout, stderr := runRedlock(t, ops("status", append([]string{"--json"}, resources...)...)...)
	if status != 0 || stderr != "" {
		t.Fatalf("status --json %q: status %d, stderr %q", resources, status, stderr)
	}
	var ins []engine.Inspection
	if err := json.Unmarshal([]byte(stdout), &ins); err != nil || len(ins) != len(resources) {
		t.Fatalf("status --json %q: %v; stdout %s", resources, err, stdout)
	}
	return ins
}

// waitQueued waits until n waiters are queued for the lock resource on
// every master (engine's queuePrefix).
func waitQueued(t *testing.T, resource string, n int) {
	t.Helper()
	waitFor(t, "the waiter queued", func() bool {
		for _, a := range masters {
			r, err := redisproc.Do(context.Background(), a, 10*time.Second, "ZCARD", "\xffredlock:queue:"+resource)
			if err != nil || r != ":"+strconv.Itoa(n) {
				return false
			}
		}
		return true
	})
}

// With a lock held by 'redlock exec --fencing', status shows the holder's
// value and token and how long a quorum vouches for it, and who waits.
func TestStatusShowsHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder := start(t, exec1(append([]string{"--fencing", "shown", "--"}, holdUntil(dir, "go")...)...)...)
	value, token := readyOnAll(t, holder, "shown")
	beforeWaiter := time.Now()
	waiter := start(t, exec1("--wait", "30s", "shown", "--", "echo", "waiter ran")...)
	waitQueued(t, "shown", 1)

	in := inspect(t, "shown", "shown-free")
	// The waiter began after beforeWaiter and had queued before status
	// read the masters' clocks, all one machine's clock: its age is
	// positive and at most the time since beforeWaiter.
	sinceWaiter := time.Since(beforeWaiter)
	got := in[0]
	if got.Resource != "shown" || got.Kind != engine.KindMutex || len(got.Holders) != 1 || !got.Agree || got.Quorum != 2 {
		t.Fatalf("status of a held lock: %+v", got)
	}
	h := got.Holders[0]
	// exec attaches its host and pid (--owner).
	host, _ := os.Hostname()
	owner := fmt.Sprintf("host=%s,pid=%d", host, holder.cmd.Process.Pid)
	if h.Value != value || h.Owner != owner || strconv.FormatInt(h.Token, 10) != token || h.Masters != len(masters) {
		t.Errorf("holder %+v; want value %s, owner %s, token %s, on %d masters", h, value, owner, token, len(masters))
	}
	// At most exec1's TTL, to which every extension renews it.
	if h.Validity <= 0 || h.Validity > execTTL || got.Validity != h.Validity {
		t.Errorf("validity %s (holder %s): want in (0, %s]", got.Validity, h.Validity, execTTL)
	}
	if len(got.Waiters) != 1 || got.Waiters[0].Masters != len(masters) {
		t.Errorf("waiters %+v: want the one waiting exec, on every master", got.Waiters)
	} else if age := got.Waiters[0].Age; age <= 0 || age > sinceWaiter {
		t.Errorf("waiter's age %s: want in (0, %s], the time since it was started", age, sinceWaiter)
	}
	if in[1].Kind != engine.KindFree || len(in[1].Holders) != 0 {
		t.Errorf("status of a free name: %+v", in[1])
	}

	// The table, for a person.
	status, stdout, stderr := runRedlock(t, ops("status", "shown", "shown-free")...)
	lines := strings.Split(stdout, "\n")
	if status != 0 || stderr != "" || len(lines) < 4 {
		t.Fatalf("status: %d, stderr %q, stdout:\n%s", status, stderr, stdout)
	}
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "RESOURCE KIND HOLDER OWNER TOKEN VALID MASTERS" {
		t.Errorf("header %q", lines[0])
	}
	if f := strings.Fields(lines[1]); len(f) != 7 || f[0] != "shown" || f[1] != "mutex" || f[2]+"|"+f[3] != value || f[3] != owner || f[4] != token || f[6] != "3/3" {
		t.Errorf("holder row %q; want shown, mutex, the value without its owner (%s), %s, %s, validity, 3/3", lines[1], value, owner, token)
	}
	if f := strings.Fields(lines[2]); len(f) != 7 || f[0] != "shown-free" || f[1] != "free" {
		t.Errorf("free row %q", lines[2])
	}
	if !strings.HasPrefix(lines[3], "shown: 1 waiting: "+got.Waiters[0].ID+" (waiting ") {
		t.Errorf("waiters line %q", lines[3])
	}
	if strings.Contains(stdout, "disagree") {
		t.Errorf("masters that agree reported as disagreeing:\n%s", stdout)
	}

	touch(t, dir, "go")
	for _, p := range []*proc{holder, waiter} {
		if s := p.wait(t, 30*time.Second); s != 0 {
			t.Errorf("status %d; stderr %s", s, p.stderr)
		}
	}
}

// A holder taken without fencing has no token: status shows "-", and
// the JSON no token.
func TestStatusUnfencedHolderHasNoToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder := start(t, exec1(append([]string{"unfenced", "--"}, holdUntil(dir, "go")...)...)...)
	value, token := readyOnAll(t, holder, "unfenced")
	if token != "-" {
		t.Fatalf("exec without --fencing gave COMMAND token %q", token)
	}
	status, stdout, stderr := runRedlock(t, ops("status", "unfenced")...)
	lines := strings.Split(stdout, "\n")
	if status != 0 || stderr != "" || len(lines) < 2 {
		t.Fatalf("status: %d, stderr %q, stdout:\n%s", status, stderr, stdout)
	}
	if f := strings.Fields(lines[1]); len(f) != 7 || f[0] != "unfenced" || f[2]+"|"+f[3] != value || f[4] != "-" {
		t.Errorf("holder row %q: want unfenced, its value, TOKEN -", lines[1])
	}
	status, stdout, stderr = runRedlock(t, ops("status", "--json", "unfenced")...)
	var raw []struct {
		Holders []map[string]json.RawMessage `json:"holders"`
	}
	if status != 0 || stderr != "" || json.Unmarshal([]byte(stdout), &raw) != nil || len(raw) != 1 || len(raw[0].Holders) != 1 {
		t.Fatalf("status --json: %d, stderr %q, stdout:\n%s", status, stderr, stdout)
	}
	if tok, ok := raw[0].Holders[0]["token"]; ok {
		t.Errorf("JSON holder has token %s: want none", tok)
	}
	touch(t, dir, "go")
	if s := holder.wait(t, 30*time.Second); s != 0 {
		t.Errorf("status %d; stderr %s", s, holder.stderr)
	}
}

// A key on one master only is no lock: the name is free, and the masters'
// disagreement is shown, per master.
func TestStatusShowsDisagreement(t *testing.T) {
	t.Parallel()
	if _, err := redisproc.Do(context.Background(), masters[0], 10*time.Second, "SET", "minority", "stray", "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteKey(t, "minority") })
	in := inspect(t, "minority")[0]
	if in.Kind != engine.KindFree || len(in.Holders) != 0 || in.Agree {
		t.Errorf("a key on 1 of 3 masters: %+v; want free, the masters disagreeing", in)
	}
	status, stdout, _ := runRedlock(t, ops("status", "minority")...)
	want := regexp.MustCompile(`minority: the masters disagree:\n  ` + regexp.QuoteMeta(masters[0]) + ` +mutex: stray \(ttl `)
	free := regexp.MustCompile(`\n  ` + regexp.QuoteMeta(masters[1]) + ` +free\n`)
	if status != 0 || !want.MatchString(stdout) || !free.MatchString(stdout) {
		t.Errorf("status %d, stdout:\n%s\nwant %q and %s free", status, stdout, want, masters[1])
	}
}

func TestStatusErrors(t *testing.T) {
	t.Parallel()
	down := []string{redistest.DeadAddr(t), redistest.DeadAddr(t)}
	status, stdout, stderr := runRedlock(t, "status", "--masters", masters[0]+","+strings.Join(down, ","), "r")
	if status != exitUnavailable || stdout != "" || !strings.HasPrefix(stderr, "redlock: status: too many masters unreachable for a quorum: ") ||
		!strings.Contains(stderr, down[0]) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("unreachable: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	m := strings.Join(masters, ",")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--masters", m}, "status: missing RESOURCE"},
		{[]string{"status", "--masters", m, ""}, "status: RESOURCE is empty"},
		{[]string{"status", "--masters", m, "--timeout", "0s", "r"}, "--timeout must be > 0"},
		{[]string{"status", "r"}, "status: no masters: give --masters"},
		{[]string{"status", "--masters", m, "--bogus", "r"}, "status: unknown flag: --bogus (see 'redlock status --help')"},
		{[]string{"status", "--masters", m, "\xffredlock:fence:r"}, `status: RESOURCE "\xffredlock:fence:r"`},
	} {
		status, stdout, stderr := runRedlock(t, c.args...)
		if status != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "redlock: ") ||
			!strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d and one line with %q", c.args, status, stdout, stderr, exitUsage, c.want)
		}
	}
}

// With one master of three down, status and unlock still answer from the
// quorum, and say which master did not.
func TestOneMasterDown(t *testing.T) {
	t.Parallel()
	setOn(t, "onedown", 0, 1)
	down := redistest.DeadAddr(t)
	m := masters[0] + "," + masters[1] + "," + down
	status, stdout, stderr := runRedlock(t, "status", "--masters", m, "onedown")
	lines := strings.Split(stdout, "\n")
	if status != 0 || stderr != "" || len(lines) < 6 {
		t.Fatalf("status: %d, stderr %q, stdout:\n%s", status, stderr, stdout)
	}
	if f := strings.Fields(lines[1]); len(f) != 7 || f[1] != "mutex" || f[2] != "v-onedown" || f[6] != "2/3" {
		t.Errorf("holder row %q: want the key's value, on 2/3", lines[1])
	}
	if f := strings.Fields(lines[5]); lines[2] != "onedown: the masters disagree:" || len(f) < 2 || f[0] != down || f[1] != "error:" {
		t.Errorf("want the down master's error:\n%s", stdout)
	}
	status, stdout, stderr = runRedlock(t, "unlock", "--masters", m, "onedown", "--value", "v-onedown")
	if status != 0 || stderr != "" || !strings.HasPrefix(stdout, "onedown v-onedown: released on 2 of 3 masters (quorum 2)\n") ||
		!strings.Contains(stdout, "\n  "+down+" ") {
		t.Errorf("unlock: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	if n := keys(t, "onedown"); n != 0 {
		t.Errorf("the key is left on %d masters", n)
	}
}
