package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// rwStates are the read/write lock's states on one master, for its
// scripts' tests. Commands name "K" the lock key, "Q" its intents, "M"
// its mark, "F" its fencing counter and "S" the permit count of a
// semaphore of its name; "V" is our lease's value, "I" our waiter's id;
// "+" and "-" scores become live and expired expiries in µs of the clock.
var rwStates = []struct {
	name  string
	setup [][]string
}{
	{"none", nil},
	{"reader-ours", [][]string{{"ZADD", "K", "0", rwMember, "+", "V"}}},
	{"reader-ours-expired", [][]string{{"ZADD", "K", "0", rwMember, "-", "V"}}},
	{"writer-ours", [][]string{{"ZADD", "K", "0", rwMember, "-+", "V"}}},
	{"writer-ours-expired", [][]string{{"ZADD", "K", "0", rwMember, "--", "V"}}},
	{"readers", [][]string{{"ZADD", "K", "0", rwMember, "+", "r1", "+", "r2"}}},
	{"readers-and-ours-marked", [][]string{{"ZADD", "K", "0", rwMember, "+", "r1", "+", "V"}, {"SET", "M", "1"}}},
	{"reader-ours-marked", [][]string{{"ZADD", "K", "0", rwMember, "+", "V"}, {"SET", "M", "1"}}},
	{"writer", [][]string{{"ZADD", "K", "0", rwMember, "-+", "w1"}}},
	{"writer-expired", [][]string{{"ZADD", "K", "0", rwMember, "--", "w1"}}},
	{"intent", [][]string{{"ZADD", "Q", "+", "other"}}},
	{"intent-expired", [][]string{{"ZADD", "Q", "-", "other"}}},
	{"intent-ours-readers-marked", [][]string{{"ZADD", "K", "0", rwMember, "+", "r1"}, {"ZADD", "Q", "+", "I"}, {"SET", "M", "1"}}},
	{"plain-lock", [][]string{{"SET", "K", "x", "PX", "60000"}}},
	{"hash", [][]string{{"HSET", "K", "f", "1"}}},
	{"zset-not-ours", [][]string{{"ZADD", "K", "1", "a"}}},
	{"semaphore", [][]string{{"SET", "S", "3", "PX", "60000"}}},
	{"fenced-writer-ours", [][]string{{"ZADD", "K", "0", rwMember, "-+", "V"}, {"SET", "F", "9000000000000000"}}},
	{"fence-not-int", [][]string{{"SET", "F", "x"}}},
}

// rwRefusedByW1 is an acquire's answer where the writer w1 holds the
// lock: refused, naming w1.
var rwRefusedByW1 = "refused " + strconv.FormatInt(holderHash("w1"), 10)

