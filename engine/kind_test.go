package engine

import (
	"context"
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
		{"failures and unknowns sink it", tally(0, 1, 2, 0, 2), ErrNoQuorum},
		{"reached too late", tally(3, 0, 0, 0, 2), ErrNoQuorum},
		{"context ended", multiplex.Tally{Votes: make([]multiplex.Vote, 5), Quorum: 3, Pending: 5, Err: context.Canceled}, nil},
	} {
		if got := acquireKind(&tc.t); got != tc.want {
			t.Errorf("%s: %+v: got %v, want %v", tc.name, tc.t, got, tc.want)
		}
	}
}
