package simredis

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// slowLAN is a latency with room to see reordering: 10-20ms one way.
var slowLAN = Latency{Min: 10 * time.Millisecond, Jitter: 10 * time.Millisecond}

// Writes on one connection arrive in order, each no sooner than its delay;
// the master answers them in that order.
func TestConnDeliversInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(7)
		m := NewMaster(n, 7, 0, "m0:6379", MasterOptions{Latency: slowLAN})
		defer m.Close()
		_, c := dialT(t, n, m)
		start := time.Now()
		for i := range 20 {
			if err := c.write("APPEND", "l", string(rune('a'+i))); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 20 {
			if r, err := c.read(); err != nil || r != integer(i+1) {
				t.Fatalf("reply %d: %q, %v; want :%d, in order", i, r, err, i+1)
			}
		}
		if rtt := time.Since(start); rtt < 2*slowLAN.Min || rtt > 2*(slowLAN.Min+slowLAN.Jitter) {
			t.Fatalf("20 pipelined commands took %s, want one round trip of 20-40ms", rtt)
		}
		if r := do(t, c, "GET", "l"); r != bulk("abcdefghijklmnopqrst") {
			t.Fatalf("GET: %q, want the writes' order", r)
		}
	})
}

// A partition that hangs holds what is in flight both ways, and dials
// hang; healing delivers what was held.
func TestPartitionHang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		m := NewMaster(n, 1, 0, "m0:6379", MasterOptions{})
		defer m.Close()
		conn, c := dialT(t, n, m)
		m.Partition(Hang)
		if err := c.write("SET", "k", "v"); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.read(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read during the partition: %v, want a deadline error", err)
		}
		if keys := m.Keys(); len(keys) != 0 {
			t.Fatalf("the master ran a command sent across the partition: %q", keys)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := n.Dialer("test")(ctx, m.Addr)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dial during the partition: %v, want it to hang until ctx ends", err)
		}
		m.Partition(Connected)
		conn.SetReadDeadline(time.Time{})
		if r, err := c.read(); err != nil || r != status("OK") {
			t.Fatalf("reply after healing: %q, %v; want +OK", r, err)
		}
	})
}

// A partition that refuses breaks open connections and refuses dials.
func TestPartitionRefuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		m := NewMaster(n, 1, 0, "m0:6379", MasterOptions{})
		defer m.Close()
		_, c := dialT(t, n, m)
		m.Partition(Refuse)
		if _, err := c.do("PING"); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("PING on an open connection: %v, want ECONNRESET", err)
		}
		if _, err := n.Dialer("test")(context.Background(), m.Addr); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial: %v, want ECONNREFUSED", err)
		}
		m.Partition(Connected)
		_, c = dialT(t, n, m)
		do(t, c, "PING")
	})
}

// A paused master accepts connections but answers nothing; on resume it
// runs everything sent meanwhile at once.
func TestPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		m := NewMaster(n, 1, 0, "m0:6379", MasterOptions{})
		defer m.Close()
		_, c := dialT(t, n, m)
		m.Pause()
		if err := c.write("INCR", "n"); err != nil {
			t.Fatal(err)
		}
		_, lc := dialT(t, n, m) // the kernel accepts
		if err := lc.write("INCR", "n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		if keys := m.Keys(); len(keys) != 0 {
			t.Fatalf("a paused master ran commands: %q", keys)
		}
		m.Resume()
		r1, err1 := c.read()
		r2, err2 := lc.read()
		if err1 != nil || err2 != nil || r1 == r2 {
			t.Fatalf("replies after resume %q, %q (%v, %v): want :1 and :2", r1, r2, err1, err2)
		}
	})
}

// Breaking a connection fails the client's end at once; a command in
// flight still runs, late, or never.
func TestBreakConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		m := NewMaster(n, 1, 0, "m0:6379", MasterOptions{Latency: slowLAN})
		defer m.Close()
		for _, tc := range []struct {
			late time.Duration
			key  string
			runs bool
		}{{100 * time.Millisecond, "late", true}, {-1, "never", false}} {
			_, c := dialT(t, n, m)
			if err := c.write("SET", tc.key, "v"); err != nil {
				t.Fatal(err)
			}
			if got := m.BreakConnections(tc.late); got != 1 {
				t.Fatalf("broke %d connections, want 1", got)
			}
			if _, err := c.read(); !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("read after the break: %v, want ECONNRESET", err)
			}
			time.Sleep(50 * time.Millisecond)
			if keys := m.Keys(); len(keys) != 0 && tc.key == "late" {
				t.Fatalf("%s: the command ran before its late delivery: %q", tc.key, keys)
			}
			time.Sleep(time.Second)
			conn2, c2 := dialT(t, n, m)
			if got := do(t, c2, "EXISTS", tc.key) == integer(1); got != tc.runs {
				t.Fatalf("%s: the command in flight ran: %v, want %v", tc.key, got, tc.runs)
			}
			conn2.Close()
		}
	})
}
