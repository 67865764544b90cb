package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
)

// subscribe subscribes to channel on addr and returns what it publishes,
// one message per receive.
func subscribe(t *testing.T, addr, channel string) <-chan string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n", len(channel), channel)
	r := bufio.NewReader(c)
	// readArray reads one RESP array of bulk strings and integers.
	readArray := func() ([]string, error) {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		var n int
		if _, err := fmt.Sscanf(line, "*%d", &n); err != nil {
			return nil, fmt.Errorf("reply %q", line)
		}
		out := make([]string, n)
		for i := range out {
			head, err := r.ReadString('\n')
			if err != nil {
				return nil, err
			}
			if head[0] == ':' {
				out[i] = strings.TrimSpace(head[1:])
				continue
			}
			var size int
			fmt.Sscanf(head, "$%d", &size)
			b := make([]byte, size+2)
			if _, err := io.ReadFull(r, b); err != nil {
				return nil, err
			}
			out[i] = string(b[:size])
		}
		return out, nil
	}
	if a, err := readArray(); err != nil || len(a) != 3 || a[0] != "subscribe" {
		t.Fatalf("SUBSCRIBE %s on %s: %q, %v", channel, addr, a, err)
	}
	msgs := make(chan string, 16)
	go func() {
		defer close(msgs)
		for {
			a, err := readArray()
			if err != nil {
				return
			}
			if len(a) == 3 && a[0] == "message" {
				msgs <- a[2]
			}
		}
	}()
	return msgs
}

