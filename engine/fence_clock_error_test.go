package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// slowWay is how long master 2's proxy holds every command on its way
// there, in the tests below; replies come back at once. The master reads
// its clock at the end of that half of the round trip, while the engine
// takes the reading against its middle: the reading says the master's
// clock is slowWay/2 (250 ms) ahead of its true place, and its
// uncertainty, half the round trip, is as large. Against MaxTTL 400 ms,
// whose half is the bound, a healthy master looks 250 ms off.
const (
	slowWay     = 500 * time.Millisecond
	clockMaxTTL = 400 * time.Millisecond
)

// slowClockConfig is a fenced Locker's configuration whose TTL and
// MaxTTL are clockMaxTTL, reaching master 2 through a proxy that holds
// commands back by slowWay (returned, with its delay set).
func slowClockConfig(e *env) (engine.Config, *latencyProxy) {
	slow := newLatencyProxy(e, e.addrs[2], slowWay, nil)
	cfg := e.config()
	cfg.Masters = []string{e.addrs[0], e.addrs[1], slow.addr()}
	cfg.Fencing, cfg.TTL, cfg.MaxTTL = true, clockMaxTTL, clockMaxTTL
	// Connecting takes several round trips of slowWay.
	cfg.Conn.DialTimeout = 10 * time.Second
	return cfg, slow
}

// New with Fencing checks that the masters' clocks agree within MaxTTL/2.
// Each reading is off by up to half its round trip, and a master whose
// connect round trips are long (a loaded host, a far link) must not be
// refused for what the reading cannot tell: here the clocks agree, and
// master 2's reading is 250 ms off, ±250 ms, on every read (read again,
// it stays as vague). The control, clock-error-ignored, refuses it.
func TestFencingAcceptsAgreeingClocksBehindALongRoundTrip(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		cfg, _ := slowClockConfig(e)
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("New over masters whose clocks agree: %v", err)
		}
		defer l.Close()
		st := l.Nodes()[2]
		// The premise: the reading is as far off, and as uncertain, as
		// the delay makes it.
		if !st.ClockKnown || st.ClockOffsetMS < 240 || st.ClockErrorMS < st.ClockOffsetMS {
			t.Fatalf("master 2's reading: offset %.1f ms ±%.1f ms, want about 250 ms ±250 ms", st.ClockOffsetMS, st.ClockErrorMS)
		}
		for i, st := range l.Nodes()[:2] {
			if st.ClockErrorMS > 1 {
				t.Errorf("master %d, 100 µs away: uncertainty %.3f ms", i, st.ClockErrorMS)
			}
		}
	})
}

// The control: judged by the offsets alone, as before the readings'
// uncertainty counted, the agreeing clocks above are refused ("the
// masters' clocks differ by 250ms"). Every reading of master 2 takes
// the 500 ms round trip, so the schedule cannot miss.
func TestFencingAcceptsAgreeingClocksBehindALongRoundTripControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.ClockErrorIgnored.Set(true)()
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		cfg, slow := slowClockConfig(e)
		l, err := engine.New(context.Background(), cfg)
		if err == nil {
			l.Close()
			t.Fatalf("with %s on, New over a master read 250 ms ±250 ms off let it through: the test cannot catch it", mutation.ClockErrorIgnored.Name())
		}
		if !strings.Contains(err.Error(), "clocks differ") || !strings.Contains(err.Error(), slow.addr()) {
			t.Fatalf("with %s on: %v, want the clocks refused", mutation.ClockErrorIgnored.Name(), err)
		}
		t.Logf("caught: %v", err)
	})
}

// What the readings prove off is still refused: master 2's clock is a
// second behind, read through the same long round trip as -750 ms
// ±250 ms, at least 500 ms from the others', beyond MaxTTL/2; and a
// second ahead, read as +1250 ms ±250 ms.
func TestFencingRefusesSkewedClocksBehindALongRoundTrip(t *testing.T) {
	for _, skew := range []time.Duration{-time.Second, time.Second} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
				cfg, slow := slowClockConfig(e)
				e.sim[2].JumpClock(skew)
				l, err := engine.New(context.Background(), cfg)
				if err == nil {
					l.Close()
					t.Fatalf("New over a master %s off", skew)
				}
				if !strings.Contains(err.Error(), "clocks differ") || !strings.Contains(err.Error(), slow.addr()) {
					t.Fatalf("New over a master %s off: %v, want the clocks refused", skew, err)
				}
				t.Log(err)
			})
		})
	}
}

