package simredis

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// miniredis has no INFO server or replication section: the master adds
// the fields the engine reads, with its own clock and identity.
func TestMasterInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		m := NewMaster(n, 1, 0, "m0:6379", MasterOptions{Uptime: time.Hour, Offset: 5 * time.Second})
		defer m.Close()
		_, c := dialT(t, n, m)
		if v := infoField(t, c, "server", "redis_version"); v != RedisVersion {
			t.Errorf("redis_version %q, want %q", v, RedisVersion)
		}
		if v := infoField(t, c, "server", "run_id"); len(v) != 40 || v != m.RunID() {
			t.Errorf("run_id %q, want the master's 40 hex digits %q", v, m.RunID())
		}
		if v := infoField(t, c, "server", "uptime_in_seconds"); v != "3600" {
			t.Errorf("uptime_in_seconds %s, want 3600", v)
		}
		// Read when the command arrives, between sending and the reply.
		lo := time.Now().Add(5 * time.Second).UnixMicro()
		v := infoField(t, c, "server", "server_time_usec")
		hi := time.Now().Add(5 * time.Second).UnixMicro()
		if us, _ := strconv.ParseInt(v, 10, 64); us < lo || us > hi {
			t.Errorf("server_time_usec %s, want the master's clock, in [%d, %d]", v, lo, hi)
		}
		if v := infoField(t, c, "replication", "role"); v != "master" {
			t.Errorf("role %q, want master", v)
		}
	})
}

// A master's clock runs at its own rate: TIME and key expiry follow it,
// and so do jumps.
func TestMasterClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		m := NewMaster(n, 1, 0, "m0:6379", MasterOptions{Rate: 2})
		defer m.Close()
		_, c := dialT(t, n, m)
		start, master := time.Now(), m.Now()
		do(t, c, "SET", "k", "v", "PX", "1000")
		time.Sleep(400 * time.Millisecond) // the master's clock: +800ms
		if r := do(t, c, "GET", "k"); r != bulk("v") {
			t.Fatalf("GET after 800ms of the master's clock: %q, want v", r)
		}
		lo := 2 * time.Since(start)
		reply, err := parseBulks(do(t, c, "TIME"))
		if err != nil {
			t.Fatal(err)
		}
		hi := 2 * time.Since(start)
		sec, _ := strconv.ParseInt(reply[0], 10, 64)
		usec, _ := strconv.ParseInt(reply[1], 10, 64)
		if got := time.Unix(sec, usec*1000).Sub(master); got < lo.Truncate(time.Microsecond) || got > hi {
			t.Fatalf("TIME moved %s at rate 2, want twice virtual time, in [%s, %s]", got, lo, hi)
		}
		time.Sleep(150 * time.Millisecond) // over 1.1s: past the PX
		if r := do(t, c, "GET", "k"); r != nilBulk {
			t.Fatalf("GET after 1.1s of the master's clock: %q, want nil", r)
		}
		do(t, c, "SET", "j", "v", "PX", "1000")
		m.JumpClock(2 * time.Second)
		if r := do(t, c, "GET", "j"); r != nilBulk {
			t.Fatalf("GET after a 2s jump: %q, want nil", r)
		}
	})
}

