package multiplex_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
	"pgregory.net/rapid"
)

// Scripts over several keys with a CoalesceKeys Multi, each with a way to
// end that a coalesced call must keep to the call that took it.
var (
	// shape answers what the call was given: keys and arguments.
	ckShape = multiplex.NewScript(`return {#KEYS, #ARGV, table.concat(KEYS, ","), table.concat(ARGV, ",")}`).CoalesceKeys()
	// appendAll appends to each key in turn and fails (WRONGTYPE) at the
	// first key that is not a string, its earlier appends kept.
	ckAppendAll = multiplex.NewScript(`local out = {}
for i = 1, #KEYS do
  out[i] = redis.call("APPEND", KEYS[i], ARGV[1] or "-")
end
return out`).CoalesceKeys()
	// guard sets every key only if none exists, and otherwise answers the
	// first one found, or an error reply for a key of the wrong type: all
	// or nothing, as the engine's multi-resource acquire.
	ckGuard = multiplex.NewScript(`for i = 1, #KEYS do
  local t = redis.call("TYPE", KEYS[i]).ok
  if t ~= "none" and t ~= "string" then
    return redis.error_reply("WRONGTYPE key " .. i)
  end
  local v = redis.call("GET", KEYS[i])
  if v then
    return {i, v}
  end
end
for i = 1, #KEYS do
  redis.call("SET", KEYS[i], ARGV[1] or "x")
end
return false`).CoalesceKeys()
	// boom writes its first key, then raises a Lua error if told to.
	ckBoom = multiplex.NewScript(`redis.call("SET", KEYS[1], "w" .. #KEYS)
if ARGV[1] == "boom" then
  error("boom")
end
return redis.call("DEL", unpack(KEYS))`).CoalesceKeys()
	// append1 is a single-key script (Coalesce), on the same keys.
	ckAppend1 = multiplex.NewScript(`return redis.call("APPEND", KEYS[1], ARGV[1] or "-")`).Coalesce()

	ckScripts = []*multiplex.Script{ckShape, ckAppendAll, ckGuard, ckBoom, ckAppend1}
)

// ckKeys are the keys the drawn calls name; hashes among them make the
// scripts fail.
var ckKeys = []string{"k0", "k1", "k2", "k3", "k4", "k5"}

// TestCoalescedKeysMatchAlone is the property of CoalesceKeys: a drawn
// batch of calls, of scripts over several keys and single-key ones and
// plain commands, on overlapping drawn keys (some of the wrong type), is
// run on one master each call alone, in order, and on another through a
// pool, as one batch in which calls of one script coalesce. Each call
// must get the reply it got alone (error replies compared by message),
// and every key must be left the same.
func TestCoalescedKeysMatchAlone(t *testing.T) {
	c := redistest.StartT(t, 2)
	alone, coal := directClient(t, c.Addrs()[0]), directClient(t, c.Addrs()[1])
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: c.Addrs()[1:], Quarantine: quarantine.Off,
		NodeTimeout: 30 * time.Second, Scripts: ckScripts})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	if err := coal.Do(ctx, coal.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	scriptCalls := 0
	rapid.Check(t, func(rt *rapid.T) {
		mustDo(rt, alone, coal, "FLUSHALL")
		for _, k := range ckKeys {
			switch rapid.IntRange(0, 3).Draw(rt, "state of "+k) {
			case 1:
				mustDo(rt, alone, coal, "SET", k, "s")
			case 2:
				mustDo(rt, alone, coal, "HSET", k, "f", "1")
			}
		}
		cmds := rapid.SliceOfN(ckCommand(), 8, 40).Draw(rt, "commands")
		want := make([]string, len(cmds))
		for i, cmd := range cmds {
			want[i] = renderResult(alone.Do(ctx, alone.B().Arbitrary(aloneArgs(cmd)...).Build()))
			if cmd.Script != nil {
				scriptCalls++
			}
		}
		got := postBatch(rt, p, cmds)
		for i, cmd := range cmds {
			if got[i] != want[i] {
				rt.Errorf("call %d (%s): %s coalesced, %s alone", i, describe(cmd), got[i], want[i])
			}
		}
		for _, k := range ckKeys {
			if g, w := dump(coal, k), dump(alone, k); g != w {
				rt.Errorf("key %s: %s coalesced, %s alone", k, g, w)
			}
		}
	})
	calls := 0
	if txt, err := coal.Do(ctx, coal.B().Info().Section("commandstats").Build()).ToString(); err == nil {
		if _, rest, ok := strings.Cut(txt, "cmdstat_evalsha:calls="); ok {
			calls, _ = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		}
	}
	t.Logf("%d EVALSHA for %d script calls", calls, scriptCalls)
	if calls == 0 || calls >= scriptCalls {
		t.Errorf("%d EVALSHA for %d script calls: nothing was coalesced", calls, scriptCalls)
	}
}

