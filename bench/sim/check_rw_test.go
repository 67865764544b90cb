package sim

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// rwLease is a doctored read/write lock's lease of rw0: "read" or
// "write", trusted from granted to end, called 1 ms before.
func rwLease(id int, kind string, granted, end time.Duration) Grant {
	g := Grant{ID: id, Resource: "rw0", RW: kind, Client: id, Granted: granted, Called: granted - ms(1), End: end, Value: fmt.Sprintf("v%d", id)}
	if kind == "write" {
		g.Token = int64(id + 1)
	}
	return g
}

// A writer overlapping any other holder is caught; readers overlap
// freely; meeting at an instant is no overlap; the lock's leases are
// not units of the other checkers.
func TestCheckRWExclusion(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grants []Grant
		want   int
	}{
		{"readers share", []Grant{rwLease(0, "read", ms(0), ms(10)), rwLease(1, "read", ms(5), ms(15)), rwLease(2, "read", ms(6), ms(20))}, 0},
		{"a writer after the readers", []Grant{rwLease(0, "read", ms(0), ms(10)), rwLease(1, "read", ms(5), ms(15)), rwLease(2, "write", ms(15), ms(20))}, 0},
		{"a writer among readers", []Grant{rwLease(0, "read", ms(0), ms(10)), rwLease(1, "read", ms(5), ms(15)), rwLease(2, "write", ms(12), ms(20))}, 1},
		{"a reader while a writer holds", []Grant{rwLease(0, "write", ms(0), ms(10)), rwLease(1, "read", ms(9), ms(15))}, 1},
		{"two writers", []Grant{rwLease(0, "write", ms(0), ms(10)), rwLease(1, "write", ms(5), ms(15))}, 1},
		{"another lock", []Grant{rwLease(0, "write", ms(0), ms(10)), {ID: 1, Resource: "rw1", RW: "write", Granted: ms(5), End: ms(15)}}, 0},
	} {
		if got := CheckRWExclusion(tc.grants); len(got) != tc.want {
			t.Errorf("%s: %d violations, want %d: %v", tc.name, len(got), tc.want, got)
		}
		if got := CheckMutualExclusion(tc.grants); len(got) != 0 {
			t.Errorf("%s: CheckMutualExclusion judged the read/write lock: %v", tc.name, got)
		}
	}
}

// Writers' tokens increase in grant order; readers carry none, and an
// unfenced writer's is left out.
func TestCheckRWFencing(t *testing.T) {
	ok := []Grant{rwLease(0, "write", ms(0), ms(1)), rwLease(1, "read", ms(1), ms(2)), rwLease(2, "write", ms(2), ms(3))}
	unfenced := rwLease(3, "write", ms(3), ms(4))
	unfenced.Token = 0
	if got := CheckRWFencing(append(ok, unfenced)); len(got) != 0 {
		t.Fatalf("increasing tokens: %v", got)
	}
	back := rwLease(4, "write", ms(4), ms(5))
	back.Token = 2
	if got := CheckRWFencing(append(ok, back)); len(got) != 1 {
		t.Fatalf("token 2 after 3: violations %v, want one", got)
	}
}

// rwRecord is a doctored key log record of rw0's sorted set (or its
// intents, with key) on master m at when: members and the virtual
// instant each expires (a writer's negated), on a clock that reads
// virtual time.
func rwRecord(start time.Time, key string, m int, when time.Duration, members map[string]time.Duration) simredis.KeyRecord {
	r := simredis.KeyRecord{At: when, Master: m, Key: key, Cause: "EVALSHA rw", Scores: map[string]float64{}}
	if len(members) == 0 {
		r.Gone = true
		return r
	}
	last := time.Duration(0)
	r.Scores[rwMember] = 0
	for v, until := range members {
		sc := float64(start.Add(until.Abs()).UnixMicro())
		if until < 0 {
			sc = -sc
		}
		r.Scores[v] = sc
		last = max(last, until.Abs())
	}
	r.Value, r.ExpireAt = "<zset>", start.Add(last)
	return r
}