// A master that reconnects is judged on its new connection's reading
// against the others' clocks. Its round trips there are long (slowWay
// on the way there, as above): a healthy clock must keep voting, while
// one a second behind, read as -750 ms ±250 ms, sits out. The control,
// clock-error-ignored, keeps the healthy master out.
func TestMasterReconnectingOverALongRoundTripIsJudgedByWhatItsReadingProves(t *testing.T) {
	for _, skew := range []time.Duration{0, -time.Second} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
				l := reconnectOverALongRoundTrip(t, e, skew)
				defer l.Close()
				st := l.Nodes()[2]
				skewed := st.State == engine.StateClockSkewed
				if want := skew != 0; skewed != want {
					t.Fatalf("master 2 back %s off over a long round trip: %+v; want clock-skewed: %v", skew, st, want)
				}
				// Its vote decides: masters 0 and 1 are split.
				e.set(0, "skew", "someone")
				le, err := l.TryLock(context.Background(), "skew")
				switch {
				case skewed && (err == nil || !errors.Is(err, engine.ErrClockSkew)):
					t.Fatalf("master 2 a second behind: TryLock %v, want refused for its clock", err)
				case !skewed && err != nil:
					t.Fatalf("master 2 whose clock agrees: %v", err)
				}
				if le != nil {
					le.Release(context.Background())
				}
			})
		})
	}
}

// The control: judged by the offsets alone, the healthy master that
// reconnects over the long round trip, read 250 ms ahead, sits out as
// clock-skewed.
func TestMasterReconnectingOverALongRoundTripControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.ClockErrorIgnored.Set(true)()
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		l := reconnectOverALongRoundTrip(t, e, 0)
		defer l.Close()
		st := l.Nodes()[2]
		if st.State != engine.StateClockSkewed {
			t.Fatalf("with %s on, master 2, healthy, back over a long round trip: %+v, not kept out: the test cannot catch it", mutation.ClockErrorIgnored.Name(), st)
		}
		t.Logf("caught: %s", st.Err)
	})
}

// reconnectOverALongRoundTrip starts a fenced Locker over e's masters,
// master 2 behind a proxy (slowClockConfig) that holds nothing at
// first, then steps master 2's clock by skew, slows its proxy by slowWay
// and breaks its connections, and returns once master 2 answers on a
// new connection whose reading has been judged.
func reconnectOverALongRoundTrip(t *testing.T, e *env, skew time.Duration) *engine.Locker {
	t.Helper()
	cfg, slow := slowClockConfig(e)
	slow.delay.Store(0)
	var dials dialCounter
	dials.wrap(&cfg)
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	e.sim[2].JumpClock(skew)
	slow.delay.Store(int64(slowWay))
	before := dials.count(slow.addr())
	e.sim[2].BreakConnections(-1)
	// The next round finds the connection broken; the one after dials
	// again. The new connection's reading, and its judgement in the
	// background (the others' clocks read again, and its own read again
	// while vague, each within a node timeout), are done well within a
	// second.
	for dials.count(slow.addr()) == before {
		if le, err := l.TryLock(context.Background(), "probe"); err == nil {
			le.Release(context.Background())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	// Fast again, once what the proxy held has gone through: a reply on
	// the new connection marks the master up.
	slow.delay.Store(0)
	time.Sleep(slowWay)
	eventually(t, 5*time.Second, "master 2 answers on its new connection", func() bool {
		if le, err := l.TryLock(context.Background(), "probe"); err == nil {
			le.Release(context.Background())
		}
		return l.Nodes()[2].State != engine.StateDown
	})
	return l
}

// vagueInfoProxy is a proxy to a master that holds the next chunks
// toward it that carry INFO (a clock reading's request), as many as
// vague says, slowWay each, and passes everything else at once (order
// kept): a round trip slowed for a moment, on a loaded host, while the
// clock is read.
type vagueInfoProxy struct {
	*proxy
	vague atomic.Int64
}

func newVagueInfoProxy(e *env, target string) *vagueInfoProxy {
	p := &vagueInfoProxy{}
	p.proxy = startProxy(e, target, func(pp *proxy, c, s net.Conn) {
		go pump(c, s, nil)
		pp.hold(s, c, func(b []byte) time.Duration {
			if bytes.Contains(b, []byte("INFO")) && p.vague.Add(-1) >= 0 {
				return slowWay
			}
			return 0
		})
	})
	return p
}

// vagueClockConfig is slowClockConfig with master 2 reached through a
// vagueInfoProxy (returned).
func vagueClockConfig(e *env) (engine.Config, *vagueInfoProxy) {
	cfg, _ := slowClockConfig(e)
	vp := newVagueInfoProxy(e, e.addrs[2])
	cfg.Masters[2] = vp.addr()
	return cfg, vp
}

// A reading made vague by a slow round trip is taken again at once, and
// the sharpest kept: where the slowness passed, the clock is judged on a
// sharp reading. Master 2's first two readings at connect (the dialer's
// and the client's) go through a round trip slowed as above, read 250 ms
// ahead of where it is, ±250 ms, and prove nothing either way; its next
// ones are quick. Its clock 300 ms behind (read -50 ms ±250 ms at first)
// is refused, beyond MaxTTL/2 (200 ms); the control, clock-read-once,
// lets it through. A clock that agrees is let through, read sharp.
func TestFencingReadsAVagueClockAgain(t *testing.T) {
	for _, skew := range []time.Duration{0, -300 * time.Millisecond} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
				l, vp, err := newOverAVagueReading(e, skew)
				if skew != 0 {
					if err == nil {
						st := l.Nodes()[2]
						l.Close()
						t.Fatalf("New over a master %s off: let through, its reading %.1f ms ±%.1f ms", skew, st.ClockOffsetMS, st.ClockErrorMS)
					}
					if !strings.Contains(err.Error(), "clocks differ") || !strings.Contains(err.Error(), vp.addr()) {
						t.Fatalf("New over a master %s off: %v, want the clocks refused", skew, err)
					}
					t.Log(err)
					return
				}
				if err != nil {
					t.Fatalf("New over masters whose clocks agree: %v", err)
				}
				defer l.Close()
				if st := l.Nodes()[2]; st.ClockErrorMS > 1 || st.ClockOffsetMS < -1 || st.ClockOffsetMS > 1 {
					t.Errorf("master 2 read again, quick: %.3f ms ±%.3f ms, want 0 ±0.2 ms", st.ClockOffsetMS, st.ClockErrorMS)
				}
			})
		})
	}
}

