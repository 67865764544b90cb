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
	cfg.DialTimeout = 10 * time.Second
	return cfg, slow
}

// New with Fencing checks that the masters' clocks agree within MaxTTL/2.
// Each reading is off by up to half its round trip, and a master whose
// connect round trips are long (a loaded host, a far link) must not be
// refused for what the reading cannot tell: here the clocks agree, and
// master 2's reading is 250 ms off, ±250 ms. New refused it ("the
// masters' clocks differ by 250ms") before the check counted the
// readings' uncertainty.
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
// one a second behind, read as -750 ms ±250 ms, sits out. Before the
// judgement counted the readings' uncertainty, the healthy master, read
// 250 ms ahead, sat out as clock-skewed.
func TestMasterReconnectingOverALongRoundTripIsJudgedByWhatItsReadingProves(t *testing.T) {
	for _, skew := range []time.Duration{0, -time.Second} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
				cfg, slow := slowClockConfig(e)
				slow.delay.Store(0)
				var dials dialCounter
				dials.wrap(&cfg)
				l, err := engine.New(context.Background(), cfg)
				if err != nil {
					t.Fatalf("engine.New: %v", err)
				}
				defer l.Close()
				e.sim[2].JumpClock(skew)
				slow.delay.Store(int64(slowWay))
				before := dials.count(slow.addr())
				e.sim[2].BreakConnections(-1)
				// The next round finds the connection broken; the one after
				// dials again. The new connection's reading, and its
				// judgement in the background (the others' clocks read again
				// within a node timeout), are done well within a second.
				for dials.count(slow.addr()) == before {
					if le, err := l.TryLock(context.Background(), "probe"); err == nil {
						le.Release(context.Background())
					}
					time.Sleep(10 * time.Millisecond)
				}
				time.Sleep(time.Second)
				// Fast again, once what the proxy held has gone through: a
				// reply on the new connection marks the master up.
				slow.delay.Store(0)
				time.Sleep(slowWay)
				eventually(t, 5*time.Second, "master 2 answers on its new connection", func() bool {
					if le, err := l.TryLock(context.Background(), "probe"); err == nil {
						le.Release(context.Background())
					}
					return l.Nodes()[2].State != engine.StateDown
				})
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
	p.proxy = startProxy(e, target, func(c, s net.Conn) {
		go pump(c, s, nil)
		p.hold(s, c, func(b []byte) time.Duration {
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
// is refused, beyond MaxTTL/2 (200 ms); before the readings were taken
// again, New let it through. A clock that agrees is let through, read
// sharp.
func TestFencingReadsAVagueClockAgain(t *testing.T) {
	for _, skew := range []time.Duration{0, -300 * time.Millisecond} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
				cfg, vp := vagueClockConfig(e)
				vp.vague.Store(2)
				e.sim[2].JumpClock(skew)
				l, err := engine.New(context.Background(), cfg)
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

// The same on a reconnect: master 2 comes back 300 ms behind, and its new
// connection's reading goes through a round trip slowed as above (-50 ms
// ±250 ms): the judgement cannot tell, and reads the clock again on the
// new connection once it is up, quick, and keeps the master out. Before
// the reading was taken again, master 2 voted.
func TestMasterReconnectingWithAVagueReadingIsReadAgain(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		cfg, vp := vagueClockConfig(e)
		var dials dialCounter
		dials.wrap(&cfg)
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("engine.New: %v", err)
		}
		defer l.Close()
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
		// The reading, the judgement, and the reading again, all within
		// a second.
		time.Sleep(time.Second)
		eventually(t, 5*time.Second, "master 2 answers on its new connection", func() bool {
			if le, err := l.TryLock(context.Background(), "probe"); err == nil {
				le.Release(context.Background())
			}
			return l.Nodes()[2].State != engine.StateDown
		})
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
