package sim

import (
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// multi is a doctored lease on several resources.
func multi(id int, granted, end time.Duration, rs ...string) Grant {
	return Grant{ID: id, Resource: "{multi}", Resources: rs, Client: id, Granted: granted, End: end}
}

// A lease on several resources is a holder of each: it excludes, and is
// excluded by, a lease on one of them alone or on a set that shares one.
func TestCheckMutualExclusionMulti(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grants []Grant
		want   int
	}{
		{"a set and a lock on one of it", []Grant{multi(0, ms(0), ms(10), "a", "b"), {ID: 1, Resource: "b", Granted: ms(5), End: ms(15)}}, 1},
		{"a lock, then a set over it", []Grant{{ID: 0, Resource: "a", Granted: ms(0), End: ms(10)}, multi(1, ms(5), ms(15), "a", "b")}, 1},
		{"two sets sharing one", []Grant{multi(0, ms(0), ms(10), "a", "b"), multi(1, ms(5), ms(15), "b", "c")}, 1},
		{"two sets sharing two", []Grant{multi(0, ms(0), ms(10), "a", "b", "c"), multi(1, ms(5), ms(15), "b", "c")}, 2},
		{"disjoint sets", []Grant{multi(0, ms(0), ms(10), "a", "b"), multi(1, ms(5), ms(15), "c", "d")}, 0},
		{"a set and another resource", []Grant{multi(0, ms(0), ms(10), "a", "b"), {ID: 1, Resource: "c", Granted: ms(5), End: ms(15)}}, 0},
		{"one after the other", []Grant{multi(0, ms(0), ms(10), "a", "b"), multi(1, ms(10), ms(15), "a", "b")}, 0},
	} {
		if got := CheckMutualExclusion(tc.grants); len(got) != tc.want {
			t.Errorf("%s: %d violations, want %d: %v", tc.name, len(got), tc.want, got)
		}
	}
}

// Tokens increase per resource across leases on it alone and on sets.
func TestCheckFencingMulti(t *testing.T) {
	gs := []Grant{
		{ID: 0, Resource: "a", Token: 5, Granted: ms(0)},
		multi(1, ms(1), ms(2), "a", "b"),
		{ID: 2, Resource: "b", Token: 8, Granted: ms(3)},
	}
	gs[1].Token = 7
	if got := CheckFencing(gs); len(got) != 0 {
		t.Fatalf("increasing tokens: %v", got)
	}
	gs[2].Token = 7
	if got := CheckFencing(gs); len(got) != 1 || got[0].Resource != "b" {
		t.Fatalf("violations %v: want b's token 7 after the set's 7", got)
	}
}

// A lease on several resources is trusted only while each of its keys is
// on a quorum.
func TestCheckExpiryMulti(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	set := func(m int, key string, until time.Duration) simredis.KeyRecord {
		return simredis.KeyRecord{At: ms(5), Master: m, Key: key, Value: "v+", ExpireAt: start.Add(until), Cause: "EVALSHA acquire all"}
	}
	g := multi(0, ms(10), ms(900), "a", "b")
	g.Value = "v"
	var recs []simredis.KeyRecord
	for m := range 3 {
		recs = append(recs, set(m, "a", ms(1005)), set(m, "b", ms(1005)))
	}
	if got := CheckExpiry([]Grant{g}, spansOf(start, 3, recs...), 2); len(got) != 0 {
		t.Fatalf("every key alive past the lease: %v", got)
	}
	recs = append(recs, simredis.KeyRecord{At: ms(300), Master: 1, Key: "b", Gone: true, Cause: "EVALSHA release"},
		simredis.KeyRecord{At: ms(400), Master: 2, Key: "b", Gone: true, Cause: "EVALSHA release"})
	if got := CheckExpiry([]Grant{g}, spansOf(start, 3, recs...), 2); len(got) != 1 || got[0].At != ms(400) || got[0].Resource != "b" {
		t.Fatalf("violations %v: want one, b from 400ms", got)
	}
}

