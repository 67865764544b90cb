package bench

import (
	"fmt"
	"testing"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// A run on given masters leaves nothing behind: not its locks, and not
// what the engine keeps beside them (fencing counters, waiter queues,
// semaphore slots and counts, read/write intents), which expire on their
// own but long after the run.
func TestRunLeavesNoKeys(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 3)
	for i, lock := range []string{"mutex", "semaphore:2", "rw:0.5", "multi:2"} {
		t.Run(lock, func(t *testing.T) {
			l, err := engines.ParseLock(lock)
			if err != nil {
				t.Fatal(err)
			}
			cfg := familyConfig("redlock", c.Addrs(), l)
			cfg.Mode = ModeWait
			cfg.Fencing = true
			cfg.KeyPrefix = fmt.Sprintf("clean%d:", i)
			byCount(&cfg, 500)
			s := run(t, cfg).Summary
			requireLive(t, s, false)
			for _, addr := range c.Addrs() {
				n, err := redistest.Do(addr, 5e9, "DBSIZE")
				if err != nil {
					t.Fatal(err)
				}
				if n != ":0" {
					t.Errorf("%s: DBSIZE %s after the run, want none", addr, n)
				}
			}
		})
	}
}
