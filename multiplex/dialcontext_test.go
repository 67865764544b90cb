package multiplex_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// countingDialer is an Options.DialContext that dials TCP and counts the
// connections it opened per address.
type countingDialer struct {
	mu    sync.Mutex
	dials map[string]int
}

func (d *countingDialer) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	d.mu.Lock()
	if d.dials == nil {
		d.dials = make(map[string]int)
	}
	d.dials[addr]++
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", addr)
}

func (d *countingDialer) count(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials[addr]
}

// Options.DialContext opens every connection, the first ones and those
// rueidis opens again after a master restarted, and the restart check
// still reads INFO on them: the restarted master is quarantined.
func TestDialContextOpensEveryConnection(t *testing.T) {
	c := redistest.StartT(t, 3)
	var d countingDialer
	p, err := multiplex.Dial(context.Background(), multiplex.Options{
		Addrs: c.Addrs(), Quarantine: quarantine.Observed, MaxTTL: time.Minute, NodeTimeout: patientTimeout,
		Scripts: []*multiplex.Script{incrScript}, DialContext: d.DialContext,
	})
	if err != nil {
		t.Fatalf("Dial through DialContext: %v", err)
	}
	defer p.Close()
	for _, a := range c.Addrs() {
		if n := d.count(a); n != 1 {
			t.Fatalf("DialContext opened %d connections to %s at Dial, want 1", n, a)
		}
	}
	for i, s := range p.Status() {
		if s.RunID == "" || !s.ClockKnown {
			t.Fatalf("master %d: no INFO read on the custom connection: %+v", i, s)
		}
	}
	cmd := multiplex.Command{Script: incrScript, Key: "dialctx"}
	if tally := p.Fanout(context.Background(), cmd, classifyInt, nil, nil); !tally.Reached() {
		t.Fatalf("Fanout through DialContext: %+v", tally)
	}
	if err := c.Nodes[0].Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Status()[0].State != multiplex.StateQuarantined {
		if time.Now().After(deadline) {
			t.Fatalf("restart not detected on a DialContext connection: %+v", p.Status()[0])
		}
		p.Fanout(context.Background(), cmd, classifyInt, nil, nil)
		time.Sleep(20 * time.Millisecond)
	}
	if n := d.count(c.Addrs()[0]); n < 2 {
		t.Fatalf("DialContext opened %d connections to the restarted master, want a new one", n)
	}
}

// A DialContext error is the master's cause, as a TCP error would be.
func TestDialContextErrorNamesMaster(t *testing.T) {
	c := redistest.StartT(t, 3)
	refused := func(ctx context.Context, addr string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "sim", Err: syscall.ECONNREFUSED}
	}
	_, err := multiplex.Dial(context.Background(), multiplex.Options{
		Addrs: c.Addrs(), Quarantine: quarantine.Off, DialContext: refused,
	})
	if !errors.Is(err, multiplex.ErrUnreachable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Dial with every DialContext refused: %v, want ErrUnreachable saying connection refused", err)
	}
	for _, a := range c.Addrs() {
		if !strings.Contains(err.Error(), a) {
			t.Fatalf("Dial error %q does not name %s", err, a)
		}
	}
}
