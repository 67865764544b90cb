package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// The judges are pure functions of an observation. Each is tested here on
// synthetic observations, with at least one on which it must fail: a
// verdict that cannot fail proves nothing.

// verdict is one synthetic case: the judge's answer and a word its
// reasoning must contain.
type verdict struct {
	name   string
	passed bool
	want   string // a substring of the reasoning
	judge  func() (bool, string)
}

func checkVerdicts(t *testing.T, cases []verdict) {
	t.Helper()
	sawFail := false
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			passed, why := c.judge()
			if passed != c.passed {
				t.Errorf("passed = %v, want %v: %s", passed, c.passed, why)
			}
			if !strings.Contains(why, c.want) {
				t.Errorf("reasoning %q does not mention %q", why, c.want)
			}
		})
		sawFail = sawFail || !c.passed
	}
	if !sawFail {
		t.Fatal("no case on which the judge must fail")
	}
}

func amnesiaGranted() amnesiaObs {
	return amnesiaObs{Masters: 5, Quorum: 3, HolderNodes: []int{0, 1, 2}, Restarted: true,
		Granted: true, HolderLeftMs: 1900, DoubleGrants: 1,
		Attempts: []amnesiaAttempt{{Outcome: "acquired", RestartedVote: "ok (counted)"}}}
}

func amnesiaRefused() amnesiaObs {
	return amnesiaObs{Masters: 5, Quorum: 3, HolderNodes: []int{0, 1, 2}, Restarted: true,
		DiscountedVotes: 3, RestartedState: "quarantined", QuarantinedForMs: 1900,
		AfterRelease: "acquired", AfterReleaseAcquired: true,
		Attempts: []amnesiaAttempt{{Outcome: "not-acquired"}, {Outcome: "not-acquired"}, {Outcome: "not-acquired"}}}
}

func TestJudgeRestartAmnesia(t *testing.T) {
	with := func(o amnesiaObs, q engine.QuarantinePolicy, mut func(*amnesiaObs)) func() (bool, string) {
		if mut != nil {
			mut(&o)
		}
		return func() (bool, string) { return judgeRestartAmnesia(o, q) }
	}
	checkVerdicts(t, []verdict{
		{"off, double grant: hazard reproduced", true, "double grant", with(amnesiaGranted(), engine.QuarantineOff, nil)},
		{"off, no double grant: hazard not reproduced", false, "not reproduced", with(amnesiaRefused(), engine.QuarantineOff, nil)},
		{"observed, refused by quarantine", true, "No double grant", with(amnesiaRefused(), engine.QuarantineObserved, nil)},
		{"always, refused by quarantine", true, "No double grant", with(amnesiaRefused(), engine.QuarantineAlways, nil)},
		{"always, double grant", false, "DOUBLE GRANT", with(amnesiaGranted(), engine.QuarantineAlways, nil)},
		{"observed, double grant", false, "DOUBLE GRANT", with(amnesiaGranted(), engine.QuarantineObserved, nil)},
		{"always, refused but not by the quarantine", false, "never seen discounted",
			with(amnesiaRefused(), engine.QuarantineAlways, func(o *amnesiaObs) { o.DiscountedVotes = 0 })},
		{"always, locked out after release", false, "not the lock",
			with(amnesiaRefused(), engine.QuarantineAlways, func(o *amnesiaObs) {
				o.AfterReleaseAcquired, o.AfterRelease = false, "engine: no quorum"
			})},
		{"holder on 4 masters: set-up failed", false, "set-up failed",
			with(amnesiaGranted(), engine.QuarantineOff, func(o *amnesiaObs) { o.HolderNodes = []int{0, 1, 2, 3} })},
		{"no restart: set-up failed", false, "not restarted",
			with(amnesiaRefused(), engine.QuarantineAlways, func(o *amnesiaObs) { o.Restarted = false })},
	})
}

func lat(p50, p99, maxUs int64) Latency {
	return Latency{N: 100, P50Us: p50, P99Us: p99, MaxUs: maxUs}
}

