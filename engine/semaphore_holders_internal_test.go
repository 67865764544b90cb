package engine

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// TestSemaphoreRefusalNamesTheHolders: the acquire script, finding every
// slot taken, answers who holds them, so that a waiter tells one set of
// holders refusing on a quorum from a split: in every mode, single and
// coalesced, from any start slot, the same holders give the same vote
// value whichever of their values a waiter marked, other holders another;
// the value is odd (never 0, unknown, nor turnHash), and the reply stays
// one hash for MaxPermits slots.
func TestSemaphoreRefusalNamesTheHolders(t *testing.T) {
	c := redistest.StartT(t, 1)
	cl := direct(t, c.Nodes[0].Addr())
	ctx := context.Background()
	for _, body := range []string{semAcquireScript.Body, semAcquireScript.Multi.Body} {
		must(t, cl, "SCRIPT", "LOAD", body)
	}
	// refusal runs the script (coalesced or not) on base, whose slots
	// hold values, and returns the refusal's vote value.
	refusal := func(base string, values []string, first int, mode string, coalesced bool) int64 {
		t.Helper()
		must(t, cl, "DEL", base+"permits")
		for i, v := range values {
			must(t, cl, "SET", base+strconv.Itoa(i), v, "PX", "60000")
		}
		args := []string{"ours", "60000", strconv.Itoa(len(values)), strconv.Itoa(first), mode, "60000"}
		var res rueidis.RedisResult
		if coalesced {
			res = cl.Do(ctx, cl.B().Evalsha().Sha1(semAcquireScript.Multi.SHA).Numkeys(1).Key(base).Arg("6").Arg(args...).Build())
			a, err := res.ToArray()
			if err != nil || len(a) != 1 {
				t.Fatalf("coalesced %q: %v (%d replies)", mode, err, len(a))
			}
			s, err := a[0].ToString()
			if err != nil {
				t.Fatalf("coalesced %q: %v", mode, err)
			}
			res = cl.Do(ctx, cl.B().Echo().Message(s).Build())
		} else {
			res = cl.Do(ctx, cl.B().Evalsha().Sha1(semAcquireScript.SHA).Numkeys(1).Key(base).Arg(args...).Build())
		}
		o, h, err := classifySem(res)
		if err != nil || o.String() != "refused" || h&1 == 0 || h == turnHash {
			t.Fatalf("mode %q, coalesced %v: %v, %#x, %v; want refused with an odd hash", mode, coalesced, o, h, err)
		}
		return h
	}
	for _, mode := range []string{"", "w", "o", "ow", "f", "wf", "c", "owc", "m", "mw", "mowf"} {
		for _, coalesced := range []bool{false, true} {
			want := refusal("s:", []string{"a", "b", "c"}, 0, mode, coalesced)
			for _, same := range []struct {
				values []string
				first  int
			}{
				{[]string{"a+", "b", "c+"}, 1},
				{[]string{"a", "b+", "c"}, 2},
				{[]string{"a+", "b+", "c+"}, 0},
			} {
				if got := refusal("s:", same.values, same.first, mode, coalesced); got != want {
					t.Errorf("mode %q, coalesced %v: holders %q from slot %d read %#x, want %#x as unmarked", mode, coalesced, same.values, same.first, got, want)
				}
			}
			if got := refusal("s:", []string{"a", "c", "b"}, 0, mode, coalesced); got == want {
				t.Errorf("mode %q, coalesced %v: other holders read the same %#x", mode, coalesced, got)
			}
			if mode == "w" {
				for i, v := range []string{"a", "c", "b"} {
					if got, _ := cl.Do(ctx, cl.B().Get().Key("s:"+strconv.Itoa(i)).Build()).ToString(); got != v+waitMark {
						t.Errorf("a waiter's refusal left slot %d %q, want it marked", i, got)
					}
				}
			}
		}
	}
	full := make([]string, MaxPermits)
	for i := range full {
		full[i] = newValue()
	}
	refusal("big:", full, 7, "w", false)
}
