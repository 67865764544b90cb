package redisproc

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// A killed node keeps its port until Restart or Stop: a socket of the
// test's stays bound to it (so the kernel hands it to no other server),
// a connection to it is refused as by a stopped server, Restart binds it
// over the held socket, and Stop gives it back. The node is killed with
// a client connected, which leaves the port in TIME_WAIT, as in the
// tests that kill masters their clients use.
func TestKilledNodeKeepsItsPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	n := c.Nodes[0]
	conn, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	// The kill's close reaches the client, which closes in turn.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	conn.Read(make([]byte, 1))
	conn.Close()
	if err := n.Kill(); err != nil { // again: still one hold
		t.Fatal(err)
	}
	n.mu.Lock()
	held := append([]int(nil), n.held...)
	n.mu.Unlock()
	if len(held) != 1 {
		t.Fatalf("%d sockets held for the killed node, want 1 (its port)", len(held))
	}
	if sa, err := syscall.Getsockname(held[0]); err != nil || sa.(*syscall.SockaddrInet4).Port != n.Port {
		t.Fatalf("the held socket is bound to %v (%v), want port %d", sa, err, n.Port)
	}
	if _, err := net.DialTimeout("tcp", n.Addr(), time.Minute); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial the killed node: %v, want connection refused", err)
	}
	if err := n.Restart(ctx); err != nil {
		t.Fatalf("Restart over the held port: %v", err)
	}
	if err := Ping(n.Addr(), 10*time.Second); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	n.mu.Lock()
	left := len(n.held)
	n.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d sockets still held after Restart", left)
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	left = len(n.held)
	n.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d sockets still held after Stop", left)
	}
}
