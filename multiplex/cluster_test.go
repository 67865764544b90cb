package multiplex_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redlock-bench/redlock/internal/addrcheck"
	"github.com/redlock-bench/redlock/internal/keyslot"
	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// A vote given as a cluster answers each key from the shard that owns
// its slot: a script run alone, many coalesced into calls (which must
// each stay within one slot), and a command over several keys of one
// slot; one over keys of different slots is not sent.
func TestClusterVoteRoutesBySlot(t *testing.T) {
	add := multiplex.NewScript(`return redis.call("INCRBY", KEYS[1], ARGV[1])`).Coalesce()
	both := multiplex.NewScript(`redis.call("INCR", KEYS[2]) return redis.call("INCR", KEYS[1])`)
	count := multiplex.NewScript(`return #KEYS`)
	cl := redistest.StartClustersT(t, 1, redistest.ClusterOptions{Shards: 3})[0]
	masters := redistest.StartT(t, 2)
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: masters.Addrs(), Clusters: [][]string{cl.Seeds()[:1]},
		Quarantine: quarantine.Off, NodeTimeout: patientTimeout, DialTimeout: patientTimeout, Scripts: []*multiplex.Script{add, both, count}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Len() != 3 || p.Quorum() != 2 {
		t.Fatalf("%d votes, quorum %d; want 3 and 2", p.Len(), p.Quorum())
	}
	if s := p.Status()[2]; s.Addr != "cluster("+cl.Seeds()[0]+")" || s.State != multiplex.StateUp {
		t.Errorf("the cluster vote's status: %+v", s)
	}
	const n = 600
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			k := "key" + strconv.Itoa(i)
			cmd := multiplex.Command{Script: add, Key: k, Args: [multiplex.MaxArgs]string{strconv.Itoa(i + 1)}, NArgs: 1, WaitAll: true}
			tl := p.Fanout(context.Background(), cmd, classifyInt, nil, nil)
			if v := tl.Votes[2]; v.Outcome != multiplex.OK || v.Value != int64(i+1) {
				errs <- k + ": " + v.Outcome.String() + " " + strconv.FormatInt(v.Value, 10) + " " + errString(v.Err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	ctx := context.Background()
	direct, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Seeds(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	for _, i := range []int{0, 17, 599} {
		k := "key" + strconv.Itoa(i)
		if v, err := direct.Do(ctx, direct.B().Get().Key(k).Build()).AsInt64(); err != nil || v != int64(i+1) {
			t.Errorf("GET %s in the cluster: %d, %v", k, v, err)
		}
	}
	keys := []string{"{t}b"}
	tl := p.Fanout(ctx, multiplex.Command{Script: both, Key: "{t}a", Keys: &keys, WaitAll: true}, classifyInt, nil, nil)
	if v := tl.Votes[2]; v.Outcome != multiplex.OK {
		t.Errorf("two keys of one slot: %+v", v)
	}
	// A cluster vote's script declares its slot's guard too (see
	// migration.go), which its body never sees.
	keys = []string{"{t}b", "{t}c"}
	tl = p.Fanout(ctx, multiplex.Command{Script: count, Key: "{t}a", Keys: &keys, WaitAll: true}, classifyInt, nil, nil)
	for i, v := range tl.Votes {
		if v.Outcome != multiplex.OK || v.Value != 3 {
			t.Errorf("vote %d: #KEYS of a script on three keys: %+v", i, v)
		}
	}
	keys = []string{"b"}
	tl = p.Fanout(ctx, multiplex.Command{Script: both, Key: "a", Keys: &keys, WaitAll: true}, classifyInt, nil, nil)
	if v := tl.Votes[2]; v.Outcome != multiplex.Failed || !strings.Contains(errString(v.Err), "different hash slots") {
		t.Errorf("two keys of two slots: %+v, want refused unsent", v)
	}
	if v, _ := direct.Do(ctx, direct.B().Get().Key("b").Build()).AsInt64(); v != 0 {
		t.Errorf("a cross-slot command ran: b = %d", v)
	}
	// KeySlot agrees with the server.
	for _, k := range []string{"a", "{t}a", "x{}y", "}{z}", "\xffredlock:queue:{t}a"} {
		got, err := direct.Do(ctx, direct.B().ClusterKeyslot().Key(k).Build()).AsInt64()
		if err != nil || int(got) != keyslot.KeySlot(k) {
			t.Errorf("CLUSTER KEYSLOT %q = %d, %v; KeySlot says %d", k, got, err, keyslot.KeySlot(k))
		}
	}
}

// The control of the grouping by slot: with coalesce-across-slots on, a
// coalesced call takes keys of several slots, which the cluster refuses.
func TestCoalesceAcrossSlotsControl(t *testing.T) {
	mutation.Require(t)
	add := multiplex.NewScript(`return redis.call("INCRBY", KEYS[1], ARGV[1])`).Coalesce()
	cl := redistest.StartClustersT(t, 1, redistest.ClusterOptions{Shards: 3})[0]
	defer mutation.CoalesceAcrossSlots.Set(true)()
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Clusters: [][]string{cl.Seeds()},
		Quarantine: quarantine.Off, NodeTimeout: patientTimeout, DialTimeout: patientTimeout, Scripts: []*multiplex.Script{add}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	crossSlot := 0
	for i := range 600 {
		wg.Go(func() {
			cmd := multiplex.Command{Script: add, Key: "key" + strconv.Itoa(i), Args: [multiplex.MaxArgs]string{"1"}, NArgs: 1}
			tl := p.Fanout(context.Background(), cmd, classifyInt, nil, nil)
			if strings.Contains(errString(tl.Votes[0].Err), "CROSSSLOT") || strings.Contains(errString(tl.Votes[0].Err), "slot") {
				mu.Lock()
				crossSlot++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if crossSlot == 0 {
		t.Fatal("no coalesced call was refused with the grouping by slot off: the test cannot catch it")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A server may cast one vote only: a cluster given twice (by two of its
// nodes) is refused, naming both votes and the node; so is a master in
// cluster mode, and a cluster vote that is a plain master.
func TestClusterVoteIndependence(t *testing.T) {
	cl := redistest.StartClustersT(t, 1, redistest.ClusterOptions{Shards: 2, Replicas: 1})[0]
	master := redistest.StartT(t, 1)
	seeds := cl.Seeds()
	for _, tc := range []struct {
		name     string
		addrs    []string
		clusters [][]string
		want     error
		names    []string
	}{
		{"one cluster as two votes", master.Addrs(), [][]string{{seeds[0]}, {seeds[1]}}, multiplex.ErrNotIndependent,
			[]string{"cluster(" + seeds[0] + ") (vote 1)", "cluster(" + seeds[1] + ") (vote 2)", "one server in two votes"}},
		{"a replica as another cluster's seed", master.Addrs(), [][]string{{seeds[0]}, {cl.Shards[1].Nodes[1].Addr()}}, multiplex.ErrNotIndependent,
			[]string{"(vote 1)", "(vote 2)"}},
		{"a cluster node as a master", []string{seeds[1], master.Addrs()[0]}, [][]string{{seeds[0]}}, multiplex.ErrWrongMode,
			[]string{seeds[1] + " runs in cluster mode"}},
		{"a master as a cluster", nil, [][]string{{seeds[0]}, {master.Addrs()[0]}}, multiplex.ErrWrongMode,
			[]string{master.Addrs()[0], "not in cluster mode"}},
	} {
		p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: tc.addrs, Clusters: tc.clusters,
			Quarantine: quarantine.Off, DialTimeout: patientTimeout})
		if err == nil {
			p.Close()
			t.Errorf("%s: Dial accepted it", tc.name)
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		for _, s := range tc.names {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", tc.name, err, s)
			}
		}
	}
}

// Bad cluster addresses are refused before any dial, naming where.
func TestClusterAddrsValidated(t *testing.T) {
	for _, tc := range []struct {
		addrs    []string
		clusters [][]string
		want     string
	}{
		{nil, [][]string{{}}, "Clusters[0] has no addresses"},
		{nil, [][]string{{"a:1", "nope"}}, `"nope" (Clusters[0][1]): want host:port`},
		{[]string{"a:1"}, [][]string{{"b:2"}, {"c:3", "a:1"}}, `"a:1" given twice (Addrs[0] and Clusters[1][1])`},
		{nil, [][]string{{"b:2"}, {"b:2"}}, `(Clusters[0][0] and Clusters[1][0])`},
	} {
		_, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: tc.addrs, Clusters: tc.clusters, Quarantine: quarantine.Off})
		var ce *addrcheck.ClusterAddrError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: %v, want a ClusterAddrError saying %q", tc.addrs, tc.clusters, err, tc.want)
		}
	}
}