// ckCommand draws one call: of a script over several keys, with or
// without further keys; of the single-key script, now and then with
// further keys (not coalesced); or a plain APPEND.
func ckCommand() *rapid.Generator[multiplex.Command] {
	return rapid.Custom(func(rt *rapid.T) multiplex.Command {
		var cmd multiplex.Command
		switch kind := rapid.IntRange(0, 9).Draw(rt, "kind"); {
		case kind < 7:
			cmd.Script = []*multiplex.Script{ckShape, ckAppendAll, ckGuard, ckBoom, ckGuard, ckAppendAll, ckBoom}[kind]
		case kind < 9:
			cmd.Script = ckAppend1
		default:
			cmd.Name = "APPEND"
		}
		keys := rapid.SliceOfNDistinct(rapid.SampledFrom(ckKeys), 1, 4, rapid.ID[string]).Draw(rt, "keys")
		cmd.Key = keys[0]
		if cmd.Script != nil && (len(keys) > 1 || rapid.Bool().Draw(rt, "empty further keys")) && (cmd.Script != ckAppend1 || rapid.IntRange(0, 3).Draw(rt, "further") == 0) {
			rest := keys[1:]
			cmd.Keys = &rest
		}
		args := rapid.SliceOfN(rapid.SampledFrom([]string{"a", "b", "boom", "", "x y"}), 0, multiplex.MaxArgs).Draw(rt, "args")
		if cmd.Script == nil && len(args) == 0 {
			args = []string{"p"}
		}
		cmd.NArgs = uint8(copy(cmd.Args[:], args))
		return cmd
	})
}

// aloneArgs is cmd as its own command: EVAL of the script's body.
func aloneArgs(cmd multiplex.Command) []string {
	if cmd.Script == nil {
		return append([]string{cmd.Name, cmd.Key}, cmd.Args[:cmd.NArgs]...)
	}
	a := []string{"EVAL", cmd.Script.Body, "", cmd.Key}
	if cmd.Keys != nil {
		a = append(a, *cmd.Keys...)
	}
	a[2] = strconv.Itoa(len(a) - 3)
	return append(a, cmd.Args[:cmd.NArgs]...)
}

func describe(cmd multiplex.Command) string {
	name := cmd.Name
	if cmd.Script != nil {
		name = strings.SplitN(cmd.Script.Body, "\n", 2)[0]
	}
	keys := []string{cmd.Key}
	if cmd.Keys != nil {
		keys = append(keys, *cmd.Keys...)
	}
	return fmt.Sprintf("%.40q keys %q args %q", name, keys, cmd.Args[:cmd.NArgs])
}

// postBatch holds the pool's only worker on a busy script, posts cmds
// behind it so that they leave as one batch, and returns each reply.
func postBatch(rt *rapid.T, p *multiplex.Pool, cmds []multiplex.Command) []string {
	got := make([]string, len(cmds))
	var wg sync.WaitGroup
	wg.Add(len(cmds))
	p.Post(busyFor(20*time.Millisecond), anyReply, nil)
	time.Sleep(5 * time.Millisecond)
	for i, cmd := range cmds {
		p.Post(cmd, func(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
			got[i] = renderResult(res)
			wg.Done()
			return multiplex.OK, 0, nil
		}, nil)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		rt.Fatal("the batch's replies did not all come within 30s")
	}
	return got
}

