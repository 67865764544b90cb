package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// A fenced lease is handed out only if more validity is left, once its
// counters are raised, than a competing round can last: a round that
// began before the counters were raised and ended after the keys expired
// could read only old counters and issue the same token. In virtual time
// the boundary is exact: masters 1 and 2 are reached through proxies that
// hold every command back by delay, each way takes oneWay, so the acquire
// and the fence round take 2×(delay + 2×oneWay); of the 2 s TTL's
// validity (less the drift, 22 ms), 1977.6 ms − 2×delay is left, which
// must exceed the round span (node timeout and watchdog period, 975 ms):
// granted up to a delay of 501.3 ms.
func TestFencedAcquireKeepsARoundSpanOfValidity(t *testing.T) {
	const oneWay = 100 * time.Microsecond
	for _, tc := range []struct {
		delay   time.Duration
		granted bool
	}{
		{250 * time.Millisecond, true},  // 1477.6 ms left
		{501 * time.Millisecond, true},  // 975.6 ms left
		{502 * time.Millisecond, false}, // 973.6 ms left
		{600 * time.Millisecond, false}, // 777.6 ms left
	} {
		t.Run(tc.delay.String(), func(t *testing.T) {
			simTestWith(t, 3, simredis.MasterOptions{Uptime: time.Hour, Latency: simredis.Latency{Min: oneWay}}, func(t *testing.T, e *env) {
				slow1 := newLatencyProxy(e, e.addrs[1], 0, nil)
				slow2 := newLatencyProxy(e, e.addrs[2], 0, nil)
				l := e.locker(func(c *engine.Config) {
					c.Masters = []string{e.addrs[0], slow1.addr(), slow2.addr()}
					c.Fencing = true
					c.TTL = 2 * time.Second
					c.NodeTimeout = 950 * time.Millisecond // a round span of 975 ms
					c.Conn.ConnTimeout = 10 * time.Second
				})
				if span := l.RoundSpan(); span != 975*time.Millisecond {
					t.Fatalf("set-up: round span %s, want 975ms", span)
				}
				slow1.delay.Store(int64(tc.delay))
				slow2.delay.Store(int64(tc.delay))
				le, err := l.TryLock(context.Background(), "span")
				switch {
				case tc.granted && err != nil:
					t.Errorf("delay %s: %v", tc.delay, err)
				case tc.granted && le.Validity() <= l.RoundSpan():
					t.Errorf("delay %s: granted with %s of validity, no more than a round's span %s", tc.delay, le.Validity(), l.RoundSpan())
				case !tc.granted && err == nil:
					t.Errorf("delay %s: granted with %s of validity left after fencing; a round lasts up to %s",
						tc.delay, le.Validity(), l.RoundSpan())
				case !tc.granted && !errors.Is(err, engine.ErrNoQuorum):
					t.Errorf("delay %s: %v, want ErrNoQuorum", tc.delay, err)
				}
				if le != nil {
					le.Release(context.Background())
				}
			})
		})
	}
}

// Fencing refuses masters whose clocks disagree by MaxTTL/2 or more: the
// tokens' clock floor would not hold across restarts.
func TestFencingRefusesMastersWithSkewedClocks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	var skew atomic.Int64
	skew.Store(time.Hour.Microseconds())
	ahead := shiftedClockProxy(e, e.addrs[2], &skew)
	cfg := e.config()
	cfg.Masters = []string{e.addrs[0], e.addrs[1], ahead.addr()}
	cfg.Fencing = true
	_, err := engine.New(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "clocks differ") || !strings.Contains(err.Error(), ahead.addr()) {
		t.Fatalf("New with a master an hour ahead: %v", err)
	}
	cfg.Fencing = false
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("without fencing the clocks do not matter: %v", err)
	}
	l.Close()
}

