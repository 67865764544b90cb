// Package redisproc starts and controls local redis-server processes on
// free loopback ports, and talks to them for set-up and probes.
//
// The load generator (bench, bench/scenario) starts its local masters with
// it, and the tests use it through the test-only wrapper internal/redistest
// to run the lock against real masters and to inject process faults (kill,
// pause, restart). It is not part of the lock: engine and multiplex must
// not import it.
//
// Servers may want a password (Options.Password), an ACL user
// (Options.User) or TLS (Options.TLS, with certificates from
// GenerateCerts); Node.Conn then says how to reach them, and the
// package-level helpers have Conn methods that take the same credentials.
//
// Every process is started with Pdeathsig=SIGKILL, so it dies with the
// process that started it even if that process is killed outright.
//
// It imports the standard library and rueidis only; in particular not
// testing, since the redlock-bench binary links it.
package redisproc
