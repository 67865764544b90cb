package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
)

// setOn sets key on the masters at idx for a minute, as a lock's holder
// would.
func setOn(t *testing.T, key string, idx ...int) {
	t.Helper()
	for _, i := range idx {
		if _, err := redisproc.Do(context.Background(), masters[i], 10*time.Second, "SET", key, "v-"+key, "PX", "60000"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { deleteKey(t, key) })
}

// list pages through the names a quorum holds under --prefix, sorted; a
// key on a minority is no lock, and a semaphore is listed once.
func TestListPages(t *testing.T) {
	t.Parallel()
	setOn(t, "ls:a", 0, 1, 2)
	setOn(t, "ls:b", 0, 1)
	setOn(t, "ls:d", 1, 2)
	setOn(t, "ls:minority", 2)
	setOn(t, "other", 0, 1, 2)
	dir := t.TempDir()
	sem := start(t, exec1(append([]string{"--permits", "3", "ls:c", "--"}, holdUntil(dir, "go")...)...)...)
	readyLine(t, sem)

	status, stdout, stderr := runRedlock(t, ops("list", "--prefix", "ls:")...)
	if status != 0 || stdout != "ls:a\nls:b\nls:c\nls:d\n" || stderr != "" {
		t.Errorf("list --prefix ls:: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	status, stdout, stderr = runRedlock(t, ops("list", "--prefix", "ls:", "--limit", "2")...)
	if status != 0 || stdout != "ls:a\nls:b\n" || stderr != "redlock: list: --limit 2 reached: the next page is --after ls:b\n" {
		t.Errorf("--limit 2: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	status, stdout, stderr = runRedlock(t, ops("list", "--prefix", "ls:", "--limit", "2", "--after", "ls:b")...)
	if status != 0 || stdout != "ls:c\nls:d\n" || stderr != "" {
		t.Errorf("--after ls:b: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	status, stdout, _ = runRedlock(t, ops("list", "--prefix", "ls:", "--limit", "3", "--json")...)
	if status != 0 || stdout != `{"names":["ls:a","ls:b","ls:c"],"more":true}`+"\n" {
		t.Errorf("--json: status %d, stdout %q", status, stdout)
	}
	status, stdout, _ = runRedlock(t, ops("list", "--prefix", "ls:none", "--json")...)
	if status != 0 || stdout != `{"names":[],"more":false}`+"\n" {
		t.Errorf("--json of nothing: status %d, stdout %q", status, stdout)
	}
	touch(t, dir, "go")
	if s := sem.wait(t, 30*time.Second); s != 0 {
		t.Errorf("semaphore holder: status %d; stderr %s", s, sem.stderr)
	}
}

func TestListErrors(t *testing.T) {
	t.Parallel()
	m := strings.Join(masters, ",")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "--masters", m, "--limit", "0"}, "list: --limit 0 is out of range: want 1 to 1000000"},
		{[]string{"list", "--masters", m, "job:"}, `list: takes no arguments, got "job:" (a prefix is --prefix)`},
		{[]string{"list", "--masters", m, "--timeout", "-1s"}, "list: --timeout must be > 0"},
		{[]string{"list"}, "list: no masters"},
	} {
		status, stdout, stderr := runRedlock(t, c.args...)
		if status != exitUsage || stdout != "" || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d and %q", c.args, status, stdout, stderr, exitUsage, c.want)
		}
	}
	down := []string{closedAddr(t), closedAddr(t)}
	status, _, stderr := runRedlock(t, "list", "--masters", masters[0]+","+strings.Join(down, ","))
	if status != exitUnavailable || !strings.HasPrefix(stderr, "redlock: list: too many masters unreachable for a quorum: ") {
		t.Errorf("unreachable: status %d, stderr %q", status, stderr)
	}
}
