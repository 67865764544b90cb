package sim

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestCheckMutualExclusion(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grants []Grant
		want   int
	}{
		{"one after the other", []Grant{
			{ID: 0, Resource: "r", Granted: ms(0), End: ms(10)},
			{ID: 1, Resource: "r", Granted: ms(10), End: ms(20)}, // meets at one instant
		}, 0},
		{"different resources", []Grant{
			{ID: 0, Resource: "a", Granted: ms(0), End: ms(10)},
			{ID: 1, Resource: "b", Granted: ms(5), End: ms(15)},
		}, 0},
		{"overlap", []Grant{
			{ID: 0, Resource: "r", Granted: ms(0), End: ms(10)},
			{ID: 1, Resource: "r", Granted: ms(9), End: ms(20)},
		}, 1},
		{"inside another, listed first", []Grant{
			{ID: 0, Resource: "r", Granted: ms(5), End: ms(6)},
			{ID: 1, Resource: "r", Granted: ms(0), End: ms(10)},
		}, 1},
		{"three at once", []Grant{
			{ID: 0, Resource: "r", Granted: ms(0), End: ms(10)},
			{ID: 1, Resource: "r", Granted: ms(1), End: ms(10)},
			{ID: 2, Resource: "r", Granted: ms(2), End: ms(10)},
		}, 3},
		{"ended before it began", []Grant{
			{ID: 0, Resource: "r", Granted: ms(0), End: ms(10)},
			{ID: 1, Resource: "r", Granted: ms(5), End: ms(5)}, // never trusted
		}, 0},
	} {
		if got := CheckMutualExclusion(tc.grants); len(got) != tc.want {
			t.Errorf("%s: %d violations, want %d: %v", tc.name, len(got), tc.want, got)
		}
	}
}

// The checker is not vacuous: with two KeyPrefixes, one resource name is
// two locks, the real engine grants it twice, and the checker must say so.
func TestCheckerCatchesDoubleGrants(t *testing.T) {
	cfg := Config{Seed: 1, Duration: 5 * time.Second, Control: SplitPrefix}
	res := runSeed(t, cfg)
	if res == nil {
		t.FailNow()
	}
	var v *Violation
	for i := range res.Violations {
		if res.Violations[i].Checker == CheckerExclusion {
			v = &res.Violations[i]
			break
		}
	}
	if v == nil {
		t.Fatalf("no violation of mutual exclusion found in %d leases granted under two KeyPrefixes", len(res.History.Grants()))
	}
	a, b := v.Leases[0], v.Leases[1]
	shared := slices.ContainsFunc(a.Units(), func(u string) bool { return slices.Contains(b.Units(), u) })
	if !shared || a.Client%2 == b.Client%2 {
		t.Fatalf("violation %v: want a resource (alone or in a set) or a slot held by clients with different KeyPrefixes", v)
	}
	if !strings.Contains(v.String(), "mutual exclusion") {
		t.Fatalf("violation %q does not name its checker", v)
	}
	t.Logf("%d violations; the first:\n%s", len(res.Violations), v)
}

// A lease that ended before its Release and is then handed on is caught;
// a released one handed on is not.
func TestCheckHandoffs(t *testing.T) {
	grants := []Grant{
		{ID: 0, Resource: "r", Value: "v", Granted: ms(0), End: ms(10), Ended: "lost"},
		{ID: 1, Resource: "r", Value: "v", Granted: ms(20), End: ms(30), Ended: "released", Wake: "handoff"},
		{ID: 2, Resource: "r", Value: "v", Granted: ms(30), End: ms(40), Ended: "released", Wake: "handoff"},
	}
	got := CheckHandoffs(grants)
	if len(got) != 1 || got[0].Leases[1].ID != 1 {
		t.Fatalf("violations %v: want lease#1, handed a lost lease", got)
	}
}

