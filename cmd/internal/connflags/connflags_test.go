package connflags_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/cmd/internal/connflags"
	"github.com/redlock-bench/redlock/internal/redisproc"
)

func parse(t *testing.T, args ...string) *connflags.Flags {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := connflags.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return f
}

func TestSettings(t *testing.T) {
	certs, err := redisproc.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(connflags.EnvPassword, "")

	s, err := parse(t, "--user", "alice", "-a", "pw").Settings(true)
	if err != nil || s.Username != "alice" || s.Password != "pw" || s.TLS != nil {
		t.Errorf("--user alice -a pw: %+v, %v", s, err)
	}
	s, err = parse(t, "--tls", "--cacert", certs.CAFile, "--cert", certs.ClientCert, "--key", certs.ClientKey, "--sni", "redis.internal").Settings(true)
	if err != nil || s.TLS == nil || s.TLS.RootCAs == nil || len(s.TLS.Certificates) != 1 || s.TLS.ServerName != "redis.internal" || s.TLS.InsecureSkipVerify {
		t.Errorf("full TLS: %+v, %v", s.TLS, err)
	}
	s, err = parse(t, "--tls", "--insecure").Settings(true)
	if err != nil || s.TLS == nil || !s.TLS.InsecureSkipVerify || s.TLS.RootCAs != nil {
		t.Errorf("--tls --insecure: %+v, %v", s.TLS, err)
	}

	// The password comes from REDISCLI_AUTH unless -a is given.
	t.Setenv(connflags.EnvPassword, "from-env")
	if s, _ := parse(t).Settings(true); s.Password != "from-env" {
		t.Errorf("password with %s set: %q", connflags.EnvPassword, s.Password)
	}
	if s, _ := parse(t, "--pass", "flag").Settings(true); s.Password != "flag" {
		t.Errorf("-a beside %s: %q, want the flag's", connflags.EnvPassword, s.Password)
	}
	// ... and not for the tool's own local masters.
	if s, err := parse(t).Settings(false); err != nil || s.Password != "" {
		t.Errorf("local masters with %s set: %+v, %v", connflags.EnvPassword, s, err)
	}

	// -a is warned about, as redis-cli does, unless --no-auth-warning;
	// REDISCLI_AUTH is not.
	if w := parse(t, "-a", "pw").Warning(); !strings.Contains(w, "-a/--pass") || !strings.Contains(w, connflags.EnvPassword) || strings.Contains(w, "pw ") {
		t.Errorf("warning of -a: %q", w)
	}
	for _, args := range [][]string{{"-a", "pw", "--no-auth-warning"}, {}, {"--user", "u"}} {
		if w := parse(t, args...).Warning(); w != "" {
			t.Errorf("%q: warning %q, want none", args, w)
		}
	}

	if s, err := parse(t, "--user", "u", "--tls", "--insecure").Settings(true); err != nil || s.Username != "u" || s.Password != "from-env" || s.TLS == nil {
		t.Errorf("Settings: %+v, %v", s, err)
	}

	bad := filepath.Join(t.TempDir(), "notpem")
	if err := os.WriteFile(bad, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		remote bool
		want   string
	}{
		{[]string{"--cacert", certs.CAFile}, true, "--cacert: needs --tls"},
		{[]string{"--insecure"}, true, "--insecure: needs --tls"},
		{[]string{"--tls", "--cert", certs.ClientCert}, true, "--cert: needs --key"},
		{[]string{"--tls", "--key", certs.ClientKey}, true, "--key: needs --cert"},
		{[]string{"--tls", "--cacert", "/no/such/ca.pem"}, true, "--cacert: cannot read the CA file: /no/such/ca.pem: no such file"},
		{[]string{"--tls", "--cacert", bad}, true, "--cacert: " + bad + " holds no PEM certificate"},
		{[]string{"--tls", "--cert", certs.ClientCert, "--key", certs.ServerKey}, true, "--cert: cannot load the client certificate and key"},
		{[]string{"--tls", "--insecure", "--cacert", certs.CAFile}, true, "--insecure: cannot be combined with --cacert"},
		{[]string{"--user", "a b"}, true, "--user: must not contain spaces"},
		{[]string{"-a", ""}, true, "--pass: is empty"},
		{[]string{"--tls"}, false, "--tls: applies to --masters only"},
		{[]string{"-a", "pw"}, false, "--pass: applies to --masters only"},
	} {
		_, err := parse(t, tc.args...).Settings(tc.remote)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") && !strings.Contains(tc.want, "pw") {
			t.Errorf("%q: the error %q shows the password", tc.args, err)
		}
	}
}
