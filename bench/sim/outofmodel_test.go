package sim

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// Two faults outside the model, each run with fencing off and on. The
// expected outcome, asserted: the lock fails (two holders at once), and
// without fencing the protected resource accepts a stale write; with
// fencing it rejects every stale write, and tokens still only increase.
//
//   - A master's clock jumps forward past the TTL (an NTP step, a clock
//     set by hand) on a master that a lease shares with the next
//     holder's majority: the lease's key expires there early, and another
//     client gets a majority while the lease is still trusted.
//   - A client paused past its validity (a GC pause, a stopped process)
//     comes back and writes as if it still held the lease.

// oomEnv is a hand-run scenario: five masters, Lockers, a history and the
// fenced store, for the checkers.
type oomEnv struct {
	t       *testing.T
	net     *simredis.Network
	masters []*simredis.Master
	addrs   []string
	h       *History
	store   *fencedStore
	fencing bool
}

func newOOMEnv(t *testing.T, fencing bool) *oomEnv {
	e := &oomEnv{t: t, net: simredis.NewNetwork(1), h: NewHistory(), fencing: fencing}
	e.store = newFencedStore(e.h)
	e.masters, e.addrs = simMasters(t, e.net, 5, simredis.Latency{Min: time.Millisecond})
	return e
}

func (e *oomEnv) locker(name string) *engine.Locker {
	cfg := engine.DefaultConfig(e.addrs...)
	cfg.TTL = time.Second
	cfg.Fencing = e.fencing
	cfg.Conn.DialContext = e.net.Dialer(name)
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { l.Close() })
	return l
}

// grant records a lease as the workers do, and its first write.
func (e *oomEnv) grant(client int, le *engine.Lease, called time.Time) int {
	id := e.h.grant(Grant{Resource: le.Resource(), Client: client, Token: le.Token(), Value: le.Value(),
		Called: e.h.since(called), Granted: e.h.since(time.Now()), ValidUntil: e.h.since(le.ValidUntil())})
	e.store.write(le.Resource(), id, le.Token(), true)
	return id
}

// end records the end of a lease's trust: its validity, as the engine
// gives it.
func (e *oomEnv) end(id int, le *engine.Lease) {
	e.h.end(id, e.h.since(le.ValidUntil()), "released", 0)
}

// checkStaleWrites asserts the expected outcome at the store: without
// fencing a stale write accepted, with fencing every stale write
// rejected (and one tried).
func (e *oomEnv) checkStaleWrites(t *testing.T) {
	t.Helper()
	switch n := e.staleAccepted(); {
	case !e.fencing && n == 0:
		t.Fatalf("without fencing, A's stale write was rejected: %v", e.h.Writes())
	case e.fencing && n > 0:
		t.Fatalf("with fencing, the store accepted %d stale writes: %v", n, e.h.Writes())
	case e.fencing && e.staleWrites() == 0:
		t.Fatalf("with fencing, no stale write was tried: %v", e.h.Writes())
	}
}

func (e *oomEnv) staleAccepted() int {
	n := 0
	for _, w := range e.h.Writes() {
		if w.Stale && w.Accepted {
			n++
		}
	}
	return n
}

func (e *oomEnv) staleWrites() int {
	n := 0
	for _, w := range e.h.Writes() {
		if w.Stale {
			n++
		}
	}
	return n
}

func TestOutOfModelClockJump(t *testing.T) {
	for _, fencing := range []bool{false, true} {
		t.Run(fmt.Sprintf("fencing=%v", fencing), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newOOMEnv(t, fencing)
				a, b := e.locker("c0"), e.locker("c1")
				ctx := context.Background()
				// A holds r on masters 0-2 only: 3 and 4 were cut off.
				e.masters[3].Partition(simredis.Refuse)
				e.masters[4].Partition(simredis.Refuse)
				called := time.Now()
				la, err := a.TryLock(ctx, "r")
				if err != nil {
					t.Fatal(err)
				}
				ida := e.grant(0, la, called)
				e.masters[3].Partition(simredis.Connected)
				e.masters[4].Partition(simredis.Connected)
				time.Sleep(100 * time.Millisecond)
				// Master 2, which A shares with the majority {2, 3, 4},
				// jumps 2 TTLs ahead: A's key expires there at once.
				e.masters[2].JumpClock(2 * time.Second)
				called = time.Now()
				lb, err := b.TryLock(ctx, "r")
				if err != nil {
					t.Fatalf("B could not take r after master 2's jump: %v", err)
				}
				idb := e.grant(1, lb, called)
				if la.Err() != nil {
					t.Fatalf("A's lease ended (%v): want it trusted, as the engine cannot see the jump", la.Err())
				}
				// A, still trusting its lease, writes.
				e.store.write("r", ida, la.Token(), false)
				e.end(ida, la)
				e.end(idb, lb)
				grants := e.h.Grants()
				if v := CheckMutualExclusion(grants); len(v) == 0 {
					t.Fatalf("no double grant seen after the clock jump: %v, %v", grants[0], grants[1])
				} else {
					t.Logf("the lock failed, as expected out of the model:\n%s", v[0])
				}
				e.checkStaleWrites(t)
				// The masters' view: A's keys were on fewer than a majority
				// from the jump on, while A trusted its lease.
				var logs [][]simredis.KeyRecord
				var clocks []simredis.Clock
				for _, m := range e.masters {
					logs, clocks = append(logs, m.KeyLog()), append(clocks, m.Clock())
				}
				if v := CheckExpiry(grants[:1], buildSpans(logs, clocks, e.h.start), 3); len(v) == 0 {
					t.Fatal("checker 3 did not see A trusted past its keys' expiry on a majority")
				}
				if fencing {
					if v := CheckFencing(grants); len(v) > 0 {
						t.Fatalf("tokens went backwards: %v", v)
					}
				}
				for _, w := range e.h.Writes() {
					t.Log(w)
				}
				la.Release(ctx)
				lb.Release(ctx)
			})
		})
	}
}