// busyFor is a script that keeps the master busy for d.
func busyFor(d time.Duration) multiplex.Command {
	return multiplex.Command{Name: "EVAL", Key: `local t = redis.call("TIME")
local s = t[1] * 1000000 + t[2]
while true do
  t = redis.call("TIME")
  if t[1] * 1000000 + t[2] - s > tonumber(ARGV[1]) then return 1 end
end`, Args: [multiplex.MaxArgs]string{"0", strconv.FormatInt(d.Microseconds(), 10)}, NArgs: 2}
}

func mustDo(rt *rapid.T, a, b rueidis.Client, args ...string) {
	for _, cl := range []rueidis.Client{a, b} {
		if err := cl.Do(context.Background(), cl.B().Arbitrary(args...).Build()).Error(); err != nil {
			rt.Fatalf("%q: %v", args, err)
		}
	}
}

// renderResult is a reply as text; an error reply by its message, less
// the script's name and line that Redis adds when an error leaves a
// script (a coalesced call's member's error does not leave it).
func renderResult(res rueidis.RedisResult) string {
	m, err := res.ToMessage()
	if err != nil && !rueidis.IsRedisNil(err) {
		if _, ok := rueidis.IsRedisErr(err); !ok {
			return "failed(" + err.Error() + ")"
		}
	}
	return render(m)
}

func render(m rueidis.RedisMessage) string {
	if err := m.Error(); err != nil {
		if rueidis.IsRedisNil(err) {
			return "nil"
		}
		msg, _, _ := strings.Cut(err.Error(), " script: ")
		return "error(" + msg + ")"
	}
	switch {
	case m.IsArray():
		arr, _ := m.ToArray()
		parts := make([]string, len(arr))
		for i := range arr {
			parts[i] = render(arr[i])
		}
		return "[" + strings.Join(parts, " ") + "]"
	case m.IsInt64():
		v, _ := m.AsInt64()
		return strconv.FormatInt(v, 10)
	case m.IsString():
		s, _ := m.ToString()
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%#v", m)
}

// dump is what a key holds: its type, and a string's value.
func dump(cl rueidis.Client, k string) string {
	ctx := context.Background()
	typ, _ := cl.Do(ctx, cl.B().Type().Key(k).Build()).ToString()
	if typ == "string" {
		v, _ := cl.Do(ctx, cl.B().Get().Key(k).Build()).ToString()
		return strconv.Quote(v)
	}
	return typ
}

// A coalesced call over several keys keeps its place among the batch's
// commands on each of its keys, further keys included: a later command on
// one of them does not join an earlier group of its script, and it does
// not join one that runs before an earlier command on one of them.
func TestCoalescedKeysKeepPerKeyOrder(t *testing.T) {
	for name, got := range coalescedKeysOrder(t) {
		if got != "12" {
			t.Errorf("%s: key k is %q after APPEND 1 then APPEND 2: the later command ran first", name, got)
		}
	}
}

// The control: with coalesce-first-key-only on, a call over several keys
// is placed by its first key alone, and one of the cases runs out of
// order.
func TestCoalescedKeysKeepPerKeyOrderControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.CoalesceFirstKeyOnly.Set(true)()
	wrong := 0
	for name, got := range coalescedKeysOrder(t) {
		t.Logf("%s: key k is %q", name, got)
		if got != "12" {
			wrong++
		}
	}
	if wrong == 0 {
		t.Fatal("every case kept its order with the further keys left out of the plan: the test cannot fail")
	}
}