// rwCases are the scripts with one key's arguments ("S": the key's
// semaphore count key), and what each must answer in some states (a
// prefix of its outcome; a master's clock reads 1).
var rwCases = []struct {
	scriptCase
	want map[string]string
}{
	{scriptCase{"acquire-r", rwAcquireScript, []string{"V", "60000", "r", "", "S", "60000"}, classifyRW}, map[string]string{
		"none": "ok 1", "readers": "ok 1", "reader-ours-expired": "ok 1", "writer": rwRefusedByW1, "writer-expired": "ok 1",
		"intent": "refused 6", "intent-expired": "ok 1", "plain-lock": "error reply=true code=WRONGTYPE",
		"hash": "error reply=true code=WRONGTYPE", "zset-not-ours": "error reply=true code=WRONGTYPE", "semaphore": "ok 1"}},
	{scriptCase{"acquire-refresh", rwAcquireScript, []string{"V", "60000", "rm", "", "S", "60000"}, classifyRW}, map[string]string{
		"none": "ok 1", "semaphore": "error reply=true code=WRONGTYPE"}},
	{scriptCase{"acquire-mark", rwAcquireScript, []string{"V", "60000", "rn", "", "S", "60000"}, classifyRW}, map[string]string{
		"writer": rwRefusedByW1, "readers": "ok 1"}},
	{scriptCase{"acquire-w", rwAcquireScript, []string{"V", "60000", "w", "", "S", "60000"}, classifyRW}, map[string]string{
		"none": "ok 1", "readers": "refused 4", "writer": rwRefusedByW1, "writer-expired": "ok 1", "intent": "ok 1",
		"reader-ours-expired": "ok 1", "plain-lock": "error reply=true code=WRONGTYPE"}},
	{scriptCase{"acquire-w-waiter", rwAcquireScript, []string{"V", "60000", "wqn", "I", "S", "60000"}, classifyRW}, map[string]string{
		"readers": "refused 4", "intent-ours-readers-marked": "refused 4", "none": "ok 1"}},
	{scriptCase{"acquire-w-fenced", rwAcquireScript, []string{"V", "60000", "wf", "", "S", "60000"}, classifyRW}, map[string]string{
		"none": "ok 1", "fenced-writer-ours": "refused ", "fence-not-int": "error reply=true"}},
	{scriptCase{"release", rwReleaseScript, []string{"V"}, classifyInt}, map[string]string{
		"reader-ours": "ok 1", "writer-ours": "ok 1", "reader-ours-expired": "refused 0", "writer-ours-expired": "refused 0",
		"readers": "refused 0", "none": "refused 0", "plain-lock": "refused 0", "reader-ours-marked": "ok 1"}},
	{scriptCase{"undo", rwUndoScript, []string{"V"}, classifyInt}, map[string]string{
		"reader-ours": "ok 1", "reader-ours-marked": "ok 1"}},
	{scriptCase{"undo-silent", rwUndoSilentScript, []string{"V"}, classifyInt}, map[string]string{
		"reader-ours": "ok 1", "reader-ours-marked": "ok 1"}},
	{scriptCase{"extend", rwExtendScript, []string{"V", "90000", "0", "", "S", "60000"}, classifyInt}, map[string]string{
		"reader-ours": "ok 1", "writer-ours": "ok 1", "reader-ours-expired": "refused 0", "writer-ours-expired": "refused 0",
		"none": "refused 0", "readers": "refused 0", "plain-lock": "refused 0"}},
	{scriptCase{"fence", rwFenceScript, []string{"9000000000000005", "V", "60000"}, classifyInt}, map[string]string{
		"writer-ours": "ok 9000000000000005", "fenced-writer-ours": "ok 9000000000000005", "reader-ours": "refused 0",
		"writer-ours-expired": "refused -1", "none": "refused -1", "writer": "refused 0", "readers": "refused 0", "writer-expired": "refused -1"}},
	{scriptCase{"quit", rwQuitScript, []string{"I"}, classifyInt}, map[string]string{
		"intent-ours-readers-marked": "ok 1", "intent": "refused 0"}},
}

