package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// mutualTLS is a new CA with its certificates, and the TLS set-up of
// masters that want a client certificate signed by it.
func mutualTLS(t *testing.T) (*redisproc.Certs, *redisproc.TLS) {
	t.Helper()
	certs, err := redisproc.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, err := certs.ServerTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	return certs, st
}

// exec takes its lock on masters that want mutual TLS and an ACL user,
// with the password from REDISCLI_AUTH, which the command inherits as
// documented; a wrong password or a missing key file fail with the cause,
// and the password shows nowhere.
func TestExecWithAuthAndTLS(t *testing.T) {
	t.Parallel()
	const secret = "pw-exec-Hq72-secret"
	certs, st := mutualTLS(t)
	c, err := redisproc.Start(context.Background(), 3, redisproc.Options{User: "job", Password: secret, TLS: st})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	// exec1's TTL: with 1s, a stall timed the release out (its node
	// timeout 50ms), which added a line to stderr.
	base := []string{"exec", "--masters", strings.Join(c.Addrs(), ","), "--ttl", execTTL.String(), "--quarantine", "observed",
		"--user", "job", "--tls", "--cacert", certs.CAFile, "--cert", certs.ClientCert}
	for _, tc := range []struct {
		name   string
		args   []string
		env    string
		status int
		out    string // stdout, or the start of stderr on failure
	}{
		{"ok", append(base, "--key", certs.ClientKey, "nightly", "--", "sh", "-c", `test -n "$REDISCLI_AUTH" && echo held $REDLOCK_RESOURCE`), secret, 0, "held nightly\n"},
		{"wrong password", append(base, "--key", certs.ClientKey, "nightly", "--", "true"), "wrong", exitUnavailable,
			`redlock: exec: too many masters unreachable for a quorum: `},
		{"cert without key", append(base, "nightly", "--", "true"), secret, exitUsage, "redlock: exec: --cert: needs --key"},
	} {
		cmd := exec.Command(binary, tc.args...)
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+tc.env)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		done := make(chan error, 1)
		go func() { done <- cmd.Run() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("%s: still running after 20s", tc.name)
		}
		got := cmd.ProcessState.ExitCode()
		if got != tc.status {
			t.Errorf("%s: status %d, want %d; stderr %s", tc.name, got, tc.status, stderr.String())
		}
		if tc.status == 0 && stdout.String() != tc.out || tc.status != 0 && !strings.HasPrefix(stderr.String(), tc.out) {
			t.Errorf("%s: stdout %q, stderr %q; want %q", tc.name, stdout.String(), stderr.String(), tc.out)
		}
		if tc.name == "wrong password" && !strings.Contains(stderr.String(), `AUTH as user "job" refused: WRONGPASS`) {
			t.Errorf("%s: stderr %q does not say why", tc.name, stderr.String())
		}
		if strings.Contains(stdout.String()+stderr.String(), secret) {
			t.Errorf("%s: the password is in the output", tc.name)
		}
	}

	// A password on the command line is warned about once, as redis-cli
	// and redlock-bench do, unless --no-auth-warning.
	for _, quiet := range []bool{false, true} {
		args := append(append([]string{}, base...), "--key", certs.ClientKey, "-a", secret)
		if quiet {
			args = append(args, "--no-auth-warning")
		}
		cmd := exec.Command(binary, append(args, "nightly", "--", "true")...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("-a (quiet %v): %v; stderr %s", quiet, err, stderr.String())
		}
		want := "redlock: warning: a password given with -a/--pass may be seen by other users"
		if quiet && stderr.String() != "" || !quiet && (!strings.HasPrefix(stderr.String(), want) || strings.Count(stderr.String(), "\n") != 1) {
			t.Errorf("-a (--no-auth-warning %v): stderr %q, want %s", quiet, stderr.String(), map[bool]string{false: "one line " + want, true: "nothing"}[quiet])
		}
	}
}

// A credential or TLS mistake fails with 69 and one line that names the
// masters once per cause and the fix once, in exec's flags; the password
// shows nowhere.
func TestConnectionMistakesNameTheFix(t *testing.T) {
	t.Parallel()
	const secret = "pw-mistake-Zk31-secret"
	certs, st := mutualTLS(t)
	foreign, _ := mutualTLS(t) // a client certificate of another CA
	withPass := strings.Join(redistest.StartT(t, 3, redistest.Options{Password: secret}).Addrs(), ",")
	withTLS := strings.Join(redistest.StartT(t, 3, redistest.Options{TLS: st}).Addrs(), ",")
	plain := strings.Join(masters, ",")
	for _, tc := range []struct {
		name string
		args []string
		env  string // REDISCLI_AUTH
		fix  string
	}{
		{"no password", []string{"--masters", withPass}, "", "the masters want a password: set REDISCLI_AUTH (or give -a/--pass), with --user for an ACL user"},
		{"wrong password", []string{"--masters", withPass}, "wrong", "the password from REDISCLI_AUTH was refused: check it, and give --user if it is an ACL user's"},
		{"wrong -a", []string{"--masters", withPass, "-a", "wrong", "--no-auth-warning"}, "", "the password from -a/--pass was refused"},
		{"unknown user", []string{"--masters", withPass, "--user", "nobody"}, secret, `--user "nobody" with the password from REDISCLI_AUTH was refused: check both`},
		{"password to a master without", []string{"--masters", plain}, secret, "the masters want no password: unset REDISCLI_AUTH"},
		{"-a to a master without", []string{"--masters", plain, "-a", secret, "--no-auth-warning"}, "", "the masters want no password: drop -a/--pass"},
		{"--tls to plain", []string{"--masters", plain, "--tls"}, "", "the masters do not answer TLS on these ports: drop --tls, or give their TLS ports"},
		{"plain to TLS", []string{"--masters", withTLS}, "", "the masters close plain connections: if they serve TLS, add --tls"},
		{"no client certificate", []string{"--masters", withTLS, "--tls", "--cacert", certs.CAFile}, "", "the masters want a client certificate: give --cert and --key"},
		{"unknown CA", []string{"--masters", withTLS, "--tls", "--cert", certs.ClientCert, "--key", certs.ClientKey}, "",
			"the masters' certificates are not signed by a CA that redlock trusts: give that CA's certificate with --cacert"},
		{"foreign client certificate", []string{"--masters", withTLS, "--tls", "--cacert", certs.CAFile, "--cert", foreign.ClientCert, "--key", foreign.ClientKey}, "",
			"the masters refuse the client certificate: give with --cert and --key one signed by a CA they trust"},
		{"wrong name", []string{"--masters", withTLS, "--tls", "--cacert", certs.CAFile, "--cert", certs.ClientCert, "--key", certs.ClientKey, "--sni", "example.com"}, "",
			"the masters' certificates are not valid for the name redlock checks: give --sni with one they are valid for"},
	} {
		cmd := exec.Command(binary, append(append([]string{"exec", "--ttl", "1s", "--quarantine", "observed"}, tc.args...), "r", "--", "echo", "must-not-run")...)
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+tc.env)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		e := stderr.String()
		if status := cmd.ProcessState.ExitCode(); status != exitUnavailable || stdout.Len() != 0 {
			t.Errorf("%s: status %d, stdout %q; want %d", tc.name, status, stdout.String(), exitUnavailable)
		}
		if !strings.HasPrefix(e, "redlock: exec: ") || strings.Count(e, "\n") != 1 || strings.Count(e, tc.fix) != 1 ||
			strings.Contains(e, "engine: ") || strings.Contains(e, secret) {
			t.Errorf("%s: stderr %q\nwant one line with, once: %s", tc.name, e, tc.fix)
		}
	}
}
