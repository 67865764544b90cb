package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
	"pgregory.net/rapid"
)

// TestCoalescedMultiScriptsMatchSingle is the property of the coalesced
// multi-resource scripts: a drawn batch of calls of acquireAllScript
// (plain, fenced, a waiter's) and of the all-keys forms (release, undo,
// extend, fence, leave, quit, zrem), by drawn callers over drawn sets of
// keys in drawn states (held by a caller, marked, a caller's turn,
// queued, fenced, of the wrong type), mixed with single-key releases, is
// run on one master each call alone, in order, and on another through a
// pool as one batch, in which calls of one script coalesce into one call
// over all their keys. Each call must be classified as alone, every key
// (value, expiry, fencing counter, queue) left the same, and the same
// published; the coalesced master must have seen fewer script calls.
// Each side's keys are read in the pipeline of its calls, right behind
// them: a turn token a call gives lasts only turnGraceMS.
func TestCoalescedMultiScriptsMatchSingle(t *testing.T) {
	c := redistest.StartT(t, 2)
	single, coal := direct(t, c.Nodes[0].Addr()), direct(t, c.Nodes[1].Addr())
	pubSingle, pubCoal := subscribe(t, c.Nodes[0].Addr()), subscribe(t, c.Nodes[1].Addr())
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: c.Addrs()[1:], Quarantine: quarantine.Off,
		NodeTimeout: 5 * time.Second, Scripts: append(slices.Clone(allScripts), multiScripts...)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	must(t, coal, "CONFIG", "RESETSTAT")
	scriptCalls := 0
	rapid.Check(t, func(rt *rapid.T) {
		for _, cl := range []rueidis.Client{single, coal} {
			must(t, cl, "FLUSHALL")
		}
		for _, k := range mcKeys {
			for _, cmd := range mcState().Draw(rt, "state of "+k) {
				cmd = slices.Clone(cmd)
				cmd[1] = map[string]string{"K": k, "F": fencePrefix + k, "Q": queuePrefix + k}[cmd[1]]
				for _, cl := range []rueidis.Client{single, coal} {
					must(t, cl, cmd...)
				}
			}
		}
		calls := rapid.SliceOfN(mcCall(), 8, 40).Draw(rt, "calls")
		scriptCalls += len(calls)
		// Alone: each call its own EVAL, all pipelined, so that they run
		// back to back as the coalesced ones do (a turn token given on
		// the way lasts only turnGraceMS), and the keys read behind them.
		cmds := make(rueidis.Commands, len(calls), len(calls)+1)
		for i, cl := range calls {
			a := []string{"EVAL", cl.cmd.Script.Body, "1", cl.cmd.Key}
			if cl.cmd.Keys != nil {
				a = append(a, *cl.cmd.Keys...)
				a[2] = strconv.Itoa(1 + len(*cl.cmd.Keys))
			}
			a = append(a, cl.cmd.Args[:cl.cmd.NArgs]...)
			cmds[i] = single.B().Arbitrary(a...).Build()
		}
		want := make([]string, len(calls))
		res := single.DoMulti(ctx, append(cmds, single.B().Arbitrary("EVAL", mcSnapshot, "0").Build())...)
		for i := range calls {
			want[i] = outcome(calls[i].classify, res[i], true)
		}
		left := mcStates(rt, res[len(calls)])
		// Coalesced: the calls leave as one batch behind the held
		// worker, and the keys are read in it, behind them.
		got := make([]string, len(calls))
		var wg sync.WaitGroup
		wg.Add(len(calls) + 1)
		release := holdWorkers(t, p, []rueidis.Client{coal})
		for i, cl := range calls {
			p.Post(cl.cmd, func(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
				got[i] = outcome(cl.classify, res, true)
				wg.Done()
				return multiplex.OK, 0, nil
			}, nil)
		}
		var states []string
		p.Post(multiplex.Command{Name: "EVAL", Key: mcSnapshot, Args: [multiplex.MaxArgs]string{"0"}, NArgs: 1}, func(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
			states = mcStates(rt, res)
			wg.Done()
			return multiplex.OK, 0, nil
		}, nil)
		release()
		wg.Wait()
		for k, st := range states {
			if st != left[k] {
				rt.Errorf("%s: left %s coalesced, %s alone", mcKeys[k], st, left[k])
			}
		}
		for i, cl := range calls {
			if got[i] != want[i] {
				rt.Errorf("call %d (%s): %s coalesced, %s alone", i, cl.name, got[i], want[i])
			}
		}
	})
	got, want := pubCoal(), pubSingle()
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("published %d messages coalesced, %d alone, or not the same:\n%q\n%q", len(got), len(want), got, want)
	}
	calls := commandCalls(t, coal, "evalsha")
	t.Logf("%d EVALSHA for %d script calls", calls, scriptCalls)
	if calls == 0 || calls >= scriptCalls {
		t.Errorf("%d EVALSHA for %d script calls: nothing was coalesced", calls, scriptCalls)
	}
}

// mcSnapshot is a script that reads what each of mcKeys holds: its value
// (or type), whether it expires, its fencing counter and its queue with
// its scores. mcStates reads its answer.
var mcSnapshot = `local out = {}
for _, k in ipairs({"` + strings.Join(mcKeys, `", "`) + `"}) do
  local v = redis.call("TYPE", k)["ok"]
  if v == "string" then v = redis.call("GET", k) end
  local f = redis.call("GET", "` + fencePrefixLua + `" .. k) or ""
  local q = redis.call("ZRANGE", "` + queuePrefixLua + `" .. k, 0, -1, "WITHSCORES")
  out[#out+1] = string.format("%s expires=%s fence=%q queue=[%s]", v, tostring(redis.call("PTTL", k) > 0), f, table.concat(q, " "))
end
return out`

