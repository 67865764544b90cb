package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// direct opens a plain client to addr for set-up and inspection.
func direct(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true,
		DisableCache: true, ClientSetInfo: rueidis.DisableClientSetInfo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func must(t *testing.T, c rueidis.Client, args ...string) {
	t.Helper()
	if err := c.Do(context.Background(), c.B().Arbitrary(args[0]).Args(args[1:]...).Build()).Error(); err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("%v: %v", args, err)
	}
}

// keyState is what a script left behind on one key: the value (or type),
// whether it expires, and its fencing counter.
func keyState(t *testing.T, c rueidis.Client, key string) string {
	t.Helper()
	return keyStates(t, c, key)[0]
}

// stateLua reads a key's value, whether it expires, its fencing counter,
// its queue, and the slots and permit count of a semaphore named like it,
// for every key at once. A turn token lives 50 ms: read in the pipeline
// of the call under test (statesAfter), the keys are seen as the call left
// them however loaded the machine is.
const stateLua = `local function get(k)
  local ok, v = pcall(redis.call, 'GET', k)
  if ok and v then return v end
  return ''
end
local out = {}
for _, k in ipairs(KEYS) do
  local v = redis.call('TYPE', k)['ok']
  if v == 'string' then v = get(k) end
  local ok, q = pcall(redis.call, 'ZRANGE', ARGV[2] .. k, 0, -1, 'WITHSCORES')
  if not ok then q = {} end
  out[#out+1] = string.format('%s expires=%s fence=%q queue=[%s] sem=[%q %q %q]', v,
    tostring(redis.call('PTTL', k) > 0), get(ARGV[1] .. k), table.concat(q, ' '), get(k .. '0'), get(k .. '1'), get(k .. 'permits'))
end
return out`

// stateCmd reads keys' states (stateLua).
func stateCmd(c rueidis.Client, keys ...string) rueidis.Completed {
	return c.B().Eval().Script(stateLua).Numkeys(int64(len(keys))).Key(keys...).Arg(fencePrefix, queuePrefix).Build()
}

// keyStates is what stateLua reads of keys now.
func keyStates(t *testing.T, c rueidis.Client, keys ...string) []string {
	t.Helper()
	st, err := c.Do(context.Background(), stateCmd(c, keys...)).AsStrSlice()
	if err != nil {
		t.Fatalf("key states: %v", err)
	}
	return st
}

// statesAfter runs cmd and reads keys' states in the same pipeline, so
// that nothing the call left expires before it is read.
func statesAfter(t *testing.T, c rueidis.Client, cmd rueidis.Completed, keys ...string) (rueidis.RedisResult, []string) {
	t.Helper()
	res := c.DoMulti(context.Background(), cmd, stateCmd(c, keys...))
	st, err := res[1].AsStrSlice()
	if err != nil {
		t.Fatalf("key states: %v", err)
	}
	return res[0], st
}

// outcome is a reply as a caller's classifier sees it. Error texts are
// compared by their code: a script's own failure appends where it failed.
func outcome(classify multiplex.Classifier, res rueidis.RedisResult, clock bool) string {
	o, v, err := classify(res)
	if clock && o == multiplex.OK && v > 1e15 {
		v = 1 // a master's clock in µs: the two masters' differ
	}
	if err != nil {
		re, reply := rueidis.IsRedisErr(err)
		code := ""
		if reply {
			code, _, _ = strings.Cut(re.Error(), " ")
		}
		return fmt.Sprintf("%s reply=%v code=%s", o, reply, code)
	}
	return fmt.Sprintf("%s %d", o, v)
}