// Tokens must strictly increase per resource in grant order.
func TestCheckFencing(t *testing.T) {
	ok := []Grant{{ID: 0, Resource: "r", Token: 5, Granted: ms(0)}, {ID: 1, Resource: "r", Token: 6, Granted: ms(1)},
		{ID: 2, Resource: "s", Token: 1, Granted: ms(2)}}
	if got := CheckFencing(ok); len(got) != 0 {
		t.Fatalf("increasing tokens: %v", got)
	}
	for _, tok := range []int64{6, 4} {
		bad := append(ok, Grant{ID: 3, Resource: "r", Token: tok, Granted: ms(3)})
		if got := CheckFencing(bad); len(got) != 1 || got[0].Checker != CheckerFencing {
			t.Fatalf("token %d after 6: violations %v, want one", tok, got)
		}
	}
}

// The fenced store's checker: a stale write accepted, or the latest
// holder's write rejected, is a violation; a stale write rejected is
// fencing at work. Writes without a token (a Locker without fencing) are
// not judged, and a holder with a token outrun only by one without is
// not stale to the store.
func TestCheckStore(t *testing.T) {
	writes := []StoreWrite{
		{Resource: "r", Grant: 0, Token: 5, Accepted: true},
		{Resource: "r", Grant: 0, Token: 5, Stale: true, Outrun: true, Accepted: false},
		{Resource: "r", Grant: 1, Token: 7, Stale: true, Outrun: true, Accepted: true},
		{Resource: "r", Grant: 2, Token: 3, Accepted: false},
		{Resource: "r", Grant: 3, Token: 0, Stale: true, Accepted: true},
		{Resource: "r", Grant: 4, Token: 9, Stale: true, Accepted: true},
	}
	got := CheckStore(writes)
	if len(got) != 2 || !strings.Contains(got[0].Detail, "stale write accepted") || !strings.Contains(got[1].Detail, "rejected") {
		t.Fatalf("violations %v: want the accepted stale write and the rejected fresh one", got)
	}
	// The store itself: a holder without a token between two with one.
	h := NewHistory()
	st := newFencedStore(h)
	st.write("r", 0, 5, true)
	st.write("r", 1, 0, true)
	st.write("r", 0, 5, false) // outrun by a holder without a token only
	st.write("r", 2, 6, true)
	st.write("r", 1, 0, false)
	st.write("r", 0, 5, false) // outrun by lease 2
	ws := h.Writes()
	if w := ws[2]; !w.Accepted || !w.Stale || w.Outrun {
		t.Errorf("a write after a holder without a token: %v, want accepted, stale, not outrun", w)
	}
	if w := ws[4]; !w.Accepted || w.Outrun {
		t.Errorf("a write without a token: %v, want accepted, not outrun", w)
	}
	if w := ws[5]; w.Accepted || !w.Outrun {
		t.Errorf("a write after a later holder with a token: %v, want rejected, outrun", w)
	}
	if got := CheckStore(ws); len(got) != 0 {
		t.Errorf("the store's own writes: %v", got)
	}
}

// spansOf builds a resource's spans from records, with every master's
// clock running with virtual time from start.
func spansOf(start time.Time, masters int, recs ...simredis.KeyRecord) keySpans {
	logs := make([][]simredis.KeyRecord, masters)
	clocks := make([]simredis.Clock, masters)
	for m := range clocks {
		clocks[m] = simredis.VirtualClock(start)
	}
	for _, r := range recs {
		logs[r.Master] = append(logs[r.Master], r)
	}
	return buildSpans(logs, clocks, start)
}

