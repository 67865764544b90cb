package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// A late yes is cleaned up with one connection per master (ordering) and
// with several (Lease.Late deletes it again). On real masters, one of
// them stopped (SIGSTOP) with the SET in its socket: a liveness claim of
// the README's.
func TestLateYesIsReleased(t *testing.T) {
	for _, pm := range []int{-1, 1} {
		t.Run(fmt.Sprintf("PipelineMultiplex=%d", pm), func(t *testing.T) {
			t.Parallel()
			testLateYes(t, pm)
		})
	}
}

// commandCalls is how many times master i has run command (lower case,
// as INFO commandstats names it), scripts' calls included: a count over
// the whole server, so only for masters of the test's own.
func (e *env) commandCalls(i int, command string) int {
	e.t.Helper()
	c := e.direct[i]
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		e.t.Fatalf("INFO commandstats on node %d: %v", i, err)
	}
	_, rest, ok := strings.Cut(info, "cmdstat_"+command+":calls=")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	return n
}

func testLateYes(t *testing.T, pipelineMultiplex int) {
	e := ownEnv(t, 3)
	l := e.locker(func(c *engine.Config) {
		// Node 1 is stopped: it times out whatever the node timeout.
		// Nodes 0 and 2 must answer within it, however loaded the
		// machine, or the attempt is no contention but an outage.
		c.NodeTimeout = 2 * time.Second
		c.Conn.PipelineMultiplex = pipelineMultiplex
	})
	const res = "late-yes"
	e.set(0, res, "other-owner")
	if err := e.cluster.Nodes[1].Pause(); err != nil {
		t.Fatal(err)
	}
	// Node 0 refuses, node 2 says yes, node 1 is paused: no quorum, and
	// node 1's SET is queued in its socket to run when it resumes.
	_, err := l.TryLock(context.Background(), res)
	if !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("want ErrNotAcquired, got %v", err)
	}
	var ve *engine.VotesError
	if !errors.As(err, &ve) || ve.Votes[1].Outcome.String() != "timeout" {
		t.Fatalf("node 1 should have timed out: %v", err)
	}
	if err := e.cluster.Nodes[1].Resume(); err != nil {
		t.Fatal(err)
	}
	// Once node 1 has run the SET, nothing can set the key there again:
	// gone after that, it stays gone.
	eventually(t, 30*time.Second, "late SET on node 1 run and released", func() bool {
		return e.commandCalls(1, "set") > 0 && e.get(1, res) == ""
	})
	eventually(t, 30*time.Second, "node 2 released", func() bool { return e.get(2, res) == "" })
	if v := e.get(0, res); v != "other-owner" {
		t.Fatalf("node 0 value %q, the other owner's lock was touched", v)
	}
}

func TestReleaseOfExpiredOrForeignLockChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	// Short enough to wait out, with the longest node timeout it allows.
	l := e.locker(func(c *engine.Config) { c.TTL = 2 * time.Second; patient(c) })
	other := e.locker(patient)

	le, err := l.TryLock(context.Background(), "expired")
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns at a quorum: the keys are each owner's on every
	// master once its last SET has landed.
	everywhere := func(v string) func() bool {
		return func() bool {
			for i := range 3 {
				if e.get(i, e.key("expired")) != v {
					return false
				}
			}
			return true
		}
	}
	eventually(t, 30*time.Second, "the lease's keys set", everywhere(le.Value()))
	// Past the TTL the keys are gone, and the lease's validity (shorter)
	// with them.
	eventually(t, 30*time.Second, "the keys expired", everywhere(""))
	le2, err := other.TryLock(context.Background(), "expired")
	if err != nil {
		t.Fatalf("second owner after expiry: %v", err)
	}
	eventually(t, 30*time.Second, "the second owner's keys set", everywhere(le2.Value()))
	err = le.Release(context.Background())
	if !errors.Is(err, engine.ErrLeaseExpired) {
		t.Fatalf("release of expired lease: want ErrLeaseExpired, got %v", err)
	}
	for i := 0; i < 3; i++ {
		if v := e.get(i, e.key("expired")); v != le2.Value() {
			t.Fatalf("node %d: the new owner's key was touched: %q", i, v)
		}
	}

	// Someone else's lock: the keys were overwritten while the lease was
	// still valid by its own clock.
	le3, err := other.TryLock(context.Background(), "foreign")
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns at a quorum: a SET still on its way would land over
	// the intruder's key.
	awaitOnAll(t, e, "foreign", le3.Value())
	for i := 0; i < 3; i++ {
		e.set(i, e.key("foreign"), "intruder")
	}
	if err := le3.Release(context.Background()); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("release of a foreign lock: want ErrNotHeld, got %v", err)
	}
	for i := 0; i < 3; i++ {
		if v := e.get(i, e.key("foreign")); v != "intruder" {
			t.Fatalf("node %d: foreign key changed to %q", i, v)
		}
	}
	if err := le2.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := le2.Release(context.Background()); !errors.Is(err, engine.ErrNotHeld) {
		t.Fatalf("double release: want ErrNotHeld, got %v", err)
	}
}