// coalescedKeysOrder runs the cases and returns what each left in key k
// ("12" when in order).
func coalescedKeysOrder(t *testing.T) map[string]string {
	c := redistest.StartT(t, 1)
	cl := directClient(t, c.Addrs()[0])
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: c.Addrs(), Quarantine: quarantine.Off,
		NodeTimeout: 30 * time.Second, Scripts: ckScripts})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	arg := func(s string) [multiplex.MaxArgs]string { return [multiplex.MaxArgs]string{s} }
	out := map[string]string{}
	for _, tc := range []struct {
		name string
		cmds []multiplex.Command
	}{
		// appendAll on "other" starts a group; APPEND 1 on k (single-key
		// script) runs after it; appendAll on j and k, whose further key
		// k has that earlier command, must not join the first group.
		{"further key checked", []multiplex.Command{
			{Script: ckAppendAll, Key: "other", Keys: &[]string{}, Args: arg("x"), NArgs: 1},
			{Script: ckAppend1, Key: "k", Args: arg("1"), NArgs: 1},
			{Script: ckAppendAll, Key: "j", Keys: &[]string{"k"}, Args: arg("2"), NArgs: 1},
		}},
		// append1 on "other" starts a group; appendAll on j and k runs
		// after it; APPEND 2 on k (single-key script) must not join the
		// first group, which runs before.
		{"further key recorded", []multiplex.Command{
			{Script: ckAppend1, Key: "other", Args: arg("x"), NArgs: 1},
			{Script: ckAppendAll, Key: "j", Keys: &[]string{"k"}, Args: arg("1"), NArgs: 1},
			{Script: ckAppend1, Key: "k", Args: arg("2"), NArgs: 1},
		}},
	} {
		if err := cl.Do(context.Background(), cl.B().Flushall().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		postOneBatch(t, p, c.Nodes[0], tc.cmds...)
		out[tc.name] = appended(t, cl)
	}
	return out
}

// A cluster vote coalesces calls over several keys by slot: each call's
// keys share a hash tag, one of six (so that the calls of one slot can
// coalesce, and those of others must not join them), and every call must
// get its own reply from the shard that owns its slot.
func TestClusterVoteCoalescesKeysBySlot(t *testing.T) {
	incrAll := multiplex.NewScript(`local s = 0
for i = 1, #KEYS do
  s = s + redis.call("INCRBY", KEYS[i], ARGV[1])
end
return s`).CoalesceKeys()
	cl := redistest.StartClustersT(t, 1, redistest.ClusterOptions{Shards: 3})[0]
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Clusters: [][]string{cl.Seeds()},
		Quarantine: quarantine.Off, NodeTimeout: patientTimeout, DialTimeout: patientTimeout, Scripts: []*multiplex.Script{incrAll}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	direct, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Seeds(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	before := clusterEvalsha(t, direct)
	const n = 600
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			tag := "{t" + strconv.Itoa(i%6) + "}" + strconv.Itoa(i)
			keys := []string{tag + "b", tag + "c"}
			cmd := multiplex.Command{Script: incrAll, Key: tag + "a", Keys: &keys, Args: [multiplex.MaxArgs]string{strconv.Itoa(i + 1)}, NArgs: 1}
			v := p.Fanout(ctx, cmd, classifyInt, nil, nil).Votes[0]
			if v.Outcome != multiplex.OK || v.Value != int64(3*(i+1)) {
				errs <- tag + ": " + v.Outcome.String() + " " + strconv.FormatInt(v.Value, 10) + " " + errString(v.Err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for _, i := range []int{0, 17, 599} {
		k := "{t" + strconv.Itoa(i%6) + "}" + strconv.Itoa(i) + "c"
		if v, err := direct.Do(ctx, direct.B().Get().Key(k).Build()).AsInt64(); err != nil || v != int64(i+1) {
			t.Errorf("GET %s in the cluster: %d, %v", k, v, err)
		}
	}
	calls := clusterEvalsha(t, direct) - before
	t.Logf("%d EVALSHA in the cluster for %d calls", calls, n)
	if calls >= n {
		t.Errorf("%d EVALSHA for %d calls: nothing was coalesced", calls, n)
	}
}

// clusterEvalsha is the EVALSHA calls of every primary of the cluster.
func clusterEvalsha(t *testing.T, c rueidis.Client) int {
	t.Helper()
	total := 0
	for _, node := range c.Nodes() {
		txt, err := node.Do(context.Background(), node.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		if _, rest, ok := strings.Cut(txt, "cmdstat_evalsha:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			total += n
		}
	}
	return total
}
