package engine_test

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// dropProxy forwards TCP to a master. Once armed, the first chunk toward
// the master that contains needle is dropped and its connection cut on
// both sides: the command is lost with the connection, which the client
// sees as broken, while later commands go out on a new connection.
type dropProxy struct {
	ln      net.Listener
	target  string
	needle  atomic.Pointer[[]byte]
	dropped atomic.Bool
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, target: target}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			go func() {
				defer s.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if nd := p.needle.Load(); nd != nil && !p.dropped.Load() && bytes.Contains(buf[:n], *nd) {
							p.dropped.Store(true)
							c.Close()
							return
						}
						if _, err := s.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *dropProxy) addr() string { return p.ln.Addr().String() }

// The same race with A's fence to m1 delivered: A raises m1's counter
// before its release deletes the key there (one connection, in order), so
// B reads it on m1 and its token is higher, although it read m2 before
// A's raise. The lost fence is what breaks the order.
func TestReviewSuccessiveHoldersFenceDelivered(t *testing.T) {
	successiveHolders(t, false)
}

// successiveHolders runs A then B on one resource and checks that B's
// token is above A's. With cutFence, A's fence to m1 is lost with its
// connection, which gave both the same token while the fence round
// counted raises on masters where A held no key. The token argument says two successive holders' quorums share a master
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
func successiveHolders(t *testing.T, cutFence bool) {
	e := newEnv(t, 3)
	const res = "review-fence-order"
	addrs := e.cluster.Addrs()
	// Counters 2 s ahead of the clocks.
	c := time.Now().UnixMicro() + 2_000_000
	for i := range addrs {
		e.set(i, engine.FenceKey(res), strconv.FormatInt(c, 10))
	}
	mk := func(masters []string, mutate func(*engine.Config)) *engine.Locker {
		cfg := engine.DefaultConfig(masters...)
		cfg.Quarantine = engine.QuarantineObserved
		cfg.Fencing = true
		cfg.TTL = 6 * time.Second
		cfg.MaxTTL = 6 * time.Second
		if mutate != nil {
			mutate(&cfg)
		}
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("engine.New: %v", err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	dp := newDropProxy(t, addrs[1])
	a := mk([]string{addrs[0], dp.addr(), addrs[2]}, nil)
	sp0 := newStallProxy(t, addrs[0])
	lp1 := newLatencyProxy(t, addrs[1], 0, nil)
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
	for i := 0; i < 2; i++ {
		if v := e.get(i, res); v != "" {
			t.Fatalf("set-up: A's release left %q on m%d", v, i)
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
	// B is not released: m0 is cut off from it, and the servers go with the test.
	if rb.le.Token() <= la.Token() {
		t.Fatalf("B acquired after A released, yet B's token %d is not above A's %d", rb.le.Token(), la.Token())
	}
}
