package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/multiplex"
)

func TestAcquireKind(t *testing.T) {
	tally := func(ok, refused, failed, timeout, pending int) multiplex.Tally {
		return multiplex.Tally{Votes: make([]multiplex.Vote, ok+refused+failed+timeout+pending), Quorum: 3,
			OK: ok, Refused: refused, Failed: failed, Timeout: timeout, Pending: pending}
	}
	for _, tc := range []struct {
		name string
		t    multiplex.Tally
		want error
	}{
		{"held elsewhere", tally(0, 5, 0, 0, 0), ErrNotAcquired},
		{"held, with failures", tally(0, 3, 2, 0, 0), ErrNotAcquired},
		{"held, decided early", tally(0, 3, 0, 0, 2), ErrNotAcquired},
		{"split vote", tally(2, 2, 0, 0, 1), ErrNotAcquired},
		{"split vote with one failure", tally(2, 2, 1, 0, 0), ErrNotAcquired},
		{"majority failed", tally(1, 1, 3, 0, 0), ErrNoQuorum},
		{"majority timed out", tally(2, 0, 0, 3, 0), ErrNoQuorum},
		// Two failures of five leave a quorum possible: the refusal
		// decided it, so it is contention.
		{"failures with a refusal, decided early", tally(0, 1, 2, 0, 2), ErrNotAcquired},
		{"failures alone sink it, decided early", tally(0, 0, 3, 0, 2), ErrNoQuorum},
		{"reached too late", tally(3, 0, 0, 0, 2), ErrNoQuorum},
		{"context ended", multiplex.Tally{Votes: make([]multiplex.Vote, 5), Quorum: 3, Pending: 5, Err: context.Canceled}, nil},
	} {
		if got := acquireKind(&tc.t); got != tc.want {
			t.Errorf("%s: %+v: got %v, want %v", tc.name, tc.t, got, tc.want)
		}
	}
}

func TestHeldByOne(t *testing.T) {
	v := func(o Outcome, holder int64) Vote {
		return Vote{Outcome: o, value: holder}
	}
	r, ok := OutcomeRefused, OutcomeOK
	for _, tc := range []struct {
		name  string
		votes []Vote
		want  bool
	}{
		{"one holder everywhere", []Vote{v(r, 7), v(r, 7), v(r, 7), v(r, 7), v(r, 7)}, true},
		{"one holder on a quorum, leftovers elsewhere", []Vote{v(r, 7), v(r, 9), v(r, 7), v(r, 9), v(r, 7)}, true},
		{"split between two attempts", []Vote{v(r, 7), v(r, 9), v(ok, 0), v(r, 9), v(r, 7)}, false},
		{"three owners", []Vote{v(r, 1), v(r, 5), v(r, 3), v(r, 1), v(r, 5)}, false},
		// A turn token stands where a release just gave the resource to a
		// queued waiter: with the old holder still on the others, it is
		// one hand-over under way, not a split.
		{"holder and turn tokens", []Vote{v(r, 7), v(r, turnHash), v(r, 7), v(ok, 0), v(r, turnHash)}, true},
		{"turn tokens on a quorum", []Vote{v(r, turnHash), v(r, turnHash), v(r, turnHash), v(ok, 0), v(ok, 0)}, true},
		{"turn tokens and two owners", []Vote{v(r, 7), v(r, turnHash), v(r, 9), v(ok, 0), v(r, 9)}, true},
		{"two owners, no quorum with the tokens", []Vote{v(r, 7), v(r, turnHash), v(r, 9), v(ok, 0), v(ok, 0)}, false},
		{"too few refusals", []Vote{v(r, 7), v(r, 7), v(ok, 0), v(ok, 0), v(OutcomeFailed, 0)}, false},
	} {
		e := &VotesError{Votes: tc.votes, Quorum: 3}
		for _, x := range tc.votes {
			if x.Outcome == r {
				e.Refused++
			}
		}
		if got := e.heldByOne(); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHolderHashIgnoresWaitMark(t *testing.T) {
	v := newValue()
	if holderHash(v) != holderHash(v+waitMark) {
		t.Fatalf("%q and its marked form hash apart: one holder would look like a split vote", v)
	}
	if holderHash(v) == holderHash(newValue()) {
		t.Fatal("two values hash alike")
	}
	if holderHash(turnPrefix+"w:1") != turnHash || holderHash(turnPrefix+"w:1"+waitMark) != turnHash || holderHash(v)&1 == 0 {
		t.Fatal("turn tokens must hash to turnHash, and lock values never")
	}
	if strings.Contains(v, waitMark) || strings.Contains(v, turnPrefix) {
		t.Fatalf("lock value %q contains the wait mark", v)
	}
}

// A VotesError is a copy: the lease reuses its vote buffer for the next
// round, which must not rewrite an error already returned.
func TestVotesErrorCopiesVotes(t *testing.T) {
	buf := []multiplex.Vote{{Outcome: multiplex.Refused, Value: 7}, {Outcome: multiplex.Failed, Err: ErrQuarantined}, {}}
	tally := multiplex.Tally{Votes: buf, Refused: 1, Failed: 1, Pending: 1, Quorum: 2}
	e := newVotesError("acquire", "r", ErrNotAcquired, &tally, []string{"a:1", "b:2", "c:3"})
	before := e.Error()
	buf[0], buf[1] = multiplex.Vote{Outcome: multiplex.OK}, multiplex.Vote{Outcome: multiplex.OK}
	if got := e.Error(); got != before {
		t.Fatalf("the error changed with the buffer:\nbefore %s\n after %s", before, got)
	}
	if e.Votes[0].Outcome != OutcomeRefused || e.Votes[0].value != 7 || e.Votes[1].Outcome != OutcomeFailed {
		t.Fatalf("votes not carried over: %+v", e.Votes)
	}
	want := `engine: acquire "r": not acquired: held by another owner (0 ok, 1 refused, 1 error, 0 timeout, 1 pending; quorum 2 of 3); b:2: error: quarantined`
	if before != want {
		t.Fatalf("Error():\n got %s\nwant %s", before, want)
	}
	var ne *NodeError
	if !errors.As(e, &ne) || ne.Addr != "b:2" || ne.Outcome != OutcomeFailed || !errors.Is(ne, multiplex.ErrQuarantined) {
		t.Fatalf("NodeError: %+v", ne)
	}
}