func minorityOK() outageObs {
	return outageObs{Killed: []int{3, 4}, Rejoined: true, RejoinMs: 1000, Phases: []PhaseStats{
		{Phase: "before", Attempts: 1000, Acquired: 990, NotAcquired: 10, AcquiredPerS: 3000, Acquire: lat(200, 500, 900)},
		{Phase: "outage", Attempts: 1000, Acquired: 995, NotAcquired: 4, NoQuorum: 1, AcquiredPerS: 2500, Acquire: lat(220, 900, 2000)},
		{Phase: "recovering", Attempts: 500, Acquired: 500, AcquiredPerS: 2500},
		{Phase: "after", Attempts: 1000, Acquired: 1000, AcquiredPerS: 3100, Acquire: lat(200, 480, 800)},
	}}
}

func TestJudgeMinorityDown(t *testing.T) {
	with := func(mut func(*outageObs)) func() (bool, string) {
		o := minorityOK()
		if mut != nil {
			mut(&o)
		}
		return func() (bool, string) { return judgeMinorityDown(o) }
	}
	checkVerdicts(t, []verdict{
		{"locking goes on", true, "Locking went on", with(nil)},
		{"locking stopped", false, "locking stopped", with(func(o *outageObs) {
			o.Phases[1] = PhaseStats{Phase: "outage", Attempts: 900, NoQuorum: 900}
		})},
		{"too many no-quorum failures", false, "lack of quorum", with(func(o *outageObs) {
			o.Phases[1].NoQuorum, o.Phases[1].Acquired = 50, 946
		})},
		{"throughput collapsed", false, "throughput fell", with(func(o *outageObs) { o.Phases[1].AcquiredPerS = 100 })},
		{"never rejoined", false, "did not rejoin", with(func(o *outageObs) { o.Rejoined = false })},
		{"nothing after", false, "after the masters rejoined", with(func(o *outageObs) { o.Phases[3].Acquired = 0 })},
		{"overlap", false, "overlapping", with(func(o *outageObs) { o.Violations = 1 })},
		{"no baseline", false, "set-up failed", with(func(o *outageObs) { o.Phases[0].Acquired = 0 })},
	})
}

func majorityOK() outageObs {
	return outageObs{Killed: []int{0, 1, 2}, NodeTimeoutMs: 50, FailFastBoundMs: 100,
		Recovered: true, RecoveryMs: 1000, UnavailableMs: 1600, Phases: []PhaseStats{
			{Phase: "before", Attempts: 1000, Acquired: 1000, AcquiredPerS: 3000},
			{Phase: "outage", Attempts: 1500, NoQuorum: 1500, Failed: lat(200, 1300, 6000)},
			{Phase: "recovering", Attempts: 2000, Acquired: 60, NoQuorum: 1940, Failed: lat(300, 700, 2500), FirstAcquiredMs: 1900},
			{Phase: "after", Attempts: 1000, Acquired: 1000},
		}}
}

func TestJudgeMajorityDown(t *testing.T) {
	with := func(mut func(*outageObs)) func() (bool, string) {
		o := majorityOK()
		if mut != nil {
			mut(&o)
		}
		return func() (bool, string) { return judgeMajorityDown(o, 4*time.Second) }
	}
	checkVerdicts(t, []verdict{
		{"fails fast, recovers", true, "ErrNoQuorum", with(nil)},
		{"reported as contention", false, "misreported", with(func(o *outageObs) {
			o.Phases[1].NoQuorum, o.Phases[1].NotAcquired = 1495, 5
		})},
		{"other errors", false, "misreported", with(func(o *outageObs) { o.Phases[1].NoQuorum, o.Phases[1].Other = 1499, 1 })},
		{"acquired without quorum", false, "succeeded with 3 of 5", with(func(o *outageObs) { o.Phases[1].Acquired = 1 })},
		{"acquired once the restarts began", true, "ErrNoQuorum", with(func(o *outageObs) {
			o.Phases[1].Acquired, o.Phases[1].AcquiredLater = 2, 2
		})},
		{"acquired in the outage and after", false, "1 acquire(s) succeeded with 3 of 5", with(func(o *outageObs) {
			o.Phases[1].Acquired, o.Phases[1].AcquiredLater = 3, 2
		})},
		{"an attempt hung", false, "hung", with(func(o *outageObs) { o.Phases[1].Failed.MaxUs = 2_000_000 })},
		{"hung while recovering", false, "hung", with(func(o *outageObs) { o.Phases[2].Failed.MaxUs = 150_000 })},
		{"slow as the host lagged", true, "ErrNoQuorum", with(func(o *outageObs) { o.Phases[1].Failed.MaxUs, o.HostLagMs = 1_794_000, 1700 })},
		{"slow beyond the host's lag", false, "hung", with(func(o *outageObs) { o.Phases[1].Failed.MaxUs, o.HostLagMs = 1_794_000, 1600 })},
		{"never recovered", false, "did not recover", with(func(o *outageObs) { o.Recovered = false })},
		{"recovered too late", false, "to recover", with(func(o *outageObs) { o.RecoveryMs = 9000 })},
		{"no attempts in the outage", false, "no attempt", with(func(o *outageObs) { o.Phases[1] = PhaseStats{Phase: "outage"} })},
		{"overlap", false, "overlapping", with(func(o *outageObs) { o.Violations = 2 })},
	})
}

