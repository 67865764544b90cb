package redistest

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// DeadAddr returns a loopback address where a connection is refused, held
// so until the test ends. A port that is merely closed again can be taken
// at once by a redis-server another test starts, and a client that retries
// its dial then finds a live master where the test expected none. The port
// is bound without SO_REUSEADDR and never listened on: a connect meets a
// reset, and neither the kernel's port picker nor another bind can hand it
// out while the test runs.
func DeadAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("redistest: socket for a dead address: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("redistest: bind a dead address: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("redistest: name of a dead address: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// DeadAddrs returns n addresses as DeadAddr does.
func DeadAddrs(t testing.TB, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = DeadAddr(t)
	}
	return out
}
