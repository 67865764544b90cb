package engine

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// TestAllKeysFormsMatchSingle runs each script a lease on several
// resources runs in its all-keys form (allKeys) over keys in every state,
// on one master, and the single script key by key on another: each key
// must be left the same (value, expiry, fencing counter, queue), the same
// must be published, and the call must answer the keys' common answer,
// 0 when they differ, or an error when one failed. Each state is also
// run alone over three keys, where the answer is the single one's.
func TestAllKeysFormsMatchSingle(t *testing.T) {
	const id = "I"
	value := id + idEnd + "ours"
	states := []struct {
		name  string
		setup [][]string // on "K" the key, "F" its counter, "Q" its queue
	}{
		{"ours", [][]string{{"SET", "K", "V", "PX", "60000"}}},
		{"marked", [][]string{{"SET", "K", "V+", "PX", "60000"}}},
		{"marked-queued", [][]string{{"SET", "K", "V+", "PX", "60000"}, {"ZADD", "Q", "5", "I", "7", "next", "9", "last"}}},
		{"marked-queued-alone", [][]string{{"SET", "K", "V+", "PX", "60000"}, {"ZADD", "Q", "5", "I"}}},
		{"turn", [][]string{{"SET", "K", "~I", "PX", "60000"}, {"ZADD", "Q", "5", "I", "7", "next"}}},
		{"their-turn", [][]string{{"SET", "K", "~next", "PX", "60000"}, {"ZADD", "Q", "5", "next"}}},
		{"theirs", [][]string{{"SET", "K", "theirs", "PX", "60000"}}},
		{"theirs-marked-queued", [][]string{{"SET", "K", "theirs+", "PX", "60000"}, {"ZADD", "Q", "5", "I", "7", "next"}}},
		{"missing", nil},
		{"missing-queued-first", [][]string{{"ZADD", "Q", "5", "I", "7", "next"}}},
		{"fenced", [][]string{{"SET", "K", "V", "PX", "60000"}, {"SET", "F", "9000000000000000"}}},
		{"fenced-higher", [][]string{{"SET", "K", "V", "PX", "60000"}, {"SET", "F", "9000000000000009"}}},
		{"wrongtype", [][]string{{"HSET", "K", "f", "1"}}},
	}
	scripts := []struct {
		name string
		s    *multiplex.Script
		args []string
	}{
		{"release", releaseScript, []string{value}},
		{"undo", undoScript, []string{value}},
		{"extend", extendScript, []string{value, "90000"}},
		{"fence", fenceScript, []string{"9000000000000005", value, "60000"}},
		{"leave", leaveScript, []string{id}},
		{"quit", quitScript, []string{id}},
		{"zrem", zremScript, []string{id}},
	}
	for s := range allKeysForm {
		if s != releaseScriptGhost && !slices.ContainsFunc(scripts, func(sc struct {
			name string
			s    *multiplex.Script
			args []string
		}) bool {
			return sc.s == s
		}) {
			t.Errorf("a script's all-keys form is not compared here: %.60q", s.Body)
		}
	}
	c := redistest.StartT(t, 2)
	single, all := direct(t, c.Nodes[0].Addr()), direct(t, c.Nodes[1].Addr())
	pubSingle, pubAll := subscribe(t, c.Nodes[0].Addr()), subscribe(t, c.Nodes[1].Addr())
	replace := map[string]string{"V": value, "V+": value + waitMark, "~I": turnPrefix + id, "~next": turnPrefix + "next",
		"theirs+": "theirs" + waitMark, "I": id}
	// A call's keys: every state once, every state but the wrong type
	// (last) once, then each state alone three times.
	type call struct {
		name   string
		states []int
	}
	calls := []call{{"every-state", nil}, {"mixed", nil}}
	for i := range states {
		calls[0].states = append(calls[0].states, i)
		if i < len(states)-1 {
			calls[1].states = append(calls[1].states, i)
		}
		calls = append(calls, call{states[i].name, []int{i, i, i}})
	}
	for _, sc := range scripts {
		for _, cl := range calls {
			keys := make([]string, len(cl.states))
			for j, si := range cl.states {
				keys[j] = fmt.Sprintf("%s:%s:%d:%s", sc.name, cl.name, j, states[si].name)
				for _, r := range []rueidis.Client{single, all} {
					for _, cmd := range states[si].setup {
						cmd = slices.Clone(cmd)
						for a := 2; a < len(cmd); a++ {
							if v, ok := replace[cmd[a]]; ok {
								cmd[a] = v
							}
						}
						cmd[1] = map[string]string{"K": keys[j], "F": fencePrefix + keys[j], "Q": queuePrefix + keys[j]}[cmd[1]]
						must(t, r, cmd...)
					}
				}
			}
			var want string
			var replies, wantStates []string
			for _, k := range keys {
				res, st := statesAfter(t, single, single.B().Eval().Script(sc.s.Body).Numkeys(1).Key(k).Arg(sc.args...).Build(), k)
				wantStates = append(wantStates, st[0])
				n, err := res.AsInt64()
				if _, isReply := rueidis.IsRedisErr(err); isReply {
					if want == "" {
						want = "error"
					}
					continue
				}
				replies = append(replies, strconv.FormatInt(n, 10))
			}
			if want == "" {
				want = replies[0]
				for _, r := range replies {
					if r != replies[0] {
						want = "0"
					}
				}
			}
			form := allKeysForm[sc.s]
			res, states := statesAfter(t, all, all.B().Eval().Script(form.Body).Numkeys(int64(len(keys))).Key(keys...).Arg(sc.args...).Build(), keys...)
			got := "error"
			if n, err := res.AsInt64(); err == nil {
				got = strconv.FormatInt(n, 10)
			} else if _, isReply := rueidis.IsRedisErr(err); !isReply {
				t.Fatalf("%s over %s: %v", sc.name, cl.name, err)
			}
			if got != want {
				t.Errorf("%s over %s: answered %s, want %s (the keys alone: %v)", sc.name, cl.name, got, want, replies)
			}
			for i, k := range keys {
				if g, w := states[i], wantStates[i]; g != w {
					t.Errorf("%s: left %q by the all-keys form, %q alone", k, g, w)
				}
			}
		}
	}
	got, want := pubAll(), pubSingle()
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("published %q by the all-keys forms, %q alone", got, want)
	}
}