func slowOK() slowObs {
	return slowObs{AddedMs: 50, ToleranceMs: 5, Phases: []PhaseStats{
		{Phase: "warm-up", Acquired: 100, Acquire: lat(300, 9000, 12000)},
		{Phase: "fast", Acquired: 10000, Acquire: lat(234, 494, 10000)},
		{Phase: "slow", Acquired: 10000, Acquire: lat(246, 562, 4000)},
		{Phase: "control", Acquired: 18, Acquire: lat(50900, 51300, 51300)},
	}}
}

func TestJudgeSlowNode(t *testing.T) {
	with := func(mut func(*slowObs)) func() (bool, string) {
		o := slowOK()
		if mut != nil {
			mut(&o)
		}
		return func() (bool, string) { return judgeSlowNode(o) }
	}
	checkVerdicts(t, []verdict{
		{"early return hides the slow master", true, "quorum returned without it", with(nil)},
		{"slow master drags p99", false, "did not return early", with(func(o *slowObs) { o.Phases[2].Acquire.P99Us = 50_500 })},
		{"delay not applied", false, "not applied", with(func(o *slowObs) { o.Phases[3].Acquire.P50Us = 400 })},
		{"nothing acquired slow", false, "set-up failed", with(func(o *slowObs) { o.Phases[2].Acquired = 0 })},
		{"no control", false, "control", with(func(o *slowObs) { o.Phases = o.Phases[:3] })},
		{"overlap", false, "overlapping", with(func(o *slowObs) { o.Violations = 1 })},
	})
}

func pausedObsFor(fencing, lateAccepted bool) pausedObs {
	o := pausedObs{Fencing: fencing, TTLMs: 2000, ValidForMs: 1977, PauseMs: 2020,
		DoneFired: true, DoneErr: "engine: lease expired", DoneExpired: true, DoneLagMs: 1.1,
		ContenderAcquired: true, ContenderAfterMs: 2020, LateWriteDone: true, LateWriteAccepted: lateAccepted}
	if fencing {
		o.HolderToken, o.ContenderToken = 1, 2
	}
	return o
}

func TestJudgePausedHolder(t *testing.T) {
	with := func(o pausedObs, mut func(*pausedObs)) func() (bool, string) {
		if mut != nil {
			mut(&o)
		}
		return func() (bool, string) { return judgePausedHolder(o) }
	}
	checkVerdicts(t, []verdict{
		{"fencing rejects the late write", true, "rejected", with(pausedObsFor(true, false), nil)},
		{"fencing, late write accepted", false, "STALE WRITE", with(pausedObsFor(true, true), nil)},
		{"fencing, tokens did not increase", false, "did not increase",
			with(pausedObsFor(true, false), func(o *pausedObs) { o.ContenderToken = 1 })},
		{"no fencing, late write accepted: weakness shown", true, "weakness", with(pausedObsFor(false, true), nil)},
		{"no fencing, late write rejected: impossible", false, "broken", with(pausedObsFor(false, false), nil)},
		{"signal never fired", false, "never fired", with(pausedObsFor(true, false), func(o *pausedObs) { o.DoneFired = false })},
		{"signal fired late", false, "from the validity end", with(pausedObsFor(true, false), func(o *pausedObs) { o.DoneLagMs = 400 })},
		{"signal late as the host's timers were", true, "rejected",
			with(pausedObsFor(true, false), func(o *pausedObs) { o.DoneLagMs, o.TimerLagMs = 400, 390 })},
		{"signal late beyond the host's timer lag", false, "from the validity end",
			with(pausedObsFor(true, false), func(o *pausedObs) { o.DoneLagMs, o.TimerLagMs = 400, 250 })},
		{"signal early, timers late", false, "from the validity end",
			with(pausedObsFor(true, false), func(o *pausedObs) { o.DoneLagMs, o.TimerLagMs = -5, 300 })},
		{"signal with the wrong error", false, "want ErrLeaseExpired", with(pausedObsFor(true, false), func(o *pausedObs) {
			o.DoneExpired, o.DoneErr = false, "engine: lease released"
		})},
		{"pause too short", false, "did not outlast", with(pausedObsFor(true, false), func(o *pausedObs) { o.PauseMs = 500 })},
		{"double grant", false, "overlapping", with(pausedObsFor(true, false), func(o *pausedObs) { o.DoubleGrants = 1 })},
		{"nobody took over", false, "set-up failed", with(pausedObsFor(false, true), func(o *pausedObs) { o.ContenderAcquired = false })},
	})
}