func TestOutOfModelClientPause(t *testing.T) {
	for _, fencing := range []bool{false, true} {
		t.Run(fmt.Sprintf("fencing=%v", fencing), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newOOMEnv(t, fencing)
				a, b := e.locker("c0"), e.locker("c1")
				ctx := context.Background()
				called := time.Now()
				la, err := a.TryLock(ctx, "r")
				if err != nil {
					t.Fatal(err)
				}
				ida := e.grant(0, la, called)
				// B waits for r; A's holder stops for two TTLs without
				// looking at its lease (its Locker's goroutines run on).
				got := make(chan *engine.Lease, 1)
				go func() {
					called := time.Now()
					lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
					lb, err := b.Lock(lctx, "r")
					if err != nil {
						t.Error(err)
						got <- nil
						return
					}
					e.grant(1, lb, called)
					got <- lb
				}()
				time.Sleep(2 * time.Second)
				lb := <-got
				if lb == nil {
					t.FailNow()
				}
				// A comes back and writes without looking: past its
				// validity, while B holds r.
				acted := e.h.since(time.Now())
				e.store.write("r", ida, la.Token(), false)
				e.end(ida, la)
				grants := e.h.Grants()
				if v := CheckMutualExclusion(grants); len(v) > 0 {
					t.Fatalf("the engine's leases overlap: %v", v)
				}
				// The resource's view: A acted as a holder until its write.
				acting := grants
				acting[0].End = acted
				acting[1].End = acted + time.Second
				if v := CheckMutualExclusion(acting); len(v) == 0 {
					t.Fatal("no double grant in the resource's view")
				} else {
					t.Logf("two holders acted at once, as expected out of the model:\n%s", v[0])
				}
				e.checkStaleWrites(t)
				for _, w := range e.h.Writes() {
					t.Log(w)
				}
				la.Release(ctx)
				lb.Release(ctx)
			})
		})
	}
}

// A quorum of masters' clocks run fast at three times the DriftFactor
// (3%, past the 1% the validity allows for): a lease's keys expire there
// some 18 ms before its validity ends, and another client takes the
// resource while the lease is still trusted. The lock fails; with
// fencing the store rejects the first holder's late write.
func TestOutOfModelQuorumDriftPastTheBound(t *testing.T) {
	for _, fencing := range []bool{false, true} {
		t.Run(fmt.Sprintf("fencing=%v", fencing), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newOOMEnv(t, fencing)
				a, b := e.locker("c0"), e.locker("c1")
				ctx := context.Background()
				called := time.Now()
				la, err := a.TryLock(ctx, "r")
				if err != nil {
					t.Fatal(err)
				}
				ida := e.grant(0, la, called)
				for _, m := range e.masters[:3] {
					m.SetRate(1 + 3*engine.DefaultDriftFactor)
				}
				// A's keys on masters 0-2 last 1s/1.03 from their SET
				// (971 ms); A trusts its lease until 988 ms.
				time.Sleep(time.Until(la.ValidUntil().Add(-10 * time.Millisecond)))
				called = time.Now()
				lb, err := b.TryLock(ctx, "r")
				if err != nil {
					t.Fatalf("B could not take r once A's keys expired on the fast quorum: %v", err)
				}
				idb := e.grant(1, lb, called)
				if la.Err() != nil {
					t.Fatalf("A's lease ended (%v): want it trusted to its validity, as the engine cannot see the drift", la.Err())
				}
				// A, still trusting its lease, writes.
				e.store.write("r", ida, la.Token(), false)
				e.end(ida, la)
				e.end(idb, lb)
				grants := e.h.Grants()
				if v := CheckMutualExclusion(grants); len(v) == 0 {
					t.Fatalf("no double grant seen with a quorum of clocks fast past the bound: %v, %v", grants[0], grants[1])
				} else {
					t.Logf("the lock failed, as expected out of the model:\n%s", v[0])
				}
				e.checkStaleWrites(t)
				if fencing {
					if v := CheckFencing(grants); len(v) > 0 {
						t.Fatalf("tokens went backwards: %v", v)
					}
				}
				la.Release(ctx)
				lb.Release(ctx)
			})
		})
	}
}
