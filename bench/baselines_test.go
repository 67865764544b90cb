package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// baselines are the redsync flavours, run end to end: the same workers
// and oracle as our engine.
var baselines = []string{engines.RedsyncRueidis.String(), engines.RedsyncGoredis.String()}

// The baselines pass the same end-to-end check as our engine: the same
// workers and oracle, under heavy contention, with zero violations.
//
// The TTL is short because redsync with fail-fast leaks keys under
// contention: it releases a failed attempt as soon as the vote is decided,
// and a SET still on its way lands after the release and holds that
// master until the TTL. Enough of those split every later vote, so with
// a long TTL the measured window would see no acquisition at all, and a
// check without acquisitions proves nothing.
func TestBaselinesHoldMutualExclusion(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 5)
	for i, name := range baselines {
		for _, mode := range []Mode{ModeTry, ModeWait} {
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				cfg := shortConfig(name, c.Addrs())
				cfg.TTL = 500 * time.Millisecond
				cfg.Resources = 8
				cfg.Mode = mode
				// By count: on a loaded machine a window of a second
				// can hold next to no attempt.
				byCount(&cfg, 400)
				if mode == ModeWait {
					byCount(&cfg, 100)
					cfg.WaitTimeout = time.Second
				}
				// Each run its own keys: another run's leaked keys would
				// only add contention, but keep the runs independent.
				cfg.KeyPrefix = fmt.Sprintf("rs%d%s:", i, mode)
				s := run(t, cfg).Summary
				if s.Violations != 0 {
					t.Fatalf("%d violations: %+v", s.Violations, s.ViolationExamples)
				}
				// Without contention the check would prove nothing: in mode
				// try it shows as refusals, in mode wait as Locks that had
				// to retry (redsync waits at least 50ms between tries).
				if s.Acquired == 0 || (mode == ModeTry && s.Contended == 0) ||
					(mode == ModeWait && s.WaitLatencyUs.Max < 50_000) {
					t.Fatalf("want acquisitions under contention, got %d acquired, %d contended of %d attempts, wait max %d µs (errors %v %v)",
						s.Acquired, s.Contended, s.Attempts, s.WaitLatencyUs.Max, s.Errors, s.ErrorExamples)
				}
				// Every redsync failure falls in a category. Timeouts are
				// not checked: redsync gives each attempt 5% of the TTL
				// (25ms here), which a loaded 2-core machine under -race
				// misses now and then, and that is redsync doing its job.
				if s.Errors["other"] > 0 {
					t.Errorf("unclassified errors: %v: %v", s.Errors, s.ErrorExamples)
				}
				if e := s.ErrorTotal(); e > 0 {
					t.Logf("errors on healthy masters: %v of %d attempts", s.Errors, s.Attempts)
				}
			})
		}
	}
}

// The engines that run on one master: the single-Redis baselines, and our
// engine in the same shape beside them.
var oneMasterEngines = []string{engines.Rueidislock.String(), engines.BsmRedislock.String(), "redlock@1"}

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
				cfg.Resources = 8
				cfg.Mode = mode
				// By count, with a minute's TTL and wait (loadProof): a
				// loaded machine makes the attempts slow, not fewer, and
				// only a stall of 600 ms (redlock@1's node timeout) or
				// half a minute (rueidislock's extension) can cost a
				// healthy master's vote or a lease.
				loadProof(&cfg)
				byCount(&cfg, 400)
				if mode == ModeWait {
					byCount(&cfg, 100)
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
				// Holds of 200µs on a healthy master with a minute's TTL:
				// a lease lost is the adapter's doing (a lock tied to the
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

// rueidislock extends its key while the lock is held, so a hold longer
// than the TTL keeps its lease: the worker must read the validity again at
// the end of the hold (engines.SelfExtending). Read once, as for a lease of
// fixed validity, every such hold would count as lost (as
// TestSelfExtendingLeaseIsReadAtTheHoldsEnd shows in virtual time).
//
// The extensions run on this machine's timers against a real master: one
// more than half a TTL late (rueidislock extends every half TTL) lets the
// key expire, a lease really lost. So a lost lease fails the test only
// when this host's own lag through the run, a PING's round trip and a
// timer's lateness (lagProbe), stayed under that margin.
func TestRueidislockHoldsPastTheTTL(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 1)
	cfg := shortConfig(engines.Rueidislock.String(), c.Addrs())
	cfg.TTL = time.Second
	cfg.Hold = Hold{D: 1500 * time.Millisecond}
	cfg.Mode = ModeWait
	cfg.WaitTimeout = time.Minute
	cfg.Workers = 4
	cfg.Resources = 2
	cfg.Warmup = 0
	byCount(&cfg, 4)
	lag := lagProbe(t, c.Addrs()[0])
	s := run(t, cfg).Summary
	maxLag := lag()
	if s.Violations != 0 {
		t.Fatalf("%d violations: %+v", s.Violations, s.ViolationExamples)
	}
	if s.Acquired < 2 {
		t.Fatalf("%d acquired of %d attempts; want holds past the TTL (errors %v %v)", s.Acquired, s.Attempts, s.Errors, s.ErrorExamples)
	}
	switch margin := cfg.TTL / 2; {
	case s.LostLeases == 0:
	case maxLag < margin:
		t.Errorf("%d of %d holds past the TTL lost, though this host lagged %s at most, under the %s an extension may be late (errors %v %v)",
			s.LostLeases, s.Acquired, maxLag, margin, s.Errors, s.ErrorExamples)
	default:
		t.Logf("%d of %d holds past the TTL lost, with this host %s late at worst, beyond the %s an extension may be: the machine's doing",
			s.LostLeases, s.Acquired, maxLag, margin)
	}
}