// A lease trusted past the moment its entry was live on fewer than a
// quorum is caught, from the entries' own scores: a writer whose entry
// expires on two of three masters while trusted, a reader whose entry
// a release took out on two. A restart's amnesia is not expiry.
func TestCheckRWExpiry(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	w := rwLease(0, "write", ms(10), ms(900))
	set := func(m int, until time.Duration) simredis.KeyRecord {
		return rwRecord(start, "rw0", m, ms(5), map[string]time.Duration{"v0": -until})
	}
	live := spansOf(start, 3, set(0, ms(1005)), set(1, ms(1005)), set(2, ms(1005)))
	if got := CheckRWExpiry([]Grant{w}, live, 2); len(got) != 0 {
		t.Fatalf("entries live past the lease: %v", got)
	}
	short := spansOf(start, 3, set(0, ms(1005)), set(1, ms(800)), set(2, ms(850)))
	if got := CheckRWExpiry([]Grant{w}, short, 2); len(got) != 1 || got[0].At != ms(850) {
		t.Fatalf("entries expired on two masters at 800 and 850 ms: violations %v, want one at 850 ms", got)
	}
	// A restart wipes master 1 at 300 ms: counted until the deadline.
	wiped := spansOf(start, 3, set(0, ms(1005)), set(1, ms(1005)), set(2, ms(500)),
		simredis.KeyRecord{At: ms(300), Master: 1, Key: "rw0", Gone: true, Cause: "restart"})
	if got := CheckRWExpiry([]Grant{w}, wiped, 2); len(got) != 0 {
		t.Fatalf("a restart's amnesia counted as expiry: %v", got)
	}
	// A reader, its entry taken out on two masters at 400 ms while the
	// other reader's stays.
	r := rwLease(1, "read", ms(10), ms(900))
	both := func(m int) simredis.KeyRecord {
		return rwRecord(start, "rw0", m, ms(5), map[string]time.Duration{"v1": ms(1005), "v2": ms(1005)})
	}
	other := func(m int) simredis.KeyRecord {
		return rwRecord(start, "rw0", m, ms(400), map[string]time.Duration{"v2": ms(1005)})
	}
	gone := spansOf(start, 3, both(0), both(1), both(2), other(1), other(2))
	if got := CheckRWExpiry([]Grant{r}, gone, 2); len(got) != 1 || got[0].At != ms(400) {
		t.Fatalf("reader's entry gone from two masters at 400 ms: violations %v, want one", got)
	}
}

// A reader granted while a quorum of masters held a waiting writer's
// live intent throughout its call is caught; one whose call began
// before the intent, or during which the intent expired (by its score)
// on one of the quorum, is not.
func TestCheckRWIntent(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	key := rwPrefix + "rw0"
	intent := func(m int, at, until time.Duration) simredis.KeyRecord {
		return rwRecord(start, key, m, at, map[string]time.Duration{"L:1": until})
	}
	r := rwLease(0, "read", ms(200), ms(300)) // called at 199 ms
	for _, tc := range []struct {
		name string
		recs []simredis.KeyRecord
		want int
	}{
		{"an intent on a quorum", []simredis.KeyRecord{intent(0, ms(100), ms(1100)), intent(1, ms(100), ms(1100))}, 1},
		{"on one master", []simredis.KeyRecord{intent(0, ms(100), ms(1100))}, 0},
		{"registered during the call", []simredis.KeyRecord{intent(0, ms(199)+1, ms(1100)), intent(1, ms(100), ms(1100))}, 0},
		{"expired during the call", []simredis.KeyRecord{intent(0, ms(100), ms(199)+500*time.Microsecond), intent(1, ms(100), ms(1100))}, 0},
		{"taken out during the call", []simredis.KeyRecord{intent(0, ms(100), ms(1100)), intent(1, ms(100), ms(1100)),
			{At: ms(199) + 10, Master: 1, Key: key, Gone: true, Cause: "ZREM"}}, 0},
	} {
		keys := spansOf(start, 3, tc.recs...)
		if got := CheckRWIntent([]Grant{r}, keys, 2); len(got) != tc.want {
			t.Errorf("%s: %d violations, want %d: %v", tc.name, len(got), tc.want, got)
		}
		// A writer is not judged by it.
		w := rwLease(1, "write", ms(200), ms(300))
		if got := CheckRWIntent([]Grant{w}, keys, 2); len(got) != 0 {
			t.Errorf("%s: a writer judged: %v", tc.name, got)
		}
	}
}