// After Release returns, the same process can take the resource again at
// once: the deletes it sent have all landed, so none is overtaken by the
// new SET. Many goroutines make the masters' queues deep.
// (Not parallel: it keeps both cores busy.)
func TestReacquireRightAfterRelease(t *testing.T) {
	e := newEnv(t, 5)
	// Not a test of node timeouts, which a loaded machine runs out of (at
	// 1 s, all at once, on two busy cores): a node timeout far beyond any
	// reply, and a TTL that allows it. A delete overtaken by the next SET
	// shows as a refusal.
	l := e.locker(func(c *engine.Config) { c.TTL = time.Minute; patient(c) })
	ctx := context.Background()
	var wg sync.WaitGroup
	var once sync.Once
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("reacquire:%d", g)
			prev := ""
			for i := 0; i < 200; i++ {
				le, err := l.TryLock(ctx, name)
				if err != nil {
					once.Do(func() {
						vals := []string{}
						for n := 0; n < 5; n++ {
							vals = append(vals, e.get(n, e.key(name)))
						}
						t.Errorf("iter %d: %v\nprev=%s\nvalues now=%q", i, err, prev, vals)
					})
					return
				}
				prev = le.Value()
				if err := le.Release(ctx); err != nil {
					t.Errorf("release: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// Liveness: a failed attempt's undo whose connection breaks with the
// delete on it is sent again. Sent once, the key would refuse everyone on
// that master for the rest of its TTL.
//
// The TTL outlives the test's waits: only the resent delete can free m0
// in time.
func TestUndoLostWithItsConnectionIsResent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	const res = "undo-lost"
	e.set(1, e.key(res), "someone")
	e.set(2, e.key(res), "someone")
	t.Cleanup(func() { e.del(1, e.key(res)); e.del(2, e.key(res)) })
	dp := newDropProxy(e, e.addrs[0])
	cfg := e.config()
	cfg.Masters = []string{dp.addr(), e.addrs[1], e.addrs[2]}
	// (Its node timeout, 600 ms, is also the resend's delay.)
	cfg.TTL = time.Minute
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The plain acquire is SET NX GET; the first script on this
	// connection afterwards is the undo.
	needle := []byte("EVALSHA")
	dp.needle.Store(&needle)
	if _, err := l.TryLock(context.Background(), res); err == nil {
		t.Fatal("set-up: acquired a resource held on two of three masters")
	}
	eventually(t, 30*time.Second, "the undo was cut off", dp.dropped.Load)
	eventually(t, 30*time.Second, "the failed attempt's key on m0 is deleted", func() bool { return e.get(0, e.key(res)) == "" })
}

// Liveness: a lease whose acquire's connection to one master broke with
// the SET on its way, released after acquiring on the others, deletes on
// that master again later: the SET may run after the first delete and
// would leave the key there for a full TTL. In virtual time, so that the
// late SET surely lands before the second delete, and that one comes
// when it is due (a ConnTimeout after the first); the TTL outlives the
// test.
func TestReleaseAfterABrokenAcquireConnection(t *testing.T) {
	simTestWith(t, 3, steadyMasters, func(t *testing.T, e *env) {
		const res = "broken-release"
		const connTimeout = time.Second
		px := newStallProxy(e, e.addrs[0])
		cfg := e.config()
		cfg.Masters = []string{px.addr(), e.addrs[1], e.addrs[2]}
		cfg.TTL = time.Minute
		cfg.Conn.ConnTimeout = connTimeout
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		px.stall.Store(true)
		le, err := l.TryLock(context.Background(), res)
		if err != nil {
			t.Fatalf("set-up: TryLock with two of three masters: %v", err)
		}
		// The SET to m0 sits in the proxy (TryLock returned on m1 and
		// m2); its connection breaks, so the lease counts m0 as unsure.
		eventually(t, 5*time.Second, "set-up: the SET to m0 held in the proxy", px.holding)
		px.stall.Store(false)
		px.breakStalled()
		eventually(t, 5*time.Second, "the lease heard of the broken connection", func() bool { return l.Nodes()[0].Failed > 0 })
		if err := le.Release(context.Background()); err != nil {
			t.Logf("Release: %v", err)
		}
		released := time.Now()
		eventually(t, 5*time.Second, "set-up: the release reached m0 on a new connection", func() bool { return px.newConns.Load() > 0 })
		// The deletes sent at the release (its own, and the undo of the
		// broken connection's SET) have run on m0 in a round trip; the
		// SET reaches m0 after them.
		time.Sleep(10 * time.Millisecond)
		px.flushStalled()
		eventually(t, 5*time.Millisecond, "set-up: the late SET ran on m0", func() bool { return e.get(0, e.key(res)) == le.Value() })
		eventually(t, connTimeout+5*time.Millisecond, "m0 deleted the released lease's late SET", func() bool { return e.get(0, e.key(res)) == "" })
		t.Logf("m0 deleted the late SET %s after the release", time.Since(released))
	})
}
