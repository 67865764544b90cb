package engine

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// TestRWValidityScript runs rwValidityScript in each of the read/write
// lock's states (rwStates) on one master: where our entry ("V") is live,
// as a reader or a writer, marked or beside others, it answers the time
// the entry has left (60 s from the set-up, less what has passed since);
// where it is gone, expired, or the key is not a read/write lock's, it
// refuses.
func TestRWValidityScript(t *testing.T) {
	live := map[string]bool{"reader-ours": true, "writer-ours": true, "readers-and-ours-marked": true,
		"reader-ours-marked": true, "fenced-writer-ours": true}
	c := redistest.StartT(t, 1)
	cl := direct(t, c.Nodes[0].Addr())
	ctx := context.Background()
	for i, st := range rwStates {
		k := "validity:" + st.name
		start := time.Now()
		for _, cmd := range st.setup {
			must(t, cl, rwSetup(cmd, k, i)...)
		}
		res := cl.Do(ctx, cl.B().Eval().Script(rwValidityScript.Body).Numkeys(1).Key(k).Arg(rwArgs([]string{"V"}, k, i)...).Build())
		passed := time.Since(start).Milliseconds() + 1
		o, ms, err := classifyPTTL(res)
		switch {
		case err != nil:
			t.Errorf("%s: %v", st.name, err)
		case !live[st.name] && o != multiplex.Refused:
			t.Errorf("%s: %v %d; want refused", st.name, o, ms)
		case live[st.name] && (o != multiplex.OK || ms > 60000 || ms < 60000-passed):
			t.Errorf("%s: %v %d; want ok, within %d ms of 60000", st.name, o, ms, passed)
		}
	}
}
