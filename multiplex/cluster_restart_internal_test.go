package multiplex

import (
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/quarantine"
)

// A cluster's node restarted in the middle of a slot's migration that it
// was the source of, and the slot was handed over before this pool
// reached the node again: the node's view no longer shows the slot, but
// the slot's keys it had not moved yet are gone, and the new owner serves
// the slot without them. The slot stays out of the vote for MaxTTL with
// the node's others; the other node's slots vote. With
// cluster-restart-slots-as-seen on (the control), the slot votes at once.
func TestClusterRestartQuarantinesTheSlotsItHandedOver(t *testing.T) {
	mutation.Require(t)
	const moved = 11097
	inSlot := func(s int) string { return "{" + keyslot.SlotTag(s) + "}k" }
	for _, asSeen := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed", true: "control"}[asSeen], func(t *testing.T) {
			defer mutation.ClusterRestartSlotsAsSeen.Set(asSeen)()
			p := &Pool{policy: quarantine.Always, maxTTL: time.Minute, epoch: time.Now()}
			n := &node{Index: 2, Addr: "cluster(a:1,b:1)", seeds: []string{"a:1", "b:1"}}
			p.nodes = []*node{n}
			member := func(addr, runID string, slots ...slotRange) {
				t.Helper()
				info := serverInfo{Mode: "cluster", Role: "master", RunID: runID, Uptime: time.Hour, view: &clusterView{slots: slots}}
				if _, err := p.observeMember(n, addr, info); err != nil {
					t.Fatalf("observeMember %s: %v", addr, err)
				}
			}
			// The vote's first topology: a serves the upper half.
			member("a:1", "run-a", slotRange{8192, 16383})
			member("b:1", "run-b", slotRange{0, 8191})
			n.established = true
			// a restarted (a new run_id), and handed slot moved to b
			// before this pool reached it again.
			member("a:1", "run-a2", slotRange{8192, moved - 1}, slotRange{moved + 1, 16383})
			if e := p.slotQuarantined(n, inSlot(100)); e != nil {
				t.Errorf("b's slot is out of the vote: %v", e)
			}
			if e := p.slotQuarantined(n, inSlot(12000)); e == nil || !e.Restarted {
				t.Errorf("a's slot: quarantine %v, want the restart's", e)
			}
			e := p.slotQuarantined(n, inSlot(moved))
			switch {
			case asSeen && e != nil:
				t.Fatalf("with %s on, the handed-over slot is out of the vote (%v): the test cannot catch it", mutation.ClusterRestartSlotsAsSeen.Name(), e)
			case asSeen:
				t.Logf("control: the slot a served when it restarted votes at once from b")
			case e == nil:
				t.Fatal("the slot a served when it restarted, handed over since, votes at once from b")
			case !e.Restarted || e.Until.Before(p.epoch.Add(time.Minute)):
				t.Errorf("the handed-over slot's quarantine: %v, want the restart's, for MaxTTL", e)
			}
		})
	}
}
