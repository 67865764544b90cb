package masters

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/internal/redisproc"
)

// bannerServer accepts connections and writes banner on each, as an SSH
// server greets its clients, then closes them.
func bannerServer(t *testing.T, banner string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(banner))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// A master's address where another server listens is named as not a Redis
// server, with what it answered, rather than diagnosed as a TLS mismatch
// (an HTTPS server: "the master serves TLS on this port: add --tls") or
// left as the client's "received unknown message type: 72".
func TestProbeNamesANonRedisServer(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewUnstartedServer(handler)
	secure.Config.ErrorLog = log.New(io.Discard, "", 0) // the probes' failed handshakes
	secure.StartTLS()
	defer secure.Close()
	insecure := &tls.Config{InsecureSkipVerify: true}
	for _, c := range []struct {
		name string
		addr string
		conn redisproc.Conn
		want []string
	}{
		{"http", plain.Listener.Addr().String(), redisproc.Conn{}, []string{"not a Redis server", `"HTTP/1.1 400 Bad Request"`, "an HTTP server"}},
		{"https", secure.Listener.Addr().String(), redisproc.Conn{}, []string{"not a Redis server", "speaks TLS", `"HTTP/1.1 400 Bad Request"`, "an HTTPS server"}},
		{"https --tls", secure.Listener.Addr().String(), redisproc.Conn{TLS: insecure}, []string{"not a Redis server", `"HTTP/1.1 400 Bad Request"`, "an HTTPS server"}},
		{"ssh", bannerServer(t, "SSH-2.0-OpenSSH_9.6\r\n"), redisproc.Conn{}, []string{"not a Redis server", `"SSH-2.0-OpenSSH_9.6"`}},
	} {
		_, err := Probe(context.Background(), c.conn, []string{c.addr})
		if err == nil {
			t.Errorf("%s: probe succeeded", c.name)
			continue
		}
		msg := err.Error()
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", c.name, msg, w)
			}
		}
		if strings.Contains(msg, "add --tls") || strings.Contains(msg, "drop --tls") || strings.Contains(msg, "unknown message type") {
			t.Errorf("%s: %q misdiagnoses the server", c.name, msg)
		}
	}
}

// A master that accepts connections but never answers (a stopped process,
// a wedged server) fails the probe on its timeout, named with that cause.
// The listener never answers, so the probe fails however fast or slow the
// machine is; the test takes ProbeTimeout.
func TestProbeNamesAMasterThatDoesNotAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // read by the test once Accept has failed
		}
	}()
	addr := ln.Addr().String()
	_, err = Probe(context.Background(), redisproc.Conn{}, []string{addr})
	ln.Close()
	<-accepted
	want := "1 of 1 masters unreachable: " + addr + " (no reply within " + ProbeTimeout.String() + ": i/o timeout)"
	if err == nil || err.Error() != want {
		t.Errorf("probe of a silent master: %v, want %q", err, want)
	}
}