// An ended lease stays ended, with no validity, and an Extend that comes
// too late says so. The expiry timer could fire between an Extend's last
// check and its update of the validity: a window of nanoseconds, closed
// by construction (Extend re-checks under the lease's lock, and Validity
// is 0 once Err is set), which no schedule reaches. In virtual time the
// Extends are placed exactly around the end of the validity, each way
// taking oneWay: from far enough before it that the round trip fits in the
// nine tenths of the validity left that an Extend waits (extended), through
// too little left (the round cut short: not extended, and the lease ends
// on time), to its very end and after (expired).
func TestExtendNeverRevivesAnEndedLease(t *testing.T) {
	const oneWay = 100 * time.Microsecond
	simTestWith(t, 3, simredis.MasterOptions{Uptime: time.Hour, Latency: simredis.Latency{Min: oneWay}}, func(t *testing.T, e *env) {
		l := e.locker(func(c *engine.Config) { c.TTL = 60 * time.Millisecond; c.NodeTimeout = 20 * time.Millisecond })
		// The round trip, 2×oneWay, fits in 9/10 of what is left from
		// 2×oneWay×10/9 (222.2µs) before the end.
		for left := 400 * time.Microsecond; left >= -100*time.Microsecond; left -= 10 * time.Microsecond {
			le, err := l.TryLock(context.Background(), "revive")
			if err != nil {
				t.Fatalf("left %s: %v", left, err)
			}
			le.Done() // start the expiry timer
			end := le.ValidUntil()
			time.Sleep(time.Until(end) - left)
			err = le.Extend(context.Background(), 60*time.Millisecond)
			if le.Err() != nil && le.Validity() > 0 {
				t.Fatalf("left %s: ended (%v) with %s of validity; Extend said %v", left, le.Err(), le.Validity(), err)
			}
			if err == nil && le.Err() != nil {
				t.Fatalf("left %s: Extend succeeded on a lease that ended: %v", left, le.Err())
			}
			extended := left*9/10 >= 2*oneWay
			if extended != (err == nil) {
				t.Fatalf("left %s: Extend said %v; want extended: %v", left, err, extended)
			}
			if left <= 0 && !errors.Is(err, engine.ErrLeaseExpired) {
				t.Fatalf("left %s: Extend at or after the end said %v, want ErrLeaseExpired", left, err)
			}
			time.Sleep(time.Until(end) + time.Microsecond)
			if ended := le.Err() != nil; ended == extended || ended != (le.Validity() == 0) {
				t.Fatalf("left %s, extended %v: just past the old end, Err %v, validity %s", left, extended, le.Err(), le.Validity())
			}
			le.Release(context.Background())
		}
	})
}

// Two holders, one after the other, never get the same fencing token, even
// when the earlier holder's fence to a master is lost with its connection;
// see successiveHolders.
func TestSuccessiveHoldersGetDistinctTokens(t *testing.T) {
	successiveHolders(t, true)
}

// The same race with A's fence to m1 delivered: A raises m1's counter
// before its release deletes the key there (one connection, in order), so
// B reads it on m1 and its token is higher, although it read m2 before
// A's raise. The lost fence is what breaks the order.
func TestSuccessiveHoldersFenceDelivered(t *testing.T) {
	successiveHolders(t, false)
}

// successiveHolders runs A then B on one resource and checks that B's
// token is above A's. With cutFence, A's fence to m1 is lost with its
// connection: both got the same token while the fence round counted
// raises on masters where A held no key. The token argument says two
// successive holders' quorums share a master
// whose counter the earlier holder raised; but the fence round counts a
// raise on any quorum, not on masters where the lease holds its key, so
// the shared master can be one the later acquirer read before the raise
// (its own key kept the earlier holder out there).
//
// Three masters; the counters are high (a master whose clock runs ahead,
// within the MaxTTL/2 that New accepts, issued the last tokens), so the
// counters, not the clocks, decide the tokens.
//
//	B: SET m2 (ok, reads counter c)   B's SET to m1 is 400 ms on its way, m0 is cut off
//	A: SET m0 ok, m1 ok, m2 refused (B's key)      token c+1
//	A: fence m0 ok, m2 ok (raised after B read it), m1 lost with its connection
//	A: release m0, m1 (m1 on a new connection)
//	B: SET m1 arrives: ok, reads c                  token c+1, fence ok on m1, m2
//
// In virtual time, where B's SET to m1 arrives 400 ms after it left,
// after A acquired, fenced and released, as scheduled.
func successiveHolders(t *testing.T, cutFence bool) {
	simTest(t, 3, func(t *testing.T, e *env) { successiveHoldersOn(t, e, cutFence) })
}

