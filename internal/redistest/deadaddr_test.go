package redistest_test

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redistest"
)

// A dead address refuses connections and cannot be taken by a listener
// while the test runs.
func TestDeadAddrRefusesAndStaysReserved(t *testing.T) {
	addr := redistest.DeadAddr(t)
	_, err := net.DialTimeout("tcp", addr, time.Minute)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("a listener took %s while it was reserved", addr)
	}
}
