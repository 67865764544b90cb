package multiplex_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// forwarder is a TCP relay on a free loopback port whose target can be
// moved, as a VIP or a DNS name moves in a failover. Moving it drops every
// relayed connection, so that clients redial and reach the new target.
type forwarder struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func startForwarder(t *testing.T, target string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln, target: target, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(f.close)
	return f
}

func (f *forwarder) Addr() string { return f.ln.Addr().String() }

// Point moves the forwarder to target and drops the open connections.
func (f *forwarder) Point(target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = target
	for c := range f.conns {
		c.Close()
		delete(f.conns, c)
	}
}

func (f *forwarder) close() {
	f.ln.Close()
	f.Point("")
	f.wg.Wait()
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.relay(c)
		}()
	}
}

func (f *forwarder) relay(c net.Conn) {
	f.mu.Lock()
	target := f.target
	f.mu.Unlock()
	up, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		c.Close()
		return
	}
	f.mu.Lock()
	if f.target != target { // moved while dialling
		f.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	f.conns[c], f.conns[up] = true, true
	f.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
	f.mu.Lock()
	delete(f.conns, c)
	delete(f.conns, up)
	f.mu.Unlock()
}

func classifySet(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	s, err := res.ToString()
	switch {
	case err != nil:
		return multiplex.Failed, 0, err
	case s == "OK":
		return multiplex.OK, 0, nil
	}
	return multiplex.Refused, 0, nil
}

func setCmd(key string) multiplex.Command {
	c := multiplex.Command{Name: "SET", Key: key, NArgs: 1, WaitAll: true}
	c.Args[0] = "v"
	return c
}

// replicaOf makes node a replica of master and waits until it says so.
func replicaOf(t *testing.T, node *redistest.Node, master string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(master)
	if _, err := redistest.Do(node.Addr(), 10*time.Second, "REPLICAOF", host, port); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		// ROLE answers *5 for a replica (role, host, port, state, offset)
		// and *3 for a master.
		if line, err := redistest.Do(node.Addr(), 10*time.Second, "ROLE"); err == nil && line == "*5" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not report the replica role", node.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDialRefusesOneServerUnderSeveralNames(t *testing.T) {
	// Node 0 also listens on ::1 when the host has it, for a third name.
	c := redistest.StartT(t, 3, redistest.Options{Args: []string{"--bind", "127.0.0.1", "-::1"}})
	port := strconv.Itoa(c.Nodes[0].Port)
	names := []string{c.Nodes[0].Addr(), net.JoinHostPort("localhost", port)}
	if v6 := net.JoinHostPort("::1", port); redistest.Ping(v6, time.Second) == nil {
		names = append(names, v6)
	} else {
		t.Logf("%s does not answer, so only two names are tried", v6)
	}
	addrs := append(append([]string{}, names...), c.Nodes[1].Addr(), c.Nodes[2].Addr())
	_, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: addrs, Quarantine: quarantine.Off})
	if !errors.Is(err, multiplex.ErrNotIndependent) {
		t.Fatalf("one server as %v: want ErrNotIndependent, got %v", names, err)
	}
	t.Log(err)
	for _, a := range names {
		if !strings.Contains(err.Error(), a) {
			t.Fatalf("error should name %s: %v", a, err)
		}
	}
	for _, a := range addrs[len(names):] {
		if strings.Contains(err.Error(), a) {
			t.Fatalf("error names the independent master %s: %v", a, err)
		}
	}
}

func TestDialRefusesAReplica(t *testing.T) {
	c := redistest.StartT(t, 4)
	replicaOf(t, c.Nodes[3], c.Nodes[0].Addr())
	_, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: c.Addrs(), Quarantine: quarantine.Off})
	if !errors.Is(err, multiplex.ErrNotIndependent) {
		t.Fatalf("3 masters and a replica: want ErrNotIndependent, got %v", err)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), c.Nodes[3].Addr()+" is a replica") || !strings.Contains(err.Error(), c.Nodes[0].Addr()) {
		t.Fatalf("error should name the replica %s and its master: %v", c.Nodes[3].Addr(), err)
	}
	for _, n := range c.Nodes[1:3] {
		if strings.Contains(err.Error(), n.Addr()) {
			t.Fatalf("error names the independent master %s: %v", n.Addr(), err)
		}
	}
}

