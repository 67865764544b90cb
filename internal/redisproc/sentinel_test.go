package redisproc_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
)

// A started sentinel group reports its first data node as the master;
// a forced failover makes every sentinel report the replica, which is then
// a master; Stop leaves no process behind.
func TestSentinelGroupFailsOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, err := redisproc.StartSentinels(ctx, redisproc.SentinelOptions{}, redisproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Stop() })
	if len(g.Data) != 2 || len(g.Sentinels) != 3 || g.Master != "mymaster" {
		t.Fatalf("%d data nodes, %d sentinels, master %q; want 2, 3, mymaster", len(g.Data), len(g.Sentinels), g.Master)
	}
	first, err := g.MasterAddr(ctx)
	if err != nil || first != g.Data[0].Addr() {
		t.Fatalf("master %q (%v), want %s", first, err, g.Data[0].Addr())
	}
	got, err := g.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != g.Data[1].Addr() {
		t.Fatalf("failover promoted %s, want the replica %s", got, g.Data[1].Addr())
	}
	if now, err := g.MasterAddr(ctx); err != nil || now != got {
		t.Fatalf("after the failover the sentinels report %q (%v), want %s", now, err, got)
	}
	// The old master, demoted, replicates from the new one: a second
	// failover fails back to it.
	if err := g.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	if back, err := g.Failover(ctx); err != nil || back != first {
		t.Fatalf("second failover promoted %q (%v), want the old master %s", back, err, first)
	}
	var pids []int
	for _, n := range append(g.Data, g.Sentinels...) {
		pids = append(pids, n.PID())
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("pid %d still runs after Stop", pid)
		}
	}
}

// Bad shapes are refused before anything starts.
func TestSentinelOptionsRefused(t *testing.T) {
	for _, so := range []redisproc.SentinelOptions{
		{Master: "my master"},
		{Sentinels: 3, Quorum: 4},
		{Replicas: -1},
	} {
		if g, err := redisproc.StartSentinels(context.Background(), so, redisproc.Options{}); err == nil {
			g.Stop()
			t.Errorf("%+v accepted", so)
		}
	}
}
