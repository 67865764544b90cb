package multiplex

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redis/rueidis"
)

// maxCoalesce is the most keys one coalesced script call carries (one
// call may carry more alone: up to its own keys). A call runs its keys
// back to back on the master, which serves nobody else meanwhile: at
// under a microsecond a key, 128 keys keep that pause near a tenth of a
// millisecond, while the script call's fixed cost is already spread thin.
const maxCoalesce = 128

// Coalesce gives s a Multi: its body run for each key of one call, so
// that single and coalesced calls cannot drift apart, and returns s. The
// body must use only KEYS[1] and ARGV. Call it before s is given to Dial.
//
// The Multi call takes n keys, then for each key in order the number of
// its arguments and the arguments, and answers an array of n replies,
// each what body answered for that key alone (nil for false or nothing).
// Each key runs under pcall: an error (a wrong-type key, say) becomes
// that key's error reply, and the other keys run as they would alone. As
// with separate calls, a key's writes are not undone when a later key
// fails.
func (s *Script) Coalesce() *Script {
	// KEYS and ARGV are the function's parameters, so that body reads
	// the key's own share of the call's arguments under their usual names;
	// body starts on the first line, so that its errors name the same line.
	s.Multi = NewScript("local function one(KEYS, ARGV) " + s.Body + `
end
local keys, argv, out = {}, {}, {}
local a, m = 1, 0
for i = 1, #KEYS do
  keys[1] = KEYS[i]
  local n = tonumber(ARGV[a])
  for j = 1, n do
    argv[j] = ARGV[a + j]
  end
  for j = n + 1, m do
    argv[j] = nil
  end
  a, m = a + n + 1, math.max(m, n)
  local ok, r = pcall(one, keys, argv)
` + subReply + `  out[i] = r
end
return out`)
	return s
}

// subReply makes a Multi call's reply for one of its calls from what
// pcall gave: ok and r.
const subReply = `  if not ok then
    -- A failed redis.call's message starts with its code (WRONGTYPE,
    -- OOM ...): keep it, as the single call's reply does.
    if type(r) == "table" and r.err then
    elseif string.find(tostring(r), "^%u+ ") then
      r = {err = r}
    else
      r = {err = "ERR " .. tostring(r)}
    end
  elseif r == nil then
    r = false
  end
`

// CoalesceKeys gives s a Multi, as Coalesce does, for a script over any
// number of keys: its calls with further keys (Command.Keys) are grouped
// too, each run as its own call over its own keys. The body may use all
// of KEYS and ARGV. Call it before s is given to Dial.
//
// The Multi call takes every call's keys in order, then for each call
// the number of its keys, the number of its arguments and the arguments,
// and answers an array of one reply per call, each what body answered
// for that call alone. Each call runs under pcall, as with Coalesce: an
// error ends that call only, whose writes before it stay, as a single
// call's do; the other calls run as they would alone.
func (s *Script) CoalesceKeys() *Script {
	s.Multi = NewScript("local function one(KEYS, ARGV) " + s.Body + `
end
local out, a, k, i = {}, 1, 1, 0
while a <= #ARGV do
  local nk, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local ok, r = pcall(one, {unpack(KEYS, k, k + nk - 1)}, {unpack(ARGV, a + 2, a + 1 + n)})
  k, a, i = k + nk, a + 2 + n, i + 1
` + subReply + `  out[i] = r
end
return out`)
	s.keyed = true
	return s
}