// subscribe collects what the master publishes on release channels. The
// function it returns reports what was published before it was called:
// it publishes a token of its own on a release channel and waits for it,
// which the master delivers after every message published before.
func subscribe(t *testing.T, addr string) func() []string {
	t.Helper()
	c, pub := direct(t, addr), direct(t, addr)
	var mu sync.Mutex
	var got []string
	synced := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Receive(ctx, c.B().Psubscribe().Pattern(releasedPrefix+"*").Build(), func(m rueidis.PubSubMessage) {
			if m.Channel == syncChannel {
				synced <- m.Message
				return
			}
			mu.Lock()
			got = append(got, m.Channel+"="+m.Message)
			mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(30 * time.Second); ; {
		if n, _ := redistest.Do(addr, time.Second, "PUBSUB", "NUMPAT"); n == ":1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("subscription not confirmed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	syncs := 0
	return func() []string {
		t.Helper()
		syncs++
		token := strconv.Itoa(syncs)
		if err := pub.Do(context.Background(), pub.B().Publish().Channel(syncChannel).Message(token).Build()).Error(); err != nil {
			t.Fatalf("PUBLISH: %v", err)
		}
		select {
		case got := <-synced:
			if got != token {
				t.Fatalf("subscriber synced on %q, want %q", got, token)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the subscriber did not receive its own publish")
		}
		mu.Lock()
		defer mu.Unlock()
		s := slices.Clone(got)
		slices.Sort(s)
		return s
	}
}

// syncChannel is a release channel that no resource's release uses, for
// subscribe's token.
const syncChannel = releasedPrefix + "\xffsubscribe-sync"

// holdWorkers keeps each of p's node workers (one per master) waiting for
// a reply, so that what is posted meanwhile leaves as one batch: a BLPOP
// on each master, which release (given a client of each master, in p's
// order) answers.
func holdWorkers(t *testing.T, p *multiplex.Pool, masters []rueidis.Client) (release func()) {
	t.Helper()
	key := fmt.Sprintf("\xffhold:%d", holds.Add(1))
	p.Post(multiplex.Command{Name: "BLPOP", Key: key, Args: [multiplex.MaxArgs]string{"0"}, NArgs: 1}, classifyInt, nil)
	return func() {
		t.Helper()
		for _, cl := range masters {
			must(t, cl, "LPUSH", key, "go")
		}
	}
}

var holds atomic.Int64

// scriptCase is a script with one key's arguments and its classifier.
type scriptCase struct {
	name     string
	s        *multiplex.Script
	args     []string
	classify multiplex.Classifier
}

// TestCoalescedScriptsMatchSingle runs every script on one master one key
// at a time, and on another as one coalesced call over the same keys in
// the same states: each key's reply (as its caller's classifier sees it),
// what is left of the key, its fencing counter and its queue of waiters,
// and what was published must be the same. A script whose arguments or
// states change must have its cases here changed with it.
func TestCoalescedScriptsMatchSingle(t *testing.T) {
	// Each key has a value and a waiter id of its own, so that a key
	// given another's arguments shows.
	const v, id, other = "V", "I", "theirs"
	ids := func(i int) string { return "id" + strconv.Itoa(i) }
	ours := func(i int) string { return ids(i) + idEnd + "ours" }
	states := []struct {
		name string
		// commands on "K" the key, "F" its fencing counter, "Q" its queue,
		// "S0", "S1" and "P" the slots and count of a semaphore whose keys
		// start with K; "V" and "I" as above
		setup [][]string
	}{
		{"ours", [][]string{{"SET", "K", "V", "PX", "60000"}}},
		{"marked", [][]string{{"SET", "K", "V" + waitMark, "PX", "60000"}}},
		{"marked-queued", [][]string{{"SET", "K", "V" + waitMark, "PX", "60000"}, {"ZADD", "Q", "5", "I", "7", "next", "9", "last"}}},
		{"marked-queued-alone", [][]string{{"SET", "K", "V" + waitMark, "PX", "60000"}, {"ZADD", "Q", "5", "I"}}},
		{"turn", [][]string{{"SET", "K", turnPrefix + "I", "PX", "60000"}, {"ZADD", "Q", "5", "I", "7", "next"}}},
		{"their-turn", [][]string{{"SET", "K", turnPrefix + "next", "PX", "60000"}, {"ZADD", "Q", "5", "next"}}},
		{"theirs", [][]string{{"SET", "K", other, "PX", "60000"}}},
		{"theirs-marked", [][]string{{"SET", "K", other + waitMark, "PX", "60000"}}},
		{"theirs-marked-queued", [][]string{{"SET", "K", other + waitMark, "PX", "60000"}, {"ZADD", "Q", "5", "I", "7", "next"}}},
		{"missing", nil},
		{"wrongtype", [][]string{{"HSET", "K", "f", "1"}}},
		{"fenced", [][]string{{"SET", "K", "V", "PX", "60000"}, {"SET", "F", "9000000000000000"}}},
		{"fence-not-int", [][]string{{"SET", "F", "x"}}},
		{"missing-fenced", [][]string{{"SET", "F", "9000000000000000"}}},
		{"slot-ours", [][]string{{"SET", "S0", "V", "PX", "60000"}}},
		{"slots-taken", [][]string{{"SET", "S0", other, "PX", "60000"}, {"SET", "S1", other + waitMark, "PX", "60000"}, {"SET", "P", "2"}}},
		{"slot-wrongtype", [][]string{{"HSET", "S0", "f", "1"}}},
		{"other-count", [][]string{{"SET", "P", "3", "PX", "60000"}}},
		// Last, so that the keys before it leave their further arguments
		// behind in a coalesced call: its own call has only the first.
		{"first-arg-only", [][]string{{"SET", "K", "V", "PX", "60000"}}},
	}
	keyArgs := func(args []string, i int) []string {
		a := slices.Clone(args)
		if i == len(states)-1 {
			a = a[:1]
		}
		for j := range a {
			switch a[j] {
			case v:
				a[j] = ours(i)
			case id:
				a[j] = ids(i)
			}
		}
		return a
	}
	scripts := []scriptCase{
		{"release", releaseScript, []string{v}, classifyInt},
		{"undo", undoScript, []string{v}, classifyInt},
		{"extend", extendScript, []string{v, "90000"}, classifyInt},
		{"acquire-mark", acquireMarkScript, []string{v, "60000", "6", id}, classifyAcquireGet},
		{"acquire-fence", acquireFenceScript, []string{v, "60000", "0"}, classifyFenced},
		{"acquire-fence-mark", acquireFenceScript, []string{v, "60000", "1", "6", id}, classifyFenced},
		{"fence", fenceScript, []string{"9000000000000005", v, "60000"}, classifyInt},
		{"leave", leaveScript, []string{id}, classifyInt},
		{"quit", quitScript, []string{id}, classifyInt},
		{"sem-acquire", semAcquireScript, []string{v, "60000", "2", "0", "", "60000"}, classifySem},
		{"sem-acquire-all", semAcquireScript, []string{v, "60000", "2", "1", "mwf", "60000"}, classifySem},
		{"sem-acquire-old", semAcquireScript, []string{v, "60000", "2", "1", "owc", "60000"}, classifySem},
		{"sem-release", semReleaseScript, []string{v}, classifyInt},
		{"sem-undo", semUndoScript, []string{v}, classifyInt},
		{"sem-sweep", semSweepScript, []string{v, "2", "-1"}, classifyInt},
	}
	for _, s := range allScripts {
		if !slices.ContainsFunc(scripts, func(sc scriptCase) bool { return sc.s == s }) {
			t.Errorf("a script is not compared here: %.60q", s.Body)
		}
	}
	c := redistest.StartT(t, 2)
	single, multi := direct(t, c.Nodes[0].Addr()), direct(t, c.Nodes[1].Addr())
	pubSingle, pubMulti := subscribe(t, c.Nodes[0].Addr()), subscribe(t, c.Nodes[1].Addr())
	for _, s := range allScripts {
		for _, body := range []string{s.Body, s.Multi.Body} {
			must(t, single, "SCRIPT", "LOAD", body)
			must(t, multi, "SCRIPT", "LOAD", body)
		}
	}
	for _, sc := range scripts {
		if sc.s.Multi == nil {
			t.Fatalf("%s: not coalesced", sc.name)
		}
		keys := make([]string, len(states))
		for i, st := range states {
			keys[i] = sc.name + ":" + st.name
			for _, cl := range []rueidis.Client{single, multi} {
				for _, cmd := range st.setup {
					cmd = slices.Clone(cmd)
					for j := 2; j < len(cmd); j++ {
						switch {
						case strings.HasPrefix(cmd[j], v):
							cmd[j] = ours(i) + cmd[j][1:]
						case strings.HasSuffix(cmd[j], id):
							cmd[j] = cmd[j][:len(cmd[j])-1] + ids(i)
						}
					}
					cmd[1] = map[string]string{"K": keys[i], "F": fencePrefix + keys[i], "Q": queuePrefix + keys[i],
						"S0": keys[i] + "0", "S1": keys[i] + "1", "P": keys[i] + "permits"}[cmd[1]]
					must(t, cl, cmd...)
				}
			}
		}
		want, wantState := make([]string, len(keys)), make([]string, len(keys))
		for i, k := range keys {
			res, st := statesAfter(t, single, single.B().Evalsha().Sha1(sc.s.SHA).Numkeys(1).Key(k).Arg(keyArgs(sc.args, i)...).Build(), k)
			want[i], wantState[i] = outcome(sc.classify, res, true), st[0]
		}
		args := append([]string{sc.s.Multi.SHA, strconv.Itoa(len(keys))}, keys...)
		for i := range keys {
			a := keyArgs(sc.args, i)
			args = append(append(args, strconv.Itoa(len(a))), a...)
		}
		res, states := statesAfter(t, multi, multi.B().Arbitrary("EVALSHA").Args(args...).Build(), keys...)
		arr, err := res.ToArray()
		if err != nil || len(arr) != len(keys) {
			t.Fatalf("%s: coalesced call: %d replies, %v", sc.name, len(arr), err)
		}
		for i, k := range keys {
			if got := outcome(sc.classify, rueidis.NewResult(arr[i], nil), true); got != want[i] {
				t.Errorf("%s: reply %q coalesced, %q alone", k, got, want[i])
			}
			if got, want := states[i], wantState[i]; got != want {
				t.Errorf("%s: left %q coalesced, %q alone", k, got, want)
			}
		}
	}
	got, want := pubMulti(), pubSingle()
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("published %q coalesced, %q alone", got, want)
	}
}

// commandCalls reads a command's calls from INFO commandstats.
func commandCalls(t *testing.T, c rueidis.Client, cmd string) int {
	t.Helper()
	txt, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(txt, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			calls, _ := strconv.Atoi(n)
			return calls
		}
	}
	return 0
}

// TestCoalescedRoundsRouteEachReply sends many concurrent releases over
// keys in different states through the pool: each caller must get its
// own key's outcome on every master, and the masters must have seen fewer
// script calls than releases. With coalescing off (the control) they see
// one per release, so the count check can fail. The releases start while
// the pool's workers are held (holdWorkers), which they let go once every
// caller is about to send: the first callers' releases wait together.
func TestCoalescedRoundsRouteEachReply(t *testing.T) {
	c := redistest.StartT(t, 3)
	cls := make([]rueidis.Client, 3)
	for i, a := range c.Addrs() {
		cls[i] = direct(t, a)
	}
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableCoalesce=%v", off), func(t *testing.T) {
			// A node timeout well past the workers' hold, however loaded
			// the machine.
			p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: c.Addrs(), Quarantine: quarantine.Off,
				NodeTimeout: 10 * time.Second, Scripts: allScripts, DisableCoalesce: off})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			const n = 600
			prefix := fmt.Sprintf("route%v:", off)
			for _, cl := range cls {
				must(t, cl, "CONFIG", "RESETSTAT")
				for i := range n {
					k := prefix + strconv.Itoa(i)
					switch i % 3 {
					case 0:
						must(t, cl, "SET", k, "v"+strconv.Itoa(i), "PX", "60000")
					case 1:
						must(t, cl, "SET", k, "someone else", "PX", "60000")
					case 2:
						must(t, cl, "HSET", k, "f", "1")
					}
				}
			}
			var wg, sending sync.WaitGroup
			errs := make(chan error, n)
			release := holdWorkers(t, p, cls)
			sending.Add(n)
			for i := range n {
				wg.Go(func() {
					le := &Lease{key: prefix + strconv.Itoa(i), value: "v" + strconv.Itoa(i)}
					sending.Done()
					tl := p.Fanout(context.Background(), le.releaseCommand(0, releaseScript), classifyInt, nil, nil)
					want := [...]multiplex.Outcome{multiplex.OK, multiplex.Refused, multiplex.Failed}[i%3]
					for node, v := range tl.Votes {
						_, reply := rueidis.IsRedisErr(v.Err)
						if v.Outcome != want || (want == multiplex.Failed && (!reply || !strings.HasPrefix(v.Err.Error(), "WRONGTYPE"))) {
							errs <- fmt.Errorf("release %d on node %d: %v %v, want %v", i, node, v.Outcome, v.Err, want)
							return
						}
					}
				})
			}
			sending.Wait()
			release()
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for node, cl := range cls {
				calls := commandCalls(t, cl, "evalsha")
				t.Logf("node %d: %d EVALSHA for %d releases", node, calls, n)
				if off && calls != n {
					t.Errorf("node %d: coalescing off, %d EVALSHA for %d releases", node, calls, n)
				}
				if !off && calls >= n {
					t.Errorf("node %d: %d EVALSHA for %d releases: nothing was coalesced", node, calls, n)
				}
				if k := prefix + "0"; keyState(t, cl, k) != `none expires=false fence="" queue=[] sem=["" "" ""]` {
					t.Errorf("node %d: %s left: %s", node, k, keyState(t, cl, k))
				}
			}
		})
	}
}