// unlock without the holder's value (or --force naming the resource) is
// refused, and the lock stays; with the value, the lock is released on
// every master, the waiter is woken by the release's publish (not its
// fallback retry) and runs, and the holder, whose lock is gone, is
// stopped (124).
func TestUnlockByValue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder := start(t, exec1(append([]string{"--fencing", "stuck", "--"}, holdUntil(dir, "never")...)...)...)
	value, _ := readyOnAll(t, holder, "stuck")

	for _, c := range []struct {
		args []string
		want string
	}{
		{ops("unlock", "stuck"), `unlock: refused: name the holder of "stuck" with --value (or --token), or release whoever holds it with --force stuck`},
		{ops("unlock", "stuck", "--force", "other"), `unlock: --force names "other", not RESOURCE "stuck"`},
		{ops("unlock", "--force", "stuck"), "unlock: missing RESOURCE"},
		{ops("unlock", "stuck", "--value", value, "--force", "stuck"), "unlock: --value and --force: give one"},
	} {
		status, stdout, stderr := runRedlock(t, c.args...)
		if status != exitUsage || stdout != "" || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d and %q", c.args, status, stdout, stderr, exitUsage, c.want)
		}
	}
	// Another value deletes nothing.
	status, stdout, stderr := runRedlock(t, ops("unlock", "stuck", "--value", "not-"+value)...)
	if status != exitNoHolder || !strings.Contains(stdout, "released on 0 of 3 masters") ||
		!strings.Contains(stderr, `that holder does not hold "stuck" on a quorum`) {
		t.Errorf("another value: status %d, want %d; stdout %q, stderr %q", status, exitNoHolder, stdout, stderr)
	}
	if in := inspect(t, "stuck")[0]; len(in.Holders) != 1 || in.Holders[0].Value != value || keys(t, "stuck") != len(masters) {
		t.Fatalf("the lock did not stay after refused unlocks: %+v", in)
	}
	select {
	case <-holder.exited:
		t.Fatalf("the holder exited: stderr %s", holder.stderr)
	default:
	}

	waiter := start(t, exec1("--wait", "1m", "stuck", "--", "echo", "waiter ran")...)
	waitQueued(t, "stuck", 1)
	// The waiter marks the holder's key (asks its release to wake it) only
	// once it listens, after it queued; a key not yet marked on masters[0]
	// would be deleted there without a publish.
	// The mark appends "+" to the holder's value: one byte more.
	marked := ":" + strconv.Itoa(len(value)+1)
	waitFor(t, "the waiter's mark on every master", func() bool {
		for _, a := range masters {
			if n, err := redisproc.Do(context.Background(), a, 10*time.Second, "STRLEN", "stuck"); err != nil || n != marked {
				return false
			}
		}
		return true
	})
	in := inspect(t, "stuck")[0]
	if len(in.Waiters) != 1 {
		t.Fatalf("waiters %+v", in.Waiters)
	}
	woken := subscribe(t, masters[0], "redlock:released:stuck")

	// The value as status's table shows it, without the owner (whose "|"
	// would be a pipe, unquoted), names the holder too.
	bare, _, _ := strings.Cut(value, "|")
	status, stdout, stderr = runRedlock(t, ops("unlock", "stuck", "--value", bare)...)
	if status != 0 || stderr != "" {
		t.Fatalf("unlock --value: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	checkUnlockReport(t, stdout, "stuck", value)
	// The release hands the turn to the first waiter and publishes its id,
	// as the holder's own release would.
	select {
	case id := <-woken:
		if id != in.Waiters[0].ID {
			t.Errorf("woke %q, want the waiter %q", id, in.Waiters[0].ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up published within 30s of the unlock")
	}
	if s := waiter.wait(t, 30*time.Second); s != 0 || waiter.stdout.String() != "waiter ran\n" {
		t.Errorf("waiter: status %d, stdout %q, stderr %s", s, waiter.stdout, waiter.stderr)
	}
	if s := holder.wait(t, 30*time.Second); s != exitLost {
		t.Errorf("holder after unlock: status %d, want %d; stderr %s", s, exitLost, holder.stderr)
	}
	// Released already: no such holder.
	status, _, stderr = runRedlock(t, ops("unlock", "stuck", "--value", value)...)
	if status != exitNoHolder {
		t.Errorf("second unlock: status %d, want %d; stderr %q", status, exitNoHolder, stderr)
	}
}

// --token names the holder of that fencing token; --force RESOURCE
// releases whoever holds it; a semaphore is refused.
func TestUnlockByTokenAndForce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder := start(t, exec1(append([]string{"--fencing", "tok", "--"}, holdUntil(dir, "never")...)...)...)
	value, token := readyOnAll(t, holder, "tok")

	status, _, stderr := runRedlock(t, ops("unlock", "tok", "--token", "1")...)
	if status != exitNoHolder || !strings.Contains(stderr, `no holder of "tok" has token 1 on a quorum (`+value+" has token "+token+")") {
		t.Errorf("--token 1: status %d, want %d; stderr %q", status, exitNoHolder, stderr)
	}
	if keys(t, "tok") != len(masters) {
		t.Fatal("a wrong token released the lock")
	}
	status, stdout, stderr := runRedlock(t, ops("unlock", "--json", "tok", "--token", token)...)
	var u struct {
		Value    string
		Released int
		Masters  []struct{ Addr, Outcome string }
	}
	if err := json.Unmarshal([]byte(stdout), &u); status != 0 || err != nil || u.Value != value || u.Released < quorum() {
		t.Errorf("--token %s: status %d, %+v (%v); stderr %q", token, status, u, err, stderr)
	}
	released := 0
	for i, m := range u.Masters {
		if m.Outcome == "ok" {
			released++
		}
		// See checkUnlockReport: the holder's own release may win on
		// the last masters.
		if m.Addr != masters[i] || (m.Outcome != "ok" && m.Outcome != "refused") {
			t.Errorf("--json: master %d: %+v, want %s ok (or refused)", i, m, masters[i])
		}
	}
	if released != u.Released {
		t.Errorf("--json: %d masters ok, released %d", released, u.Released)
	}
	waitFor(t, "no master holding tok", func() bool { return keys(t, "tok") == 0 })
	if s := holder.wait(t, 30*time.Second); s != exitLost {
		t.Errorf("holder after unlock: status %d, want %d", s, exitLost)
	}

	holder = start(t, exec1(append([]string{"forced", "--"}, holdUntil(dir, "never")...)...)...)
	value, _ = readyOnAll(t, holder, "forced")
	status, stdout, stderr = runRedlock(t, ops("unlock", "forced", "--force", "forced")...)
	if status != 0 {
		t.Errorf("--force: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	checkUnlockReport(t, stdout, "forced", value)
	if s := holder.wait(t, 30*time.Second); s != exitLost {
		t.Errorf("holder after --force: status %d, want %d", s, exitLost)
	}
	status, _, stderr = runRedlock(t, ops("unlock", "forced", "--force", "forced")...)
	if status != exitNoHolder || !strings.Contains(stderr, `nothing holds "forced"`) {
		t.Errorf("--force on a free name: status %d, stderr %q", status, stderr)
	}

	sem := start(t, exec1(append([]string{"--permits", "2", "unlock-sem", "--"}, holdUntil(dir, "sem")...)...)...)
	readyLine(t, sem)
	status, _, stderr = runRedlock(t, ops("unlock", "unlock-sem", "--force", "unlock-sem")...)
	if status != exitUsage || !strings.Contains(stderr, `"unlock-sem" is a semaphore: unlock releases a lock's holder only`) {
		t.Errorf("unlock of a semaphore: status %d, stderr %q", status, stderr)
	}
	touch(t, dir, "sem")
	if s := sem.wait(t, 30*time.Second); s != 0 {
		t.Errorf("semaphore holder: status %d; stderr %s", s, sem.stderr)
	}
}

// quorum is a quorum of the test's masters.
func quorum() int { return len(masters)/2 + 1 }

// checkUnlockReport checks unlock's report of value's release: released
// on a quorum at least, each master "released" or "not held by" value,
// and afterwards no master holds the resource. The holder's own process
// sees its keys go on the first masters (CLIENT TRACKING), ends its
// lease and releases it itself, so on the last masters its release may
// come before unlock's, which then finds the key gone.
func checkUnlockReport(t *testing.T, stdout, resource, value string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	var n int
	if len(lines) != 1+len(masters) {
		t.Fatalf("unlock's report:\n%s", stdout)
	}
	rest, ok := strings.CutPrefix(lines[0], resource+" "+value+": ")
	if _, err := fmt.Sscanf(rest, "released on %d of 3 masters (quorum 2)", &n); !ok || err != nil || n < quorum() {
		t.Errorf("unlock's report: %q, want %s %s released on a quorum", lines[0], resource, value)
	}
	released := 0
	for i, a := range masters {
		line := strings.TrimSpace(lines[1+i])
		switch {
		case line == a+"  released":
			released++
		case line == a+"  not held by "+value:
		default:
			t.Errorf("unlock's report on %s: %q", a, lines[1+i])
		}
	}
	if released != n {
		t.Errorf("unlock's report: %d masters released, the summary says %d:\n%s", released, n, stdout)
	}
	waitFor(t, "no master holding "+resource, func() bool { return keys(t, resource) == 0 })
}

// Each command's help lists its flags and exit statuses.
func TestOpsHelpListsExitStatuses(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string][]string{
		"status": {"--json", "--masters", "--timeout", "VALID", "waiters", "\n  0    ", "\n  64   ", "\n  69   ", "\n  78   "},
		"list":   {"--prefix", "--limit", "--after", "--json", "SCAN", "\n  0    ", "\n  64   ", "\n  69   "},
		"unlock": {"--value", "--token", "--force", "--json", "REDLOCK_LEASE_VALUE", "\n  0    ", "\n  64   ", "\n  66   ", "\n  69   ", "\n  78   "},
	} {
		status, stdout, _ := runRedlock(t, cmd, "--help")
		if status != 0 {
			t.Errorf("%s --help: status %d", cmd, status)
		}
		for _, s := range want {
			if !strings.Contains(stdout, s) {
				t.Errorf("%s --help does not mention %q", cmd, s)
			}
		}
	}
}

// --token against a holder that took no fencing token says so, rather
// than naming a token 0 it never had.
func TestUnlockByTokenOfAnUnfencedHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder := start(t, exec1(append([]string{"plain", "--"}, holdUntil(dir, "never")...)...)...)
	value, _ := readyOnAll(t, holder, "plain")
	status, _, stderr := runRedlock(t, ops("unlock", "plain", "--token", "1")...)
	if status != exitNoHolder || !strings.Contains(stderr, `(`+value+" has no fencing token)") {
		t.Errorf("--token 1: status %d, want %d; stderr %q", status, exitNoHolder, stderr)
	}
	if keys(t, "plain") != len(masters) {
		t.Fatal("a wrong token released the lock")
	}
}
