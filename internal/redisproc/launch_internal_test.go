package redisproc

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A server started on a port that another server holds (taken between
// freePort's probe and its bind) exits; the other's PONG must not pass
// for its start, or a cluster node is sent another cluster's commands.
func TestLaunchOnATakenPortFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other, err := Start(ctx, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	var o Options
	if err := o.fill(); err != nil {
		t.Fatal(err)
	}
	n := &Node{opts: o, Dir: t.TempDir(), Port: other.Nodes[0].Port}
	err = n.launch(ctx)
	if err == nil {
		n.stop()
		t.Fatalf("a server launched on %s, which another server holds, was taken for started", n.Addr())
	}
	if !strings.Contains(err.Error(), "exited at start") {
		t.Errorf("launch: %v, want its exit reported", err)
	}
}
