package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/results"
)

// familyConfig is shortConfig taking lock.
func familyConfig(engine string, masters []string, lock engines.Lock) Config {
	c := shortConfig(engine, masters)
	c.Lock = lock
	return c
}

// requireLive fails a run that proves nothing: nothing acquired, or (for
// a safety claim) no contention.
func requireLive(t *testing.T, s *results.Summary, contended bool) {
	t.Helper()
	if s.Acquired == 0 || contended && s.Contended == 0 {
		var b bytes.Buffer
		results.WriteText(&b, s)
		t.Fatalf("want acquisitions%s, got acquired %d contended %d:\n%s",
			map[bool]string{true: " and contention"}[contended], s.Acquired, s.Contended, b.String())
	}
}

// nolockFromTheStart measures a control's run from its first attempt and
// for 100,000 attempts, not for a time after a warm-up: on a loaded
// machine a window of a second after the warm-up counted nothing at all.
// From the start, the first attempt on each resource is a measured
// acquisition. Refused in mode try a worker retries at once, so the
// count must outlast many holds of 200 µs, each a chance of the overlap
// the oracle must see: 2000 attempts were spent within one hold and
// missed it now and then on an idle machine; 100,000 take tens of
// milliseconds idle, seconds under load, and span many holds on both.
func nolockFromTheStart(cfg *Config) {
	cfg.Warmup = 0
	byCount(cfg, 100_000)
}

// The semaphore's check can fail: the control admits one holder too many,
// P+1, and the oracle counts the breach and no more than it.
func TestNolockSemaphoreTripsTheOracle(t *testing.T) {
	noLeaks(t)
	cfg := familyConfig("nolock", nil, engines.Lock{Kind: engines.LockSemaphore, Permits: 2})
	nolockFromTheStart(&cfg)
	s := run(t, cfg).Summary
	requireLive(t, s, true)
	if s.Violations == 0 || len(s.ViolationExamples) == 0 {
		t.Fatalf("a control that admits 3 holders of a semaphore of 2: %d violations; the oracle is blind", s.Violations)
	}
	for _, v := range s.ViolationExamples {
		if v.Holders != 3 {
			t.Errorf("example %+v: the control never admits more than 3, want 3 holders", v)
		}
	}
	if s.Lock != "semaphore:2" || s.Config.Lock != "semaphore:2" {
		t.Errorf("lock %q, config lock %q", s.Lock, s.Config.Lock)
	}
}

// The multi-resource check can fail, on any resource of a lease: the
// control takes every resource of a lease exclusively but the last, which
// only a worker that registers each of the K resources sees overlap.
func TestNolockMultiTripsTheOracle(t *testing.T) {
	noLeaks(t)
	cfg := familyConfig("nolock", nil, engines.Lock{Kind: engines.LockMulti, K: 3})
	cfg.Resources = 6
	nolockFromTheStart(&cfg)
	s := run(t, cfg).Summary
	requireLive(t, s, true)
	if s.Violations == 0 {
		t.Fatalf("a control that leaves the last resource of each lease unguarded: no violations; the oracle is blind")
	}
}

// The read/write check can fail, and only where it must: the control's
// readers all hold together (no violation: the worker registers them as
// shared), its writers alone exclude each other (none), and a mix lets a
// writer in beside a reader, which the oracle counts. Where the control
// refuses, it waits (mode wait): refused in mode try, its workers would
// retry without ever blocking, and on a loaded machine keep the holders
// from the CPU they need to wake and let go.
func TestNolockRWTripsTheOracle(t *testing.T) {
	noLeaks(t)
	for _, c := range []struct {
		f          float64
		mode       Mode
		violations bool
	}{{1, ModeTry, false}, {0, ModeWait, false}, {0.5, ModeWait, true}} {
		cfg := familyConfig("nolock", nil, engines.Lock{Kind: engines.LockRW, ReadFraction: c.f})
		cfg.Mode = c.mode
		byCount(&cfg, 2000)
		s := run(t, cfg).Summary
		requireLive(t, s, false)
		if got := s.Violations > 0; got != c.violations {
			t.Errorf("rw:%g: %d violations %+v, want violations %v", c.f, s.Violations, s.ViolationExamples, c.violations)
		}
		if c.f == 1 && s.Contended != 0 {
			t.Errorf("rw:1: %d reads refused; readers share", s.Contended)
		}
	}
}

