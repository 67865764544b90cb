package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// secret is the masters' password: long and odd enough that finding it in
// a file is no accident.
const secret = "pw-Zq81xK0vT7-secret"

// tlsMasters starts three masters that want mutual TLS and the ACL user
// "bench" with secret, and returns them with their certificates.
func tlsMasters(t *testing.T) (*redistest.Cluster, *redisproc.Certs) {
	t.Helper()
	certs, err := redisproc.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, err := certs.ServerTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	return redistest.StartT(t, 3, redistest.Options{User: "bench", Password: secret, TLS: st}), certs
}

// noSecret fails the test if the password is in any file under dir or in
// the command's output.
func noSecret(t *testing.T, dir string, outputs ...string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the password", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outputs {
		if strings.Contains(o, secret) {
			t.Errorf("the output shows the password: %q", o)
		}
	}
}

// A run reaches masters that want TLS with a client certificate and an
// ACL user, through the flags or with the password from REDISCLI_AUTH, with
// the redlock engine and every baseline; the password is in none of
// the run's files nor its output.
func TestRunWithAuthAndTLS(t *testing.T) {
	c, certs := tlsMasters(t)
	tlsFlags := []string{"--tls", "--cacert", certs.CAFile, "--cert", certs.ClientCert, "--key", certs.ClientKey}
	for _, tc := range []struct {
		engine string
		env    bool // the password from REDISCLI_AUTH rather than -a
		hush   bool // --no-auth-warning
	}{
		{"redlock", false, false},
		{"redlock", true, false},
		{"redsync-rueidis", true, false},
		{"redsync-goredis", false, true},
		{"rueidislock", false, true},
		{"bsm-redislock", true, false},
	} {
		name := tc.engine + map[bool]string{true: "-env", false: "-flag"}[tc.env]
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			args := append([]string{"run", "--masters", strings.Join(c.Addrs(), ","), "--engine", tc.engine,
				"--quarantine", "observed", "--workers", "4", "--resources", "20", "--duration", "1s", "--warmup", "0",
				"--out", out, "--user", "bench"}, tlsFlags...)
			if !tc.env {
				args = append(args, "-a", secret)
			}
			if tc.hush {
				args = append(args, "--no-auth-warning")
			}
			if tc.engine == "redlock" && tc.env {
				// stall speaks to a master directly, with the credentials.
				args = append(args, "--fault", "stall:0@200ms+200ms")
			}
			cmd := command(t, args...)
			cmd.Env = append(os.Environ(), "REDISCLI_AUTH=")
			if tc.env {
				cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+secret)
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("exit %d: %s", exitStatus(err), stderr.String())
			}
			for _, f := range []string{"summary.json", "summary.txt"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Error(err)
				}
			}
			s := readSummary(t, out)
			if s["acquired"].(float64) == 0 {
				t.Errorf("acquired nothing: %v", s)
			}
			// Enough to rerun, and to tell a TLS run's latency from a
			// plain one's: the user and TLS are in the config, the
			// password is not.
			if cfg := s["config"].(map[string]any); cfg["tls"] != true || cfg["user"] != "bench" || cfg["insecure"] != false || cfg["sni"] != "" {
				t.Errorf("config %v: want tls true, user bench, insecure false, sni empty", cfg)
			}
			if tc.engine == "redlock" && tc.env {
				if f, _ := s["faults"].([]any); len(f) != 1 || f[0].(map[string]any)["via"] != "CLIENT PAUSE" || f[0].(map[string]any)["error"] != nil {
					t.Errorf("faults %v: want one stall by CLIENT PAUSE, without error", s["faults"])
				}
			}
			for _, bad := range []string{"NOAUTH", "WRONGPASS", "tls:"} {
				if strings.Contains(stderr.String(), bad) {
					t.Errorf("stderr mentions %s: %s", bad, stderr.String())
				}
			}
			// As redis-cli, a password on the command line is warned
			// about, once, unless --no-auth-warning.
			warned := strings.Count(stderr.String(), "redlock-bench: warning: a password given with -a/--pass")
			if want := map[bool]int{true: 1, false: 0}[!tc.env && !tc.hush]; warned != want {
				t.Errorf("%d warnings about -a, want %d: %s", warned, want, stderr.String())
			}
			noSecret(t, out, stdout.String(), stderr.String())
		})
	}
	// The run removed its keys from the masters it was given, which takes
	// the credentials too.
	for _, n := range c.Nodes {
		if got, err := n.Conn().Do(context.Background(), n.Addr(), 2*time.Second, "DBSIZE"); err != nil || got != ":0" {
			t.Errorf("DBSIZE on %s after the runs = %q, %v", n.Addr(), got, err)
		}
	}
}

