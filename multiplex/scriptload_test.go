package multiplex_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// turnCounter is an Options.DialContext whose connections count round
// trips: a write after the connection read a reply counts as a new one.
type turnCounter struct {
	mu    sync.Mutex
	turns int
}

func (tc *turnCounter) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &turnConn{Conn: c, tc: tc, read: true}, nil
}

func (tc *turnCounter) count() int {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.turns
}

type turnConn struct {
	net.Conn
	tc   *turnCounter
	read bool // read since the last write; under tc.mu
}

func (c *turnConn) Write(b []byte) (int, error) {
	c.tc.mu.Lock()
	if c.read {
		c.tc.turns++
		c.read = false
	}
	c.tc.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *turnConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.tc.mu.Lock()
		c.read = true
		c.tc.mu.Unlock()
	}
	return n, err
}

// Connecting loads every script in one round trip, however many there
// are: a Locker's scripts (its multi-resource forms included) cost a
// connect no more round trips than one script does. (Loaded one by one,
// twelve scripts took eleven round trips more than one.)
func TestConnectLoadsScriptsInOneRoundTrip(t *testing.T) {
	c := redistest.StartT(t, 1)
	connect := func(scripts []*multiplex.Script) int {
		var tc turnCounter
		p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: c.Addrs(), Quarantine: quarantine.Off,
			NodeTimeout: 2 * time.Second, Scripts: scripts, DialContext: tc.DialContext})
		if err != nil {
			t.Fatal(err)
		}
		n := tc.count()
		p.Close()
		return n
	}
	one := []*multiplex.Script{multiplex.NewScript(`return 0`)}
	var many []*multiplex.Script
	for i := range 12 {
		many = append(many, multiplex.NewScript(`return `+strconv.Itoa(i+1)))
	}
	if a, b := connect(one), connect(many); a != b {
		t.Fatalf("a connect took %d round trips with one script, %d with %d: the scripts are not loaded together", a, b, len(many))
	}
}