func successiveHoldersOn(t *testing.T, e *env, cutFence bool) {
	const res = "fence-order"
	addrs := e.addrs
	// Counters 2 s ahead of the clocks.
	c := time.Now().UnixMicro() + 2_000_000
	for i := range addrs {
		e.set(i, engine.FenceKey(res), strconv.FormatInt(c, 10))
	}
	mk := func(masters []string, mutate func(*engine.Config)) *engine.Locker {
		return e.locker(func(cfg *engine.Config) {
			cfg.Masters = masters
			cfg.Fencing = true
			cfg.TTL = 6 * time.Second
			cfg.MaxTTL = 6 * time.Second
			if mutate != nil {
				mutate(cfg)
			}
		})
	}
	dp := newDropProxy(e, addrs[1])
	a := mk([]string{addrs[0], dp.addr(), addrs[2]}, nil)
	sp0 := newStallProxy(e, addrs[0])
	lp1 := newLatencyProxy(e, addrs[1], 0, nil)
	b := mk([]string{sp0.addr(), lp1.addr(), addrs[2]}, func(c *engine.Config) { c.NodeTimeout = time.Second })
	defer sp0.breakStalled()

	sp0.stall.Store(true)
	lp1.delay.Store(int64(400 * time.Millisecond))
	type result struct {
		le  *engine.Lease
		err error
	}
	bDone := make(chan result, 1)
	go func() {
		le, err := b.TryLock(context.Background(), res)
		bDone <- result{le, err}
	}()
	eventually(t, 2*time.Second, "B's SET on m2", func() bool { return e.get(2, res) != "" })

	if cutFence {
		needle := []byte(strconv.FormatInt(c+1, 10)) // A's fence command carries its token
		dp.needle.Store(&needle)
	}
	la, err := a.TryLock(context.Background(), res)
	if dp.dropped.Load() != cutFence {
		t.Fatalf("set-up: A's fence to m1 cut off: %v, want %v (TryLock: %v)", dp.dropped.Load(), cutFence, err)
	}
	if err != nil {
		// Refusing A, whose counters went up on too few of its own
		// masters, keeps the order: B's token has nothing to follow.
		t.Logf("A's fenced acquire failed: %v", err)
		select {
		case <-bDone:
		case <-time.After(5 * time.Second):
			t.Fatal("B's TryLock did not return")
		}
		return
	}
	if cutFence {
		time.Sleep(50 * time.Millisecond) // the client sees the connection gone
	}
	if err := la.Release(context.Background()); err != nil {
		t.Logf("A's release: %v", err)
	}
	// Release returns once its vote is decided (its error only logged
	// above): the delete on m0 or m1 may land a latency after it (the
	// keys live 6 s).
	for i := 0; i < 2; i++ {
		if !within(time.Second, func() bool { return e.get(i, res) == "" }) {
			t.Fatalf("set-up: A's release left %q on m%d", e.get(i, res), i)
		}
	}
	var rb result
	select {
	case rb = <-bDone:
	case <-time.After(5 * time.Second):
		t.Fatal("B's TryLock did not return")
	}
	if rb.err != nil {
		t.Fatalf("set-up: B's TryLock after A released: %v", rb.err)
	}
	// B is not released: m0 is cut off from it, and the masters go with the test.
	if rb.le.Token() <= la.Token() {
		t.Fatalf("B acquired after A released, yet B's token %d is not above A's %d", rb.le.Token(), la.Token())
	}
}