// A master's acquire of several resources takes all their keys or none,
// and its keys go together after: a strict subset holding the value on a
// master, at the acquire or later, is caught.
func TestCheckAllOrNothing(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(at time.Duration, key, v string) simredis.KeyRecord {
		r := simredis.KeyRecord{At: at, Master: 1, Key: key, Value: v, ExpireAt: start.Add(time.Second), Cause: "EVALSHA acquire all", Client: "c0"}
		if v == "" {
			r.Gone, r.Cause = true, "EVALSHA release"
		}
		return r
	}
	attempt := simredis.AllAttempt{At: ms(10), Master: 1, Keys: []string{"a", "b"}, Value: "v", Client: "c0"}
	g := multi(0, ms(12), ms(50), "a", "b")
	g.Value = "v"
	for _, tc := range []struct {
		name string
		recs []simredis.KeyRecord
		want int
	}{
		{"both, then both gone", []simredis.KeyRecord{rec(ms(10), "a", "v"), rec(ms(10), "b", "v+"), rec(ms(40), "a", ""), rec(ms(40), "b", "")}, 0},
		{"refused: b another's", []simredis.KeyRecord{rec(ms(5), "b", "other")}, 0},
		{"a taken although b was another's", []simredis.KeyRecord{rec(ms(5), "b", "other"), rec(ms(10), "a", "v")}, 1},
		{"b gone before a", []simredis.KeyRecord{rec(ms(10), "a", "v"), rec(ms(10), "b", "v"), rec(ms(30), "b", ""), rec(ms(40), "a", "")}, 1},
		{"a marked by a waiter", []simredis.KeyRecord{rec(ms(10), "a", "v"), rec(ms(10), "b", "v"), rec(ms(20), "a", "v+")}, 0},
		{"keys expire together", []simredis.KeyRecord{rec(ms(10), "a", "v"), rec(ms(10), "b", "v")}, 0},
	} {
		keys := spansOf(start, 2, tc.recs...)
		got := CheckAllOrNothing([]simredis.AllAttempt{attempt}, []Grant{g}, keys)
		if len(got) != tc.want {
			t.Errorf("%s: violations %v, want %d", tc.name, got, tc.want)
		}
		for _, v := range got {
			if v.Checker != CheckerAllKeys || len(v.Leases) != 1 {
				t.Errorf("%s: violation %v: want the all-or-nothing checker's, with the lease", tc.name, v)
			}
		}
	}
}

// A turn given to a LockAll waiter still in its call is no gone waiter's;
// once the call returned, an unused turn is.
func TestCheckTurnsLockAllWaiter(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	b := Bounds{Tight: ms(300), Loose: ms(1500), Settle: ms(100)}
	rec := func(at time.Duration, v, cause, client string) simredis.KeyRecord {
		return simredis.KeyRecord{At: at, Master: 0, Key: "a", Value: v, ExpireAt: start.Add(10 * time.Second), Cause: cause, Client: client}
	}
	keys := spansOf(start, 1,
		rec(ms(0), "L:1.x", "EVALSHA acquire all", "c1"), // c1's Locker L, by a value it set
		rec(ms(100), "~L:2", "EVALSHA release", "c0"),
		simredis.KeyRecord{At: ms(150), Master: 0, Key: "a", Gone: true, Cause: "expired"})
	for _, tc := range []struct {
		name string
		ev   []Event
		want int
	}{
		{"waiting in LockAll", []Event{{Op: "lockall", Resource: "{a,b}", Resources: []string{"a", "b"}, Client: 1, Called: ms(50), At: ms(400)}}, 0},
		{"its LockAll returned", []Event{{Op: "lockall", Resource: "{a,b}", Resources: []string{"a", "b"}, Client: 1, Called: ms(0), At: ms(50)}}, 1},
		{"a LockAll of other resources", []Event{{Op: "lockall", Resource: "{b,c}", Resources: []string{"b", "c"}, Client: 1, Called: ms(50), At: ms(400)}}, 1},
	} {
		if got := CheckTurns(tc.ev, nil, keys, nil, nil, b); len(got) != tc.want {
			t.Errorf("%s: violations %v, want %d", tc.name, got, tc.want)
		}
	}
}

// A refused TryLockAll or LockAll is honest where each master that
// refused held a key of one of its resources.
func TestCheckErrorsMulti(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	keys := spansOf(start, 3, simredis.KeyRecord{At: ms(0), Master: 0, Key: "b", Value: "x", ExpireAt: start.Add(time.Second), Client: "c0"},
		simredis.KeyRecord{At: ms(0), Master: 1, Key: "b", Value: "x", ExpireAt: start.Add(time.Second), Client: "c0"},
		simredis.KeyRecord{At: ms(0), Master: 2, Key: "c", Value: "x", ExpireAt: start.Add(time.Second), Client: "c0"})
	refused := func(who ...int) *engine.VotesError {
		ve := &engine.VotesError{Op: "acquire", Resource: "{a,b}", Kind: engine.ErrNotAcquired, Votes: make([]engine.Vote, 3), Quorum: 2}
		for _, i := range who {
			ve.Votes[i].Outcome = engine.OutcomeRefused
			ve.Refused++
		}
		return ve
	}
	call := func(err error) Event {
		return Event{Op: "trylockall", Resource: "{a,b}", Resources: []string{"a", "b"}, Client: 1, Called: ms(100), At: ms(110), Result: "not-acquired", Err: err, Grant: -1}
	}
	if got := CheckErrors([]Event{call(refused(0, 1))}, nil, keys, nil, Bounds{}); len(got) != 0 {
		t.Fatalf("refused by the masters that held b: %v", got)
	}
	if got := CheckErrors([]Event{call(refused(1, 2))}, nil, keys, nil, Bounds{}); len(got) != 1 {
		t.Fatalf("refused by master 2, which held neither a nor b: %v, want a violation", got)
	}
}