// A lease trusted past the moment its keys were on fewer than a quorum
// of masters is caught: the keys expire on two of three masters (one
// shortened by a stale PEXPIRE) while the lease is still trusted. A key
// a restart wiped counts until its deadline (the quarantine covers
// amnesia).
func TestCheckExpiry(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	set := func(m int, when, until time.Duration) simredis.KeyRecord {
		return simredis.KeyRecord{At: when, Master: m, Key: "r", Value: "v", ExpireAt: at(until), Cause: "EVALSHA"}
	}
	g := Grant{ID: 0, Resource: "r", Value: "v", Granted: ms(10), End: ms(900)}
	keys := spansOf(start, 3, set(0, ms(5), ms(1005)), set(1, ms(5), ms(1005)), set(2, ms(5), ms(1005)))
	if got := CheckExpiry([]Grant{g}, keys, 2); len(got) != 0 {
		t.Fatalf("keys alive on every master past the lease: %v", got)
	}
	// A stale shorter PEXPIRE on master 1 at 300ms: its key expires at
	// 500ms; master 2's own at 600ms.
	keys = spansOf(start, 3, set(0, ms(5), ms(1005)), set(1, ms(5), ms(1005)), set(1, ms(300), ms(500)), set(2, ms(5), ms(600)))
	got := CheckExpiry([]Grant{g}, keys, 2)
	if len(got) != 1 || got[0].At != ms(600) {
		t.Fatalf("violations %v: want one, from 600ms", got)
	}
	// A restart wipes master 2's key at 100ms: counted to its deadline.
	keys = spansOf(start, 3, set(0, ms(5), ms(1005)), set(1, ms(5), ms(1005)), set(2, ms(5), ms(1005)),
		simredis.KeyRecord{At: ms(100), Master: 2, Key: "r", Gone: true, Cause: "restart"})
	if got := CheckExpiry([]Grant{g}, keys, 3); len(got) != 0 {
		t.Fatalf("a restart's amnesia counted as expiry: %v", got)
	}
}

// A Lock waiter left waiting while a release freed the resource on a
// quorum, with no fault near, is caught at the tight bound; one freed by
// expiry only at the loose bound; a waiter that took it in time is not.
func TestCheckWaiters(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	b := Bounds{Tight: ms(300), Loose: ms(1500), Settle: ms(100)}
	hold := func(m int, when time.Duration, v string, cause string) simredis.KeyRecord {
		return simredis.KeyRecord{At: when, Master: m, Key: "r", Value: v, ExpireAt: start.Add(10 * time.Second), Cause: cause}
	}
	gone := func(m int, when time.Duration, cause string) simredis.KeyRecord {
		return simredis.KeyRecord{At: when, Master: m, Key: "r", Gone: true, Cause: cause}
	}
	var recs []simredis.KeyRecord
	for m := range 3 {
		recs = append(recs, hold(m, ms(0), "a", "EVALSHA acquire"), hold(m, ms(2000), "~ghost", "EVALSHA release"))
	}
	keys := spansOf(start, 3, recs...)
	waiter := Event{Op: "lock", Resource: "r", Client: 1, Called: ms(1000), At: ms(3500), Result: "ok"}
	got := CheckWaiters([]Event{waiter}, nil, keys, nil, 2, 3, b)
	if len(got) == 0 || got[0].At != ms(2300) {
		t.Fatalf("violations %v: want the waiter left asleep after the release at 2s, at 2.3s", got)
	}
	// The waiter took it 100ms after the release.
	for m := range 3 {
		recs = append(recs, hold(m, ms(2100), "w", "EVALSHA acquire"))
	}
	if got := CheckWaiters([]Event{waiter}, nil, spansOf(start, 3, recs...), nil, 2, 3, b); len(got) != 0 {
		t.Fatalf("the waiter took the resource in time: %v", got)
	}
	// Freed by expiry at 2s (no command): only the loose bound applies.
	recs = nil
	for m := range 3 {
		recs = append(recs, hold(m, ms(0), "a", "EVALSHA acquire"), gone(m, ms(2000), "expired"))
	}
	waiter.At = ms(3400)
	if got := CheckWaiters([]Event{waiter}, nil, spansOf(start, 3, recs...), nil, 2, 3, b); len(got) != 0 {
		t.Fatalf("a waiter within the loose bound of an expiry: %v", got)
	}
	waiter.At = ms(4000)
	if got := CheckWaiters([]Event{waiter}, nil, spansOf(start, 3, recs...), nil, 2, 3, b); len(got) != 1 || got[0].At != ms(3500) {
		t.Fatalf("violations %v: want the waiter past the loose bound, at 3.5s", got)
	}
	// A fault near the release: no tight check; the loose one counts
	// only healthy masters.
	faults := []FaultRecord{{Fault: Fault{Kind: FaultPause, Master: 0}, At: ms(1900), End: ms(2050)}}
	recs = nil
	for m := range 3 {
		recs = append(recs, hold(m, ms(0), "a", "EVALSHA acquire"), gone(m, ms(2000), "EVALSHA release"))
	}
	waiter.At = ms(3000)
	if got := CheckWaiters([]Event{waiter}, nil, spansOf(start, 3, recs...), faults, 2, 3, b); len(got) != 0 {
		t.Fatalf("a fault near the release: %v", got)
	}
}

