package multiplex

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// BenchmarkPlan is a worker's CPU for one batch of 128 commands, without
// the network: the plan (grouping) and the commands built from it. One
// script on one key each (releases under load, the hot path); the same
// mixed with plain commands and a second script (a mixed batch, which
// tracks its keys); and calls over three keys of a CoalesceKeys script
// (multi-resource releases).
func BenchmarkPlan(b *testing.B) {
	one := NewScript(`return redis.call("GET", KEYS[1])`).Coalesce()
	two := NewScript(`return redis.call("DEL", KEYS[1])`).Coalesce()
	three := NewScript(`return redis.call("DEL", unpack(KEYS))`).CoalesceKeys()
	c := redistest.StartT(b, 1)
	p, err := Dial(context.Background(), Options{Addrs: c.Addrs(), Quarantine: quarantine.Off,
		NodeTimeout: time.Second, Scripts: []*Script{one, two, three}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	n := p.nodes[0]
	const size = 128
	for _, tc := range []struct {
		name string
		cmd  func(i int) Command
	}{
		{"one-script", func(i int) Command {
			return Command{Script: one, Key: "k" + strconv.Itoa(i), Args: [MaxArgs]string{"v"}, NArgs: 1}
		}},
		{"mixed", func(i int) Command {
			switch i % 4 {
			case 0:
				return Command{Name: "SET", Key: "k" + strconv.Itoa(i), Args: [MaxArgs]string{"v", "NX"}, NArgs: 2}
			case 1:
				return Command{Script: two, Key: "k" + strconv.Itoa(i), Args: [MaxArgs]string{"v"}, NArgs: 1}
			}
			return Command{Script: one, Key: "k" + strconv.Itoa(i), Args: [MaxArgs]string{"v"}, NArgs: 1}
		}},
		{"keys", func(i int) Command {
			k := "k" + strconv.Itoa(i)
			return Command{Script: three, Key: k + "a", Keys: &[]string{k + "b", k + "c"}, Args: [MaxArgs]string{"v"}, NArgs: 1}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tasks := make([]task, size)
			for i := range tasks {
				tasks[i] = task{r: &round{cmd: tc.cmd(i)}}
			}
			bt := &batch{}
			var cmds []rueidis.Completed
			b.ReportAllocs()
			for b.Loop() {
				bt.sent = append(bt.sent[:0], tasks...)
				bt.plan(true, false)
				cmds = cmds[:0]
				for _, a := range bt.at {
					if a >= 0 {
						cmds = append(cmds, p.buildFor(n, &bt.sent[a].r.cmd, false))
					} else if g := &bt.groups[-a-1]; len(g.tasks) == 1 {
						cmds = append(cmds, p.buildFor(n, &g.tasks[0].r.cmd, false))
					} else {
						cmds = append(cmds, p.buildMulti(n, g, false))
					}
				}
				bt.release()
			}
			b.ReportMetric(float64(len(cmds)), "calls/batch")
		})
	}
}