func partitionOK() partitionObs {
	return partitionObs{TTLMs: 3000, Cut: []int{0, 1, 2}, Held: true, RefusedBeforeCut: true,
		CutOffOutcome: "no-quorum", CutOffMs: 50, LeaseLost: true, LostErr: "engine: lock lost: ...",
		LostLockLost: true, LostAfterCutMs: 1050, LostLeftMs: 1900,
		MajorityAcquired: true, MajorityAfterCutMs: 3040, Recovered: true, RecoveryMs: 1, RecoveryAttempts: 1}
}

func TestJudgePartition(t *testing.T) {
	with := func(mut func(*partitionObs)) func() (bool, string) {
		o := partitionOK()
		if mut != nil {
			mut(&o)
		}
		return func() (bool, string) { return judgePartition(o) }
	}
	checkVerdicts(t, []verdict{
		{"cut off, loss reported", true, "ErrLockLost", with(nil)},
		{"loss at validity end is still a report", true, "ErrLeaseExpired", with(func(o *partitionObs) {
			o.LostLockLost, o.LostExpired, o.LostLeftMs = false, true, 0
		})},
		{"acquired through the partition", false, "ACQUIRED", with(func(o *partitionObs) { o.CutOffOutcome = "acquired" })},
		{"partition looks like contention", false, "not ErrNoQuorum", with(func(o *partitionObs) { o.CutOffOutcome = "not-acquired" })},
		{"lease never lost", false, "never reported", with(func(o *partitionObs) { o.LeaseLost = false })},
		{"lost for another reason", false, "not ErrLockLost", with(func(o *partitionObs) {
			o.LostLockLost, o.LostErr = false, "engine: lease released"
		})},
		{"majority side overlapped", false, "overlapping", with(func(o *partitionObs) { o.DoubleGrants = 1 })},
		{"majority side never got it", false, "never acquired", with(func(o *partitionObs) { o.MajorityAcquired = false })},
		{"no recovery", false, "after the heal", with(func(o *partitionObs) { o.Recovered = false })},
		{"lease not real", false, "set-up failed", with(func(o *partitionObs) { o.RefusedBeforeCut = false })},
	})
}

func oomOK() oomObs {
	return oomObs{Phases: []oomPhase{
		{Phase: "one-oom", OOMNodes: []int{0}, Attempts: 300, Acquired: 300,
			NodeOK: []int64{0, 560, 530, 440, 565}, NodeRefused: make([]int64, 5), NodeFailed: []int64{300, 0, 0, 0, 0}},
		{Phase: "majority-oom", OOMNodes: []int{0, 1, 2}, Attempts: 300, NoQuorum: 300, NamedOOM: 300,
			NodeOK: []int64{0, 0, 0, 400, 480}, NodeRefused: make([]int64, 5), NodeFailed: []int64{300, 300, 300, 0, 0}},
		{Phase: "recovered", Attempts: 300, Acquired: 300,
			NodeOK: []int64{500, 500, 400, 360, 560}, NodeRefused: make([]int64, 5), NodeFailed: make([]int64, 5)},
	}}
}