// A late release that gives the turn to a waiter while another lease is
// trusted is a violation only where that holder had its place in the
// master's queue: there the release should have popped the holder.
func TestCheckTurnsLateRelease(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	b := Bounds{Tight: ms(300), Loose: ms(1500), Settle: ms(100)}
	rec := func(m int, when time.Duration, key, v, cause string) simredis.KeyRecord {
		return simredis.KeyRecord{At: when, Master: m, Key: key, Value: v, ExpireAt: start.Add(10 * time.Second), Cause: cause, Client: "c0"}
	}
	holder := Grant{ID: 2, Resource: "r", Value: "h:1.x", Called: ms(20), Granted: ms(100), End: ms(900), Client: 1}
	for _, tc := range []struct {
		queue, then string
		want        int
	}{
		{"<zset h:1 w:1>", "<zset h:1 w:1>", 1}, // the holder queued there: it should have been popped
		{"<zset h:1 w:1>", "<zset w:1>", 1},     // the holder left there before the late release
		{"<zset w:1>", "<zset w:1>", 0},         // the release cannot know of the holder
	} {
		keys := spansOf(start, 1,
			rec(0, ms(0), "r", "old+", "EVALSHA acquire"),
			rec(0, ms(50), queuePrefix+"r", tc.queue, "EVALSHA acquire"),
			rec(0, ms(150), queuePrefix+"r", tc.then, "EVALSHA leave"),
			rec(0, ms(200), "r", "~w:1", "EVALSHA release"))
		leaves := []simredis.Leave{{At: ms(110), Master: 0, Resource: "r", ID: "h:1"}}
		if got := CheckTurns(nil, []Grant{holder}, keys, leaves, nil, b); len(got) != tc.want {
			t.Errorf("queue %s: violations %v, want %d", tc.queue, got, tc.want)
		}
		// The waiter's attempt then finds the token and marks it: the
		// verdict is the release's, whatever became of the token after.
		marked := spansOf(start, 1,
			rec(0, ms(0), "r", "old+", "EVALSHA acquire"),
			rec(0, ms(50), queuePrefix+"r", tc.queue, "EVALSHA acquire"),
			rec(0, ms(150), queuePrefix+"r", tc.then, "EVALSHA leave"),
			rec(0, ms(200), "r", "~w:1", "EVALSHA release"),
			rec(0, ms(300), "r", "~w:1+", "EVALSHA acquire"))
		if got := CheckTurns(nil, []Grant{holder}, marked, leaves, nil, b); len(got) != tc.want {
			t.Errorf("queue %s, the token marked later: violations %v, want %d", tc.queue, got, tc.want)
		}
		// Before the holder's leave reached the master, the release may
		// pass it on the wire: not judged.
		leaves[0].At = ms(250)
		if got := CheckTurns(nil, []Grant{holder}, keys, leaves, nil, b); len(got) != 0 {
			t.Errorf("queue %s, the leave after the release: violations %v, want none", tc.queue, got)
		}
	}
}

