package engines

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// testSpec is the default spec with the bench's key prefix. rueidislock
// gives up a key attempt after 20 ms by default, as the bench runs it:
// beside other work a healthy master can take longer to answer, and the
// baseline would then acquire nothing. The tests check the adapter, not
// that deadline: its node timeout allows more.
func testSpec() Spec {
	s := DefaultSpec()
	s.KeyPrefix = "rlb:"
	s.NodeTimeout = 200 * time.Millisecond
	return s
}

// openT connects the implementation named name, with spec's settings, to
// masters.
func openT(ctx context.Context, name string, masters []string, spec Spec) (mutexes, error) {
	spec.Engine = MustParse(name)
	return open(ctx, spec, Votes{Masters: masters})
}

// noLeaks fails the test if it leaves goroutines behind: a client whose
// Close does not stop what it started. A count, not a list: waiting for
// the runtime to reap exited goroutines, up to 30s.
func noLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(20 * time.Millisecond) // polling the count: no event says a goroutine has exited
		}
	})
}