// A master that comes back (a restart, or here a reconnect) with its
// clock far from the others' is kept out of the vote while fencing relies
// on the clocks: its counters may be gone, and a clock behind by more
// than MaxTTL would then hand out a token below an earlier one. Once a new
// connection finds its clock back within MaxTTL/2 it votes again. Without
// fencing the clocks do not matter, and it votes throughout.
func TestMasterBackWithASkewedClockSitsOut(t *testing.T) {
	for _, fencing := range []bool{true, false} {
		t.Run(fmt.Sprintf("fencing=%v", fencing), func(t *testing.T) {
			simTest(t, 3, func(t *testing.T, e *env) {
				var dials dialCounter
				l := e.locker(func(c *engine.Config) {
					c.Fencing, c.TTL = fencing, 2*time.Second
					dials.wrap(c)
				})
				votes := func() engine.VotesError {
					t.Helper()
					// Masters 0 and 1 hold it elsewhere: master 2's vote decides.
					e.set(0, "skew", "someone")
					defer e.del(0, "skew")
					le, err := l.TryLock(context.Background(), "skew")
					if err == nil {
						le.Release(context.Background())
						return engine.VotesError{OK: 2}
					}
					var ve *engine.VotesError
					if !errors.As(err, &ve) {
						t.Fatalf("TryLock: %v", err)
					}
					return *ve
				}
				e.sim[2].JumpClock(-time.Hour)
				reconnectMeasured(t, e, l, &dials, 2)
				st := l.Nodes()[2]
				ve := votes()
				if fencing {
					if st.State != engine.StateClockSkewed || !strings.Contains(st.Err, "clock") {
						t.Fatalf("master 2 an hour behind: status %+v, want clock-skewed", st)
					}
					if ve.Failed == 0 || !errors.Is(&ve, engine.ErrClockSkew) {
						t.Fatalf("master 2 an hour behind still voted: %+v", ve)
					}
				} else if st.State != engine.StateUp || ve.Failed != 0 {
					t.Fatalf("without fencing, master 2 should vote: status %+v, votes %+v", st, ve)
				}
				e.sim[2].JumpClock(time.Hour)
				reconnectMeasured(t, e, l, &dials, 2)
				if st := l.Nodes()[2]; st.State != engine.StateUp {
					t.Fatalf("master 2 back within the bound: status %+v", st)
				}
				if ve := votes(); ve.Failed != 0 {
					t.Fatalf("master 2 back within the bound does not vote: %+v", ve)
				}
			})
		})
	}
}

// shiftedClockProxy is a proxy to addr that adds shift µs to the
// server_time_usec the master reports, as a master whose clock is that far
// off would.
func shiftedClockProxy(e *env, addr string, shift *atomic.Int64) *latencyProxy {
	return newLatencyProxy(e, addr, 0, func(b []byte) []byte {
		s := string(b)
		i := strings.Index(s, "server_time_usec:")
		if i < 0 || shift.Load() == 0 {
			return b
		}
		j := i + len("server_time_usec:")
		k := j + strings.IndexAny(s[j:], "\r\n")
		us, err := strconv.ParseInt(s[j:k], 10, 64)
		if err != nil {
			return b
		}
		// Same number of digits, so the bulk length stays right.
		return []byte(s[:j] + strconv.FormatInt(us+shift.Load(), 10) + s[k:])
	})
}

// reconnectMeasured breaks the connections to simulated master i and
// waits until l has dialled it again, which measures its clock, and
// carried a command on the new connection (the one that found the old
// connection dead marked the master down); then for the judgement of
// the new reading, which is made in the background against the others'
// clocks read again at once, within a node timeout.
func reconnectMeasured(t *testing.T, e *env, l *engine.Locker, dials *dialCounter, i int) {
	t.Helper()
	before := dials.count(e.addrs[i])
	e.sim[i].BreakConnections(-1)
	eventually(t, 5*time.Second, fmt.Sprintf("master %d reconnected and measured", i), func() bool {
		le, err := l.TryLock(context.Background(), "skew-probe")
		if err == nil {
			le.Release(context.Background())
		}
		return dials.count(e.addrs[i]) > before && l.Nodes()[i].State != engine.StateDown
	})
	time.Sleep(l.Config().NodeTimeout)
}

