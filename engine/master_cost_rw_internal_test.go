package engine

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// BenchmarkMasterCostRW is a master's CPU (master-µs/op) for a read/write
// lock's reader on a fresh name, its acquire and its release, each
// coalesced 32 to a call as under load, beside the mutex's SET NX GET PX
// and its release: what each costs the master, whatever the client's
// time (ns/op); and a join's check, its two commands (join-intent,
// join-entry) on names a reader holds, each pipelined 64 to a round trip.
func BenchmarkMasterCostRW(b *testing.B) {
	c := redistest.StartT(b, 1)
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), ForceSingleClient: true,
		DisableCache: true, ClientSetInfo: rueidis.DisableClientSetInfo})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for _, s := range []string{rwAcquireScript.Multi.Body, rwReleaseScript.Multi.Body, releaseScript.Multi.Body} {
		if err := cl.Do(ctx, cl.B().ScriptLoad().Script(s).Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
	key := func(i int) string { return "k" + strconv.Itoa(i) }
	coalesced := func(sha string, args func(i int) []string) func(i, n int) []string {
		return func(i, n int) []string {
			a := []string{"EVALSHA", sha, strconv.Itoa(n)}
			for j := range n {
				a = append(a, key(i+j))
			}
			for j := range n {
				as := args(i + j)
				a = append(append(a, strconv.Itoa(len(as))), as...)
			}
			return a
		}
	}
	val := func(i int) string { return "v" + strconv.Itoa(i) }
	readers := coalesced(rwAcquireScript.Multi.SHA, func(i int) []string { return []string{val(i), "10000", "r", "", "", "20000"} })
	for _, o := range []struct {
		name  string
		group int
		build func(i, n int) []string
		setup func(i, n int) []string // run first over the same i
	}{
		{"mutex-acquire", 1, func(i, _ int) []string {
			return []string{"SET", key(i), val(i), "NX", "GET", "PX", "10000"}
		}, nil},
		{"mutex-release/coalesced", 32, coalesced(releaseScript.Multi.SHA, func(i int) []string { return []string{val(i)} }),
			func(i, _ int) []string { return []string{"SET", key(i), val(i), "PX", "10000"} }},
		{"read-acquire/coalesced", 32, coalesced(rwAcquireScript.Multi.SHA, func(i int) []string {
			return []string{val(i), "10000", "r", "", "", "20000"}
		}), nil},
		{"read-release/coalesced", 32, coalesced(rwReleaseScript.Multi.SHA, func(i int) []string { return []string{val(i)} }),
			coalesced(rwAcquireScript.Multi.SHA, func(i int) []string { return []string{val(i), "10000", "r", "", "", "20000"} })},
		// A join's check (see RWMutex.confirm), among the readers' keys:
		// EXISTS of the intents key, and ZRANK of the shared entry (beside
		// ZSCORE, which answers the same with a double to format).
		{"join-intent", 1, func(i, _ int) []string { return []string{"EXISTS", rwPrefix + key(i)} }, readers},
		{"join-entry", 1, func(i, _ int) []string { return []string{"ZRANK", key(i), val(i)} }, readers},
		{"join-entry-zscore", 1, func(i, _ int) []string { return []string{"ZSCORE", key(i), val(i)} }, readers},
	} {
		b.Run(o.name, func(b *testing.B) {
			if err := cl.Do(ctx, cl.B().Flushall().Build()).Error(); err != nil {
				b.Fatal(err)
			}
			if o.setup != nil {
				send(b, cl, b.N, 32, o.setup)
			}
			before := masterCPU(b, cl)
			b.ResetTimer()
			send(b, cl, b.N, o.group, o.build)
			b.ReportMetric((masterCPU(b, cl)-before)*1e6/float64(b.N), "master-µs/op")
		})
	}
}
