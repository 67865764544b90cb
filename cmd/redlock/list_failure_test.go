package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// listNames is how many names TestListJSONFailureStaysJSON's masters
// hold: their JSON (about 12 bytes each) is many times what the pipe
// and redlock's buffer hold (64 KiB each), so the walk is far from its
// end when redlock blocks on a stdout no one reads.
const listNames = 100_000

// With --json, a walk that fails after names were printed still prints
// one JSON object: the names so far, "error" saying why it stopped, and
// the cursor of the last name; the exit status and stderr say it failed.
// Masters 0 and 1 hold every name; redlock walks 0 and 1 (3 − 2 + 1)
// and keeps 2 for a failed one's place. The test reads stdout's first
// bytes (the walk has begun), then reads nothing more, so that redlock
// blocks writing with master 0's walk far from its end; it kills masters
// 2 and 0, then reads the rest: master 0's walk fails at its next SCAN,
// and its spare's at its first.
func TestListJSONFailureStaysJSON(t *testing.T) {
	t.Parallel()
	c := redistest.StartT(t, 3, redistest.Options{Args: []string{"--enable-debug-command", "local"}})
	addrs := c.Addrs()
	for _, a := range addrs[:2] {
		if _, err := redisproc.Do(context.Background(), a, time.Minute, "DEBUG", "POPULATE", strconv.Itoa(listNames), "lf"); err != nil {
			t.Fatal(err)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(binary, "list", "--masters", strings.Join(addrs, ","), "--prefix", "lf:", "--limit", "1000000", "--json")
	var stderr buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	cmd.Env = append(os.Environ(), "REDLOCK_MASTERS=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	first := make([]byte, 1)
	if _, err := io.ReadFull(r, first); err != nil {
		t.Fatalf("no output: %v; stderr %s", err, &stderr)
	}
	// Master 2 first: it takes master 0's place once master 0 fails, and
	// holds no keys, so its walk would end at once were it still up.
	for _, i := range []int{2, 0} {
		if err := c.Nodes[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	status := 0
	if err := cmd.Wait(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		status = ee.ExitCode()
	}
	stdout := string(first) + string(rest)
	var page struct {
		Names  []string `json:"names"`
		More   *bool    `json:"more"`
		Cursor string   `json:"cursor"`
		Error  string   `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &page); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\nits end: %q", err, stdout[max(0, len(stdout)-200):])
	}
	msg, _ := strings.CutPrefix(stderr.String(), "redlock: ")
	msg, _ = strings.CutSuffix(msg, "\n")
	if status != exitUnavailable || !strings.HasPrefix(msg, `list "lf:": `) || !strings.Contains(msg, "no quorum") || strings.Contains(msg, "\n") {
		t.Errorf("status %d, stderr %q; want %d, `list \"lf:\": ` once, no quorum, on one line", status, stderr.String(), exitUnavailable)
	}
	if len(page.Names) == 0 || len(page.Names) >= listNames || page.More == nil || *page.More ||
		page.Cursor == "" || page.Error != msg {
		t.Errorf("%d names, more %v, cursor %q, error %q; want some names, more false, a cursor, the error %q",
			len(page.Names), page.More, page.Cursor, page.Error, msg)
	}
	if !strings.HasSuffix(stdout, "}\n") || strings.Count(stdout, "\n") != 1 {
		t.Errorf("stdout does not end in one line: %q", stdout[max(0, len(stdout)-200):])
	}
}