// counts are the counts of keys and arguments as the Multi call takes
// them, up to a group's.
var counts = func() (s [maxCoalesce + 1]string) {
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func count(n int32) string {
	if n <= maxCoalesce {
		return counts[n]
	}
	return strconv.Itoa(int(n))
}

// group is the commands of one batch that go out as one Multi call.
type group struct {
	s     *Script
	tasks []task
	keys  int32 // its tasks' keys, further keys included
	pos   int32 // its place in batch.at
	slot  int32 // its keys' slot, for a cluster vote's batch; else -1
}

// keyCount is how many keys c names, its further keys included.
func (c *Command) keyCount() int32 {
	if c.Keys == nil {
		return 1
	}
	return 1 + int32(len(*c.Keys))
}

// plan lays out a batch's commands: b.at[k] is the k-th command to send,
// a task of b.sent (k >= 0) or the group -k-1. Commands of a script with a
// Multi join the first group of that script with room, which goes out at
// its first member's place; the others keep theirs (as do commands with
// further keys, unless their script is CoalesceKeys's). A command joins a
// group only if no earlier command on any of its keys comes after the
// group's place, so that one key's commands keep their order on the
// master (an undo of a waiter's attempt must run before its next
// attempt). With slotted (a cluster vote's batch), a group takes only
// keys of one slot: one script call runs on one shard.
func (b *batch) plan(coalesce, slotted bool) {
	b.at = b.at[:0]
	// Commands of one script, each on one key, all join groups and
	// cannot be reordered by grouping: only a mixed batch pays for
	// tracking keys. A command with further keys makes its batch mixed,
	// even with one script: it is not grouped, or, grouped, it may miss
	// a group's room that a later, smaller one finds.
	mixed := false // set below, only when coalescing
	for _, t := range b.sent {
		if !coalesce {
			break
		}
		if t.r.cmd.Script != b.sent[0].r.cmd.Script || t.r.cmd.Keys != nil {
			mixed = true
			break
		}
	}
	if mixed {
		if b.last == nil {
			b.last = make(map[string]int32)
		}
		clear(b.last)
	}
	ng := 0
	for k, t := range b.sent {
		s := t.r.cmd.Script
		key := t.r.cmd.Key
		if !coalesce || s == nil || s.Multi == nil || (t.r.cmd.Keys != nil && !s.keyed) {
			if mixed {
				b.last[key] = int32(len(b.at))
				if t.r.cmd.Keys != nil {
					for _, k := range *t.r.cmd.Keys {
						b.last[k] = int32(len(b.at))
					}
				}
			}
			b.at = append(b.at, int32(k))
			continue
		}
		// A group runs at its first member's place: join only one placed
		// after every earlier command on these keys, so that one key's
		// commands still run in the order they were submitted.
		var after int32
		var seen bool
		if mixed {
			after, seen = b.last[key]
			if t.r.cmd.Keys != nil && !faults.CoalesceFirstKeyOnly.On() {
				for _, k := range *t.r.cmd.Keys {
					if a, ok := b.last[k]; ok && (!seen || a > after) {
						after, seen = a, true
					}
				}
			}
		}
		nk := t.r.cmd.keyCount()
		slot := int32(-1)
		if slotted && !faults.CoalesceAcrossSlots.On() {
			slot = int32(keyslot.KeySlot(key))
		}
		gi := -1
		for j := 0; j < ng; j++ {
			if g := &b.groups[j]; g.s == s && g.slot == slot && g.keys+nk <= maxCoalesce && (!seen || g.pos >= after) {
				gi = j
				break
			}
		}
		if gi < 0 {
			gi = ng
			ng++
			if gi < len(b.groups) {
				b.groups[gi].s, b.groups[gi].slot = s, slot
			} else {
				b.groups = append(b.groups, group{s: s, slot: slot})
			}
			b.groups[gi].pos = int32(len(b.at))
			b.at = append(b.at, int32(-gi-1))
		}
		if mixed {
			b.last[key] = b.groups[gi].pos
			if t.r.cmd.Keys != nil && !faults.CoalesceFirstKeyOnly.On() {
				for _, k := range *t.r.cmd.Keys {
					b.last[k] = b.groups[gi].pos
				}
			}
		}
		b.groups[gi].tasks = append(b.groups[gi].tasks, t)
		b.groups[gi].keys += nk
	}
	b.ngroups = ng
}

// release drops the batch's references to rounds, which are pooled.
func (b *batch) release() {
	for i := range b.ngroups {
		g := &b.groups[i]
		clear(g.tasks)
		g.tasks, g.s, g.keys = g.tasks[:0], nil, 0
	}
	b.ngroups = 0
	clear(b.tasks)
}

// buildMulti makes g's Multi call: its keys, then each key's count of
// arguments and the arguments; for a CoalesceKeys script, every call's
// keys, then each call's count of keys and of arguments and the
// arguments.
func (p *Pool) buildMulti(n *node, g *group, eval bool) rueidis.Completed {
	m := g.s.Multi
	b, nkeys := p.builder, int32(len(g.tasks))
	if g.s.keyed {
		nkeys = g.keys
	}
	guard := n.seeds != nil && !unguarded()
	if n.seeds != nil {
		b = n.builder
	}
	if guard {
		// A cluster vote's: its slot's guard last (see migration.go).
		m, nkeys = m.guarded(), nkeys+1
	}
	name, head := "EVALSHA", m.SHA
	if eval {
		name, head = "EVAL", m.Body
	}
	a := b.Arbitrary(name, head, count(nkeys))
	for _, t := range g.tasks {
		a = a.Args(t.r.cmd.Key)
		if g.s.keyed && t.r.cmd.Keys != nil {
			a = a.Args(*t.r.cmd.Keys...)
		}
	}
	if guard {
		a = a.Args(guardKey(keyslot.KeySlot(g.tasks[0].r.cmd.Key)))
	}
	for _, t := range g.tasks {
		if g.s.keyed {
			a = a.Args(count(t.r.cmd.keyCount()))
		}
		a = a.Args(counts[t.r.cmd.NArgs]).Args(t.r.cmd.Args[:t.r.cmd.NArgs]...)
	}
	if n.seeds != nil {
		return a.Build().SetSlot(g.tasks[0].r.cmd.Key)
	}
	return a.Build()
}

// finishMulti hands each member of g its share of the Multi call's reply
// res, reloading the script first if the node answered NOSCRIPT. An
// error for the whole call (a broken connection, BUSY) is every member's,
// as it would have been for each of their own calls.
func (p *Pool) finishMulti(ctx context.Context, n *node, c rueidis.Client, g *group, res rueidis.RedisResult) {
	if re, ok := rueidis.IsRedisErr(res.Error()); ok && re.IsNoScript() {
		res = c.Do(ctx, p.buildMulti(n, g, true))
	}
	arr, err := res.ToArray()
	if err == nil && len(arr) != len(g.tasks) {
		// Not a reply from Redis: the keys may or may not have been acted on.
		res = rueidis.NewErrorResult(fmt.Errorf("coalesced script answered %d replies for %d keys", len(arr), len(g.tasks)))
		err = res.Error()
	}
	for j, t := range g.tasks {
		if err != nil {
			t.r.finish(t.i, res)
		} else {
			t.r.finish(t.i, rueidis.NewResult(arr[j], nil))
		}
	}
}
