package engine

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// BenchmarkMasterCostMulti is what a master spends (its used_cpu_user +
// used_cpu_sys, per operation: the master-µs/op metric) on the
// multi-resource lock's calls over three fresh keys, pipelined on one
// connection, sent alone or coalesced 32 to a call, beside the mutex's
// SET NX GET PX on one key (three make a sequential lease's acquires) and
// its release, coalesced; and, to see where a script's time goes, scripts
// over three keys that do nothing (alone and coalesced), three GETs, and
// three SET PX. The client's time (ns/op) is not the point; the
// master is its own process, so the metric holds on a loaded machine
// better than a throughput does.
func BenchmarkMasterCostMulti(b *testing.B) {
	c := redistest.StartT(b, 1)
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), ForceSingleClient: true,
		DisableCache: true, ClientSetInfo: rueidis.DisableClientSetInfo})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	empty := multiplex.NewScript(`return false`).CoalesceKeys()
	gets := multiplex.NewScript(`for i = 1, #KEYS do redis.call("GET", KEYS[i]) end return false`)
	sets := multiplex.NewScript(`for i = 1, #KEYS do redis.call("SET", KEYS[i], ARGV[1], "PX", ARGV[2]) end return false`)
	for _, s := range []string{empty.Body, empty.Multi.Body, gets.Body, sets.Body, acquireAllScript.Body, acquireAllScript.Multi.Body, allKeysForm[releaseScript].Body,
		allKeysForm[releaseScript].Multi.Body, releaseScript.Multi.Body} {
		if err := cl.Do(ctx, cl.B().ScriptLoad().Script(s).Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
	keys := func(i int) []string {
		p := "k" + strconv.Itoa(i) + ":"
		return []string{p + "a", p + "b", p + "c"}
	}
	// An op's build makes the command for ops i to i+n-1 (n == 1: alone).
	type op struct {
		name  string
		group int
		build func(i, n int) []string
		setup bool // the keys hold the value first (a release's)
	}
	multi := func(sha, multiSHA string, args ...string) func(i, n int) []string {
		return func(i, n int) []string {
			if n == 1 {
				return append(append([]string{"EVALSHA", sha, "3"}, keys(i)...), args...)
			}
			a := []string{"EVALSHA", multiSHA, strconv.Itoa(3 * n)}
			for j := range n {
				a = append(a, keys(i+j)...)
			}
			for range n {
				a = append(append(a, "3", strconv.Itoa(len(args))), args...)
			}
			return a
		}
	}
	acq := multi(acquireAllScript.SHA, acquireAllScript.Multi.SHA, "v", "10000", "0", "0")
	rel := multi(allKeysForm[releaseScript].SHA, allKeysForm[releaseScript].Multi.SHA, "v")
	nothing := multi(empty.SHA, empty.Multi.SHA, "v", "10000", "0", "0")
	for _, o := range []op{
		{"acquire-all/alone", 1, acq, false},
		{"acquire-all/coalesced", 32, acq, false},
		{"release-all/alone", 1, rel, true},
		{"release-all/coalesced", 32, rel, true},
		{"mutex-acquire", 1, func(i, _ int) []string {
			return []string{"SET", keys(i)[0], "v", "NX", "GET", "PX", "10000"}
		}, false},
		{"mutex-release/coalesced", 32, func(i, n int) []string {
			a := []string{"EVALSHA", releaseScript.Multi.SHA, strconv.Itoa(n)}
			for j := range n {
				a = append(a, keys(i + j)[0])
			}
			for range n {
				a = append(a, "1", "v")
			}
			return a
		}, true},
		{"script-nothing/alone", 1, nothing, false},
		{"script-nothing/coalesced", 32, nothing, false},
		{"script-3-get", 1, multi(gets.SHA, "", "v", "10000"), true},
		{"script-3-set", 1, multi(sets.SHA, "", "v", "10000"), false},
	} {
		b.Run(o.name, func(b *testing.B) {
			if err := cl.Do(ctx, cl.B().Flushall().Build()).Error(); err != nil {
				b.Fatal(err)
			}
			if o.setup {
				send(b, cl, b.N, 1, func(i, _ int) []string {
					return append([]string{"MSET"}, keys(i)[0], "v", keys(i)[1], "v", keys(i)[2], "v")
				})
			}
			before := masterCPU(b, cl)
			b.ResetTimer()
			send(b, cl, b.N, o.group, o.build)
			b.ReportMetric((masterCPU(b, cl)-before)*1e6/float64(b.N), "master-µs/op")
		})
	}
}

// send sends ops 0 to n-1, group to a command, pipelined 64 commands at
// a time.
func send(b *testing.B, cl rueidis.Client, n, group int, build func(i, n int) []string) {
	var cmds rueidis.Commands
	flush := func() {
		for _, r := range cl.DoMulti(context.Background(), cmds...) {
			if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
				b.Fatal(err)
			}
		}
		cmds = cmds[:0]
	}
	for i := 0; i < n; i += group {
		cmds = append(cmds, cl.B().Arbitrary(build(i, min(group, n-i))...).Build())
		if len(cmds) == 64 {
			flush()
		}
	}
	flush()
}

