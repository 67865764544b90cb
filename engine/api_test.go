package engine

import (
	"errors"
	"testing"

	"github.com/redlock-bench/redlock/multiplex"
)

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
