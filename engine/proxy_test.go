package engine_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy forwards TCP from a free loopback port to a master. Each kind of
// proxy below decides what happens to a connection's bytes; the proxy and
// every connection it opened close with the test.
type proxy struct {
	ln  net.Listener
	cut func()
}

// startProxy calls serve, on its own goroutine, with each accepted client
// connection and a fresh connection to target.
func startProxy(t *testing.T, target string, serve func(client, server net.Conn)) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	cut := func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}
	t.Cleanup(cut)
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
			go serve(c, s)
		}
	}()
	return &proxy{ln: ln, cut: cut}
}

// kill cuts every connection and refuses new ones, as the death of the
// process on the client's side would.
func (p *proxy) kill() { p.cut() }

func (p *proxy) addr() string { return p.ln.Addr().String() }

// pump copies from src to dst, passing each chunk through f (nil: as is),
// until either side fails.
func pump(dst, src net.Conn, f func([]byte) []byte) {
	defer dst.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			b := buf[:n]
			if f != nil {
				b = f(b)
			}
			if _, err := dst.Write(b); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// latencyProxy delays every chunk toward the master by delay (order kept),
// and may rewrite what comes back.
type latencyProxy struct {
	*proxy
	delay atomic.Int64
}

func newLatencyProxy(t *testing.T, target string, delay time.Duration, rewrite func([]byte) []byte) *latencyProxy {
	t.Helper()
	p := &latencyProxy{}
	p.delay.Store(int64(delay))
	p.proxy = startProxy(t, target, func(c, s net.Conn) {
		go pump(c, s, rewrite)
		type chunk struct {
			at time.Time
			b  []byte
		}
		q := make(chan chunk, 1024)
		go func() {
			defer s.Close()
			for ch := range q {
				time.Sleep(time.Until(ch.at))
				if _, err := s.Write(ch.b); err != nil {
					return
				}
			}
		}()
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := c.Read(buf)
			if n > 0 {
				q <- chunk{time.Now().Add(time.Duration(p.delay.Load())), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	})
	return p
}

// dropProxy: once armed with a needle, the first chunk toward the master
// that contains it is dropped and its connection cut on both sides: the
// command is lost with the connection, which the client sees as broken,
// while later commands go out on a new connection.
type dropProxy struct {
	*proxy
	needle  atomic.Pointer[[]byte]
	dropped atomic.Bool
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	p := &dropProxy{}
	p.proxy = startProxy(t, target, func(c, s net.Conn) {
		go pump(c, s, nil)
		pump(s, c, func(b []byte) []byte {
			if nd := p.needle.Load(); nd != nil && !p.dropped.Load() && bytes.Contains(b, *nd) {
				p.dropped.Store(true)
				c.Close()
				s.Close()
				return nil
			}
			return b
		})
	})
	return p
}

// stallProxy: while stall is set, a new connection's bytes toward the
// master are held back; breakStalled closes such connections on the
// client's side only, and flushStalled then delivers what they held on
// their still-open master side.
type stallProxy struct {
	*proxy
	stall    atomic.Bool
	newConns atomic.Int32 // connections accepted after a break
	mu       sync.Mutex
	stalled  []*stalledConn
	broken   bool
}

type stalledConn struct {
	client, server net.Conn
	mu             sync.Mutex
	held           []byte
	stalling       bool
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	p := &stallProxy{}
	p.proxy = startProxy(t, target, func(c, s net.Conn) {
		sc := &stalledConn{client: c, server: s}
		p.mu.Lock()
		if p.broken {
			p.newConns.Add(1)
		}
		p.stalled = append(p.stalled, sc)
		p.mu.Unlock()
		go io.Copy(c, s)
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				sc.mu.Lock()
				if p.stall.Load() || sc.stalling {
					sc.stalling = true
					sc.held = append(sc.held, buf[:n]...)
				} else {
					s.Write(buf[:n])
				}
				sc.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	})
	return p
}

// holding reports whether a connection holds bytes back.
func (p *stallProxy) holding() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sc := range p.stalled {
		sc.mu.Lock()
		held := len(sc.held) > 0
		sc.mu.Unlock()
		if held {
			return true
		}
	}
	return false
}

func (p *stallProxy) breakStalled() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.broken = true
	for _, sc := range p.stalled {
		sc.mu.Lock()
		if sc.stalling {
			sc.client.Close()
		}
		sc.mu.Unlock()
	}
}

func (p *stallProxy) flushStalled() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sc := range p.stalled {
		sc.mu.Lock()
		if sc.stalling {
			sc.server.Write(sc.held)
			sc.held = nil
		}
		sc.mu.Unlock()
	}
}

// heldCount is how many times needle occurs in what the proxy's
// connections hold back.
func (p *stallProxy) heldCount(needle []byte) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, sc := range p.stalled {
		sc.mu.Lock()
		n += bytes.Count(sc.held, needle)
		sc.mu.Unlock()
	}
	return n
}

// resume delivers what the connections held back, in order, and lets
// what follows through: no connection stalls any more.
func (p *stallProxy) resume() {
	p.stall.Store(false)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sc := range p.stalled {
		sc.mu.Lock()
		if sc.stalling {
			sc.server.Write(sc.held)
			sc.held, sc.stalling = nil, false
		}
		sc.mu.Unlock()
	}
}
