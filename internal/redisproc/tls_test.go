package redisproc_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
)

// Servers started with a password, an ACL user or TLS want them: a client
// without them is refused, one with them is served, and Restart comes back
// with the same requirements (its readiness check authenticates).
func TestAuthAndTLSServers(t *testing.T) {
	certs, err := redisproc.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mtls, err := certs.ServerTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	noCert, err := certs.ClientTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const d = 2 * time.Second
	for _, tc := range []struct {
		name string
		opts redisproc.Options
		// bad are connections the server must refuse, with a word of the
		// expected error (alternatives separated by |).
		bad map[string]redisproc.Conn
	}{
		{"requirepass", redisproc.Options{Password: "pw1"}, map[string]redisproc.Conn{
			"NOAUTH":    {},
			"WRONGPASS": {Password: "nope"},
		}},
		{"acl-user", redisproc.Options{User: "alice", Password: "pw2"}, map[string]redisproc.Conn{
			"NOAUTH":     {},
			"WRONGPASS":  {Username: "bob", Password: "pw2"},
			"WRONGPASS ": {Password: "pw2"}, // the default user is off
		}},
		{"mtls+password", redisproc.Options{Password: "pw3", TLS: mtls}, map[string]redisproc.Conn{
			// The server drops plain TCP to a TLS port, and a TLS 1.3
			// client without a certificate, after the handshake.
			"reset":                      {Password: "pw3"},
			"reset|certificate required": {Password: "pw3", TLS: noCert},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t, 1, tc.opts)
			n := c.Nodes[0]
			good := n.Conn()
			if got, err := good.Do(ctx, n.Addr(), d, "SET", "k", "v"); err != nil || got != "+OK" {
				t.Fatalf("SET with the node's credentials = %q, %v", got, err)
			}
			for want, conn := range tc.bad {
				_, err := conn.Do(ctx, n.Addr(), d, "GET", "k")
				if err == nil || !slices.ContainsFunc(strings.Split(strings.TrimSpace(want), "|"), func(w string) bool {
					return strings.Contains(err.Error(), w)
				}) {
					t.Errorf("GET as %q: %v, want an error with %q", conn.Username, err, want)
				}
			}
			if err := n.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			if got, err := good.Do(ctx, n.Addr(), d, "EXISTS", "k"); err != nil || got != ":0" {
				t.Errorf("EXISTS after restart = %q, %v; want :0", got, err)
			}
			if v, err := good.Version(ctx, n.Addr(), d); err != nil || v == "unknown" {
				t.Errorf("Version = %q, %v", v, err)
			}
		})
	}
}

func TestStartRejectsBadAuthOptions(t *testing.T) {
	for _, o := range []redisproc.Options{
		{User: "alice"},
		{Password: "two words"},
		{TLS: &redisproc.TLS{CertFile: "relative.pem"}},
	} {
		if c, err := redisproc.Start(context.Background(), 1, o); err == nil {
			c.Stop()
			t.Errorf("Start(%+v) succeeded", o)
		}
	}
}