// TestCoalescedReloadsAfterRestart restarts a master, which forgets its
// scripts: a coalesced call there answers NOSCRIPT and must be sent again
// with the script's body, with every caller getting its own outcome.
// A master that forgot the scripts still gives each key its outcome, in
// coalesced calls. After a restart the new connection loads them before
// it carries a command, so nothing answers NOSCRIPT; after SCRIPT FLUSH
// on a live connection, the calls are sent again as EVAL.
func TestCoalescedReloadsAfterRestart(t *testing.T) {
	t.Run("restart", func(t *testing.T) { testCoalescedReload(t, true) })
	t.Run("script flush", func(t *testing.T) { testCoalescedReload(t, false) })
}

func testCoalescedReload(t *testing.T, restart bool) {
	c := redistest.StartT(t, 3)
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: c.Addrs(), Quarantine: quarantine.Off,
		NodeTimeout: 10 * time.Second, Scripts: allScripts})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if restart {
		if err := c.Nodes[0].Restart(ctx); err != nil {
			t.Fatal(err)
		}
	} else {
		must(t, direct(t, c.Nodes[0].Addr()), "SCRIPT", "FLUSH")
	}
	// Until the pool has a connection to the restarted master again.
	for {
		v := p.Fanout(ctx, multiplex.Command{Name: "EXISTS", Key: "x", WaitAll: true}, classifyInt, nil, nil).Votes[0]
		if v.Outcome == multiplex.Refused {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("restarted master not reached: %v", v.Err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	restarted := direct(t, c.Nodes[0].Addr())
	const n = 400
	for i := range n {
		if i%2 == 0 {
			must(t, restarted, "SET", "k"+strconv.Itoa(i), "v", "PX", "60000")
		}
	}
	// The releases start while the pool's workers are held, which they
	// let go once every caller is about to send: the first callers'
	// releases wait together, and go as coalesced calls.
	var wg, sending sync.WaitGroup
	var mu sync.Mutex
	wrong := 0
	var cls []rueidis.Client
	for _, a := range c.Addrs() {
		cls = append(cls, direct(t, a))
	}
	release := holdWorkers(t, p, cls)
	sending.Add(n)
	for i := range n {
		wg.Go(func() {
			le := &Lease{key: "k" + strconv.Itoa(i), value: "v"}
			sending.Done()
			v := p.Fanout(ctx, le.releaseCommand(0, releaseScript), classifyInt, nil, nil).Votes[0]
			if want := [...]multiplex.Outcome{multiplex.OK, multiplex.Refused}[i%2]; v.Outcome != want {
				mu.Lock()
				wrong++
				if wrong < 5 {
					t.Errorf("release %d on the restarted master: %v %v, want %v", i, v.Outcome, v.Err, want)
				}
				mu.Unlock()
			}
		})
	}
	sending.Wait()
	release()
	wg.Wait()
	eval, evalsha := commandCalls(t, restarted, "eval"), commandCalls(t, restarted, "evalsha")
	t.Logf("master 0: %d EVAL, %d EVALSHA for %d releases", eval, evalsha, n)
	switch {
	case evalsha >= n:
		t.Errorf("want coalesced calls: %d EVALSHA for %d releases", evalsha, n)
	case restart && eval != 0:
		t.Errorf("a restarted master answered NOSCRIPT (%d EVAL): the scripts were not loaded on the new connection", eval)
	case !restart && eval == 0:
		t.Errorf("want a NOSCRIPT reload after SCRIPT FLUSH: 0 EVAL")
	}
}

// TestLeaveScript: a waiter that acquired leaves a master's queue unless
// a marked lock of someone else holds the key there, whose release (maybe
// still on its way) will pop the queue and must pop this waiter, not wake
// the next (see TestLateReleaseDoesNotWakeTheNextWaiter).
func TestLeaveScript(t *testing.T) {
	const id = "w0"
	c := redistest.StartT(t, 1)
	cl := direct(t, c.Nodes[0].Addr())
	must(t, cl, "SCRIPT", "LOAD", leaveScript.Body)
	for _, tc := range []struct {
		name  string
		setup []string // a command on the key, or nil
		stays bool
	}{
		{"theirs-marked", []string{"SET", "K", "h" + idEnd + "v" + waitMark}, true},
		{"plain-marked", []string{"SET", "K", "v" + waitMark}, true},
		{"theirs-unmarked", []string{"SET", "K", "h" + idEnd + "v"}, false},
		{"ours-marked", []string{"SET", "K", id + idEnd + "v" + waitMark}, false},
		{"turn", []string{"SET", "K", turnPrefix + "w1"}, false},
		{"turn-marked", []string{"SET", "K", turnPrefix + "w1" + waitMark}, false},
		{"missing", nil, false},
		{"wrongtype", []string{"HSET", "K", "f", "1"}, false},
	} {
		key := "leave:" + tc.name
		if tc.setup != nil {
			cmd := append([]string{tc.setup[0], key}, tc.setup[2:]...)
			must(t, cl, cmd...)
		}
		must(t, cl, "ZADD", queuePrefix+key, "1", id, "2", "w1")
		res := cl.Do(context.Background(), cl.B().Evalsha().Sha1(leaveScript.SHA).Numkeys(1).Key(key).Arg(id).Build())
		if err := res.Error(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err := cl.Do(context.Background(), cl.B().Zscore().Key(queuePrefix+key).Member(id).Build()).Error()
		if stays := err == nil; stays != tc.stays {
			t.Errorf("%s: waiter still queued %v, want %v", tc.name, stays, tc.stays)
		}
		if n, _ := cl.Do(context.Background(), cl.B().Zcard().Key(queuePrefix+key).Build()).AsInt64(); n < 1 {
			t.Errorf("%s: the other waiter left the queue too", tc.name)
		}
	}
}
