package multiplex

import (
	"context"
	"errors"
	"testing"
)

// A round cut short by its caller's own deadline reads as one the node
// timeout ended: the silent nodes timed out, the counts agree, no error.
func TestTallyTimeOutPending(t *testing.T) {
	tl := Tally{
		Votes: []Vote{{Outcome: OK}, {Outcome: Pending}, {Outcome: Refused}, {Outcome: Pending}, {Outcome: OK}},
		OK:    2, Refused: 1, Pending: 2, Quorum: 3,
		Err: context.DeadlineExceeded,
	}
	tl.TimeOutPending()
	if tl.Err != nil || tl.Pending != 0 || tl.Timeout != 2 || tl.OK != 2 || tl.Refused != 1 {
		t.Fatalf("after TimeOutPending: %+v", tl)
	}
	for _, i := range []int{1, 3} {
		if v := tl.Votes[i]; v.Outcome != Timeout || !errors.Is(v.Err, ErrTimeout) {
			t.Fatalf("vote %d: %+v, want a timeout", i, v)
		}
	}
}