// Wrong credentials fail the run at start with the master's address and
// the server's refusal; bad flag combinations exit 2 with one line that
// names the flag. The password shows in none of them.
func TestRunAuthErrors(t *testing.T) {
	c, certs := tlsMasters(t)
	other, err := redisproc.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	masters := strings.Join(c.Addrs(), ",")
	tlsFlags := []string{"--tls", "--cacert", certs.CAFile, "--cert", certs.ClientCert, "--key", certs.ClientKey}
	// Masters that want the default user's password, and one plain master
	// that wants none, beside two TLS ones: --tls on some masters only.
	pw := redistest.StartT(t, 3, redistest.Options{Password: secret})
	plain := redistest.StartT(t, 1)
	mixed := strings.Join([]string{c.Addrs()[0], plain.Addrs()[0], c.Addrs()[1]}, ",")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // in the last line of stderr
	}{
		{"wrong password", append([]string{"run", "--masters", masters, "--user", "bench", "-a", "wrong-" + secret}, tlsFlags...),
			1, []string{c.Addrs()[0], `AUTH as user "bench" refused: WRONGPASS`}},
		{"ACL user's password without --user", append([]string{"run", "--masters", masters, "-a", secret}, tlsFlags...),
			1, []string{`AUTH as the default user refused: WRONGPASS`, "if the password is an ACL user's, give --user"}},
		{"unknown user", append([]string{"run", "--masters", masters, "--user", "nobody", "-a", secret}, tlsFlags...),
			1, []string{c.Addrs()[1], `AUTH as user "nobody" refused`}},
		{"wrong CA", []string{"run", "--masters", masters, "--user", "bench", "-a", secret, "--tls", "--cacert", other.CAFile,
			"--cert", certs.ClientCert, "--key", certs.ClientKey}, 1, []string{c.Addrs()[2], "certificate signed by unknown authority"}},
		{"no password", []string{"run", "--masters", strings.Join(pw.Addrs(), ",")},
			1, []string{"3 of 3 masters unreachable: " + strings.Join(pw.Addrs(), ", ") + " (the master wants a password: give -a/--pass or REDISCLI_AUTH"}},
		{"no password, redsync", []string{"run", "--masters", strings.Join(pw.Addrs(), ","), "--engine", "redsync-goredis"},
			1, []string{pw.Addrs()[0], "the master wants a password: give -a/--pass or REDISCLI_AUTH"}},
		{"wrong requirepass", []string{"run", "--masters", strings.Join(pw.Addrs(), ","), "-a", "wrong-" + secret, "--engine", "redsync-rueidis"},
			1, []string{pw.Addrs()[1], "AUTH as the default user refused: WRONGPASS"}},
		{"password to a master without one", []string{"run", "--masters", plain.Addrs()[0], "-a", secret},
			1, []string{plain.Addrs()[0], "the master wants no password: drop -a/--pass and " + "REDISCLI_AUTH"}},
		{"plain to TLS", []string{"run", "--masters", masters, "--user", "bench", "-a", secret},
			1, []string{"3 of 3 masters", c.Addrs()[0], "the master serves TLS on this port: add --tls"}},
		{"TLS to plain", append([]string{"run", "--masters", mixed, "--user", "bench", "-a", secret}, tlsFlags...),
			1, []string{"1 of 3 masters", plain.Addrs()[0], "the master serves plain TCP on this port, not TLS"}},
		{"no client certificate", []string{"run", "--masters", masters, "--user", "bench", "-a", secret, "--tls", "--cacert", certs.CAFile},
			1, []string{"3 of 3 masters", c.Addrs()[0], "without a client certificate: give --cert and --key"}},
		{"cert without key", []string{"run", "--masters", masters, "-a", secret, "--tls", "--cert", certs.ClientCert},
			2, []string{"--cert: needs --key"}},
		{"unreadable CA", []string{"run", "--masters", masters, "--tls", "--cacert", "/no/such/ca.pem"},
			2, []string{"--cacert: cannot read the CA file: /no/such/ca.pem: no such file or directory"}},
		{"cacert without tls", []string{"run", "--masters", masters, "--cacert", certs.CAFile}, 2, []string{"--cacert: needs --tls"}},
		{"local masters", []string{"run", "-a", secret}, 2, []string{"--pass: applies to --masters only"}},
		{"sweep local masters", []string{"sweep", "--workers", "1,2", "--tls"}, 2, []string{"--tls: applies to --masters only"}},
		{"compare limit", []string{"compare", "--masters", masters, "--limit", "-a", secret}, 2, []string{"--limit: is not available with --user, --pass or --tls"}},
		{"chaos local masters", []string{"chaos", "--user", "bench"}, 2, []string{"--user: applies to --masters only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := command(t, tc.args...)
			cmd.Env = append(os.Environ(), "REDISCLI_AUTH=")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := runWithin(t, cmd)
			last := lastLine(stderr.String())
			if code := exitStatus(err); code != tc.code {
				t.Errorf("exit %d, want %d: %s", code, tc.code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Errorf("last line %q: want %q", last, w)
				}
			}
			// At start: before the failure, nothing but the warning about
			// -a (no progress, no wait for a quorum, no retry).
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			for _, l := range lines[:len(lines)-1] {
				if !strings.HasPrefix(l, "redlock-bench: warning: a password given with -a/--pass ") {
					t.Errorf("stderr before the failure: %q", l)
				}
			}
			noSecret(t, cmd.Dir, stdout.String(), stderr.String())
		})
	}
}

