package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/redistest"
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

// list pages through the names a quorum holds under --prefix, sorted
// with --sorted or --after; a key on a minority is no lock, and a
// semaphore is listed once.
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

	status, stdout, stderr := runRedlock(t, ops("list", "--prefix", "ls:", "--sorted")...)
	if status != 0 || stdout != "ls:a\nls:b\nls:c\nls:d\n" || stderr != "" {
		t.Errorf("list --prefix ls: --sorted: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	status, stdout, stderr = runRedlock(t, ops("list", "--prefix", "ls:", "--sorted", "--limit", "2")...)
	if status != 0 || stdout != "ls:a\nls:b\n" || stderr != "redlock: list: --limit 2 reached: the next page is --after ls:b\n" {
		t.Errorf("--limit 2: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	status, stdout, stderr = runRedlock(t, ops("list", "--prefix", "ls:", "--limit", "2", "--after", "ls:b")...)
	if status != 0 || stdout != "ls:c\nls:d\n" || stderr != "" {
		t.Errorf("--after ls:b: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	status, stdout, _ = runRedlock(t, ops("list", "--prefix", "ls:", "--sorted", "--limit", "3", "--json")...)
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

// list prints the names in the masters' order, each once, and pages
// them with the --cursor its stderr names; --json carries the cursor.
func TestListStream(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"lt:a", "lt:b", "lt:c", "lt:d", "lt:e"} {
		setOn(t, k, 0, 1, 2)
	}
	setOn(t, "lt:f", 0, 2)
	setOn(t, "lt:minority", 1)
	want := []string{"lt:a", "lt:b", "lt:c", "lt:d", "lt:e", "lt:f"}

	status, stdout, stderr := runRedlock(t, ops("list", "--prefix", "lt:")...)
	if got := strings.Fields(stdout); status != 0 || !sameNames(got, want) || stderr != "" {
		t.Errorf("list --prefix lt:: status %d, stdout %q, stderr %q; want %q in any order", status, stdout, stderr, want)
	}
	var pages []string
	cursor := []string{}
	for range len(want) {
		status, stdout, stderr = runRedlock(t, ops("list", append([]string{"--prefix", "lt:", "--limit", "4"}, cursor...)...)...)
		if status != 0 {
			t.Fatalf("page %d: status %d, stderr %q", len(pages)/4, status, stderr)
		}
		pages = append(pages, strings.Fields(stdout)...)
		next, ok := strings.CutPrefix(stderr, "redlock: list: --limit 4 reached: the next page is --cursor ")
		if !ok {
			break
		}
		cursor = []string{"--cursor", strings.TrimSuffix(next, "\n")}
	}
	if !sameNames(pages, want) || stderr != "" || len(cursor) == 0 {
		t.Errorf("pages of 4: %q (last stderr %q, cursor %q); want %q in any order, over two pages", pages, stderr, cursor, want)
	}
	status, stdout, _ = runRedlock(t, ops("list", "--prefix", "lt:", "--limit", "5", "--json")...)
	var page struct {
		Names  []string `json:"names"`
		More   bool     `json:"more"`
		Cursor string   `json:"cursor"`
	}
	if err := json.Unmarshal([]byte(stdout), &page); status != 0 || err != nil || len(page.Names) != 5 || !page.More || page.Cursor == "" {
		t.Fatalf("--json --limit 5: status %d, stdout %q, %v", status, stdout, err)
	}
	first := page.Names
	status, stdout, _ = runRedlock(t, ops("list", "--prefix", "lt:", "--json", "--cursor", page.Cursor)...)
	page.Names = nil
	if err := json.Unmarshal([]byte(stdout), &page); status != 0 || err != nil || page.More || !sameNames(append(first, page.Names...), want) {
		t.Errorf("--json --cursor: status %d, stdout %q after %q, %v", status, stdout, first, err)
	}
	status, _, stderr = runRedlock(t, ops("list", "--prefix", "other:", "--cursor", page.Cursor)...)
	if status != exitUsage || !strings.Contains(stderr, "--cursor: list \"other:\": not a cursor") {
		t.Errorf("a cursor of another prefix: status %d, stderr %q", status, stderr)
	}
}

// sameNames: got holds each of want once, and nothing else.
func sameNames(got, want []string) bool {
	return len(got) == len(want) && !slices.ContainsFunc(want, func(n string) bool { return slices.Index(got, n) < 0 })
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
		{[]string{"list", "--masters", m, "--cursor", "x", "--after", "a"}, "list: --cursor pages the listing in the masters' order"},
		{[]string{"list"}, "list: no masters"},
	} {
		status, stdout, stderr := runRedlock(t, c.args...)
		if status != exitUsage || stdout != "" || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d and %q", c.args, status, stdout, stderr, exitUsage, c.want)
		}
	}
	down := []string{redistest.DeadAddr(t), redistest.DeadAddr(t)}
	status, _, stderr := runRedlock(t, "list", "--masters", masters[0]+","+strings.Join(down, ","))
	if status != exitUnavailable || !strings.HasPrefix(stderr, "redlock: list: too many masters unreachable for a quorum: ") {
		t.Errorf("unreachable: status %d, stderr %q", status, stderr)
	}
}

// A name held both as a lock and as a semaphore is one name to status
// and unlock: list prints it once, as it does --sorted.
func TestListNameOfTwoKinds(t *testing.T) {
	t.Parallel()
	setOn(t, "lk2:both", 0, 1, 2)
	setOn(t, "lk2:lock", 0, 1, 2)
	dir := t.TempDir()
	for _, name := range []string{"lk2:both", "lk2:sem"} {
		sem := start(t, exec1(append([]string{"--permits", "2", name, "--"}, holdUntil(dir, "go")...)...)...)
		readyLine(t, sem)
		t.Cleanup(func() {
			touch(t, dir, "go")
			if s := sem.wait(t, 30*time.Second); s != 0 {
				t.Errorf("semaphore holder of %q: status %d; stderr %s", name, s, sem.stderr)
			}
		})
	}
	want := []string{"lk2:both", "lk2:lock", "lk2:sem"}
	status, stdout, stderr := runRedlock(t, ops("list", "--prefix", "lk2:")...)
	if got := strings.Fields(stdout); status != 0 || !sameNames(got, want) || stderr != "" {
		t.Errorf("list: status %d, stdout %q, stderr %q; want %q in any order", status, stdout, stderr, want)
	}
	status, stdout, _ = runRedlock(t, ops("list", "--prefix", "lk2:", "--json")...)
	var page struct{ Names []string }
	if err := json.Unmarshal([]byte(stdout), &page); status != 0 || err != nil || !sameNames(page.Names, want) {
		t.Errorf("list --json: status %d, stdout %q, %v; want %q in any order", status, stdout, err, want)
	}
}
