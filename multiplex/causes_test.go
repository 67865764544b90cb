package multiplex

import (
	"errors"
	"testing"
)

// Masters that fail alike are listed together once, whatever addresses
// and local ports their errors carry.
func TestCausesGroupMastersThatFailAlike(t *testing.T) {
	n := func(addr, msg string) *node {
		nd := &node{Addr: addr}
		nd.setErr(errors.New(msg))
		return nd
	}
	got := causes([]*node{
		n("a:1", "dial tcp a:1: connect: connection refused"),
		n("b:2", "read tcp 127.0.0.1:41234->b:2: read: connection reset by peer (does the master want TLS?)"),
		n("c:3", "dial tcp c:3: connect: connection refused"),
		n("d:4", "read tcp 127.0.0.1:41240->d:4: read: connection reset by peer (does the master want TLS?)"),
		n("e:5", "AUTH as the default user refused: WRONGPASS invalid username-password pair"),
	})
	want := "a:1, c:3 (dial tcp: connect: connection refused); " +
		"b:2, d:4 (read tcp: read: connection reset by peer (does the master want TLS?)); " +
		"e:5 (AUTH as the default user refused: WRONGPASS invalid username-password pair)"
	if got != want {
		t.Fatalf("causes:\n got %s\nwant %s", got, want)
	}
}