// TestRWScripts runs each of the read/write lock's scripts in every state
// on one master, key by key, checking the answers rwCases names, and on
// another as one coalesced call over the same keys: each key's answer,
// what is left of it, and what was published must be the same.
func TestRWScripts(t *testing.T) {
	for _, s := range rwScripts {
		if s != rwKindScript && !slices.ContainsFunc(rwCases, func(c struct {
			scriptCase
			want map[string]string
		}) bool {
			return c.s == s
		}) {
			t.Errorf("a script is not tested here: %.60q", s.Body)
		}
	}
	c := redistest.StartT(t, 2)
	single, multi := direct(t, c.Nodes[0].Addr()), direct(t, c.Nodes[1].Addr())
	pubSingle, pubMulti := subscribe(t, c.Nodes[0].Addr()), subscribe(t, c.Nodes[1].Addr())
	ctx := context.Background()
	for _, tc := range rwCases {
		for _, body := range []string{tc.s.Body, tc.s.Multi.Body} {
			must(t, single, "SCRIPT", "LOAD", body)
			must(t, multi, "SCRIPT", "LOAD", body)
		}
		keys := make([]string, len(rwStates))
		args := make([][]string, len(rwStates))
		for i, st := range rwStates {
			k := tc.name + ":" + st.name
			keys[i] = k
			args[i] = rwArgs(tc.args, k, i)
			for _, cl := range []rueidis.Client{single, multi} {
				for _, cmd := range st.setup {
					must(t, cl, rwSetup(cmd, k, i)...)
				}
			}
		}
		// A fenced acquire answers the master's clock: the two differ.
		clock := strings.HasPrefix(tc.name, "acquire")
		want := make([]string, len(keys))
		for i, k := range keys {
			res := single.Do(ctx, single.B().Evalsha().Sha1(tc.s.SHA).Numkeys(1).Key(k).Arg(args[i]...).Build())
			want[i] = outcome(tc.classify, res, clock)
			if w, ok := tc.want[rwStates[i].name]; ok && !strings.HasPrefix(want[i], w) {
				t.Errorf("%s: %q, want %q", k, want[i], w)
			}
		}
		call := append([]string{tc.s.Multi.SHA, strconv.Itoa(len(keys))}, keys...)
		for i := range keys {
			call = append(append(call, strconv.Itoa(len(args[i]))), args[i]...)
		}
		arr, err := multi.Do(ctx, multi.B().Arbitrary("EVALSHA").Args(call...).Build()).ToArray()
		if err != nil || len(arr) != len(keys) {
			t.Fatalf("%s: coalesced call: %d replies, %v", tc.name, len(arr), err)
		}
		for i, k := range keys {
			if got := outcome(tc.classify, rueidis.NewResult(arr[i], nil), clock); got != want[i] {
				t.Errorf("%s: %q coalesced, %q alone", k, got, want[i])
			}
			if got, want := rwState(t, multi, k), rwState(t, single, k); got != want {
				t.Errorf("%s: left %s coalesced, %s alone", k, got, want)
			}
		}
	}
	got, want := pubMulti(), pubSingle()
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("published %q coalesced, %q alone", got, want)
	}
}

// rwArgs are a case's arguments for key k of state i.
func rwArgs(args []string, k string, i int) []string {
	a := slices.Clone(args)
	for j := range a {
		switch a[j] {
		case "V":
			a[j] = "v" + strconv.Itoa(i)
		case "I":
			a[j] = "id" + strconv.Itoa(i)
		case "S":
			a[j] = semPrefix + "{" + k + "}:permits"
		}
	}
	return a
}

// rwSetup is a state's command for key k of state i.
func rwSetup(cmd []string, k string, i int) []string {
	cmd = slices.Clone(cmd)
	cmd[1] = map[string]string{"K": k, "Q": rwPrefix + k, "M": rwMarkPrefix + k, "F": fencePrefix + k,
		"S": semPrefix + "{" + k + "}:permits"}[cmd[1]]
	now := time.Now().UnixMicro()
	for j := 2; j < len(cmd); j++ {
		switch cmd[j] {
		case "+":
			cmd[j] = strconv.FormatInt(now+60e6, 10)
		case "-":
			cmd[j] = strconv.FormatInt(now-1e6, 10)
		case "-+":
			cmd[j] = strconv.FormatInt(-(now + 60e6), 10)
		case "--":
			cmd[j] = strconv.FormatInt(-(now - 1e6), 10)
		case "V":
			cmd[j] = "v" + strconv.Itoa(i)
		case "I":
			cmd[j] = "id" + strconv.Itoa(i)
		}
	}
	return cmd
}