// A writer that waits past Loose after the leases granted before its
// intent ended (Tight if they were released), while readers that came
// after kept the lock, is caught;
// not when it got the lock in time, when a fault was near, or when
// another writer tried meanwhile.
func TestCheckRWWriters(t *testing.T) {
	b := Bounds{Tight: ms(300), Loose: ms(1500), Settle: ms(100)}
	wait := Event{Op: "wlock", Resource: "rw0", Client: 1, Called: ms(1000), At: ms(5000), Result: "timeout", Grant: -1}
	grants := []Grant{
		rwLease(0, "read", ms(900), ms(1800)),  // granted before the intent: waited for
		rwLease(1, "read", ms(1100), ms(1200)), // within Tight of the call: waited for too
		rwLease(2, "read", ms(1500), ms(4500)), // after: must not delay the writer
		rwLease(3, "read", ms(1700), ms(4900)), // keeps the readers overlapping
	}
	if got := CheckRWWriters([]Event{wait}, grants, nil, b); len(got) != 1 || got[0].At != ms(1800)+b.Loose {
		t.Fatalf("writer kept out by later readers: violations %v, want one at 3.3 s", got)
	}
	// Released, not expired: the last release publishes, and the bound
	// is Tight.
	released := slices.Clone(grants)
	for i := range released {
		released[i].Ended = "released"
	}
	if got := CheckRWWriters([]Event{wait}, released, nil, b); len(got) != 1 || got[0].At != ms(1800)+b.Tight {
		t.Fatalf("writer kept out after the earlier leases were released: violations %v, want one at 2.1 s", got)
	}
	quick := wait
	quick.At, quick.Result = ms(3000), "ok"
	if got := CheckRWWriters([]Event{quick}, grants, nil, b); len(got) != 0 {
		t.Fatalf("writer in within the bound: %v", got)
	}
	fault := []FaultRecord{{Fault: Fault{Kind: FaultPause, Master: 0}, At: ms(2000), End: ms(2100)}}
	if got := CheckRWWriters([]Event{wait}, grants, fault, b); len(got) != 0 {
		t.Fatalf("judged near a fault: %v", got)
	}
	other := Event{Op: "trywlock", Resource: "rw0", Client: 2, Called: ms(2000), At: ms(2001), Result: "not-acquired", Grant: -1}
	if got := CheckRWWriters([]Event{wait, other}, grants, nil, b); len(got) != 0 {
		t.Fatalf("judged while another writer tried: %v", got)
	}
	// Readers granted before the intent that hold long delay it.
	long := slices.Clone(grants)
	long[0].End = ms(4000)
	if got := CheckRWWriters([]Event{wait}, long, nil, b); len(got) != 0 {
		t.Fatalf("writer waiting for a reader admitted before its intent: %v", got)
	}
}

