package redisproc_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
)

func start(t *testing.T, n int, opts redisproc.Options) *redisproc.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := redisproc.Start(ctx, n, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

// Do's first reply line keeps the RESP2 wire form that the tests compare.
func TestDoReplyLines(t *testing.T) {
	addr := start(t, 1, redisproc.Options{}).Nodes[0].Addr()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "k", "hello"}, "+OK"},
		{[]string{"EXISTS", "k"}, ":1"},
		{[]string{"EXISTS", "absent"}, ":0"},
		{[]string{"GET", "k"}, "$5"},
		{[]string{"GET", "absent"}, "$-1"},
		{[]string{"SCRIPT", "LOAD", "return 1"}, "$40"},
		{[]string{"EVAL", "return {ok = 'status'}", "0"}, "+status"},
		{[]string{"EVAL", "return {1, 2, 3}", "0"}, "*3"},
		{[]string{"EVAL", "return ''", "0"}, "$0"},
	} {
		got, err := redisproc.Do(context.Background(), addr, 10*time.Second, tc.args...)
		if err != nil || got != tc.want {
			t.Errorf("Do %q = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
	if _, err := redisproc.Do(context.Background(), addr, 10*time.Second, "NOSUCHCOMMAND"); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("Do of an unknown command: %v, want the server's error", err)
	}
}

// Kill, Pause, Resume and Restart act on the process; a paused server
// times out as a net.Conn deadline does, and a restarted one forgets.
func TestProcessControl(t *testing.T) {
	c := start(t, 2, redisproc.Options{})
	n := c.Nodes[0]
	ctx := context.Background()
	if _, err := redisproc.Do(ctx, n.Addr(), 10*time.Second, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	err := redisproc.Ping(n.Addr(), 300*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("PING to a paused server: %v, want os.ErrDeadlineExceeded", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("PING to a paused server took %s with a 300ms timeout", d)
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := redisproc.Ping(n.Addr(), 2*time.Second); err != nil {
		t.Errorf("PING after resume: %v", err)
	}
	if err := n.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := redisproc.Do(ctx, n.Addr(), 10*time.Second, "EXISTS", "k"); got != ":0" {
		t.Errorf("EXISTS after a restart without persistence = %q, %v; want :0", got, err)
	}
	pid := n.PID()
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if n.Running() || redisproc.Ping(n.Addr(), 500*time.Millisecond) == nil {
		t.Error("node still up after Kill")
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("pid %d still exists after Kill", pid)
	}
	if err := redisproc.Ping(c.Nodes[1].Addr(), 2*time.Second); err != nil {
		t.Errorf("the other node: %v", err)
	}
	if v, err := redisproc.Version(ctx, c.Nodes[1].Addr(), 2*time.Second); err != nil || v == "unknown" || v == "" {
		t.Errorf("Version = %q, %v", v, err)
	}
	pid1 := c.Nodes[1].PID()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid1, 0); err == nil {
		t.Errorf("pid %d still exists after Stop", pid1)
	}
}

func TestStartRejectsNonLoopback(t *testing.T) {
	if _, err := redisproc.Start(context.Background(), 1, redisproc.Options{Host: "0.0.0.0"}); err == nil {
		t.Fatal("Start bound a non-loopback address")
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{
		"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n": "7.0.15",
		"# Server\r\nredis_version:7.2.4\r\nvalkey_version:8.0.1\r\n":   "valkey 8.0.1",
		"# Server\r\n": "unknown",
	} {
		if got := redisproc.ParseVersion(in); got != want {
			t.Errorf("ParseVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