// The control: judged on its first, vague reading, master 2 300 ms
// behind is let through.
func TestFencingReadsAVagueClockAgainControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.ClockReadOnce.Set(true)()
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		l, _, err := newOverAVagueReading(e, -300*time.Millisecond)
		if err != nil {
			t.Fatalf("with %s on, New over a master 300 ms behind read vague: %v: the test cannot catch it", mutation.ClockReadOnce.Name(), err)
		}
		st := l.Nodes()[2]
		l.Close()
		t.Logf("caught: let through, master 2 read %.1f ms ±%.1f ms", st.ClockOffsetMS, st.ClockErrorMS)
	})
}

// newOverAVagueReading steps master 2's clock by skew and starts a fenced
// Locker over e's masters, master 2 behind a vagueInfoProxy that slows
// the first two INFO round trips (returned).
func newOverAVagueReading(e *env, skew time.Duration) (*engine.Locker, *vagueInfoProxy, error) {
	cfg, vp := vagueClockConfig(e)
	vp.vague.Store(2)
	e.sim[2].JumpClock(skew)
	l, err := engine.New(context.Background(), cfg)
	return l, vp, err
}

// The same on a reconnect: master 2 comes back 300 ms behind, and its new
// connection's reading goes through a round trip slowed as above (-50 ms
// ±250 ms): the judgement cannot tell, and reads the clock again on the
// new connection once it is up, quick, and keeps the master out. The
// control, clock-read-once, lets master 2 vote.
func TestMasterReconnectingWithAVagueReadingIsReadAgain(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		l := reconnectWithAVagueReading(t, e)
		defer l.Close()
		if st := l.Nodes()[2]; st.State != engine.StateClockSkewed || st.ClockErrorMS > 1 {
			t.Fatalf("master 2 back 300 ms behind: %+v, want clock-skewed on a sharp reading", st)
		}
		e.set(0, "skew", "someone")
		le, err := l.TryLock(context.Background(), "skew")
		if err == nil || !errors.Is(err, engine.ErrClockSkew) {
			if le != nil {
				le.Release(context.Background())
			}
			t.Fatalf("master 2 300 ms behind: TryLock %v, want refused for its clock", err)
		}
	})
}

// The control: judged on its vague reading alone, master 2 back 300 ms
// behind votes.
func TestMasterReconnectingWithAVagueReadingControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.ClockReadOnce.Set(true)()
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		l := reconnectWithAVagueReading(t, e)
		defer l.Close()
		if st := l.Nodes()[2]; st.State == engine.StateClockSkewed {
			t.Fatalf("with %s on, master 2 back 300 ms behind, read vague: %+v, kept out: the test cannot catch it", mutation.ClockReadOnce.Name(), st)
		}
		e.set(0, "skew", "someone")
		le, err := l.TryLock(context.Background(), "skew")
		if err != nil {
			t.Fatalf("with %s on, master 2's vote: %v, want it to count", mutation.ClockReadOnce.Name(), err)
		}
		le.Release(context.Background())
		t.Logf("caught: master 2, 300 ms behind, voted (%+v)", l.Nodes()[2])
	})
}

// reconnectWithAVagueReading starts a fenced Locker over e's masters,
// master 2 behind a vagueInfoProxy, then steps master 2's clock 300 ms
// back, has the proxy slow its next INFO round trip, breaks its
// connections, and returns once master 2 answers on a new connection
// whose reading has been judged.
func reconnectWithAVagueReading(t *testing.T, e *env) *engine.Locker {
	t.Helper()
	cfg, vp := vagueClockConfig(e)
	var dials dialCounter
	dials.wrap(&cfg)
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	e.sim[2].JumpClock(-300 * time.Millisecond)
	vp.vague.Store(1)
	before := dials.count(vp.addr())
	e.sim[2].BreakConnections(-1)
	for dials.count(vp.addr()) == before {
		if le, err := l.TryLock(context.Background(), "probe"); err == nil {
			le.Release(context.Background())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The reading, the judgement, and the reading again, all within a
	// second.
	time.Sleep(time.Second)
	eventually(t, 5*time.Second, "master 2 answers on its new connection", func() bool {
		if le, err := l.TryLock(context.Background(), "probe"); err == nil {
			le.Release(context.Background())
		}
		return l.Nodes()[2].State != engine.StateDown
	})
	return l
}