func mcStates(rt *rapid.T, res rueidis.RedisResult) []string {
	st, err := res.AsStrSlice()
	if err != nil || len(st) != len(mcKeys) {
		rt.Fatalf("key states: %v (%d)", err, len(st))
	}
	return st
}

// mcKeys are the keys the drawn calls take; mcCallers the callers, each
// with its value and waiter id.
var (
	mcKeys    = []string{"r0", "r1", "r2", "r3", "r4"}
	mcCallers = []string{"c0", "c1", "c2"}
)

func mcValue(caller string) string { return caller + idEnd + "v" }

// mcState draws a key's state as commands on "K" the key, "F" its
// fencing counter and "Q" its queue.
func mcState() *rapid.Generator[[][]string] {
	return rapid.Custom(func(rt *rapid.T) [][]string {
		who := rapid.SampledFrom(mcCallers).Draw(rt, "who")
		var cmds [][]string
		switch rapid.IntRange(0, 5).Draw(rt, "value") {
		case 1:
			cmds = append(cmds, []string{"SET", "K", mcValue(who), "PX", "60000"})
		case 2:
			cmds = append(cmds, []string{"SET", "K", mcValue(who) + waitMark, "PX", "60000"})
		case 3:
			cmds = append(cmds, []string{"SET", "K", turnPrefix + who, "PX", "60000"})
		case 4:
			cmds = append(cmds, []string{"SET", "K", turnPrefix + who + waitMark, "PX", "60000"})
		case 5:
			if rapid.IntRange(0, 3).Draw(rt, "wrong type") == 0 {
				cmds = append(cmds, []string{"HSET", "K", "f", "1"})
			}
		}
		if rapid.Bool().Draw(rt, "queued") {
			q := []string{"ZADD", "Q"}
			for i, w := range rapid.SliceOfNDistinct(rapid.SampledFrom(mcCallers), 1, 3, rapid.ID[string]).Draw(rt, "queue") {
				q = append(q, strconv.Itoa(5+i), w)
			}
			cmds = append(cmds, q)
		}
		if rapid.IntRange(0, 3).Draw(rt, "fenced") == 0 {
			cmds = append(cmds, []string{"SET", "F", rapid.SampledFrom([]string{"9000000000000000", "9000000000000009"}).Draw(rt, "counter")})
		}
		return cmds
	})
}

// mcCallCase is one drawn call and the classifier of its caller.
type mcCallCase struct {
	name     string
	cmd      multiplex.Command
	classify multiplex.Classifier
}

// mcCall draws a call: a multi-resource script over one to three keys, by
// one of the callers, or a single-key release.
func mcCall() *rapid.Generator[mcCallCase] {
	return rapid.Custom(func(rt *rapid.T) mcCallCase {
		who := rapid.SampledFrom(mcCallers).Draw(rt, "caller")
		v := mcValue(who)
		keys := rapid.SliceOfNDistinct(rapid.SampledFrom(mcKeys), 1, 3, rapid.ID[string]).Draw(rt, "keys")
		slices.Sort(keys)
		set := &resourceSet{keys: keys, rest: keys[1:]}
		kind := rapid.SampledFrom([]string{"acquire", "acquire-fenced", "acquire-waiter", "acquire-waiter-fenced",
			"release", "undo", "extend", "fence", "leave", "quit", "zrem", "single-release"}).Draw(rt, "script")
		cl := mcCallCase{name: kind + " by " + who + " on " + strings.Join(keys, ","), classify: classifyInt}
		switch kind {
		case "acquire":
			cl.cmd, cl.classify = keysCall(acquireAllScript, set, v, "60000", "0", "0"), classifyAll
		case "acquire-fenced":
			cl.cmd, cl.classify = keysCall(acquireAllScript, set, v, "60000", "1", "0"), classifyAll
		case "acquire-waiter", "acquire-waiter-fenced":
			fence := "0"
			if kind == "acquire-waiter-fenced" {
				fence = "1"
			}
			score := strconv.Itoa(rapid.IntRange(1, 9).Draw(rt, "ticket"))
			cl.cmd, cl.classify = keysCall(acquireAllScript, set, v, "60000", fence, "1", score, who), classifyAll
		case "release":
			cl.cmd = keysCall(allKeysForm[releaseScript], set, v)
		case "undo":
			cl.cmd = keysCall(allKeysForm[undoScript], set, v)
		case "extend":
			cl.cmd = keysCall(allKeysForm[extendScript], set, v, "90000")
		case "fence":
			cl.cmd = keysCall(allKeysForm[fenceScript], set, "9000000000000005", v, "60000")
		case "leave":
			cl.cmd = keysCall(allKeysForm[leaveScript], set, who)
		case "quit":
			cl.cmd = keysCall(allKeysForm[quitScript], set, who)
		case "zrem":
			cl.cmd = keysCall(allKeysForm[zremScript], set, who)
		case "single-release":
			cl.cmd = scriptCall(releaseScript, keys[0], v)
			cl.name = fmt.Sprintf("single release by %s on %s", who, keys[0])
		}
		return cl
	})
}