func TestJudgeOOMNode(t *testing.T) {
	with := func(mut func(*oomObs)) func() (bool, string) {
		o := oomOK()
		if mut != nil {
			mut(&o)
		}
		return func() (bool, string) { return judgeOOMNode(o) }
	}
	checkVerdicts(t, []verdict{
		{"errors are failures", true, "none with ErrNotAcquired", with(nil)},
		{"OOM counted as contention", false, "ErrNotAcquired (contention)", with(func(o *oomObs) {
			o.Phases[1].NoQuorum, o.Phases[1].NotAcquired = 280, 20
		})},
		{"OOM master's vote counted as refusal", false, "counted as ok", with(func(o *oomObs) { o.Phases[0].NodeRefused[0] = 3 })},
		{"OOM master's votes not counted as errors", false, "none of its votes", with(func(o *oomObs) { o.Phases[0].NodeFailed[0] = 0 })},
		{"one erroring master blocks locking", false, "not the lock", with(func(o *oomObs) {
			o.Phases[0].Acquired, o.Phases[0].NoQuorum = 200, 100
		})},
		{"OOM replies not carried", false, "carry the masters' OOM", with(func(o *oomObs) { o.Phases[1].NamedOOM = 0 })},
		{"acquired with a majority erroring", false, "succeeded with 3 of 5", with(func(o *oomObs) {
			o.Phases[1].Acquired, o.Phases[1].NoQuorum = 1, 299
		})},
		{"no recovery", false, "lifted", with(func(o *oomObs) { o.Phases[2].Acquired = 0 })},
		{"missing phase", false, "set-up failed", with(func(o *oomObs) { o.Phases = o.Phases[:2] })},
	})
}

// The oracle is what the verdicts of restart-amnesia, paused-holder and
// partition rest on; it must see overlaps, and only overlaps.
func TestOracle(t *testing.T) {
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	cases := []struct {
		name  string
		steps func(o *oracle)
		want  int
	}{
		{"sequential holds", func(o *oracle) {
			o.acquire("r", "a", at(0), at(100))
			o.release("r", "a", at(50))
			o.acquire("r", "b", at(60), at(160))
		}, 0},
		{"second acquires while the first is held", func(o *oracle) {
			o.acquire("r", "a", at(0), at(100))
			o.acquire("r", "b", at(50), at(150))
		}, 1},
		{"second acquires after the first's validity ended", func(o *oracle) {
			o.acquire("r", "a", at(0), at(100))
			o.acquire("r", "b", at(100), at(200))
		}, 0},
		{"release after the validity end does not extend it", func(o *oracle) {
			o.acquire("r", "a", at(0), at(100))
			o.release("r", "a", at(500))
			o.acquire("r", "b", at(150), at(250))
		}, 0},
		{"acquire before an ended hold's end", func(o *oracle) {
			o.acquire("r", "a", at(0), at(100))
			o.release("r", "a", at(80))
			o.acquire("r", "b", at(70), at(170)) // began before a let go
		}, 1},
		{"other resources do not overlap", func(o *oracle) {
			o.acquire("r", "a", at(0), at(100))
			o.acquire("s", "b", at(50), at(150))
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := newOracle(base)
			c.steps(o)
			if n, ex := o.result(); n != c.want || len(ex) != c.want {
				t.Fatalf("overlaps = %d (%d examples), want %d", n, len(ex), c.want)
			}
		})
	}
}

func TestFencedResource(t *testing.T) {
	f := &fencedResource{base: time.Now()}
	for _, w := range []struct {
		who   string
		token int64
		want  bool
	}{
		{"first", 1, true},
		{"first", 1, true}, // the same holder writes again
		{"second", 2, true},
		{"first", 1, false}, // stale
		{"second", 2, true},
	} {
		if got := f.write(w.who, w.token); got.Accepted != w.want {
			t.Fatalf("write %s token %d: accepted = %v, want %v", w.who, w.token, got.Accepted, w.want)
		}
	}
	nf := &fencedResource{base: time.Now()}
	nf.write("first", 0)
	nf.write("second", 0)
	if !nf.write("first", 0).Accepted {
		t.Fatal("without tokens the resource cannot reject anyone; the late write must go through")
	}
}

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	if got, want := summarize(ds), (Latency{N: 100, P50Us: 50, P99Us: 99, MaxUs: 100}); got != want {
		t.Fatalf("summarize = %+v, want %+v", got, want)
	}
	if got := summarize(nil); got != (Latency{}) {
		t.Fatalf("summarize(nil) = %+v", got)
	}
}