// rwState is what the scripts left of key k: each entry as live reader,
// live writer, expired or the marker, whether the key expires, its
// intents, mark, fencing counter and semaphore mark.
func rwState(t *testing.T, c rueidis.Client, k string) string {
	t.Helper()
	ctx := context.Background()
	typ, _ := c.Do(ctx, c.B().Type().Key(k).Build()).ToString()
	var entries []string
	if typ == "zset" {
		zs, err := c.Do(ctx, c.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil {
			t.Fatal(err)
		}
		now := float64(time.Now().UnixMicro())
		for _, z := range zs {
			what := "expired"
			switch {
			case z.Member == rwMember:
				what = "marker"
			case z.Score > now:
				what = "reader"
			case z.Score < -now:
				what = "writer"
			}
			entries = append(entries, z.Member+"="+what)
		}
	}
	pttl, _ := c.Do(ctx, c.B().Pttl().Key(k).Build()).AsInt64()
	intents, _ := c.Do(ctx, c.B().Zrange().Key(rwPrefix+k).Min("0").Max("-1").Build()).AsStrSlice()
	mark, _ := c.Do(ctx, c.B().Exists().Key(rwMarkPrefix+k).Build()).AsInt64()
	fence, _ := c.Do(ctx, c.B().Get().Key(fencePrefix+k).Build()).ToString()
	sem, _ := c.Do(ctx, c.B().Get().Key(semPrefix+"{"+k+"}:permits").Build()).ToString()
	return fmt.Sprintf("%s %v expires=%v intents=%q mark=%d fence=%q sem=%q", typ, entries, pttl > 0, intents, mark, fence, sem)
}

// TestRWFormsCoverTheLeaseScripts: every script a lease's release, undo,
// extension and fence send has a read/write lock's form.
func TestRWFormsCoverTheLeaseScripts(t *testing.T) {
	for _, s := range []*multiplex.Script{releaseScript, releaseScriptGhost, undoScript, semReleaseScript, extendScript, fenceScript} {
		if f := rwForm(s); f == nil || !strings.Contains(f.Body, rwNowLua) {
			t.Errorf("no read/write form of %.40q", s.Body)
		}
	}
}

// The release that frees the lock while a waiting writer's intent lives
// wakes the writers alone: it publishes on the intents' channel and
// leaves the readers' mark for the writer's release, which, with no
// intent left, publishes on the lock's channel and takes the mark.
func TestRWReleaseWakesTheWritersFirst(t *testing.T) {
	c := redistest.StartT(t, 1)
	addr := c.Nodes[0].Addr()
	cl := direct(t, addr)
	published := subscribe(t, addr)
	k, live := "wake", strconv.FormatInt(time.Now().UnixMicro()+60e6, 10)
	must(t, cl, "ZADD", k, "0", rwMember, live, "reader")
	must(t, cl, "ZADD", rwPrefix+k, live, "writer-id")
	must(t, cl, "SET", rwMarkPrefix+k, "1")
	must(t, cl, "EVAL", rwReleaseScript.Body, "1", k, "reader")
	writers := releasedPrefix + rwPrefix + k + "="
	if got := published(); !slices.Equal(got, []string{writers}) {
		t.Fatalf("the readers' last release, a writer waiting: published %q, want %q", got, writers)
	}
	if n, _ := cl.Do(context.Background(), cl.B().Exists().Key(rwMarkPrefix+k).Build()).AsInt64(); n != 1 {
		t.Fatal("the readers' mark went with a release that woke the writers only")
	}
	// The writer holds (its intent gone), and releases.
	must(t, cl, "ZREM", rwPrefix+k, "writer-id")
	must(t, cl, "ZADD", k, "0", rwMember, "-"+live, "writer")
	must(t, cl, "EVAL", rwReleaseScript.Body, "1", k, "writer")
	readers := releasedPrefix + k + "="
	want := []string{writers, readers}
	slices.Sort(want) // as published() reports them
	if got := published(); !slices.Equal(got, want) {
		t.Fatalf("the writer's release: published %q, want %q", got, want)
	}
	if n, _ := cl.Do(context.Background(), cl.B().Exists().Key(rwMarkPrefix+k).Build()).AsInt64(); n != 0 {
		t.Error("the readers' mark outlived the release that woke them")
	}
}

// TestRWHeldTellsASplitFromAHolder: a waiter sleeps for a release only
// when what refused it on a quorum will publish when it goes.
func TestRWHeldTellsASplitFromAHolder(t *testing.T) {
	a, b := holderHash("writer-a"), holderHash("writer-b")
	for _, c := range []struct {
		name string
		by   []int64 // each master's refusal; 0: admitted
		held bool
	}{
		{"one writer everywhere", []int64{a, a, a, a, a}, true},
		{"one writer on a bare quorum, two waiters on the rest", []int64{a, a, a, b, 0}, true},
		{"writers split the masters", []int64{a, a, 0, b, b}, false},
		{"writers split, none admitted", []int64{a, b, b, a, 0}, false},
		{"readers", []int64{rwByReaders, rwByReaders, rwByReaders, 0, 0}, true},
		{"readers and intents", []int64{rwByReaders, rwByIntent, rwByIntent, 0, 0}, true},
		{"a writer and an intent, no quorum of either", []int64{a, a, rwByIntent, 0, 0}, false},
		{"refused on a minority", []int64{a, a, 0, 0, 0}, false},
	} {
		ve := &VotesError{Kind: ErrNotAcquired, Quorum: 3}
		for _, v := range c.by {
			o := OutcomeOK
			if v != 0 {
				o = OutcomeRefused
				ve.Refused++
			}
			ve.Votes = append(ve.Votes, Vote{Outcome: o, value: v})
		}
		if got := rwHeld(ve); got != c.held {
			t.Errorf("%s: held %v, want %v", c.name, got, c.held)
		}
	}
}

// TestRWUndoPublishes: an undo publishes only where it frees the master
// from a live reader's entry while a writer's intent lives, and then on
// the intents' channel alone (the writers'); a writer's undo, a reader's
// where no intent lives or another reader holds on, publish nothing.
func TestRWUndoPublishes(t *testing.T) {
	c := redistest.StartT(t, 1)
	cl := direct(t, c.Nodes[0].Addr())
	published := subscribe(t, c.Nodes[0].Addr())
	ctx := context.Background()
	for _, s := range []*multiplex.Script{rwUndoScript, rwUndoSilentScript} {
		must(t, cl, "SCRIPT", "LOAD", s.Body)
	}
	for i, tc := range []struct {
		script *multiplex.Script
		state  [][]string
		want   bool
	}{
		{rwUndoScript, [][]string{{"ZADD", "K", "0", rwMember, "+", "V"}, {"ZADD", "Q", "+", "other"}}, true},
		{rwUndoScript, [][]string{{"ZADD", "K", "0", rwMember, "-+", "V"}, {"ZADD", "Q", "+", "other"}}, false},
		{rwUndoScript, [][]string{{"ZADD", "K", "0", rwMember, "+", "V", "+", "r1"}, {"ZADD", "Q", "+", "other"}}, false},
		{rwUndoScript, [][]string{{"ZADD", "K", "0", rwMember, "+", "V"}, {"ZADD", "Q", "-", "other"}, {"SET", "M", "1"}}, false},
		{rwUndoSilentScript, [][]string{{"ZADD", "K", "0", rwMember, "+", "V"}, {"ZADD", "Q", "+", "other"}}, false},
	} {
		k := fmt.Sprintf("undo-publishes:%d", i)
		before := published()
		for _, cmd := range tc.state {
			must(t, cl, rwSetup(cmd, k, 0)...)
		}
		if err := cl.Do(ctx, cl.B().Evalsha().Sha1(tc.script.SHA).Numkeys(1).Key(k).Arg("v0").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		// What this undo published: the cumulative list, less before.
		var got []string
		for _, m := range published() {
			if j := slices.Index(before, m); j >= 0 {
				before = slices.Delete(before, j, j+1)
			} else {
				got = append(got, m)
			}
		}
		want := []string(nil)
		if tc.want {
			want = []string{releasedPrefix + rwPrefix + k + "="}
		}
		if !slices.Equal(got, want) {
			t.Errorf("undo of %v: published %q, want %q", tc.state, got, want)
		}
		for _, r := range []string{k, rwPrefix + k, rwMarkPrefix + k} {
			must(t, cl, "DEL", r)
		}
	}
}
