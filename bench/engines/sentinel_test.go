package engines

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redistest"
)

// A client tells, per vote, the master a Sentinel vote's sentinels name
// (the chaos soak's lost-write hazard waits for it to follow a
// failover), and its leases the value they stored, which a driver looks
// for on a master; a baseline tells no masters.
func TestClientTellsSentinelMastersAndLeaseValues(t *testing.T) {
	noLeaks(t)
	g := redistest.StartSentinelsT(t, redistest.SentinelOptions{})
	c := redistest.StartT(t, 2)
	ctx := context.Background()
	spec := testSpec()
	spec.Quarantine = QuarantineObserved // servers the test just started
	cl, err := Open(ctx, spec, Votes{Masters: c.Addrs(), Sentinels: []SentinelVote{{Master: g.Master, Addrs: g.SentinelAddrs()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got, want := cl.SentinelMasters(), []string{"", "", g.Data[0].Addr()}; !slices.Equal(got, want) {
		t.Fatalf("SentinelMasters() = %q, want %q", got, want)
	}
	le, err := cl.Take(ctx, Op{Names: []string{"sentinel-masters"}})
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(ctx)
	v, ok := le.(Valued)
	if !ok || v.Value() == "" {
		t.Fatalf("a redlock lease %T: Valued %v, value %q", le, ok, v)
	}
	// The engine takes the name as it is: drivers put the prefix on it.
	r, err := redistest.Do(g.Data[0].Addr(), 5*time.Second, "EVAL",
		`return redis.call("GET", KEYS[1]) == ARGV[1] and 1 or 0`, "1", "sentinel-masters", v.Value())
	if r != ":1" || err != nil {
		t.Errorf("the Sentinel vote's master does not hold the lease's value %q: %s %v", v.Value(), r, err)
	}

	spec.Engine = Engine{Base: Nolock}
	nl, err := Open(ctx, spec, Votes{})
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if got := nl.SentinelMasters(); got != nil {
		t.Errorf("nolock's SentinelMasters() = %q, want nil", got)
	}
}
