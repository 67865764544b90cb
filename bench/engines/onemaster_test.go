package engines

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redistest"
)

// The engines that run on one master: the single-Redis baselines, and our
// engine in the same shape beside them.
var oneMasterEngines = []string{Rueidislock.String(), BsmRedislock.String(), "redlock@1"}

// With their one master down, a failed attempt is an outage, not
// contention.
func TestOneMasterOutageIsNoQuorum(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	ctx := context.Background()
	cfg := testSpec()
	// rueidislock waits, after a failed attempt, for its clean-up of the
	// key, bounded by the key's validity: keep it short.
	cfg.TTL = time.Second
	cfg.Quarantine = QuarantineObserved // a master the test just started
	var es []mutexes
	for _, name := range oneMasterEngines {
		e, err := openT(ctx, name, c.Addrs(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		l, err := e.TryLock(ctx, "up:"+name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		l.Release(ctx)
		es = append(es, e)
	}
	c.Nodes[0].Kill()
	for i, e := range es {
		_, err := e.TryLock(ctx, "down")
		if k := Classify(err); k != NoQuorum {
			t.Errorf("%s with its master down: %v, classified %d, want no_quorum", oneMasterEngines[i], err, k)
		}
	}
}

func TestNewOneMasterEngineNamesADeadMaster(t *testing.T) {
	noLeaks(t)
	dead := redistest.DeadAddr(t)
	for _, name := range oneMasterEngines {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		cfg := testSpec()
		_, err := openT(ctx, name, []string{dead}, cfg)
		cancel()
		if err == nil || !strings.Contains(err.Error(), dead) {
			t.Errorf("%s: want an error naming %s, got %v", name, dead, err)
		}
	}
}
