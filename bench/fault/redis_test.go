package fault

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/results"
)

// These tests run against real redis-server processes: each fault is
// checked by its effect on a PING, never by the injector's own account.

// proxied starts three masters with a proxy in front of each, both stopped
// at the end of the test.
func proxied(t *testing.T) (*redistest.Cluster, *Proxies) {
	t.Helper()
	c := redistest.StartT(t, 3)
	px, err := NewProxies(context.Background(), c.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	return c, px
}

func procs(c *redistest.Cluster) []Process {
	out := make([]Process, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n
	}
	return out
}

// startRun runs the injector in the background and returns a channel of its
// log and a channel that receives each event as OnEvent reports it.
func startRun(t *testing.T, ctx context.Context, s Schedule, cfg Config) (<-chan []results.FaultEvent, <-chan results.FaultEvent) {
	t.Helper()
	events := make(chan results.FaultEvent, 2*len(s))
	cfg.OnEvent = func(e results.FaultEvent) { events <- e }
	in, err := New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []results.FaultEvent, 1)
	go func() { done <- in.Run(ctx, time.Now()) }()
	return done, events
}

// waitApplied waits for n faults to report that they are in effect.
func waitApplied(t *testing.T, events <-chan results.FaultEvent, n int) []results.FaultEvent {
	t.Helper()
	var got []results.FaultEvent
	timeout := time.After(time.Minute)
	for len(got) < n {
		select {
		case e := <-events:
			if e.Ended {
				t.Fatalf("%s ended before the test saw it in effect: %+v", e.Fault, e)
			}
			got = append(got, e)
		case <-timeout:
			t.Fatalf("only %d of %d faults took effect within a minute", len(got), n)
		}
	}
	return got
}

func wait(t *testing.T, done <-chan []results.FaultEvent) []results.FaultEvent {
	t.Helper()
	select {
	case log := <-done:
		for _, e := range log {
			if e.Error != "" || !e.Ended {
				t.Errorf("%s: ended=%v error=%q", e.Fault, e.Ended, e.Error)
			}
		}
		return log
	case <-time.After(time.Minute):
		// Reached only when Run cannot return: every schedule here ends
		// (or is cancelled) well before.
		t.Fatal("Run did not return within a minute")
		return nil
	}
}

// persistentConn is a client connection kept open across a fault, as the
// engine's connections are.
type persistentConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, addr string) *persistentConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &persistentConn{conn: conn, r: bufio.NewReader(conn)}
}