// Leftover keys and slow Closes are violations.
func TestCheckLeftoversAndClose(t *testing.T) {
	if got := CheckLeftovers([]string{"master0: r=\"v\""}, ms(10)); len(got) != 1 {
		t.Fatalf("a leftover key: %v", got)
	}
	b := Bounds{Close: ms(250)}
	got := CheckClose([]CloseRecord{{Client: 0, Began: ms(0), Done: ms(250)}, {Client: 1, Began: ms(0), Done: ms(251)}}, b)
	if len(got) != 1 || got[0].Client != 1 {
		t.Fatalf("violations %v: want c1's Close, past the bound", got)
	}
}

// ErrNotAcquired with a refusal from a master that held no key, or
// ErrNoQuorum with no master failed and no fault, is dishonest.
func TestCheckErrors(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	keys := spansOf(start, 3, simredis.KeyRecord{At: ms(0), Master: 0, Key: "r", Value: "x", ExpireAt: start.Add(time.Second), Client: "c0"},
		simredis.KeyRecord{At: ms(0), Master: 1, Key: "r", Value: "x", ExpireAt: start.Add(time.Second), Client: "c0"})
	refused := func(who ...int) *engine.VotesError {
		ve := &engine.VotesError{Op: "acquire", Resource: "r", Kind: engine.ErrNotAcquired, Votes: make([]engine.Vote, 3), Quorum: 2}
		for _, i := range who {
			ve.Votes[i].Outcome = engine.OutcomeRefused
			ve.Refused++
		}
		return ve
	}
	call := func(err error, result string) Event {
		return Event{Op: "trylock", Resource: "r", Client: 1, Called: ms(100), At: ms(110), Result: result, Err: err}
	}
	if got := CheckErrors([]Event{call(refused(0, 1), "not-acquired")}, nil, keys, nil, Bounds{}); len(got) != 0 {
		t.Fatalf("refused by the masters that held a key: %v", got)
	}
	if got := CheckErrors([]Event{call(refused(1, 2), "not-acquired")}, nil, keys, nil, Bounds{}); len(got) != 1 {
		t.Fatalf("refused by master 2, which held nothing: %v, want a violation", got)
	}
	noQuorum := &engine.VotesError{Op: "acquire", Resource: "r", Kind: engine.ErrNoQuorum, Votes: make([]engine.Vote, 3), Pending: 3, Quorum: 2}
	if got := CheckErrors([]Event{call(noQuorum, "no-quorum")}, nil, keys, nil, Bounds{}); len(got) != 1 {
		t.Fatalf("ErrNoQuorum with no master failed and no fault: %v, want a violation", got)
	}
	faults := []FaultRecord{{Fault: Fault{Kind: FaultHang, Master: 2}, At: ms(50), End: ms(150)}}
	if got := CheckErrors([]Event{call(noQuorum, "no-quorum")}, nil, keys, faults, Bounds{}); len(got) != 0 {
		t.Fatalf("ErrNoQuorum during a fault: %v", got)
	}
}