// Our read/write lock keeps every writer alone under contention, in both
// modes, its writers' fencing tokens increasing; redlock-mutex takes the
// same operations exclusively, each with a token.
func TestRedlockRWRun(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 5)
	for _, r := range []struct {
		engine string
		mode   Mode
	}{{"redlock", ModeTry}, {"redlock", ModeWait}, {engines.RedlockMutex.String(), ModeWait}} {
		cfg := familyConfig(r.engine, c.Addrs(), engines.Lock{Kind: engines.LockRW, ReadFraction: 0.7})
		cfg.Resources, cfg.Mode, cfg.Fencing = 2, r.mode, true
		if r.mode == ModeTry {
			// A writer that does not wait is refused while any reader
			// holds, and on 2 resources the readers of 16 workers hold
			// them almost always on a slow host: none of about 150
			// writers got in. On 16, at most 15 others are at work, 11 of
			// them readers on average: a writer finds its resource free
			// about half the time, so that none of them getting in has a
			// chance of about 2^-150, while readers still collide.
			cfg.Resources = 16
		}
		cfg.KeyPrefix = labelSafe(r.engine) + "-" + string(r.mode) + ":"
		loadProof(&cfg)
		byCount(&cfg, 500)
		s := run(t, cfg).Summary
		requireLive(t, s, r.mode == ModeTry)
		if s.Violations != 0 || s.StaleTokens != 0 {
			t.Fatalf("%s %s: %d violations %+v, %d stale tokens %+v", r.engine, r.mode, s.Violations, s.ViolationExamples, s.StaleTokens, s.StaleTokenExamples)
		}
		// Only writers carry tokens: some of each kind held (tokens
		// count the warm-up too; the acquisitions do not).
		if r.engine == engines.RedlockMutex.String() && s.TokensChecked < s.Acquired || r.engine != engines.RedlockMutex.String() && (s.TokensChecked == 0 || s.TokensChecked >= s.Acquired) {
			t.Errorf("%s %s: %d tokens checked for %d holds", r.engine, r.mode, s.TokensChecked, s.Acquired)
		}
		if e := s.ErrorTotal(); e*100 > s.Attempts {
			t.Errorf("%s %s: errors on healthy masters: %v of %d attempts (%v)", r.engine, r.mode, s.Errors, s.Attempts, s.ErrorExamples)
		}
		t.Logf("%s %s: %d acquired, %d contended, %d tokens checked", r.engine, r.mode, s.Acquired, s.Contended, s.TokensChecked)
		if s.Lock != "rw:0.7" {
			t.Errorf("%s %s: lock %q", r.engine, r.mode, s.Lock)
		}
	}
}

// Our semaphore keeps at most P holders under contention, in both modes,
// with fencing tokens increasing per permit slot.
func TestRedlockSemaphoreRun(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 5)
	for _, mode := range []Mode{ModeTry, ModeWait} {
		cfg := familyConfig("redlock", c.Addrs(), engines.Lock{Kind: engines.LockSemaphore, Permits: 3})
		cfg.Resources, cfg.Mode, cfg.Fencing = 2, mode, true
		cfg.KeyPrefix = "sem-" + string(mode) + ":"
		loadProof(&cfg)
		byCount(&cfg, 500)
		s := run(t, cfg).Summary
		requireLive(t, s, mode == ModeTry)
		if s.Violations != 0 || s.StaleTokens != 0 {
			t.Fatalf("%s: %d violations %+v, %d stale tokens %+v", mode, s.Violations, s.ViolationExamples, s.StaleTokens, s.StaleTokenExamples)
		}
		if s.TokensChecked == 0 {
			t.Errorf("%s: fencing on, no token checked", mode)
		}
		if e := s.ErrorTotal(); e*100 > s.Attempts {
			t.Errorf("%s: errors on healthy masters: %v of %d attempts (%v)", mode, s.Errors, s.Attempts, s.ErrorExamples)
		}
	}
}

// Our multi-resource lease keeps each of its resources exclusive, in both
// modes, and so do K mutexes taken one after another, ours and redsync's.
func TestMultiRun(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 5)
	for _, r := range []struct {
		engine string
		mode   Mode
	}{
		{"redlock", ModeTry}, {"redlock", ModeWait}, {engines.RedlockSequential.String(), ModeTry}, {engines.RedlockSequential.String(), ModeWait},
		{engines.RedsyncRueidis.String(), ModeTry},
	} {
		cfg := familyConfig(r.engine, c.Addrs(), engines.Lock{Kind: engines.LockMulti, K: 3})
		cfg.Resources, cfg.Mode = 6, r.mode
		cfg.Fencing = engines.MustParse(r.engine).IsRedlock()
		cfg.KeyPrefix = labelSafe(r.engine) + "-" + string(r.mode) + ":"
		loadProof(&cfg)
		byCount(&cfg, 200)
		s := run(t, cfg).Summary
		requireLive(t, s, r.mode == ModeTry)
		if s.Violations != 0 || s.StaleTokens != 0 {
			t.Fatalf("%s %s: %d violations %+v, %d stale tokens %+v", r.engine, r.mode, s.Violations, s.ViolationExamples, s.StaleTokens, s.StaleTokenExamples)
		}
		if cfg.Fencing && s.TokensChecked < 3*s.Acquired {
			t.Errorf("%s %s: %d tokens checked for %d leases of 3 resources", r.engine, r.mode, s.TokensChecked, s.Acquired)
		}
		if e := s.ErrorTotal(); e*100 > s.Attempts {
			t.Errorf("%s %s: errors on healthy masters: %v of %d attempts (%v)", r.engine, r.mode, s.Errors, s.Attempts, s.ErrorExamples)
		}
	}
}

// A run's results say what it took: summary.json's lock, the line of -q,
// and the safety line of summary.txt.
func TestSummaryRecordsTheLock(t *testing.T) {
	cfg := familyConfig("nolock", nil, engines.Lock{Kind: engines.LockSemaphore, Permits: 4})
	cfg.Workers, cfg.Duration, cfg.Warmup = 2, 100*time.Millisecond, 0
	s := run(t, cfg).Summary
	var b bytes.Buffer
	if err := results.WriteText(&b, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lock         semaphore:4\n", "OK: never more holders of a semaphore at once than its 4 permits"} {
		if !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("summary.txt lacks %q:\n%s", want, b.String())
		}
	}
}
