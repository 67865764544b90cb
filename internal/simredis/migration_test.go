package simredis

import (
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"
)

// A slot in migration is routed as Redis 7 routes it: the source runs
// what it has every key of, sends on (ASK) what it has none of and
// refuses the rest (TRYAGAIN); the target runs a command only after
// ASKING, and refuses one of several keys it lacks some of; a script on
// the source fails on a key gone to the target. Handed over, the slot is
// the target's in CLUSTER SLOTS, the source answers MOVED, and its
// sharded subscribers of the slot's channels are told sunsubscribe.
func TestMigrationRoutesAsRedis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		cl, nodes := NewCluster(n, 1, 0, 2, false, MasterOptions{Uptime: time.Hour})
		for _, m := range nodes {
			defer m.Close()
		}
		k1, k2, ch := "{x}k1", "{x}k2", "{x}channel"
		slot := keyslot.KeySlot(k1)
		owner, _ := cl.owner(slot, nil)
		src, dst := owner, nodes[0]
		if dst == src {
			dst = nodes[1]
		}
		_, s := dialT(t, n, src)
		_, d := dialT(t, n, dst)
		_, sub := dialT(t, n, src)
		do(t, s, "SET", k1, "a")
		do(t, s, "SET", k2, "b")
		if r := do(t, sub, "SSUBSCRIBE", ch); !strings.Contains(r, "ssubscribe") {
			t.Fatalf("SSUBSCRIBE: %q", r)
		}
		if got := src.ShardSubscriptions(); len(got) != 1 || !strings.HasSuffix(got[0], ": "+ch) || len(src.Subscriptions()) != 0 {
			t.Errorf("the source's sharded subscriptions %q (and others %q), want %s's alone", got, src.Subscriptions(), ch)
		}

		mg, why := cl.beginMigration(slot, 0)
		if mg == nil {
			t.Fatalf("no migration: %s", why)
		}
		if mg.dst.primary != dst {
			t.Fatalf("migrating to %s, want %s", mg.dst.primary.Addr, dst.Addr)
		}
		if !cl.moveKey(mg) { // k1, first by name
			t.Fatal("no key moved")
		}
		ask := "-ASK " + strconv.Itoa(slot) + " " + dst.Addr + "\r\n"
		moved := func(m *Master) string { return "-MOVED " + strconv.Itoa(slot) + " " + m.Addr + "\r\n" }
		const tryAgain = "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
		for _, c := range []struct {
			name string
			c    *client
			args []string
			want string
		}{
			{"source, a key it has", s, []string{"GET", k2}, bulk("b")},
			{"source, a key moved", s, []string{"GET", k1}, ask},
			{"source, keys split", s, []string{"DEL", k1, k2}, tryAgain},
			{"target without ASKING", d, []string{"GET", k1}, moved(src)},
			{"source, a script's call on a key moved", s, []string{"EVAL", "return redis.call('GET', KEYS[2])", "2", k2, k1},
				tryAgain},
			{"source, a script calling a key moved", s, []string{"EVAL", "return redis.call('GET', '" + k1 + "')", "1", k2},
				"-ERR Script attempted to access a non local key"},
		} {
			if r := do(t, c.c, c.args...); !strings.HasPrefix(r, strings.TrimSuffix(c.want, "\r\n")) {
				t.Errorf("%s: %v answered %q, want %q", c.name, c.args, r, c.want)
			}
		}
		if r := do(t, d, "ASKING"); r != status("OK") {
			t.Fatalf("ASKING: %q", r)
		}
		if r := do(t, d, "GET", k1); r != bulk("a") {
			t.Errorf("target after ASKING: GET %q, want a", r)
		}
		if r := do(t, d, "GET", k1); r != moved(src) {
			t.Errorf("target, ASKING spent: GET %q, want MOVED to the source", r)
		}
		do(t, d, "ASKING")
		if r := do(t, d, "DEL", k1, k2); r != tryAgain {
			t.Errorf("target after ASKING, keys split: %q, want TRYAGAIN", r)
		}
		nodesTxt, _ := parseBulk(do(t, d, "CLUSTER", "NODES"))
		if !strings.Contains(nodesTxt, "["+strconv.Itoa(slot)+"-<-"+src.cl.id+"]") {
			t.Errorf("target's CLUSTER NODES shows no import of slot %d:\n%s", slot, nodesTxt)
		}

		for cl.moveKey(mg) {
		}
		cl.handOver(mg)
		if r, err := sub.read(); err != nil || !strings.Contains(r, "sunsubscribe") || !strings.Contains(r, ch) {
			t.Errorf("subscriber after the hand-over: %q, %v; want sunsubscribe of %s", r, err, ch)
		}
		if got := src.ShardSubscriptions(); len(got) != 0 {
			t.Errorf("the source's sharded subscriptions after the hand-over: %q, want none", got)
		}
		if r := do(t, s, "GET", k2); r != moved(dst) {
			t.Errorf("old owner: GET %q, want MOVED to the new", r)
		}
		if r := do(t, d, "GET", k2); r != bulk("b") {
			t.Errorf("new owner: GET %q, want b", r)
		}
		if owner, _ := cl.owner(slot, nil); owner != dst {
			t.Errorf("slot %d owned by %s, want %s", slot, owner.Addr, dst.Addr)
		}
		// CLUSTER SLOTS: the slot alone in a range of the target's.
		found := false
		cl.mu.Lock()
		runs := cl.rangesLocked()
		cl.mu.Unlock()
		next := 0
		for _, r := range runs {
			if r.lo == slot && r.hi == slot && r.sh.primary == dst {
				found = true
			}
			if r.lo != next {
				t.Errorf("CLUSTER SLOTS: a run from %d after one to %d", r.lo, next-1)
			}
			for sl := r.lo; sl <= r.hi; sl++ {
				if o, _ := cl.owner(sl, nil); o != r.sh.primary {
					t.Fatalf("CLUSTER SLOTS gives slot %d to %s, owned by %s", sl, r.sh.primary.Addr, o.Addr)
				}
			}
			next = r.hi + 1
		}
		if next != keyslot.Slots {
			t.Errorf("CLUSTER SLOTS ends at %d", next-1)
		}
		if !found {
			t.Errorf("CLUSTER SLOTS has no range of slot %d alone at %s", slot, dst.Addr)
		}
	})
}

