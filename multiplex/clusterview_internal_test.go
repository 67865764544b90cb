package multiplex

import (
	"slices"
	"testing"
)

// A node's view names its own slots, ranges and single ones, with those
// it imports (their keys arrive there) and those it migrates out (still
// in its ranges), and the replicas it sees, whatever the address's form.
func TestParseClusterNodes(t *testing.T) {
	txt := "" +
		"07c3 127.0.0.1:30004@31004,host-a slave e7d1 0 1426238317239 4 connected\n" +
		"67ed 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922\n" +
		"292f 127.0.0.1:30003@31003 master - 0 1426238318243 3 connected 10923-16383\n" +
		"6ec2 127.0.0.1:30005@31005 slave,fail 67ed 1426238316232 1426238316232 5 disconnected\n" +
		"e7d1 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 12000 [93-<-292f] [77->-292f]\n"
	v := parseClusterNodes(txt)
	want := []slotRange{{0, 5460}, {12000, 12000}, {93, 93}}
	if !slices.Equal(v.slots, want) {
		t.Errorf("slots %v, want %v", v.slots, want)
	}
	if r := []string{"127.0.0.1:30004", "127.0.0.1:30005"}; !slices.Equal(v.replicas, r) {
		t.Errorf("replicas %v, want %v", v.replicas, r)
	}
	if v := parseClusterNodes("e7d1 127.0.0.1:30001@31001 myself,slave 67ed 0 0 1 connected\n"); len(v.slots) != 0 {
		t.Errorf("a replica's slots: %v", v.slots)
	}
	if !overlaps(want, []slotRange{{5000, 6000}}) || overlaps(want, []slotRange{{5461, 11999}}) {
		t.Error("overlaps")
	}
}