// masterCPU is the master's CPU time so far, in seconds.
func masterCPU(b *testing.B, cl rueidis.Client) float64 {
	txt, err := cl.Do(context.Background(), cl.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var s float64
	for _, l := range strings.Split(txt, "\n") {
		l = strings.TrimSpace(l)
		for _, p := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(l, p); ok {
				f, _ := strconv.ParseFloat(v, 64)
				s += f
			}
		}
	}
	return s
}

// BenchmarkMasterCostSemaphore is a master's CPU (master-µs/op) for a
// permit's acquire on a fresh semaphore of 8: the probe (the lock's SET NX
// GET PX of one slot), the acquire script coalesced 32 to a call, and the
// same script when it also checks and keeps the permit count (a handle's
// first attempt, and one every MaxTTL/2 after), alone among the keys and
// beside 100,000 count keys of other semaphores (which every semaphore in
// use keeps for 2 MaxTTL).
func BenchmarkMasterCostSemaphore(b *testing.B) {
	c := redistest.StartT(b, 1)
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), ForceSingleClient: true,
		DisableCache: true, ClientSetInfo: rueidis.DisableClientSetInfo})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for _, s := range []string{semAcquireScript.Body, semAcquireScript.Multi.Body} {
		if err := cl.Do(ctx, cl.B().ScriptLoad().Script(s).Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
	base := func(i int) string { return "s" + strconv.Itoa(i) + ":" }
	script := func(mode string) func(i, n int) []string {
		return func(i, n int) []string {
			a := []string{"EVALSHA", semAcquireScript.Multi.SHA, strconv.Itoa(n)}
			for j := range n {
				a = append(a, base(i+j))
			}
			for range n {
				a = append(a, "6", "v", "10000", "8", "0", mode, "20000")
			}
			return a
		}
	}
	probe := func(i, _ int) []string { return []string{"SET", base(i) + "0", "v", "NX", "GET", "PX", "10000"} }
	for _, o := range []struct {
		name   string
		group  int
		build  func(i, n int) []string
		counts bool // 100,000 other semaphores' counts are kept
	}{
		{"probe", 1, probe, false},
		{"probe/beside-100k-counts", 1, probe, true},
		{"script/coalesced", 32, script(""), false},
		{"script-checking-count/coalesced", 32, script("m"), false},
		{"script-checking-count/coalesced/beside-100k-counts", 32, script("m"), true},
	} {
		b.Run(o.name, func(b *testing.B) {
			if err := cl.Do(ctx, cl.B().Flushall().Build()).Error(); err != nil {
				b.Fatal(err)
			}
			if o.counts {
				send(b, cl, 100000, 1, func(i, _ int) []string {
					return []string{"SET", "other" + strconv.Itoa(i) + ":permits", "8", "PX", "600000"}
				})
			}
			before := masterCPU(b, cl)
			b.ResetTimer()
			send(b, cl, b.N, o.group, o.build)
			b.ReportMetric((masterCPU(b, cl)-before)*1e6/float64(b.N), "master-µs/op")
		})
	}
}
