package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/engine"
)

// A master's address where another server listens (HTTP, HTTPS, SSH) is
// named alike by the library (engine.New), redlock exec and redlock-bench:
// "not a Redis server", with what it answered, and no flag to change, as
// the three would otherwise each guess (an "unexpected reply", a
// "does the master want TLS?", "add --tls").
func TestNotARedisServerSaidAlike(t *testing.T) {
	t.Parallel()
	benchBinary := filepath.Join(t.TempDir(), "redlock-bench")
	build := exec.Command("go", "build", "-o", benchBinary, "../redlock-bench")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build redlock-bench: %v\n%s", err, out)
	}

	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewUnstartedServer(handler)
	secure.Config.ErrorLog = log.New(io.Discard, "", 0) // the plain probes' failed handshakes
	secure.StartTLS()
	defer secure.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: secure.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(secure.Certificate())

	const (
		httpAnswer = `"HTTP/1.1 400 Bad Request"`
		check      = ": check the address and port"
	)
	for _, c := range []struct {
		name string
		addr string
		tls  bool
		want string
	}{
		{"http", plain.Listener.Addr().String(), false,
			`not a Redis server: it answered a Redis command with ` + httpAnswer + `, as an HTTP server does` + check},
		{"http --tls", plain.Listener.Addr().String(), true,
			`not a Redis server: it answered a Redis command with ` + httpAnswer + `, as an HTTP server does` + check},
		// An HTTPS server is TLS-only: it drops a plain connection.
		{"https", secure.Listener.Addr().String(), false,
			`not a Redis server: it speaks TLS and answered a Redis command with ` + httpAnswer + `, as an HTTPS server does` + check},
		{"https --tls", secure.Listener.Addr().String(), true,
			`not a Redis server: it speaks TLS and answered a Redis command with ` + httpAnswer + `, as an HTTPS server does` + check},
		// Python's http.server answers a request line without a version
		// with the page alone, as HTTP/0.9 did.
		{"html page", lineServer(t, "<!DOCTYPE HTML>\n<html lang=\"en\">\n"), false,
			`not a Redis server: it answered a Redis command with "<!DOCTYPE HTML>", as an HTTP server does` + check},
		{"ssh", bannerServer(t, "SSH-2.0-OpenSSH_9.6\r\n"), false,
			`not a Redis server: it answered a Redis command with "SSH-2.0-OpenSSH_9.6"` + check},
	} {
		t.Run(c.name, func(t *testing.T) {
			cause := regexp.MustCompile(regexp.QuoteMeta(c.addr) + ` \((not a Redis server: .*` + check + `)\)`)
			said := map[string]string{}

			cfg := engine.DefaultConfig(c.addr)
			if c.tls {
				cfg.Conn.TLS = &tls.Config{RootCAs: roots}
			}
			l, err := engine.New(context.Background(), cfg)
			if err == nil {
				l.Close()
				t.Fatal("engine.New succeeded")
			}
			said["engine.New"] = err.Error()

			tlsArgs := []string{}
			if c.tls {
				tlsArgs = []string{"--tls", "--cacert", caFile}
			}
			for _, run := range []struct {
				cmd    *exec.Cmd
				status int
			}{
				{exec.Command(binary, append(append([]string{"exec", "--masters", c.addr}, tlsArgs...), "r", "--", "true")...), exitUnavailable},
				{exec.Command(benchBinary, append([]string{"run", "--masters", c.addr, "--duration", "1s", "--out", filepath.Join(t.TempDir(), "run")}, tlsArgs...)...), 1},
			} {
				out, _ := run.cmd.CombinedOutput()
				who := filepath.Base(run.cmd.Path)
				if status := run.cmd.ProcessState.ExitCode(); status != run.status {
					t.Errorf("%s: status %d, want %d", who, status, run.status)
				}
				said[who] = strings.TrimSuffix(string(out), "\n")
			}

			for who, msg := range said {
				m := cause.FindStringSubmatch(msg)
				switch {
				case m == nil:
					t.Errorf("%s: %q\nnames no %s (%s)", who, msg, c.addr, c.want)
				case m[1] != c.want:
					t.Errorf("%s: %q\nwant %q", who, m[1], c.want)
				case !strings.HasSuffix(msg, m[0]):
					t.Errorf("%s: %q\nadds to the cause (a flag to change?)", who, msg)
				}
			}
		})
	}
}

// bannerServer accepts connections and writes banner on each, as an SSH
// server greets its clients, then closes them.
func bannerServer(t *testing.T, banner string) string {
	return server(t, func(c net.Conn) { c.Write([]byte(banner)) })
}

// lineServer answers the first line it reads on each connection with
// answer, then closes the connection.
func lineServer(t *testing.T, answer string) string {
	return server(t, func(c net.Conn) {
		if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
			c.Write([]byte(answer))
		}
	})
}

// server serves each connection with serve on a loopback port until the
// test ends, closing the connection after it.
func server(t *testing.T, serve func(net.Conn)) string {
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
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}
