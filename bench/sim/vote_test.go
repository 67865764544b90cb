package sim

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/alicebob/miniredis/v2/proto"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// A failover whose copy was taken while a slot migrated from the shard
// is skipped, as one whose copy predates a migration is: a replica
// replicates the migration's deletes, so the copy is stale once a key
// moves, and the promoted replica would hold the moved keys' old values
// in a slot it no longer owns. The checkers read a cluster vote's keys
// merged over its nodes, so those old values would end what the new
// owner holds: seed 1795698425 (restarts, five cluster votes of two
// shards) failed trusted past expiry so, at the promotion, on a permit
// the new owner held.
func TestFailoverCopyTakenDuringMigrationIsSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := simredis.NewNetwork(1)
		cl, nodes := simredis.NewCluster(n, 1, 0, 2, true, simredis.MasterOptions{Uptime: time.Hour})
		for _, m := range nodes {
			defer m.Close()
		}
		v := &vote{nodes: nodes, cl: cl}
		h := NewHistory()
		const k = "r0"
		slot := keyslot.KeySlot(k)
		// No slot has moved yet: the shard whose range holds it has it.
		s := slot * cl.Shards() / keyslot.Slots
		src := cl.Primary(s)
		set(t, n, src.Addr, "SET", k, "old", "PX", "5000")

		// The slot migrates to the other shard, a key every 10ms: begun
		// now, handed over at 20ms.
		migrated := make(chan struct{})
		go func() {
			defer close(migrated)
			if report, ok := cl.Migrate(context.Background(), slot, 0, 10*time.Millisecond); !ok {
				t.Errorf("no migration: %s", report)
			}
		}()
		synctest.Wait()
		// The source's shard fails over: the copy now, during the
		// migration, the promotion after it, and the old primary back a
		// little later.
		done := make(chan struct{})
		go func() {
			defer close(done)
			v.failoverFor(context.Background(), Fault{Kind: FaultRestart, Conn: s, For: 200 * time.Millisecond, Late: 100 * time.Millisecond}, h)
		}()
		synctest.Wait()
		<-migrated
		set(t, n, cl.Primary(1-s).Addr, "SET", k, "new", "PX", "1000")
		granted := h.since(time.Now())
		<-done

		logs, _, _ := v.logs(true)
		keys := buildSpans([][]simredis.KeyRecord{logs}, []simredis.Clock{nodes[0].Clock()}, h.start)
		g := Grant{ID: 1, Resource: k, Value: "new", Granted: granted, End: granted + 900*time.Millisecond}
		if vs := CheckExpiry([]Grant{g}, keys, 1); len(vs) > 0 {
			t.Errorf("the vote's key log, with the failover's copy taken during the migration:\n%s\nfails: %v", recordsOf(logs, k), vs)
		}
		if p := cl.Primary(s); p != src {
			t.Errorf("shard %d failed over to %s with a copy taken during a migration from it", s, p.Addr)
		}
	})
}

// recordsOf lists the records of key in log, one a line.
func recordsOf(log []simredis.KeyRecord, key string) string {
	var b strings.Builder
	for _, r := range log {
		if r.Key == key {
			b.WriteString(r.String())
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// set sends a command that writes to the node at addr, on a connection of
// its own, and fails the test unless the node runs it.
func set(t *testing.T, n *simredis.Network, addr string, args ...string) {
	t.Helper()
	conn, err := n.Dialer("test")(context.Background(), addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	if r, err := proto.NewClient(conn).Do(args...); err != nil || r != proto.Inline("OK") {
		t.Fatalf("%s %v: %q, %v; want OK", addr, args, r, err)
	}
}