// A clock stepped back to before a key's deadline makes the key live
// again if no command found it expired meanwhile, as on Redis, which
// deletes an expired key only when a command (or its sampling) finds it;
// one a command found expired stays gone, and its deletion is logged.
// The clock as it ran says when each lives again (BackBefore).
func TestMasterClockStepBackRevivesKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		m := NewMaster(n, 1, 0, "m0:6379", MasterOptions{})
		defer m.Close()
		_, c := dialT(t, n, m)
		start := time.Now()
		do(t, c, "SET", "quiet", "v", "PX", "100")
		do(t, c, "SET", "seen", "v", "PX", "100")
		deadline := m.Now().Add(100 * time.Millisecond)
		time.Sleep(150 * time.Millisecond)
		if r := do(t, c, "GET", "seen"); r != nilBulk {
			t.Fatalf("GET past the deadline: %q, want nil", r)
		}
		stepped := time.Now()
		m.JumpClock(-200 * time.Millisecond)
		left := deadline.Sub(m.Now()) // the bubble's time stands still meanwhile
		if r := do(t, c, "GET", "quiet"); r != bulk("v") {
			t.Errorf("GET of a key nothing looked at, after the step back: %q, want v", r)
		}
		if r := do(t, c, "GET", "seen"); r != nilBulk {
			t.Errorf("GET of a key found expired before the step back: %q, want nil", r)
		}
		gone := 0
		for _, r := range m.KeyLog() {
			if r.Key == "seen" && r.Gone {
				gone++
			}
		}
		if gone != 1 {
			t.Errorf("the log has %d deletions of the key found expired, want 1", gone)
		}
		clock := m.Clock()
		passed := clock.VirtualAt(deadline, start)
		if back := clock.BackBefore(deadline, passed); !back.Equal(stepped) {
			t.Errorf("BackBefore: %v after start, want the step at %v", back.Sub(start), stepped.Sub(start))
		}
		if again := clock.VirtualAt(deadline, stepped); left <= 0 || again.Sub(stepped) != left {
			t.Errorf("the deadline passes again %v after the step, want %v", again.Sub(stepped), left)
		}
		if back := clock.BackBefore(deadline, stepped); !back.IsZero() {
			t.Errorf("BackBefore after the only step: %v, want never", back.Sub(start))
		}
	})
}

// A restart forgets keys and scripts, breaks the connections, and comes
// back with a new run_id and no uptime.
func TestMasterRestartAmnesia(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		m := NewMaster(n, 1, 0, "m0:6379", MasterOptions{Uptime: time.Hour})
		defer m.Close()
		conn, c := dialT(t, n, m)
		sha, err := parseBulk(do(t, c, "SCRIPT", "LOAD", "return 1"))
		if err != nil {
			t.Fatal(err)
		}
		do(t, c, "SET", "k", "v")
		before := m.RunID()
		time.Sleep(10 * time.Second)
		m.Restart()
		if _, err := c.do("PING"); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("PING on a connection across the restart: %v, want ECONNRESET", err)
		}
		conn.Close()
		_, c = dialT(t, n, m)
		if r := do(t, c, "GET", "k"); r != nilBulk {
			t.Errorf("GET after restart: %q, want nil", r)
		}
		if r := do(t, c, "EVALSHA", sha, "0"); !strings.HasPrefix(r, "-NOSCRIPT") {
			t.Errorf("EVALSHA after restart: %q, want NOSCRIPT", r)
		}
		if id := infoField(t, c, "server", "run_id"); id == before || id != m.RunID() {
			t.Errorf("run_id after restart %s, before %s: want a new one", id, before)
		}
		if v := infoField(t, c, "server", "uptime_in_seconds"); v != "0" {
			t.Errorf("uptime_in_seconds after restart %s, want 0", v)
		}
	})
}

// tostring writes numbers as Redis's Lua 5.1 does, "%.14g": a clock in
// microseconds loses its last digits, as redis-server 7.0.15 answers
// EVAL "return tostring(1796560175187641)" 0 with "1.7965601751876e+15".
func TestLuaToStringAsRedis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		m := NewMaster(n, 1, 0, "m0:6379", MasterOptions{})
		defer m.Close()
		_, c := dialT(t, n, m)
		got, err := parseBulks(do(t, c, "EVAL", "return {tostring(1796560175187641), tostring(1000), tostring(12.5), tostring(-3), tostring('s'), tostring(nil)}", "0"))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"1.7965601751876e+15", "1000", "12.5", "-3", "s", "nil"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("tostring: %q, want %q", got, want)
		}
	})
}
