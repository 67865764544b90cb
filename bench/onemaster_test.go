package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// The engines that run on one master: the single-Redis baselines, and our
// engine in the same shape beside them.
var oneMasterEngines = []string{engineRueidislock, engineBsmRedislock, "redlock@1"}

// The one-master engines pass the same end-to-end check as every engine,
// the same workers and oracle under heavy contention, with zero
// violations; and, given three masters, they lock on the first only, which
// is the master their summary names.
func TestOneMasterEnginesHoldMutualExclusion(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 3)
	for i, name := range oneMasterEngines {
		for _, mode := range []Mode{ModeTry, ModeWait} {
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				cfg := shortConfig(name, c.Addrs())
				cfg.TTL = 500 * time.Millisecond
				cfg.Resources = 8
				cfg.Mode = mode
				cfg.Duration = time.Second
				if mode == ModeWait {
					cfg.Duration = 600 * time.Millisecond
					cfg.WaitTimeout = time.Second
				}
				cfg.KeyPrefix = fmt.Sprintf("om%d%s:", i, mode)
				s := run(t, cfg).Summary
				if s.Violations != 0 {
					t.Fatalf("%d violations: %+v", s.Violations, s.ViolationExamples)
				}
				// Without contention the check would prove nothing: in mode
				// try it shows as refusals, in mode wait as waits longer
				// than a hold (200µs).
				if s.Acquired == 0 || (mode == ModeTry && s.Contended == 0) ||
					(mode == ModeWait && s.WaitLatencyUs.Max < 1000) {
					t.Fatalf("want acquisitions under contention, got %d acquired, %d contended of %d attempts, wait max %d µs (errors %v %v)",
						s.Acquired, s.Contended, s.Attempts, s.WaitLatencyUs.Max, s.Errors, s.ErrorExamples)
				}
				// Holds of 200µs on a healthy master with a 500ms TTL: a
				// lease lost is the adapter's doing (a lock tied to the
				// acquire's context ends with it).
				if s.LostLeases > 0 {
					t.Errorf("%d leases lost on a healthy master", s.LostLeases)
				}
				if s.Errors["other"] > 0 {
					t.Errorf("unclassified errors: %v: %v", s.Errors, s.ErrorExamples)
				}
				if e := s.ErrorTotal(); e > 0 {
					t.Logf("errors on a healthy master: %v of %d attempts: %v", s.Errors, s.Attempts, s.ErrorExamples)
				}
				if strings.Join(s.Masters, ",") != c.Addrs()[0] {
					t.Errorf("summary masters %v, want the first only, %s", s.Masters, c.Addrs()[0])
				}
			})
		}
	}
	// Every lock was taken on the first master: the others saw no write
	// and no script.
	for i, a := range c.Addrs() {
		stats := commandStats(t, a)
		wrote := strings.Contains(stats, "cmdstat_evalsha:") || strings.Contains(stats, "cmdstat_eval:") ||
			strings.Contains(stats, "cmdstat_set:") || strings.Contains(stats, "cmdstat_fcall:")
		if i == 0 && !wrote {
			t.Errorf("the first master %s ran no lock command:\n%s", a, stats)
		}
		if i > 0 && wrote {
			t.Errorf("master %d (%s) ran lock commands, though every engine runs on the first:\n%s", i, a, stats)
		}
	}
}

// commandStats is the master's INFO commandstats.
func commandStats(t *testing.T, addr string) string {
	t.Helper()
	c, err := redisproc.NewClient(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// With their one master down, a failed attempt is an outage, not
// contention.
func TestOneMasterOutageIsNoQuorum(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	ctx := context.Background()
	cfg := DefaultConfig()
	// rueidislock waits, after a failed attempt, for its clean-up of the
	// key, bounded by the key's validity: keep it short.
	cfg.TTL = time.Second
	cfg.Quarantine = "observed" // a master the test just started
	var engines []Engine
	for _, name := range oneMasterEngines {
		cfg.Engine = name
		e, err := newEngine(ctx, name, c.Addrs(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		l, err := e.TryLock(ctx, "up:"+name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		l.Release(ctx)
		engines = append(engines, e)
	}
	c.Nodes[0].Kill()
	for i, e := range engines {
		_, err := e.TryLock(ctx, "down")
		if k := classify(err, nil); k != errNoQuorum {
			t.Errorf("%s with its master down: %v, classified %d, want no_quorum", oneMasterEngines[i], err, k)
		}
	}
}

func TestNewOneMasterEngineNamesADeadMaster(t *testing.T) {
	noLeaks(t)
	dead := deadAddr(t)
	for _, name := range oneMasterEngines {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		cfg := DefaultConfig()
		cfg.Engine = name
		_, err := newEngine(ctx, name, []string{dead}, cfg)
		cancel()
		if err == nil || !strings.Contains(err.Error(), dead) {
			t.Errorf("%s: want an error naming %s, got %v", name, dead, err)
		}
	}
}
