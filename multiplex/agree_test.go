package multiplex_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// getScript answers the key's integer value, 0 when missing.
var getScript = multiplex.NewScript(`return tonumber(redis.call("GET", KEYS[1]) or "0")`)

// anyOK reads every integer reply as OK, with its value.
func anyOK(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	n, err := res.AsInt64()
	if err != nil {
		return multiplex.Failed, 0, err
	}
	return multiplex.OK, n, nil
}

// An Agree round counts OK votes only in groups that agree under the mask:
// it decides at a quorum of one group, not at a quorum of OK votes, and as
// soon as no group can reach a quorum.
func TestFanoutAgree(t *testing.T) {
	t.Parallel() // it mostly waits: for timeouts, or for servers to age
	c := redistest.StartT(t, 5)
	const timeout = 3 * time.Second
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Quarantine: quarantine.Off,
		Addrs: c.Addrs(), NodeTimeout: timeout, Scripts: []*multiplex.Script{getScript}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	set := func(key string, values ...int) {
		t.Helper()
		for i, v := range values {
			if _, err := redistest.Do(c.Nodes[i].Addr(), 10*time.Second, "SET", key, strconv.Itoa(v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	round := func(key string, agree uint32) (multiplex.Tally, time.Duration) {
		start := time.Now()
		cmd := multiplex.Command{Script: getScript, Key: key, Agree: agree}
		return p.Fanout(context.Background(), cmd, anyOK, nil, nil), time.Since(start)
	}

	// Groups {1, 1} and {2+1024, 2, 2}: the second agrees under 1023.
	set("groups", 1, 1, 2+1024, 2, 2)
	tl, _ := round("groups", 1023)
	if v, n := tl.Agreed(1023); v != 2 || n != 3 {
		t.Fatalf("Agreed = %d, %d; want 2, 3 (%+v)", v, n, tl.Votes)
	}
	// Under every bit, 2+1024 is a group of its own.
	all := multiplex.Tally{Votes: []multiplex.Vote{{Outcome: multiplex.OK, Value: 1}, {Outcome: multiplex.OK, Value: 1},
		{Outcome: multiplex.OK, Value: 2 + 1024}, {Outcome: multiplex.OK, Value: 2}, {Outcome: multiplex.Refused, Value: 2}}}
	if v, n := all.Agreed(-1); n != 2 || v != 1 {
		t.Fatalf("Agreed(all bits) = %d, %d; want the first group of two, 1", v, n)
	}

	// Node 4 paused: 1, 2, 3, 4 can no longer make a group of 3 with one
	// node silent, so the round ends without waiting for it ...
	set("split", 1, 2, 3, 4)
	set("three", 5, 5, 5, 6)
	c.Nodes[4].Pause()
	defer c.Nodes[4].Resume()
	tl, took := round("split", 1023)
	if _, n := tl.Agreed(1023); n != 1 || tl.Pending != 1 || took > timeout/2 {
		t.Fatalf("split round: agreed %d, %d pending, took %s: %+v", n, tl.Pending, took, tl.Votes)
	}
	// ... and a group of 3 decides it at once too.
	tl, took = round("three", 1023)
	if v, n := tl.Agreed(1023); v != 5 || n != 3 || took > timeout/2 {
		t.Fatalf("agreeing round: agreed %d x %d, took %s", v, n, took)
	}
	// Groups of 2 and 2 with one node silent could still make 3: the
	// round waits for it, until the node timeout.
	set("wait", 7, 7, 8, 8)
	tl, took = round("wait", 1023)
	if tl.Timeout != 1 || took < timeout {
		t.Fatalf("undecided round: %d timeouts after %s, want the node timeout (%s)", tl.Timeout, took, timeout)
	}
	// Without Agree, the same votes decide at the third OK.
	tl, took = round("wait", 0)
	if !tl.Reached() || took > timeout/2 {
		t.Fatalf("plain round: %+v after %s", tl, took)
	}
}