// waitNotIndependent polls until node i's error wraps ErrNotIndependent
// and its Status error contains want, sending rounds meanwhile; no round may count a yes from
// node i.
func waitNotIndependent(t *testing.T, p *multiplex.Pool, i int, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tally := p.Fanout(context.Background(), setCmd("indep"), classifySet, nil, nil)
		if v := tally.Votes[i]; v.Outcome == multiplex.OK {
			t.Fatalf("node %d voted yes while it reaches %s", i, want)
		}
		st := p.Status()[i]
		if errors.Is(p.Nodes()[i].Err(), multiplex.ErrNotIndependent) && strings.Contains(st.Err, want) {
			if st.State != multiplex.StateDown {
				t.Fatalf("node %d kept out but its state is %s", i, st.State)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: want an ErrNotIndependent error naming %q, status %+v", i, want, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A master that was down at Dial, or that redials, and then reaches another
// node's server or a replica must not vote; once its address reaches an
// independent master again it is let back in.
func TestLateDependentNodeIsKeptOut(t *testing.T) {
	c := redistest.StartT(t, 5) // 0-1: masters, 2: later a replica, 3-4: free masters
	replicaOf(t, c.Nodes[2], c.Nodes[0].Addr())
	fwd := startForwarder(t, redistest.DeadAddr(t))
	addrs := []string{c.Nodes[0].Addr(), c.Nodes[1].Addr(), fwd.Addr()}
	p, err := multiplex.Dial(context.Background(), multiplex.Tuned(multiplex.Options{Addrs: addrs, Quarantine: quarantine.Off,
		DialTimeout: patientTimeout, NodeTimeout: patientTimeout}, 20*time.Millisecond, 0, 0))
	if err != nil {
		t.Fatalf("Dial with node 2 down: %v", err)
	}
	defer p.Close()

	// Down at Dial, then its address reaches node 0's server.
	fwd.Point(c.Nodes[0].Addr())
	waitNotIndependent(t, p, 2, fwd.Addr()+" and "+c.Nodes[0].Addr()+" report the same run_id")
	if p.Nodes()[2].Client() != nil {
		t.Fatal("a node sharing node 0's server got a client")
	}
	// Then a replica.
	fwd.Point(c.Nodes[2].Addr())
	waitNotIndependent(t, p, 2, fwd.Addr()+" is a replica")

	// An independent master: the reconnect loop lets it in.
	fwd.Point(c.Nodes[3].Addr())
	deadline := time.Now().Add(30 * time.Second)
	for p.Nodes()[2].Client() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("node 2 not let in on an independent master: %v", p.Nodes()[2].Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tally := p.Fanout(context.Background(), setCmd("indep"), classifySet, nil, nil); tally.Votes[2].Outcome != multiplex.OK {
		t.Fatalf("node 2 on an independent master: %+v", tally)
	}

	// Connected, it redials into node 1's server, then a replica.
	fwd.Point(c.Nodes[1].Addr())
	waitNotIndependent(t, p, 2, fwd.Addr()+" and "+c.Nodes[1].Addr()+" report the same run_id")
	fwd.Point(c.Nodes[2].Addr())
	waitNotIndependent(t, p, 2, fwd.Addr()+" is a replica")

	// Back on an independent master: its error clears and it votes again.
	fwd.Point(c.Nodes[4].Addr())
	deadline = time.Now().Add(30 * time.Second)
	for {
		tally := p.Fanout(context.Background(), setCmd("indep"), classifySet, nil, nil)
		if tally.Votes[2].Outcome == multiplex.OK && p.Nodes()[2].Err() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 2 back on an independent master: %+v, err %v", tally.Votes[2], p.Nodes()[2].Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// When an address moves to another server that has been up longer than
// MaxTTL, that server never saw the locks granted through the address: the
// node must be quarantined for a full MaxTTL all the same.
func TestAddressMovedToLongRunningServerIsQuarantined(t *testing.T) {
	t.Parallel() // it mostly waits: for timeouts, or for servers to age
	const maxTTL = 3 * time.Second
	c := redistest.StartT(t, 4) // 0: A, 1: B, 2-3: the other masters
	// Let every server be up longer than MaxTTL, so that neither the first
	// sight (quarantine.Always) nor "MaxTTL - uptime" quarantines anything.
	time.Sleep(maxTTL + 1200*time.Millisecond)
	for _, policy := range []quarantine.Policy{quarantine.Observed, quarantine.Always} {
		t.Run(policy.String(), func(t *testing.T) {
			fwd := startForwarder(t, c.Nodes[0].Addr())
			p, err := multiplex.Dial(context.Background(), multiplex.Options{
				Addrs: []string{fwd.Addr(), c.Nodes[2].Addr(), c.Nodes[3].Addr()}, Quarantine: policy, MaxTTL: maxTTL,
				NodeTimeout: patientTimeout,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			before := p.Status()[0]
			if tally := p.Fanout(context.Background(), setCmd("moved"), classifySet, nil, nil); before.State != multiplex.StateUp || tally.OK != 3 {
				t.Fatalf("before the move: %+v, %+v", before, tally)
			}

			moved := time.Now()
			fwd.Point(c.Nodes[1].Addr())
			for {
				tally := p.Fanout(context.Background(), setCmd("moved"), classifySet, nil, nil)
				v := tally.Votes[0]
				if v.Outcome == multiplex.OK {
					t.Fatalf("a yes from the server newly behind the address was counted, %v after the move: %+v, status %+v",
						time.Since(moved), tally, p.Status()[0])
				}
				if errors.Is(v.Err, multiplex.ErrQuarantined) && v.Outcome == multiplex.Failed {
					// The vote's error says why and until when.
					var qe *quarantine.Error
					if !errors.As(v.Err, &qe) || !qe.Restarted || qe.MaxTTL != maxTTL || !strings.Contains(qe.Error(), "run_id changed") {
						t.Fatalf("quarantined vote's error: %#v", v.Err)
					}
					if st := p.Status()[0]; !qe.Until.Equal(st.QuarantinedUntil) {
						t.Fatalf("error says until %v, status %v", qe.Until, st.QuarantinedUntil)
					}
					break
				}
				// The event: the client redials through the moved address.
				// How long that takes is the host's; the quarantine then
				// runs a full MaxTTL from it, checked below.
				if time.Since(moved) > time.Minute {
					t.Fatalf("no quarantined vote within a minute of the move: last %+v", v)
				}
				time.Sleep(10 * time.Millisecond)
			}
			st := p.Status()[0]
			checked := time.Now()
			if st.State != multiplex.StateQuarantined || st.Restarts != 1 || st.RunID == before.RunID || st.RunID == "" {
				t.Fatalf("after the move: want quarantined with 1 restart and a new run_id, got %+v (before %+v)", st, before)
			}
			if up := p.Nodes()[0].Info().Uptime; up <= maxTTL {
				t.Fatalf("set-up: the new server's uptime %s should exceed MaxTTL %s", up, maxTTL)
			}
			// Quarantined from when the new connection was seen, which is
			// between the move and this check, for a full MaxTTL.
			if lo, hi := moved.Add(maxTTL), checked.Add(maxTTL); st.QuarantinedUntil.Before(lo) || st.QuarantinedUntil.After(hi) {
				t.Fatalf("quarantined until %v after the move, want between %v and %v",
					st.QuarantinedUntil.Sub(moved), maxTTL, hi.Sub(moved))
			}
		})
	}
}

func TestClockOffsetOfALocalServer(t *testing.T) {
	c := redistest.StartT(t, 1)
	p := dial(t, c, time.Second)
	node := p.Nodes()[0]
	first := node.Info()
	if !first.ClockKnown || first.ServerTime.IsZero() {
		t.Fatalf("Redis 7 reports server_time_usec, yet the offset is unknown: %+v", first)
	}
	if off := first.ClockOffset; off <= -time.Second || off >= time.Second {
		t.Fatalf("offset of a server on this host: %v", off)
	}
	if st := p.Status()[0]; !st.ClockKnown || st.ClockOffsetMS != float64(first.ClockOffset)/1e6 ||
		first.ClockError <= 0 || st.ClockErrorMS != float64(first.ClockError)/1e6 {
		t.Fatalf("status %+v, info offset %v ±%v", st, first.ClockOffset, first.ClockError)
	}
	// A new connection measures again.
	time.Sleep(5 * time.Millisecond)
	if _, err := redistest.Do(c.Nodes[0].Addr(), 10*time.Second, "CLIENT", "KILL", "TYPE", "normal"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !node.Info().ServerTime.After(first.ServerTime) {
		if time.Now().After(deadline) {
			t.Fatalf("server time not read again on a new connection: %+v", node.Info())
		}
		p.Do(context.Background(), 0, multiplex.Command{Script: incrScript, Key: "clock"})
		time.Sleep(10 * time.Millisecond)
	}
	info := node.Info()
	if !info.ClockKnown || info.ClockOffset <= -time.Second || info.ClockOffset >= time.Second {
		t.Fatalf("after a new connection: %+v", info)
	}
	t.Logf("clock offset %v at connect, %v on a new connection", first.ClockOffset, info.ClockOffset)
}