// A refusal is contention only with a holder that may refuse: a reader
// refused by a master holding readers only (readers excluding each
// other) is caught; by a writer's entry or a waiting writer's intent it
// is not. A writer refused by an empty master is caught, by a reader's
// entry not. ErrNoQuorum without failures or faults is caught.
func TestCheckRWErrors(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	refused := func(ms ...int) *engine.VotesError {
		ve := &engine.VotesError{Op: "acquire", Resource: "rw0", Kind: engine.ErrNotAcquired, Votes: make([]engine.Vote, 3), Quorum: 2}
		for _, m := range ms {
			ve.Votes[m].Outcome = engine.OutcomeRefused
			ve.Refused++
		}
		return ve
	}
	call := func(op string, err error, result string) Event {
		return Event{Op: op, Resource: "rw0", Called: ms(100), At: ms(101), Result: result, Err: err, Grant: -1}
	}
	reader := func(m int) simredis.KeyRecord {
		return rwRecord(start, "rw0", m, ms(50), map[string]time.Duration{"r": ms(1000)})
	}
	writer := func(m int) simredis.KeyRecord {
		return rwRecord(start, "rw0", m, ms(50), map[string]time.Duration{"w": -ms(1000)})
	}
	intent := func(m int) simredis.KeyRecord {
		return rwRecord(start, rwPrefix+"rw0", m, ms(50), map[string]time.Duration{"L:1": ms(1000)})
	}
	for _, tc := range []struct {
		name string
		e    Event
		recs []simredis.KeyRecord
		want int
	}{
		{"reader refused by readers", call("tryrlock", refused(0, 1), "not-acquired"), []simredis.KeyRecord{reader(0), reader(1)}, 1},
		{"reader refused by a writer", call("tryrlock", refused(0, 1), "not-acquired"), []simredis.KeyRecord{writer(0), writer(1)}, 0},
		{"reader refused by an intent", call("rlock", refused(0, 1), "not-acquired"), []simredis.KeyRecord{reader(0), reader(1), intent(0), intent(1)}, 0},
		{"writer refused by readers", call("trywlock", refused(0, 1), "not-acquired"), []simredis.KeyRecord{reader(0), reader(1)}, 0},
		{"writer refused by an empty master", call("wlock", refused(0, 1), "not-acquired"), []simredis.KeyRecord{reader(0)}, 1},
		{"no quorum with every master up", call("trywlock", &engine.VotesError{Op: "acquire", Kind: engine.ErrNoQuorum, Votes: make([]engine.Vote, 3), Pending: 3, Quorum: 2}, "no-quorum"), nil, 1},
	} {
		keys := spansOf(start, 3, tc.recs...)
		if got := CheckRWErrors([]Event{tc.e}, nil, keys, Bounds{}, nil); len(got) != tc.want {
			t.Errorf("%s: %d violations, want %d: %v", tc.name, len(got), tc.want, got)
		}
	}
}

// An entry lives at every instant its master's clock has not passed its
// score, while it stays in the set: the scripts compare scores with
// TIME and leave an expired entry in place, so a clock stepped back to
// before its score revives it, and a reader refused by a writer's intent
// revived so is refused honestly.
func TestCheckRWErrorsClockStepBack(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	ve := &engine.VotesError{Op: "acquire", Resource: "rw0", Kind: engine.ErrNotAcquired, Votes: make([]engine.Vote, 3), Quorum: 2, Refused: 2}
	ve.Votes[0].Outcome, ve.Votes[1].Outcome = engine.OutcomeRefused, engine.OutcomeRefused
	call := Event{Op: "tryrlock", Resource: "rw0", Called: ms(100), At: ms(101), Result: "not-acquired", Err: ve, Grant: -1}
	// The intents of masters 0 and 1 live until 80 ms; their clocks
	// step back by 100 ms at 90 ms, which revives them until 180 ms.
	stepped := simredis.VirtualClock(start).Jumped(start.Add(ms(90)), -ms(100))
	logs := make([][]simredis.KeyRecord, 3)
	for m := range 2 {
		logs[m] = []simredis.KeyRecord{rwRecord(start, rwPrefix+"rw0", m, ms(50), map[string]time.Duration{"L:1": ms(80)})}
	}
	for _, tc := range []struct {
		name  string
		clock simredis.Clock
		want  int
	}{
		{"revived by the step back", stepped, 0},
		{"no step back", simredis.VirtualClock(start), 1},
	} {
		keys := buildSpans(logs, []simredis.Clock{tc.clock, tc.clock, simredis.VirtualClock(start)}, start)
		if got := CheckRWErrors([]Event{call}, nil, keys, Bounds{}, nil); len(got) != tc.want {
			t.Errorf("%s: %d violations, want %d: %v", tc.name, len(got), tc.want, got)
		}
		if tc.want == 0 {
			want := []window{{ms(50), ms(80)}, {ms(90), ms(180)}}
			if got := rwIntents(keys[rwPrefix+"rw0"][0]); !slices.Equal(got, want) {
				t.Errorf("%s: the intent lives %v, want %v", tc.name, got, want)
			}
		}
	}
}
