//go:build linux

package multiplex

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
)

// A TLS 1.3 master that refuses the client's certificate does so after
// the client's side of the handshake is over: it sends its alert and
// resets the connection. A write after the reset fails with the reset,
// which says nothing of the certificate; writeOrAlert returns the alert,
// which was there to read before the reset came. Whether the first write
// comes before the reset or after is timing: here it comes after, every
// time (the test waits for the reset), and a plain Write beside it fails
// as the user's did then, without the alert ("connection reset by peer",
// or "broken pipe" here, where the wait has read the socket's error).
func TestWriteAfterARefusedCertificateSaysWhy(t *testing.T) {
	certs, err := redisproc.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := redisproc.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	serverCert, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(certs.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	clientTLS, err := certs.ClientTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tls.LoadX509KeyPair(foreign.ClientCert, foreign.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS.Certificates = []tls.Certificate{other}
	clientTLS.ServerName = "localhost"

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, fixed := range []bool{true, false} {
		refused := make(chan error, 1)
		go func() {
			raw, err := l.Accept()
			if err != nil {
				refused <- err
				return
			}
			err = tls.Server(raw, serverTLS).Handshake() // sends the alert
			raw.(*net.TCPConn).SetLinger(0)              // then a reset, as Redis's close with unread data
			raw.Close()
			refused <- err
		}()
		raw, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn := tls.Client(raw, clientTLS)
		conn.SetDeadline(time.Now().Add(time.Minute))
		if err := conn.Handshake(); err != nil {
			t.Fatalf("the client's side of a TLS 1.3 handshake ends before the server's verdict, yet: %v", err)
		}
		if err := <-refused; err == nil {
			t.Fatal("the server accepted a certificate of another CA")
		}
		awaitReset(t, raw.(*net.TCPConn))
		if fixed {
			err = writeOrAlert(conn, respCommand("INFO", "server"))
		} else {
			_, err = conn.Write(respCommand("INFO", "server"))
		}
		alert := err != nil && strings.Contains(err.Error(), "remote error: tls: ")
		switch {
		case fixed && !alert:
			t.Errorf("writeOrAlert after the reset: %v; want the server's alert", err)
		case !fixed && (err == nil || alert):
			t.Errorf("a plain write after the reset: %v; want the reset, which the alert must replace", err)
		}
		t.Logf("fixed %v: %v", fixed, err)
		conn.Close()
	}
}

// awaitReset returns once the connection's reset has reached the client's
// socket, which then holds the alert sent before it.
func awaitReset(t *testing.T, c *net.TCPConn) {
	t.Helper()
	sc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	// Nothing tells a process that a reset has landed but the socket's
	// pending error: poll it.
	for {
		var soErr int
		sc.Control(func(fd uintptr) { soErr, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_ERROR) })
		if errors.Is(syscall.Errno(soErr), syscall.ECONNRESET) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reset within a minute (SO_ERROR %d)", soErr)
		}
		time.Sleep(time.Millisecond)
	}
}