// A key expired on a migrating slot's source is sent on to the target
// (ASK), which sets it anew; the migration then drops the source's stale
// copy, as MIGRATE skips an expired key. The vote's key is the target's:
// the drop is not logged, so that the merged log of the cluster's nodes
// does not read the target's key as gone. A key expired on the source
// and absent from the target is dropped and logged, as before.
func TestMigrationDropsAnExpiredCopyTheTargetReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		cl, nodes := NewCluster(n, 1, 0, 2, false, MasterOptions{Uptime: time.Hour})
		for _, m := range nodes {
			defer m.Close()
		}
		replaced, lapsed := "{x}replaced", "{x}lapsed"
		slot := keyslot.KeySlot(replaced)
		src, _ := cl.owner(slot, nil)
		dst := nodes[0]
		if dst == src {
			dst = nodes[1]
		}
		_, s := dialT(t, n, src)
		_, d := dialT(t, n, dst)
		do(t, s, "SET", replaced, "old", "PX", "10")
		do(t, s, "SET", lapsed, "old", "PX", "10")
		time.Sleep(20 * time.Millisecond)
		mg, why := cl.beginMigration(slot, 0)
		if mg == nil {
			t.Fatalf("no migration: %s", why)
		}
		ask := "-ASK " + strconv.Itoa(slot) + " " + dst.Addr
		if r := do(t, s, "SET", replaced, "new", "NX", "PX", "10000"); !strings.HasPrefix(r, ask) {
			t.Fatalf("source, a key expired there: SET %q, want %s", r, ask)
		}
		do(t, d, "ASKING")
		if r := do(t, d, "SET", replaced, "new", "NX", "PX", "10000"); r != status("OK") {
			t.Fatalf("target after ASKING: SET %q", r)
		}
		for cl.moveKey(mg) {
		}
		cl.handOver(mg)
		if r := do(t, d, "GET", replaced); r != bulk("new") {
			t.Errorf("new owner: GET %q, want the value set there", r)
		}
		var gone []string
		for _, m := range nodes {
			for _, r := range m.KeyLog() {
				if r.Gone && r.Cause == "migrate" {
					gone = append(gone, r.Key)
				}
			}
		}
		if len(gone) != 1 || gone[0] != lapsed {
			t.Errorf("keys logged gone by the migration: %q, want %q alone", gone, lapsed)
		}
	})
}
