package engine

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/multiplex"
)

// The engine's NodeStatus is the pool's, restated so that callers need not
// import multiplex: every field must be copied, under the same JSON name,
// or a field added to the pool would silently go missing from the bench's
// figures.
func TestNodeStatusCopiesEveryField(t *testing.T) {
	var src multiplex.NodeStatus
	v := reflect.ValueOf(&src).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name)
		case reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Float64:
			f.SetFloat(float64(i) + 0.5)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Struct:
			f.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		default:
			t.Fatalf("multiplex.NodeStatus.%s: kind %s not covered by this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	want, err := json.Marshal(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(nodeStatus(src))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("engine.NodeStatus differs from multiplex.NodeStatus:\n got %s\nwant %s", got, want)
	}
	if nt, mt := reflect.TypeFor[NodeStatus](), reflect.TypeFor[multiplex.NodeStatus](); nt.NumField() != mt.NumField() {
		t.Fatalf("engine.NodeStatus has %d fields, multiplex.NodeStatus %d", nt.NumField(), mt.NumField())
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
