package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A proxy stands between Lockers and one master and decides what
// happens to each connection's bytes. Against real masters it listens on
// a free loopback port; against simulated ones (simTest) it has an
// address that only the env's dialer knows (Config.Conn.DialContext) and
// carries each connection over an in-memory pipe, which a synctest
// bubble can wait on. The proxy and every connection it opened close
// with the test.
type proxy struct {
	name   string
	target func(ctx context.Context) (net.Conn, error)
	serve  func(p *proxy, client, server net.Conn)

	mu     sync.Mutex
	conns  []net.Conn
	dead   bool
	killed chan struct{} // closed by kill
	ln     net.Listener  // real masters only
}

// proxySeq numbers the simulated proxies' addresses.
var proxySeq atomic.Int64

// errProxyKilled is what a dial through a killed proxy gets, as a refused
// connection.
var errProxyKilled = &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused (proxy killed)")}

// startProxy starts a proxy to target for e: each connection a Locker
// opens to it is served by serve, given the proxy (which the caller's
// copy of the result, stored after the first connection may be served,
// is not ordered before), the Locker's side and a fresh connection to
// target.
func startProxy(e *env, target string, serve func(p *proxy, client, server net.Conn)) *proxy {
	e.t.Helper()
	p := &proxy{
		target: func(ctx context.Context) (net.Conn, error) { return e.dialMaster(ctx, target) },
		serve:  serve,
		killed: make(chan struct{}),
	}
	e.t.Cleanup(p.kill)
	if e.net != nil {
		p.name = fmt.Sprintf("proxy%d:6379", proxySeq.Add(1))
		e.addProxy(p)
		return p
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	p.ln, p.name = ln, ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if err := p.connect(context.Background(), c); err != nil {
				c.Close()
			}
		}
	}()
	return p
}

// dial opens a connection through a simulated master's proxy.
func (p *proxy) dial(ctx context.Context) (net.Conn, error) {
	mine, theirs := net.Pipe()
	if err := p.connect(ctx, mine); err != nil {
		mine.Close()
		return nil, err
	}
	return theirs, nil
}

// connect serves client, a connection to the proxy, with a new one to
// the master.
func (p *proxy) connect(ctx context.Context, client net.Conn) error {
	p.mu.Lock()
	dead := p.dead
	p.mu.Unlock()
	if dead {
		return errProxyKilled
	}
	s, err := p.target(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		s.Close()
		return errProxyKilled
	}
	p.conns = append(p.conns, client, s)
	p.mu.Unlock()
	go p.serve(p, client, s)
	return nil
}

// kill cuts every connection and refuses new ones, as the death of the
// process on the client's side would.
func (p *proxy) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.dead {
		close(p.killed)
	}
	p.dead = true
	if p.ln != nil {
		p.ln.Close()
	}
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *proxy) addr() string { return p.name }

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

func newLatencyProxy(e *env, target string, delay time.Duration, rewrite func([]byte) []byte) *latencyProxy {
	e.t.Helper()
	p := &latencyProxy{}
	p.delay.Store(int64(delay))
	p.proxy = startProxy(e, target, func(pp *proxy, c, s net.Conn) {
		go pump(c, s, rewrite)
		pp.hold(s, c, func([]byte) time.Duration { return time.Duration(p.delay.Load()) })
	})
	return p
}

// hold copies from src (a client) to dst (the master), each chunk held
// back for what delay says of it, order kept, until either side fails
// or the proxy is killed.
func (p *proxy) hold(dst, src net.Conn, delay func([]byte) time.Duration) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	q := make(chan chunk, 1024)
	go func() {
		defer dst.Close()
		for ch := range q {
			// Not past the proxy's end: a goroutine asleep would
			// outlive a simulated test's bubble.
			select {
			case <-time.After(time.Until(ch.at)):
			case <-p.killed:
				return
			}
			if _, err := dst.Write(ch.b); err != nil {
				return
			}
		}
	}()
	defer close(q)
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{time.Now().Add(delay(buf[:n])), buf[:n]}
		}
		if err != nil {
			return
		}
	}
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

func newDropProxy(e *env, target string) *dropProxy {
	e.t.Helper()
	p := &dropProxy{}
	p.proxy = startProxy(e, target, func(_ *proxy, c, s net.Conn) {
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

func newStallProxy(e *env, target string) *stallProxy {
	e.t.Helper()
	p := &stallProxy{}
	p.proxy = startProxy(e, target, func(_ *proxy, c, s net.Conn) {
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
