package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// permit is a doctored semaphore permit: slot of s0 (2 permits),
// trusted from granted to end.
func permit(id, slot int, granted, end time.Duration) Grant {
	return Grant{ID: id, Resource: "s0", Permits: 2, Permit: slot, Client: id, Granted: granted, End: end, Token: int64(id + 1)}
}

// More permits trusted at once than the semaphore has, or a slot out of
// its range, is caught; two permits in one slot are mutual exclusion's,
// a slot being a unit.
func TestCheckPermits(t *testing.T) {
	for _, tc := range []struct {
		name            string
		grants          []Grant
		permits, shared int
	}{
		{"two of two", []Grant{permit(0, 0, ms(0), ms(10)), permit(1, 1, ms(5), ms(15))}, 0, 0},
		{"three of two", []Grant{permit(0, 0, ms(0), ms(10)), permit(1, 1, ms(5), ms(15)), permit(2, 0, ms(8), ms(20))}, 1, 1},
		{"the third after the first ended", []Grant{permit(0, 0, ms(0), ms(10)), permit(1, 1, ms(5), ms(15)), permit(2, 0, ms(10), ms(20))}, 0, 0},
		{"one slot twice", []Grant{permit(0, 1, ms(0), ms(10)), permit(1, 1, ms(5), ms(15))}, 0, 1},
		{"a slot out of range", []Grant{permit(0, 2, ms(0), ms(10))}, 1, 0},
		{"another semaphore", []Grant{permit(0, 0, ms(0), ms(10)), permit(1, 1, ms(5), ms(15)),
			{ID: 2, Resource: "s1", Permits: 2, Permit: 0, Granted: ms(6), End: ms(20)}}, 0, 0},
		{"a lock of the same name is no permit", []Grant{permit(0, 0, ms(0), ms(10)), permit(1, 1, ms(5), ms(15)),
			{ID: 2, Resource: "s0", Granted: ms(6), End: ms(20)}}, 0, 0},
	} {
		if got := CheckPermits(tc.grants); len(got) != tc.permits {
			t.Errorf("%s: CheckPermits: %d violations, want %d: %v", tc.name, len(got), tc.permits, got)
		}
		got := CheckMutualExclusion(tc.grants)
		if len(got) != tc.shared {
			t.Errorf("%s: CheckMutualExclusion: %d violations, want %d: %v", tc.name, len(got), tc.shared, got)
		}
		for _, v := range got {
			if v.Resource != "s0" || !strings.Contains(v.Detail, "s0#") {
				t.Errorf("%s: violation %v: want it about s0's slot", tc.name, v)
			}
		}
	}
}

// Tokens increase per slot, as the engine promises, not across slots;
// permits without a token (an unfenced Locker) are left out.
func TestCheckFencingPerSlot(t *testing.T) {
	ok := []Grant{permit(0, 0, ms(0), ms(1)), permit(1, 1, ms(1), ms(2)), permit(2, 0, ms(2), ms(3))}
	ok[0].Token, ok[1].Token, ok[2].Token = 5, 3, 6 // slot 1 below slot 0: no order across slots
	unfenced := permit(3, 0, ms(3), ms(4))
	unfenced.Token = 0
	if got := CheckFencing(append(ok, unfenced)); len(got) != 0 {
		t.Fatalf("tokens increasing per slot: %v", got)
	}
	bad := permit(4, 0, ms(4), ms(5))
	bad.Token = 6
	if got := CheckFencing(append(ok, bad)); len(got) != 1 || got[0].Resource != "s0" {
		t.Fatalf("token 6 after 6 in slot 0: violations %v, want one", got)
	}
}

// A permit trusted past the moment its slot's key left a quorum is
// caught, from the slot's own key.
func TestCheckExpirySlot(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	key := semPrefix + "{s0}:1"
	set := func(m int, when, until time.Duration) simredis.KeyRecord {
		return simredis.KeyRecord{At: when, Master: m, Key: key, Value: "v", ExpireAt: start.Add(until), Cause: "EVALSHA acquire"}
	}
	g := permit(0, 1, ms(10), ms(900))
	g.Value = "v"
	keys := spansOf(start, 3, set(0, ms(5), ms(1005)), set(1, ms(5), ms(1005)), set(2, ms(5), ms(1005)))
	if got := CheckExpiry([]Grant{g}, keys, 2); len(got) != 0 {
		t.Fatalf("the slot's key alive past the permit: %v", got)
	}
	keys = spansOf(start, 3, set(0, ms(5), ms(1005)), set(1, ms(5), ms(500)), set(2, ms(5), ms(600)))
	if got := CheckExpiry([]Grant{g}, keys, 2); len(got) != 1 || got[0].At != ms(600) || got[0].Resource != "s0" {
		t.Fatalf("violations %v: want one, from 600ms (the second key gone), about s0", got)
	}
	// Slot 0's key says nothing of a permit in slot 1.
	g.Permit = 0
	if got := CheckExpiry([]Grant{g}, spansOf(start, 3, set(0, ms(5), ms(1005)), set(1, ms(5), ms(1005))), 2); len(got) != 1 {
		t.Fatalf("a permit of slot 0 judged by slot 1's key: %v", got)
	}
}

// A semaphore's ErrNotAcquired is honest where each master that refused
// held a slot key meanwhile; a split (no refusal) is contention too.
// ErrPermitCount is never honest here: every client uses one count.
func TestCheckErrorsSemaphore(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	hold := func(m, slot int) simredis.KeyRecord {
		return simredis.KeyRecord{At: ms(0), Master: m, Key: semPrefix + "{s0}:" + string(rune('0'+slot)), Value: "x", ExpireAt: start.Add(time.Second), Client: "c0"}
	}
	keys := spansOf(start, 3, hold(0, 0), hold(0, 1), hold(1, 1),
		simredis.KeyRecord{At: ms(0), Master: 2, Key: semPrefix + "{s0}:permits", Value: "2", ExpireAt: start.Add(time.Second), Client: "c0"})
	votes := func(refused ...int) *engine.VotesError {
		ve := &engine.VotesError{Op: "acquire", Resource: "s0", Kind: engine.ErrNotAcquired, Votes: make([]engine.Vote, 3), Quorum: 2}
		for i := range ve.Votes {
			ve.Votes[i].Outcome = engine.OutcomeOK
		}
		for _, i := range refused {
			ve.Votes[i].Outcome = engine.OutcomeRefused
			ve.Refused++
		}
		ve.OK = 3 - ve.Refused
		return ve
	}
	call := func(op string, err error, result string) Event {
		return Event{Op: op, Resource: "s0", Client: 1, Called: ms(100), At: ms(110), Result: result, Err: err, Grant: -1}
	}
	for _, tc := range []struct {
		name string
		e    Event
		want int
	}{
		{"refused where slots were held", call("tryacquire", votes(0, 1), "not-acquired"), 0},
		{"refused by a master with no slot held", call("acquire", votes(1, 2), "not-acquired"), 1},
		{"a split", call("tryacquire", votes(), "not-acquired"), 0},
		{"another permit count", call("acquire", engine.ErrPermitCount, "permit-count"), 1},
	} {
		if got := CheckErrors([]Event{tc.e}, nil, keys, nil, Bounds{}); len(got) != tc.want {
			t.Errorf("%s: violations %v, want %d", tc.name, got, tc.want)
		}
	}
}