// lagProbe measures this host's lag as a lock client meets it, until the
// function it returns is called, which returns the worst seen: every 10 ms
// a PING to addr and a 10 ms timer, and how much longer the two took than
// the timer alone. A loaded machine shows it as hundreds of milliseconds;
// the master's stalls are in it too.
func lagProbe(t *testing.T, addr string) func() time.Duration {
	t.Helper()
	cl, err := redisproc.NewClient(addr, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const tick = 10 * time.Millisecond
	stop, done := make(chan struct{}), make(chan time.Duration, 1)
	go func() {
		defer cl.Close()
		var worst time.Duration
		defer func() { done <- worst }()
		for {
			t0 := time.Now()
			if err := cl.Do(context.Background(), cl.B().Ping().Build()).Error(); err != nil {
				worst = time.Hour // a master that cannot answer: no margin holds
			}
			select {
			case <-stop:
				return
			case <-time.After(tick):
			}
			worst = max(worst, time.Since(t0)-tick)
		}
	}()
	return func() time.Duration {
		close(stop)
		return <-done
	}
}

// The worker's side of TestRueidislockHoldsPastTheTTL, in virtual time,
// where a hold lasts exactly its time: a lease that extends itself, held
// for one and a half TTLs, is read again when the hold ends and counts as
// kept; a lease of fixed validity held as long counts as lost, which is
// what reading the self-extending one once would make of it.
func TestSelfExtendingLeaseIsReadAtTheHoldsEnd(t *testing.T) {
	const ttl = 300 * time.Millisecond
	for _, tc := range []struct {
		name  string
		lease func() engines.Lease
		lost  bool
	}{
		{"self-extending", func() engines.Lease { return selfExtendingLease{ttl} }, false},
		{"fixed validity", func() engines.Lease { return fixedLease{time.Now().Add(ttl)} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Engine = engines.MustParse("nolock")
				cfg.Resources, cfg.TTL, cfg.Hold = 1, ttl, Hold{D: ttl * 3 / 2}
				r := newRunner(cfg, nil)
				r.start = time.Now()
				r.oracle = newOracle(r.start, r.names, cfg.Lock)
				w := &worker{r: r, rng: newRand(1, 0), set: []int{0}, setNames: r.names[:1]}
				h := w.hold(op{t0: r.start, asked: r.start, t1: r.start}, tc.lease())
				if held := h.t2.Sub(r.start); held != cfg.Hold.D {
					t.Fatalf("held %s, want the %s asked for", held, cfg.Hold.D)
				}
				if h.lost != tc.lost || h.releaseFailed {
					t.Errorf("a hold of %s on a %s TTL: lost %v, release failed %v; want lost %v", cfg.Hold.D, ttl, h.lost, h.releaseFailed, tc.lost)
				}
				if n, ex := r.oracle.violations(); n != 0 {
					t.Errorf("%d violations with one holder: %+v", n, ex)
				}
			})
		})
	}
}

// selfExtendingLease is valid a TTL ahead for as long as it is held, as a
// rueidislock lease whose key is being extended.
type selfExtendingLease struct{ ttl time.Duration }

func (l selfExtendingLease) ValidUntil() time.Time       { return time.Now().Add(l.ttl) }
func (selfExtendingLease) Release(context.Context) error { return nil }
func (selfExtendingLease) SelfExtending()                {}

// fixedLease is valid until a time set when it was taken.
type fixedLease struct{ until time.Time }

func (l fixedLease) ValidUntil() time.Time       { return l.until }
func (fixedLease) Release(context.Context) error { return nil }
