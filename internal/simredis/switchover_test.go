package simredis

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"
)

// A switchover (CLUSTER FAILOVER with the primary up) promotes the
// replica with every key, and keeps the old primary up as its replica:
// its connections stay open and answer MOVED for the shard's keys, its
// sharded subscribers stay; switching over again brings it back with the
// other's keys.
func TestSwitchoverKeepsTheOldPrimaryUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		cl, nodes := NewCluster(n, 1, 0, 1, true, MasterOptions{Uptime: time.Hour})
		for _, m := range nodes {
			defer m.Close()
		}
		p, r := nodes[0], nodes[1]
		_, pc := dialT(t, n, p)
		_, sub := dialT(t, n, p)
		do(t, pc, "SET", "k", "v")
		ch := "{k}ch"
		do(t, sub, "SSUBSCRIBE", ch)
		if !cl.Switchover(0) {
			t.Fatal("no switchover")
		}
		if cl.Primary(0) != r {
			t.Fatalf("primary %s after the switchover, want the replica %s", cl.Primary(0).Addr, r.Addr)
		}
		_, rc := dialT(t, n, r)
		if got := do(t, rc, "GET", "k"); got != bulk("v") {
			t.Errorf("GET k on the promoted replica: %q, want v", got)
		}
		moved := "-MOVED " + strconv.Itoa(keyslot.KeySlot("k")) + " " + r.Addr + "\r\n"
		if got := do(t, pc, "GET", "k"); got != moved {
			t.Errorf("GET k on the old primary's open connection: %q, want %q", got, moved)
		}
		if role := infoField(t, pc, "replication", "role"); role != "slave" {
			t.Errorf("the old primary's role: %s, want slave", role)
		}
		if got := p.ShardSubscriptions(); len(got) != 1 {
			t.Errorf("the old primary's sharded subscriptions: %q, want its subscriber's", got)
		}
		do(t, rc, "SET", "k2", "v2")
		if !cl.Switchover(0) || cl.Primary(0) != p {
			t.Fatal("no switchover back")
		}
		if got := do(t, pc, "GET", "k2"); got != bulk("v2") {
			t.Errorf("GET k2 on the primary again, on its old connection: %q, want v2", got)
		}
	})
}
