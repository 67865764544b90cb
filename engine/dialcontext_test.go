package engine_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// dialCounter is a Config.Conn.DialContext that dials with next (nil: TCP)
// and counts the connections it opened per address.
type dialCounter struct {
	next  func(ctx context.Context, addr string) (net.Conn, error)
	mu    sync.Mutex
	dials map[string]int
}

func (d *dialCounter) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	d.mu.Lock()
	if d.dials == nil {
		d.dials = make(map[string]int)
	}
	d.dials[addr]++
	d.mu.Unlock()
	if d.next != nil {
		return d.next(ctx, addr)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", addr)
}

// wrap wraps c's DialContext, as set so far, to count its dials.
func (d *dialCounter) wrap(c *engine.Config) {
	d.next = c.Conn.DialContext
	c.Conn.DialContext = d.DialContext
}

func (d *dialCounter) count(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials[addr]
}

// Config.Conn.DialContext opens every connection the engine makes, the pool's
// and the release notifications', with TLS on top when Config.Conn.TLS is set:
// a Lock waiter is woken by the release's notification over it.
func TestDialContextOpensEveryConnection(t *testing.T) {
	t.Parallel()
	certs, err := redisproc.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := certs.ServerTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS, err := certs.ClientTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, s := range []authSetup{
		{"tcp", redistest.Options{}, func(*engine.Config) {}},
		{"tls", redistest.Options{TLS: serverTLS}, func(c *engine.Config) { c.Conn.TLS = clientTLS }},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			c := redistest.StartT(t, 3, s.server)
			var holderDials, waiterDials dialCounter
			slow := func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = 20*time.Second, 20*time.Second }
			holderL := authLocker(t, c, s.client, slow, func(c *engine.Config) { c.Conn.DialContext = holderDials.DialContext })
			waiterL := authLocker(t, c, s.client, slow, func(c *engine.Config) { c.Conn.DialContext = waiterDials.DialContext })
			holder, err := holderL.TryLock(ctx, "dialctx")
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan *engine.Lease, 1)
			go func() {
				ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				defer cancel()
				le, err := waiterL.Lock(ctx, "dialctx")
				if err != nil {
					t.Error(err)
				}
				got <- le
			}()
			eventually(t, 30*time.Second, "waiter subscribed and queued on every master", func() bool {
				return waiterL.Subscriptions() == 1 && queuedOn(t, c, "dialctx", 1)
			})
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			le := <-got
			if le == nil {
				t.FailNow()
			}
			if w := le.Wait(); w.Cause != engine.WakeNotified {
				t.Fatalf("wait %+v: want woken by the release notification", w)
			}
			if err := le.Release(ctx); err != nil {
				t.Fatal(err)
			}
			for _, a := range c.Addrs() {
				// The waiter's Locker: its pool's connection and its
				// pub/sub connection; the holder's: the pool's only.
				if n := waiterDials.count(a); n != 2 {
					t.Errorf("waiter's DialContext opened %d connections to %s, want 2 (pool, notifications)", n, a)
				}
				if n := holderDials.count(a); n != 1 {
					t.Errorf("holder's DialContext opened %d connections to %s, want 1 (pool)", n, a)
				}
			}
		})
	}
}