// A chaos soak on masters that want TLS and an ACL user: the engine
// reaches them through its fault proxies (verifying the masters' host, not
// the proxies'), the nemesis's own commands authenticate (no fault
// errors), and the password is in none of its files.
func TestChaosWithAuthAndTLS(t *testing.T) {
	c, certs := tlsMasters(t)
	out := filepath.Join(t.TempDir(), "chaos")
	cmd := command(t, "chaos", "--masters", strings.Join(c.Addrs(), ","), "--duration", "2s", "--ttl", "500ms", "--seed", "3",
		"--quarantine", "observed", "--out", out, "--user", "bench",
		"--tls", "--cacert", certs.CAFile, "--cert", certs.ClientCert, "--key", certs.ClientKey)
	cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+secret)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %d: %s\n%s", exitStatus(err), stdout.String(), stderr.String())
	}
	r := readChaos(t, out)
	if !r.Passed || r.Acquired == 0 || totalFaults(r) == 0 || len(r.FaultErrors) > 0 {
		t.Errorf("verdict %s, %d acquired, faults %v, fault errors %v", r.Verdict, r.Acquired, r.Faults, r.FaultErrors)
	}
	// The replay runs on the same masters, as the same user, over TLS, with
	// the same quarantine: on local masters it would draw other faults.
	want := " --quarantine observed --masters " + strings.Join(c.Addrs(), ",") + " --user bench --tls"
	if !strings.Contains(stdout.String(), want) {
		t.Errorf("the replay line lacks %q:\n%s", want, stdout.String())
	}
	noSecret(t, out, stdout.String(), stderr.String())
}

// A comparison carries the credentials to every engine and run, and writes
// the password in none of its files.
func TestCompareWithAuthAndTLS(t *testing.T) {
	c, certs := tlsMasters(t)
	out := filepath.Join(t.TempDir(), "cmp")
	cmd := command(t, "compare", "--engines", "redlock,redsync-goredis", "--masters", strings.Join(c.Addrs(), ","),
		"--quarantine", "observed", "--workers", "4", "--ops", "200", "--warmup", "0", "--label", "auth", "--out", out,
		"--user", "bench", "--tls", "--cacert", certs.CAFile, "--cert", certs.ClientCert, "--key", certs.ClientKey)
	cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+secret)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %d: %s", exitStatus(err), stderr.String())
	}
	runs, err := filepath.Glob(filepath.Join(out, "*", "summary.json"))
	if err != nil || len(runs) < 2 {
		t.Fatalf("run summaries %v, %v", runs, err)
	}
	noSecret(t, out, stdout.String(), stderr.String())
}
