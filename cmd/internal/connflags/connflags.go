// Package connflags is the command-line face of how the tools reach Redis
// masters that want a password, an ACL user or TLS: the flags memtier and
// redis-benchmark users know (--user, -a/--pass, --tls, --cacert, --cert,
// --key, --sni, --insecure), and the password from REDISCLI_AUTH, as
// redis-cli reads it, so that it need not appear in ps.
package connflags

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// EnvPassword is the environment variable the password is taken from when
// -a/--pass is not given.
const EnvPassword = "REDISCLI_AUTH"

// Flags holds the parsed connection flags of one command.
type Flags struct {
	User     string
	Pass     string
	TLS      bool
	CACert   string
	Cert     string
	Key      string
	SNI      string
	Insecure bool
	// NoAuthWarning hides Warning, as redis-cli's --no-auth-warning does.
	NoAuthWarning bool

	fs *pflag.FlagSet
}

// names are the flags Register adds that say how to connect, in the order
// they are checked (--no-auth-warning says nothing about that).
var names = []string{"user", "pass", "tls", "cacert", "cert", "key", "sni", "insecure"}

// Register adds the connection flags to fs.
func Register(fs *pflag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.User, "user", "", "ACL user to authenticate as on the masters (with the password of -a or "+EnvPassword+")")
	fs.StringVarP(&f.Pass, "pass", "a", "", "password of the masters (requirepass, or --user's); visible in ps: prefer the environment variable "+EnvPassword)
	fs.BoolVar(&f.TLS, "tls", false, "connect to the masters over TLS")
	fs.StringVar(&f.CACert, "cacert", "", "with --tls: PEM file of the CA that signed the masters' certificates (default: the system's CAs)")
	fs.StringVar(&f.Cert, "cert", "", "with --tls: PEM client certificate, for masters that want one (with --key)")
	fs.StringVar(&f.Key, "key", "", "with --tls: PEM private key of --cert")
	fs.StringVar(&f.SNI, "sni", "", "with --tls: server name to send and verify (default: each master's host)")
	fs.BoolVar(&f.Insecure, "insecure", false, "with --tls: do not verify the masters' certificates")
	fs.BoolVar(&f.NoAuthWarning, "no-auth-warning", false, "do not warn that a password given with -a/--pass may be seen by other users")
	return f
}

// Warning is what to print on stderr, once, when the password is on the
// command line, as redis-cli warns of -a; empty otherwise. The password
// stays in ps and the shell's history, where other users can read it.
func (f *Flags) Warning() string {
	if !f.fs.Changed("pass") || f.NoAuthWarning {
		return ""
	}
	return "warning: a password given with -a/--pass may be seen by other users (ps, shell history): prefer the environment variable " +
		EnvPassword + " (--no-auth-warning hides this)"
}

// Settings is what the flags say about reaching the masters.
type Settings struct {
	Username, Password string
	// TLS is nil for plain TCP.
	TLS *tls.Config
}

// Error is a bad connection flag. Its message names the flag and why.
type Error struct {
	Flag   string // without dashes
	Reason string
}

func (e *Error) Error() string { return "--" + e.Flag + ": " + e.Reason }

func flagErr(flag, format string, a ...any) error {
	return &Error{Flag: flag, Reason: fmt.Sprintf(format, a...)}
}

// Given reports whether any connection flag is on the command line.
func (f *Flags) Given() bool {
	for _, n := range names {
		if f.fs.Changed(n) {
			return true
		}
	}
	return false
}

// Settings checks the flags and builds the credentials and TLS set-up.
// remote says whether the masters are the user's (--masters); the masters
// a tool starts itself are plain and want no password, so then a
// connection flag is an error and REDISCLI_AUTH is not read.
func (f *Flags) Settings(remote bool) (Settings, error) {
	if !remote {
		for _, n := range names {
			if f.fs.Changed(n) {
				return Settings{}, flagErr(n, "applies to --masters only: the masters started locally are plain TCP without a password")
			}
		}
		return Settings{}, nil
	}
	s := Settings{Username: f.User, Password: f.Pass}
	if !f.fs.Changed("pass") {
		s.Password = os.Getenv(EnvPassword)
	}
	if strings.ContainsAny(f.User, " \t\r\n") {
		return Settings{}, flagErr("user", "must not contain spaces or line breaks, got %s", strconv.Quote(f.User))
	}
	if f.fs.Changed("pass") && f.Pass == "" {
		return Settings{}, flagErr("pass", "is empty")
	}
	if !f.TLS {
		for _, n := range []string{"cacert", "cert", "key", "sni", "insecure"} {
			if f.fs.Changed(n) {
				return Settings{}, flagErr(n, "needs --tls")
			}
		}
		return s, nil
	}
	switch {
	case f.Cert != "" && f.Key == "":
		return Settings{}, flagErr("cert", "needs --key (the certificate's private key)")
	case f.Key != "" && f.Cert == "":
		return Settings{}, flagErr("key", "needs --cert (the client certificate)")
	case f.Insecure && f.CACert != "":
		return Settings{}, flagErr("insecure", "cannot be combined with --cacert: it skips the verification --cacert is for")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.SNI, InsecureSkipVerify: f.Insecure}
	if f.CACert != "" {
		pem, err := os.ReadFile(f.CACert)
		if err != nil {
			return Settings{}, flagErr("cacert", "cannot read the CA file: %v", pathErr(err))
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return Settings{}, flagErr("cacert", "%s holds no PEM certificate", f.CACert)
		}
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return Settings{}, flagErr("cert", "cannot load the client certificate and key (%s, %s): %v", f.Cert, f.Key, pathErr(err))
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	s.TLS = tc
	return s, nil
}

// pathErr drops the "open" of a *PathError, which names the file already.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}
