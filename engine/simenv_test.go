package engine_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// simTest runs f inside a testing/synctest bubble against n simulated
// masters (internal/simredis) that have been up for an hour: virtual
// time, in which whatever a test decides by the clock (timeouts, expiry,
// extension and retry schedules, quarantine windows) happens exactly
// when it is due, however loaded the machine, and waiting costs no wall
// time. The env reads as a real-master one: its Lockers, direct clients
// and proxies reach the simulated masters over in-memory connections,
// and kill, restart, pause and resume act on them; e.sim gives the rest
// of their faults (latency, partitions, clocks). The simulated masters
// have no CLIENT TRACKING, so the env's Lockers run with DisableTracking.
func simTest(t *testing.T, n int, f func(t *testing.T, e *env)) {
	t.Helper()
	simTestWith(t, n, simredis.MasterOptions{Uptime: time.Hour}, f)
}

// simTestWith is simTest with the masters' options (uptime, clock,
// latency) given.
func simTestWith(t *testing.T, n int, o simredis.MasterOptions, f func(t *testing.T, e *env)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		f(t, newSimEnv(t, n, o))
	})
}

func newSimEnv(t *testing.T, n int, o simredis.MasterOptions) *env {
	t.Helper()
	nw := simredis.NewNetwork(1)
	ms, addrs := simredis.NewMasters(nw, n, o)
	e := &env{t: t, net: nw, sim: ms, addrs: addrs}
	for _, m := range ms {
		t.Cleanup(m.Close)
	}
	dial := nw.Dialer("direct")
	for _, a := range e.addrs {
		cl, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{a}, ForceSingleClient: true, DisableCache: true,
			ClientSetInfo: rueidis.DisableClientSetInfo,
			DialCtxFn: func(ctx context.Context, addr string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
				return dial(ctx, addr)
			},
		})
		if err != nil {
			t.Fatalf("direct client %s: %v", a, err)
		}
		t.Cleanup(cl.Close)
		e.direct = append(e.direct, cl)
	}
	return e
}

// simConfig completes cfg for e's simulated masters: each Locker a client
// of the simulated network of its own (so that the network's faults can
// tell them apart), and no tracking, which the simulated masters lack.
func (e *env) simConfig(cfg *engine.Config) {
	e.mu.Lock()
	e.clients++
	client := fmt.Sprintf("c%d", e.clients)
	e.mu.Unlock()
	direct := e.net.Dialer(client)
	cfg.Conn.DialContext = func(ctx context.Context, addr string) (net.Conn, error) {
		e.mu.Lock()
		p := e.proxies[addr]
		e.mu.Unlock()
		if p != nil {
			return p.dial(ctx)
		}
		return direct(ctx, addr)
	}
	cfg.DisableTracking = true
}