// One master of three comes back with its clock an hour behind and sits
// out. A healthy master that then reconnects must not be judged against
// it: with three masters the others of the one measured are two, and
// their median, the mean of the two, is half an hour off whenever one of
// them is. The healthy master would sit out too, and the quorum with it,
// until the bad clock is fixed.
func TestOneSkewedMasterDoesNotKeepAHealthyOneOut(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		var dials dialCounter
		l := e.locker(func(c *engine.Config) {
			c.Fencing, c.TTL = true, 2*time.Second
			dials.wrap(c)
		})
		e.sim[2].JumpClock(-time.Hour)
		reconnectMeasured(t, e, l, &dials, 2)
		if st := l.Nodes()[2]; st.State != engine.StateClockSkewed {
			t.Fatalf("set-up: master 2 an hour behind: status %+v, want clock-skewed", st)
		}
		reconnectMeasured(t, e, l, &dials, 1)
		if st := l.Nodes()[1]; st.State != engine.StateUp {
			t.Errorf("healthy master 1 after a reconnect: status %+v, want up", st)
		}
		le, err := l.TryLock(context.Background(), "skew")
		if err != nil {
			t.Fatalf("masters 0 and 1 agree, yet: %v", err)
		}
		le.Release(context.Background())
	})
}

// The masters' clocks step forward together, by an hour (an NTP server
// that stepped them all, which the fencing argument allows: they still
// agree, and none stepped back). Each master's offset is measured only on
// its new connections, against the others' offsets as measured on their
// last ones: the first master to reconnect is judged an hour off from the
// others, and the second an hour off from the one left, though all three
// agree at every instant. The quorum must survive the reconnects.
func TestMastersWhoseClocksStepTogetherKeepVoting(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		var dials dialCounter
		l := e.locker(func(c *engine.Config) {
			c.Fencing, c.TTL = true, 2*time.Second
			dials.wrap(c)
		})
		for _, m := range e.sim {
			m.JumpClock(time.Hour)
		}
		reconnectMeasured(t, e, l, &dials, 2)
		reconnectMeasured(t, e, l, &dials, 1)
		for i, st := range l.Nodes() {
			if st.State != engine.StateUp {
				t.Errorf("master %d, whose clock agrees with the others': %+v", i, st)
			}
		}
		le, err := l.TryLock(context.Background(), "skew")
		if err != nil {
			t.Fatalf("three masters that agree, yet: %v", err)
		}
		le.Release(context.Background())
	})
}

// A Lock whose context ends during the fencing round, with every master
// well, failed with ErrNoQuorum ("too many masters failed"): the fence
// round's error counted the cut wait as an outage, where an acquire cut
// by its context reports the context's error alone. (Found by bench/sim.)
// In virtual time the deadline falls in the fencing round as scheduled.
func TestFenceCutByTheDeadlineIsNotAnOutage(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		const oneWay = 40 * time.Millisecond
		l, proxies := e.proxiedLocker(func(c *engine.Config) {
			c.Fencing, c.TTL = true, 5*time.Second
		})
		for _, p := range proxies {
			p.delay.Store(int64(oneWay))
		}
		// The proxies delay what the engine sends: the attempt takes 40 ms,
		// and the deadline falls in the fencing round that follows.
		ctx, cancel := context.WithTimeout(context.Background(), oneWay*3/2)
		defer cancel()
		le, err := l.Lock(ctx, "fence-cut")
		if err == nil {
			le.Release(context.Background())
			t.Fatal("set-up: acquired within the deadline, which falls in the fence round")
		}
		if errors.Is(err, engine.ErrNoQuorum) {
			t.Fatalf("no master failed, yet: %v", err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want the context's error, got %v", err)
		}
	})
}