func (c *persistentConn) ping(timeout time.Duration) error {
	c.conn.SetDeadline(time.Now().Add(timeout))
	if _, err := c.conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

// runID reads run_id from INFO server.
func runID(t *testing.T, addr string) string {
	t.Helper()
	c := dial(t, addr)
	defer c.conn.Close()
	c.conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.conn.Write([]byte("*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		t.Fatal(err)
	}
	head, err := c.r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		t.Fatalf("INFO server: %q, %v", head, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\r\n") {
		if id, ok := strings.CutPrefix(line, "run_id:"); ok {
			return id
		}
	}
	t.Fatalf("no run_id in INFO server:\n%s", body)
	return ""
}

func timedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

func TestKill(t *testing.T) {
	c := redistest.StartT(t, 3)
	done, _ := startRun(t, context.Background(), mustParse(t, "kill:1@0s"), Config{Addrs: c.Addrs(), Nodes: procs(c)})
	wait(t, done)
	if err := redistest.Ping(c.Nodes[1].Addr(), 500*time.Millisecond); err == nil {
		t.Error("node 1 still answers PING after kill")
	}
	if c.Nodes[1].Running() {
		t.Error("node 1 still running after kill")
	}
	for _, i := range []int{0, 2} {
		if err := redistest.Ping(c.Nodes[i].Addr(), time.Second); err != nil {
			t.Errorf("node %d, not killed: %v", i, err)
		}
	}
}

func TestPauseResume(t *testing.T) {
	c := redistest.StartT(t, 3)
	addr := c.Nodes[0].Addr()
	// Three seconds: the PING below must time out inside the pause, which
	// leaves 2.7s for this goroutine to run late after it began.
	done, events := startRun(t, context.Background(), mustParse(t, "pause:0@0s+3s"), Config{Addrs: c.Addrs(), Nodes: procs(c)})
	waitApplied(t, events, 1)
	if err := redistest.Ping(addr, 300*time.Millisecond); !timedOut(err) {
		t.Errorf("PING to a paused node: %v, want a timeout", err)
	}
	log := wait(t, done)
	if err := redistest.Ping(addr, time.Second); err != nil {
		t.Errorf("PING after resume: %v", err)
	}
	if c.Nodes[0].Paused() {
		t.Error("node 0 still paused")
	}
	if len(log) != 1 || log[0].EndedS < 3 {
		t.Errorf("log = %+v, want one pause lifted after 3s", log)
	}
}

func TestRestartNewRunID(t *testing.T) {
	c, px := proxied(t)
	addr := c.Nodes[2].Addr()
	before := runID(t, addr)
	through := dial(t, px.Addrs()[2])
	if err := through.ping(time.Second); err != nil {
		t.Fatal(err)
	}

	done, _ := startRun(t, context.Background(), mustParse(t, "restart:2@0s"), Config{Addrs: c.Addrs(), Nodes: procs(c), Proxies: px})
	wait(t, done)
	if c.Nodes[2].Addr() != addr {
		t.Fatalf("address changed across restart: %s -> %s", addr, c.Nodes[2].Addr())
	}
	if after := runID(t, addr); after == before {
		t.Errorf("run_id %s unchanged by restart", after)
	}
	// The connection through the proxy died with the old process; a new one
	// through the same proxy address reaches the new process.
	if err := through.ping(time.Second); err == nil {
		t.Error("a connection to the killed process still answers")
	}
	if err := redistest.Ping(px.Addrs()[2], time.Second); err != nil {
		t.Errorf("PING through the proxy after restart: %v", err)
	}
}

func TestSlow(t *testing.T) {
	const latency = 150 * time.Millisecond
	c, px := proxied(t)
	open := dial(t, px.Addrs()[1])
	if err := open.ping(time.Second); err != nil {
		t.Fatal(err)
	}

	// The latency holds until both PINGs are back, however slow the
	// machine: a minute, cut short once they are.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, events := startRun(t, ctx, mustParse(t, "slow:1=150ms@0s+1m"), Config{Addrs: c.Addrs(), Nodes: procs(c), Proxies: px})
	waitApplied(t, events, 1)
	start := time.Now()
	if err := open.ping(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < latency {
		t.Errorf("PING on an open connection took %s, want at least %s", rtt, latency)
	}
	start = time.Now()
	if err := redistest.Ping(px.Addrs()[1], 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < latency {
		t.Errorf("PING on a new connection took %s, want at least %s", rtt, latency)
	}
	cancel()
	if log := wait(t, done); len(log) != 1 || log[0].Arg != "150ms" || !log[0].Early {
		t.Errorf("log = %+v", log)
	}
	// The latency is gone, and the connection that lived through it works.
	if err := open.ping(time.Second); err != nil {
		t.Errorf("PING after slow ended: %v", err)
	}
}

func TestCutHeal(t *testing.T) {
	c, px := proxied(t)
	open := dial(t, px.Addrs()[1])
	if err := open.ping(time.Second); err != nil {
		t.Fatal(err)
	}

	// Three seconds: the two PINGs through the cut proxy below must time
	// out inside the cut, which leaves 2.4s for this goroutine to run
	// late after it began.
	done, events := startRun(t, context.Background(), mustParse(t, "cut:1@0s+3s"), Config{Addrs: c.Addrs(), Nodes: procs(c), Proxies: px})
	waitApplied(t, events, 1)
	// A partition drops: the client waits out its own timeout, no reset.
	if err := open.ping(300 * time.Millisecond); !timedOut(err) {
		t.Errorf("PING on an open connection during the cut: %v, want a timeout", err)
	}
	if err := redistest.Ping(px.Addrs()[1], 300*time.Millisecond); !timedOut(err) {
		t.Errorf("PING on a new connection during the cut: %v, want a timeout", err)
	}
	if err := redistest.Ping(c.Nodes[1].Addr(), time.Second); err != nil {
		t.Errorf("the master itself stopped answering during the cut: %v", err)
	}
	if err := redistest.Ping(px.Addrs()[0], time.Second); err != nil {
		t.Errorf("node 0 is not cut but: %v", err)
	}

	wait(t, done)
	if err := redistest.Ping(px.Addrs()[1], time.Second); err != nil {
		t.Errorf("PING through the proxy after heal: %v", err)
	}
	// The connection that crossed the cut has holes in its stream; heal
	// closes it rather than let a client parse garbage.
	open.conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := open.r.ReadString('\n'); err != io.EOF {
		t.Errorf("read on a connection that crossed the cut: %v, want EOF", err)
	}
}

func TestStall(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		via  string
	}{
		{"debug-disabled", nil, ViaClientPause},
		{"debug-enabled", []string{"--enable-debug-command", "local"}, ViaDebugSleep},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := redistest.StartT(t, 1, redistest.Options{Args: tt.args})
			addr := c.Nodes[0].Addr()
			// Stall works on external masters: no Nodes, no Proxies.
			done, events := startRun(t, context.Background(), mustParse(t, "stall:0@0s+1s"), Config{Addrs: c.Addrs()})
			applied := waitApplied(t, events, 1)[0]
			if applied.Via != tt.via {
				t.Errorf("stall via %q, want %q", applied.Via, tt.via)
			}
			if err := redistest.Ping(addr, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			// The PING was sent after the stall began, so it cannot come back
			// before the stall ends (less a margin for clock reads).
			if blocked := time.Since(applied.AppliedAt); blocked < 900*time.Millisecond {
				t.Errorf("PING answered %s after the stall began, want at least ~1s", blocked)
			}
			log := wait(t, done)
			if len(log) != 1 || log[0].EndedS < 1 || log[0].Via != tt.via {
				t.Errorf("log = %+v", log)
			}
		})
	}
}

func TestCancelHealsEverything(t *testing.T) {
	c, px := proxied(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spec := "pause:0@0s+1m,cut:1@0s+1m,slow:2=1m@0s+1m,kill:0@50s,stall:2@55s+1s"
	done, events := startRun(t, ctx, mustParse(t, spec), Config{Addrs: c.Addrs(), Nodes: procs(c), Proxies: px})
	waitApplied(t, events, 3)
	cancel()
	// Run returned on the cancel, not at the schedule's end: the log
	// holds the three faults applied, each lifted early, and neither the
	// kill at 50s nor the stall at 55s.
	log := wait(t, done)
	if len(log) != 3 {
		t.Fatalf("log has %d events, want the 3 applied: %+v", len(log), log)
	}
	for _, e := range log {
		if !e.Early || e.EndedS > 30 {
			t.Errorf("%s: early=%v ended at %.1fs, want lifted early", e.Fault, e.Early, e.EndedS)
		}
	}
	if c.Nodes[0].Paused() || !c.Nodes[0].Running() {
		t.Error("node 0 left paused or killed")
	}
	// Through every proxy, well inside the minute of latency that slow
	// had set.
	for i, addr := range px.Addrs() {
		if err := redistest.Ping(addr, 20*time.Second); err != nil {
			t.Errorf("node %d through its proxy after cancel: %v", i, err)
		}
	}
}

func TestProxiesCloseLeavesNothing(t *testing.T) {
	c := redistest.StartT(t, 2)
	before := runtime.NumGoroutine()
	px, err := NewProxies(context.Background(), c.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	addrs := px.Addrs()
	var conns []*persistentConn
	for round := 0; round < 3; round++ {
		for i, addr := range addrs {
			conn := dial(t, addr)
			conns = append(conns, conn)
			if err := conn.ping(time.Second); err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
			if err := px.Slow(i, 5*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if err := px.Cut(i); err != nil {
				t.Fatal(err)
			}
			conn.ping(20 * time.Millisecond) // dropped, to put bytes in flight
			if err := px.Heal(i); err != nil {
				t.Fatal(err)
			}
			if err := px.Slow(i, 0); err != nil {
				t.Fatal(err)
			}
			if got := px.Addrs()[i]; got != addr {
				t.Fatalf("node %d: proxy address moved from %s to %s", i, addr, got)
			}
		}
	}
	// One connection stays open to the end, to be closed by Close.
	last := dial(t, addrs[0])
	if err := last.ping(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := px.Close(); err != nil {
		t.Fatal(err)
	}
	if err := px.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := px.Cut(0); !errors.Is(err, ErrClosed) {
		t.Errorf("Cut after Close: %v, want ErrClosed", err)
	}
	for _, addr := range addrs {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after Close", addr)
		}
	}
	if err := last.ping(time.Second); err == nil {
		t.Error("a proxied connection still answers after Close")
	}
	for _, conn := range conns {
		conn.conn.Close()
	}
	last.conn.Close()

	// toxiproxy's link goroutines end asynchronously once their sockets
	// close: waited for as long as a loaded machine may need.
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before NewProxies, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

func TestCheckStall(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want error
	}{
		{"debug-enabled", []string{"--enable-debug-command", "local"}, nil},
		{"debug-disabled", nil, nil},
		{"both-renamed", []string{"--rename-command", "DEBUG", "", "--rename-command", "CLIENT", ""}, ErrStallRefused},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := redistest.StartT(t, 1, redistest.Options{Args: tt.args})
			in, err := New(mustParse(t, "stall:0@0s+1s"), Config{Addrs: c.Addrs()})
			if err != nil {
				t.Fatal(err)
			}
			err = in.Check(context.Background())
			if !errors.Is(err, tt.want) {
				t.Fatalf("Check: %v, want %v", err, tt.want)
			}
			if err != nil {
				msg := err.Error()
				if !strings.Contains(msg, `"stall:0@0s+1s": master `+c.Nodes[0].Addr()+" cannot be stalled: DEBUG refused") || strings.Contains(msg, "\n") {
					t.Errorf("Check error %q does not name the item, the master and the cause on one line", msg)
				}
			}
		})
	}
}

// TestProxiesUnderTraffic toggles every proxy fault while clients keep
// talking through the proxy, for the race detector's sake, and checks that
// traffic flows again once the faults are lifted.
func TestProxiesUnderTraffic(t *testing.T) {
	c := redistest.StartT(t, 2)
	px, err := NewProxies(context.Background(), c.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for k := 0; k < 4; k++ {
		addr := px.Addrs()[k%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var conn *persistentConn
			for {
				select {
				case <-stop:
					if conn != nil {
						conn.conn.Close()
					}
					return
				default:
				}
				if conn == nil {
					nc, err := net.DialTimeout("tcp", addr, time.Second)
					if err != nil {
						continue
					}
					conn = &persistentConn{conn: nc, r: bufio.NewReader(nc)}
				}
				// A connection that failed once may be mid-reply: start afresh.
				if err := conn.ping(100 * time.Millisecond); err != nil {
					conn.conn.Close()
					conn = nil
				}
			}
		}()
	}
	for round := 0; round < 5; round++ {
		for i := 0; i < 2; i++ {
			if err := px.Slow(i, time.Duration(round+1)*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if err := px.Cut(i); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			if err := px.Heal(i); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			if err := px.Slow(i, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	for i, addr := range px.Addrs() {
		if err := redistest.Ping(addr, time.Second); err != nil {
			t.Errorf("node %d after the faults: %v", i, err)
		}
	}
}

func TestKillThenRestart(t *testing.T) {
	c := redistest.StartT(t, 3)
	// The restart 3s after the kill: the PING below must come between
	// them, which leaves 2.8s for this goroutine to run late.
	done, events := startRun(t, context.Background(), mustParse(t, "kill:2@0s,restart:2@3s"), Config{Addrs: c.Addrs(), Nodes: procs(c)})
	if e := <-events; e.Action != string(Kill) || !e.Ended {
		t.Fatalf("first event %+v, want the kill", e)
	}
	if err := redistest.Ping(c.Nodes[2].Addr(), 200*time.Millisecond); err == nil {
		t.Error("node 2 answers between kill and restart")
	}
	wait(t, done)
	if err := redistest.Ping(c.Nodes[2].Addr(), time.Second); err != nil {
		t.Errorf("node 2 after restart: %v", err)
	}
}