// A master's key lives at every instant its clock has not passed the
// key's deadline, up to the next change the master logged: a clock
// stepped back to before the deadline revives a key that nothing looked
// at meanwhile (the master would have logged deleting it), and an
// attempt refused by it then is honest. Trust is judged as before: a
// lease is trusted past its keys' expiry from the first instant they
// expired on fewer than a quorum, whatever a later step back revives.
func TestCheckErrorsClockStepBack(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	token := func(m int) simredis.KeyRecord {
		return simredis.KeyRecord{At: ms(0), Master: m, Key: "r", Value: turnPrefix + "other:1", ExpireAt: start.Add(ms(100)), Client: "c0"}
	}
	// Master 0's clock steps back by 200ms at 150ms: its token, past
	// its deadline since 100ms, lives again from 150ms to 300ms.
	clocks := []simredis.Clock{simredis.VirtualClock(start).Jumped(start.Add(ms(150)), -ms(200)), simredis.VirtualClock(start)}
	refused := &engine.VotesError{Op: "acquire", Resource: "r", Kind: engine.ErrNotAcquired, Votes: make([]engine.Vote, 3), Quorum: 2, Refused: 1}
	refused.Votes[0].Outcome = engine.OutcomeRefused
	call := Event{Op: "trylock", Resource: "r", Client: 1, Called: ms(200), At: ms(210), Result: "not-acquired", Err: refused, Grant: -1}
	for _, tc := range []struct {
		name   string
		clocks []simredis.Clock
		recs   []simredis.KeyRecord
		want   int
	}{
		{"revived by the step back", clocks, []simredis.KeyRecord{token(0)}, 0},
		{"no step back", []simredis.Clock{simredis.VirtualClock(start)}, []simredis.KeyRecord{token(0)}, 1},
		{"found expired before the step", clocks, []simredis.KeyRecord{token(0), {At: ms(120), Master: 0, Key: "r", Gone: true, Cause: "EVALSHA acquire"}}, 1},
	} {
		logs := make([][]simredis.KeyRecord, len(tc.clocks))
		for _, r := range tc.recs {
			logs[r.Master] = append(logs[r.Master], r)
		}
		keys := buildSpans(logs, tc.clocks, start)
		if got := CheckErrors([]Event{call}, nil, keys, nil, Bounds{}); len(got) != tc.want {
			t.Errorf("%s: violations %v, want %d", tc.name, got, tc.want)
		}
	}
	var lives []window
	for _, s := range buildSpans([][]simredis.KeyRecord{{token(0)}}, clocks[:1], start)["r"][0] {
		if !s.Gone {
			lives = append(lives, window{s.From, s.To})
		}
	}
	if want := []window{{0, ms(100)}, {ms(150), ms(300)}}; !slices.Equal(lives, want) {
		t.Errorf("the token lives %v, want %v", lives, want)
	}
	// A lease on three masters, two of them stepped back after its keys
	// expired there: it was trusted past its expiry from 100ms on.
	three := []simredis.Clock{clocks[0], clocks[0], simredis.VirtualClock(start)}
	var logs [][]simredis.KeyRecord
	for m := range three {
		logs = append(logs, []simredis.KeyRecord{{At: ms(0), Master: m, Key: "r", Value: "v", ExpireAt: start.Add(ms(100)), Client: "c0"}})
	}
	g := Grant{ID: 0, Resource: "r", Value: "v", Client: 0, Called: ms(0), Granted: ms(1), End: ms(200)}
	if got := CheckExpiry([]Grant{g}, buildSpans(logs, three, start), 2); len(got) != 1 || got[0].At != ms(100) {
		t.Errorf("a lease trusted across its keys' expiry and revival: %v, want a violation at 100ms", got)
	}
}

// A Lock refused at the in-process gate is honest while another worker of
// its client holds the resource, or is still in the Release that hands
// the gate on (its deletes wait for every master), even when that
// Release had not returned when the run ended.
func TestCheckErrorsGate(t *testing.T) {
	gateErr := errors.New("engine: lock \"r\": not acquired: queued behind another goroutine of this Locker")
	refused := Event{Op: "lock", Resource: "r", Client: 0, Worker: 0, Called: ms(500), At: ms(600), Result: "not-acquired", Err: gateErr, Grant: -1}
	held := Grant{ID: 0, Resource: "r", Client: 0, Worker: 1, Called: ms(0), Granted: ms(100), End: ms(450), Ended: "released"}
	for _, tc := range []struct {
		name    string
		release []Event
		want    int
	}{
		{"release still under way at the end", nil, 0},
		{"release returned after the refusal began", []Event{{Op: "release", Resource: "r", Client: 0, Worker: 1, Called: ms(450), At: ms(550), Result: "ok", Grant: 0}}, 0},
		{"release returned before", []Event{{Op: "release", Resource: "r", Client: 0, Worker: 1, Called: ms(450), At: ms(460), Result: "ok", Grant: 0}}, 1},
	} {
		got := CheckErrors(append(tc.release, refused), []Grant{held}, keySpans{}, nil, Bounds{})
		if len(got) != tc.want {
			t.Errorf("%s: violations %v, want %d", tc.name, got, tc.want)
		}
	}
}
