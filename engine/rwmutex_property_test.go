package engine_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"pgregory.net/rapid"
)

// The read/write lock as a concurrent property: three Lockers on five real
// masters (two fenced, one of them auto-extending; the third without the
// in-process gate) and four goroutines, each running a drawn plan of
// TryRLock, RLock, TryLock and Lock on two locks, each lease held a drawn
// while, extended or not, then released or abandoned to expire. A drawn
// master may be killed for a while and come back empty (its restart
// quarantine keeps it out of the vote). After the run:
//
//   - exclusion: no writer's lease was trusted at the same time as another
//     lease of its lock, a reader's or a writer's, from the moment their
//     acquisitions returned to their ValidUntil once they ended;
//   - fencing: a writer whose acquisition began after another writer of
//     its lock had returned has the larger token;
//   - readers share: every reader refused as contention (ErrNotAcquired)
//     was refused while a writer of its lock was at work (from its call
//     to its lease's end, plus rwSlack for the clean-up on the masters,
//     in virtual time; on real masters plus env.slack's);
//   - no deadlock: every RLock and Lock returned by its context's
//     deadline (within mpSlack in virtual time; on real masters within
//     env.slack's), and every goroutine finished;
//   - remote validity: asked mid-hold, RemoteValidity never finds a
//     lease lost in a run where no master was killed (a quorum keeps
//     its entry): no master says the entry is gone, and a round short
//     of answers leaves the lease as it was. An auto-extension that
//     misses the quorum meanwhile (the masters slow, not wrong) ends the
//     lease as Config.AutoExtend says; RemoteValidity answers that end,
//     which is no finding of its own (rwRemoteLost).
//
// Readers of one Locker with the gate share one entry (engine/rwshare.go):
// a step "rjoin" holds a read lease (TryRLock) while the same goroutine
// takes a second of the same lock and Locker, which joins the first's
// entry unless a writer waits. The runs count the readers that joined
// another's entry (its value); the checks above hold for them as for any
// reader, and over the runs some must have joined.
const (
	rwpMasters = 5
	rwpTTL     = 400 * time.Millisecond
	rwpWorkers = 4
	rwpChecks  = 8
	// rwSlack is how long a writer's traces may outlive its call or its
	// lease on the masters: the undo of a failed attempt, the leave of an
	// intent and the delete of an abandoned lease are sent without waiting.
	rwSlack = 300 * time.Millisecond
)

// TestRWMutexProperty checks the property above over -rapid.checks runs
// (8 by default here). Replay a failure with
//
//	go test -run 'TestRWMutexProperty$' -rapid.seed=N ./engine/
//
// (the goroutines' interleaving is the machine's, so a replay may need a
// few tries); -rapid.v logs every operation. REDLOCK_MUTATION names a
// switch of internal/mutation to turn on, to see the property fail
// without the guard it undoes:
//
//	REDLOCK_MUTATION=rw-reader-ignores-writer go test -run 'TestRWMutexProperty$' ./engine/
func TestRWMutexProperty(t *testing.T) {
	mutation.Require(t)
	if name := os.Getenv("REDLOCK_MUTATION"); name != "" {
		sw := mutation.ByName(name)
		if sw == nil {
			t.Fatalf("REDLOCK_MUTATION=%s: no such switch", name)
		}
		defer sw.Set(true)()
	}
	e := newLifecycleEnv(t)
	lcRapidDefaults(t)
	if !lcUserFlags()["rapid.checks"] {
		f := flag.Lookup("rapid.checks")
		old := f.Value.String()
		f.Value.Set(strconv.Itoa(rwpChecks))
		t.Cleanup(func() { f.Value.Set(old) })
	}
	shared, joined := 0, 0
	firstFailure := rwFirstFailure(t)
	rapid.Check(t, func(rt *rapid.T) {
		vs, n, j := runRWProperty(rt, e, rwKinds)
		shared += n
		joined += j
		if len(vs) > 0 {
			firstFailure(vs)
			for _, v := range vs {
				rt.Logf("VIOLATION %s: %s", v.kind, v.msg)
			}
			rt.Fatalf("%s (details in the log above)", vs[0].kind)
		}
	})
	t.Logf("readers held together %d times over the runs, %d joined another's entry", shared, joined)
	if shared == 0 {
		t.Error("no two readers ever held a lock together: the runs do not exercise sharing")
	}
	if joined == 0 {
		t.Error("no reader joined another's entry: the runs do not exercise joins")
	}
}

// rwFirstFailure returns what logs the first failing run's violations
// on t: on real masters rapid's replay of a seed runs another
// interleaving, which may pass ("flaky test"), and its log is the only
// one rapid prints.
func rwFirstFailure(t *testing.T) func([]lcViolation) {
	logged := false
	return func(vs []lcViolation) {
		if logged {
			return
		}
		logged = true
		for _, v := range vs {
			t.Logf("first failing run: VIOLATION %s: %s", v.kind, v.msg)
		}
	}
}

// TestRWMutexPropertyInVirtualTime checks the property against simulated
// masters in virtual time, each run in a bubble of its own on masters of
// its own, where the readers' sharing is held to rwSlack and each wait's
// return to its deadline within mpSlack exactly, however loaded the
// machine. Replay a failure with
//
//	go test -run 'TestRWMutexPropertyInVirtualTime$' -rapid.seed=N ./engine/
func TestRWMutexPropertyInVirtualTime(t *testing.T) {
	lcRapidDefaults(t)
	lcRapidFlags(t, map[string]string{"rapid.checks": strconv.Itoa(rwpChecks)})
	shared, joined := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			e := newSimLifecycleEnv(t, rt)
			defer e.close()
			vs, n, j := runRWProperty(rt, e, rwKinds)
			shared += n
			joined += j
			if len(vs) > 0 {
				for _, v := range vs {
					rt.Logf("VIOLATION %s: %s", v.kind, v.msg)
				}
				rt.Fatalf("%s (details in the log above)", vs[0].kind)
			}
		})
	})
	t.Logf("readers held together %d times over the runs, %d joined another's entry", shared, joined)
	if shared == 0 {
		t.Error("no two readers ever held a lock together: the runs do not exercise sharing")
	}
	if joined == 0 {
		t.Error("no reader joined another's entry: the runs do not exercise joins")
	}
}

// The property's controls: with one of the masters' guards undone, the
// machine must see a writer trusted together with another holder within
// rwpControlSeeds seeds. (TestRWMutexWriterStarvedWithoutIntent is the
// intent's.)
func TestRWMutexPropertyCatchesReaderIgnoringWriter(t *testing.T) {
	rwControl(t, mutation.RWReaderIgnoresWriter)
}

func TestRWMutexPropertyCatchesWriterIgnoringReaders(t *testing.T) {
	rwControl(t, mutation.RWWriterIgnoresReaders)
}

// TestRWMutexPropertyCatchesReadersExcluding is the control of the
// readers' sharing: with readers refusing readers
// (mutation.RWReadersExclude), the machine must see a reader refused
// while no writer was at work.
func TestRWMutexPropertyCatchesReadersExcluding(t *testing.T) {
	rwControl(t, mutation.RWReadersExclude)
}

const rwpControlSeeds = 10

// rwControl runs the property over rwpControlSeeds seeds with sw on, and
// fails unless one of them shows the violation sw lets in. Readers that
// exclude each other are looked for among readers alone, where every
// refusal is one. It runs against simulated masters in virtual time,
// where the plans' holds, waits and TTLs are exact: the overlap a seed
// draws happens every time, as on a loaded machine it need not.
func rwControl(t *testing.T, sw *mutation.Switch) {
	mutation.Require(t)
	want, kinds := rwExclusion, rwKinds
	if sw == mutation.RWReadersExclude {
		want, kinds = rwShare, []string{"tryrlock", "rlock"}
	}
	defer sw.Set(true)()
	simTest(t, rwpMasters, func(t *testing.T, se *env) {
		e := &lcEnv{env: se, restarted: map[int]time.Time{}}
		for seed := 1; seed <= rwpControlSeeds; seed++ {
			var found []lcViolation
			rapid.Custom(func(rt *rapid.T) bool {
				found, _, _ = runRWProperty(rt, e, kinds)
				return true
			}).Example(seed)
			for _, v := range found {
				if v.kind == want {
					t.Logf("seed %d: %s: %s", seed, v.kind, v.msg)
					return
				}
			}
			for _, v := range found {
				t.Logf("seed %d, other violation: %s: %s", seed, v.kind, v.msg)
			}
		}
		t.Fatalf("no %q in %d seeds with %s: the property cannot fail", want, rwpControlSeeds, sw.Name())
	})
}

// Violation kinds.
const (
	rwExclusion = "a writer trusted with another holder"
	rwFencing   = "writers' fencing order"
	rwShare     = "a reader refused with no writer at work"
	rwRemote    = "RemoteValidity found a lease lost that a quorum held"
)

// rwOp is one step of a goroutine's plan.
type rwOp struct {
	kind    string // "tryrlock", "rlock", "trylock" or "lock"
	locker  int
	lock    int
	wait    time.Duration
	hold    time.Duration
	extend  bool
	release bool // false: abandoned to expire
}

func (o rwOp) writer() bool { return o.kind == "trylock" || o.kind == "lock" }

func (o rwOp) String() string {
	s := fmt.Sprintf("%s L%d lock%d", o.kind, o.locker, o.lock)
	if o.kind == "lock" || o.kind == "rlock" {
		s += " wait " + o.wait.String()
	}
	s += " hold " + o.hold.String()
	if o.extend {
		s += " extend"
	}
	if !o.release {
		s += " abandon"
	}
	return s
}

// rwCall is one call of a plan: its lease if it acquired, or its error.
type rwCall struct {
	op     rwOp
	worker int
	le     *engine.Lease
	err    error
	// called and got: when the acquisition was called and returned;
	// released: when its Release returned (zero if abandoned).
	called, got, released time.Time
	until                 time.Time // ValidUntil once the run is over
}

func (c *rwCall) String() string {
	if c.le == nil {
		return fmt.Sprintf("w%d %s (%s..%s: %v)", c.worker, c.op, c.called.Format("05.000"), c.got.Format("05.000"), c.err)
	}
	return fmt.Sprintf("w%d %s (value %.6s token %d, held %s..%s)", c.worker, c.op, c.le.Value(), c.le.Token(),
		c.got.Format("05.000"), c.until.Format("05.000"))
}

// busyUntil is when a writer's call stops refusing readers on the masters,
// its traces allowed slack.
func (c *rwCall) busyUntil(slack time.Duration) time.Time {
	end := c.got
	if c.le != nil {
		end = c.until.Add(rwpTTL / 50) // the masters keep an entry past its validity by the drift
		if c.released.After(end) {
			end = c.released
		}
	}
	return end.Add(slack)
}

var rwpRun = 0

// rwKinds are the calls a plan draws from, a name given twice drawn twice
// as often.
var rwKinds = []string{"tryrlock", "rlock", "rlock", "trylock", "lock", "rjoin"}

// runRWProperty draws a plan of kinds of calls, runs it, and returns what
// it violated, how many pairs of readers held a lock together, and how
// many readers joined another's entry.
func runRWProperty(rt *rapid.T, e *lcEnv, kinds []string) ([]lcViolation, int, int) {
	rwpRun++
	names := []string{fmt.Sprintf("rwp-%d-a", rwpRun), fmt.Sprintf("rwp-%d-b", rwpRun)}
	plans := make([][]rwOp, rwpWorkers)
	for w := range plans {
		n := rapid.IntRange(2, 6).Draw(rt, "ops")
		for range n {
			plans[w] = append(plans[w], drawRWOp(rt, kinds))
		}
	}
	kill := rapid.IntRange(0, 3).Draw(rt, "kill a master") == 0
	victim := rapid.IntRange(0, rwpMasters-1).Draw(rt, "master")
	killAt := time.Duration(rapid.IntRange(0, 1000).Draw(rt, "kill at ms")) * time.Millisecond
	down := time.Duration(rapid.IntRange(50, 800).Draw(rt, "down ms")) * time.Millisecond

	if err := e.flushAll(); err != nil {
		rt.Fatalf("FLUSHALL: %v", err)
	}
	var mutexes [3][2]*engine.RWMutex
	var lockers []*engine.Locker
	defer func() {
		for _, l := range lockers {
			l.Close()
		}
	}()
	// In virtual time the Lockers' random delays come from the run's
	// draws too, so that a seed replays the run.
	seed := uint64(0)
	if e.env.sim != nil {
		seed = rapid.Uint64().Draw(rt, "lockers' seed")
	}
	for i := range 3 {
		c := e.config()
		if e.env.sim != nil {
			c.Wait.Rand = rand.New(rand.NewPCG(seed, uint64(i)))
		}
		c.TTL, c.MaxTTL = rwpTTL, rwpTTL
		c.Quarantine = engine.QuarantineAlways
		c.Fencing = i < 2
		c.Wait.RetryDelayMin, c.Wait.RetryDelayMax = 2*time.Millisecond, 20*time.Millisecond
		c.Wait.FallbackMin, c.Wait.FallbackMax = 20*time.Millisecond, 100*time.Millisecond
		c.AutoExtend = i == 0
		c.Wait.DisableGate = i == 2
		l, err := newPropLocker(c)
		if err != nil {
			rt.Fatalf("engine.New: %v", err)
		}
		lockers = append(lockers, l)
		for k, name := range names {
			if mutexes[i][k], err = l.RWMutex(name); err != nil {
				rt.Fatal(err)
			}
		}
	}

	var mu sync.Mutex
	var calls []*rwCall
	var violations []lcViolation
	violate := func(kind, format string, args ...any) {
		mu.Lock()
		violations = append(violations, lcViolation{kind, fmt.Sprintf(format, args...)})
		mu.Unlock()
	}
	var wg sync.WaitGroup
	start := time.Now()
	if kill {
		wg.Go(func() {
			time.Sleep(killAt)
			if err := e.nodeKill(victim); err != nil {
				violate("nemesis", "kill master %d: %v", victim, err)
				return
			}
			rt.Logf("%s: master %d killed", time.Since(start).Round(time.Millisecond), victim)
			time.Sleep(down)
			if err := e.nodeRestart(victim); err != nil {
				violate("nemesis", "restart master %d: %v", victim, err)
				return
			}
			e.restarted[victim] = time.Now()
			rt.Logf("%s: master %d back, empty", time.Since(start).Round(time.Millisecond), victim)
		})
	}
	for w, plan := range plans {
		wg.Go(func() {
			record := func(c *rwCall) {
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
			}
			for _, op := range plan {
				m := mutexes[op.locker][op.lock]
				var inner func()
				if op.kind == "rjoin" {
					// The second reader, taken and let go while the first
					// holds, for half the first's hold.
					op.kind = "tryrlock"
					second := op
					second.hold, second.extend, second.release = op.hold/2, false, true
					inner = func() { record(runRWOp(rt, m, second, w, start, kill, e.slack(mpSlack), violate, nil)) }
				}
				record(runRWOp(rt, m, op, w, start, kill, e.slack(mpSlack), violate, inner))
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		violate(mpHang, "the goroutines did not finish within 60s")
		return violations, 0, 0
	}
	// Every lease has ended by the time its validity runs out: read the
	// end of its trust then.
	for _, c := range calls {
		if c.le == nil {
			continue
		}
		if d := time.Until(c.le.ValidUntil()); d > 0 {
			time.Sleep(d)
		}
		c.le.Err()
		c.until = c.le.ValidUntil()
	}
	leases := map[string]int{}
	for _, c := range calls {
		if c.le != nil {
			leases[c.op.kind]++
		}
	}
	shared := checkRWCalls(calls, e.slack(rwSlack), violate)
	// A reader whose value an earlier reader's lease has joined its entry.
	values, joined := map[string]bool{}, 0
	for _, c := range calls {
		if c.le == nil || c.op.writer() {
			continue
		}
		if values[c.le.Value()] {
			joined++
		}
		values[c.le.Value()] = true
	}
	rt.Logf("run: %d calls, leases %v, readers together %d times, %d joined, a master killed: %v", len(calls), leases, shared, joined, kill)
	return violations, shared, joined
}

func drawRWOp(rt *rapid.T, kinds []string) rwOp {
	op := rwOp{
		kind:   rapid.SampledFrom(kinds).Draw(rt, "kind"),
		locker: rapid.IntRange(0, 2).Draw(rt, "locker"),
		lock:   rapid.IntRange(0, 1).Draw(rt, "lock"),
		wait:   time.Duration(rapid.IntRange(50, 800).Draw(rt, "wait ms")) * time.Millisecond,
		hold:   time.Duration(rapid.IntRange(0, int(rwpTTL*3/2/time.Millisecond)).Draw(rt, "hold ms")) * time.Millisecond,
		extend: rapid.Bool().Draw(rt, "extend"),
	}
	// The auto-extending Locker's leases would be extended for ever.
	op.release = op.locker == 0 || rapid.IntRange(0, 3).Draw(rt, "abandon") > 0
	if op.kind == "rjoin" {
		op.locker %= 2 // a Locker with the gate, where readers share
	}
	return op
}

// runRWOp runs op on m for worker w; kill: a master is killed in this
// run; slack: how late past its deadline a wait may return; inner, if
// set, runs once the lease is held.
func runRWOp(rt *rapid.T, m *engine.RWMutex, op rwOp, w int, start time.Time, kill bool, slack time.Duration, violate func(kind, format string, args ...any), inner func()) *rwCall {
	wait := op.wait
	if op.kind == "tryrlock" || op.kind == "trylock" {
		wait = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	deadline, _ := ctx.Deadline()
	c := &rwCall{op: op, worker: w, called: time.Now()}
	switch op.kind {
	case "tryrlock":
		c.le, c.err = m.TryRLock(ctx)
	case "rlock":
		c.le, c.err = m.RLock(ctx)
	case "trylock":
		c.le, c.err = m.TryLock(ctx)
	case "lock":
		c.le, c.err = m.Lock(ctx)
	}
	c.got = time.Now()
	at := c.got.Sub(start).Round(time.Millisecond)
	if late := c.got.Sub(deadline); late > slack {
		violate(mpDeadlock, "w%d %s returned %s after its deadline: %v", w, op, late.Round(time.Millisecond), c.err)
	}
	if c.err != nil {
		rt.Logf("%s: w%d %s: %v", at, w, op, c.err)
		return c
	}
	rt.Logf("%s: w%d %s: acquired, token %d", at, w, op, c.le.Token())
	if inner != nil {
		inner()
	}
	time.Sleep(op.hold / 2)
	remoteValidity(rt, c, w, start, kill, violate)
	if op.extend {
		ectx, ecancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.le.Extend(ectx, rwpTTL)
		ecancel()
		rt.Logf("%s: w%d extend %s: %v", time.Since(start).Round(time.Millisecond), w, op, err)
	}
	time.Sleep(op.hold / 2)
	if op.release {
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.le.Release(rctx)
		rcancel()
		c.released = time.Now()
		rt.Logf("%s: w%d release %s: %v", time.Since(start).Round(time.Millisecond), w, op, err)
	}
	return c
}

// remoteValidity asks the masters about c's lease mid-hold: without a
// killed master, every one that acquired it keeps its entry until it
// expires there, after the lease's validity, so RemoteValidity may find
// the lease expired or short of answers, never lost.
func remoteValidity(rt *rapid.T, c *rwCall, w int, start time.Time, kill bool, violate func(kind, format string, args ...any)) {
	ended := c.le.Err()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	v, err := c.le.RemoteValidity(ctx)
	cancel()
	rt.Logf("%s: w%d remote validity %s: %s, %v", time.Since(start).Round(time.Millisecond), w, c.op, v, err)
	if ended == nil && !kill && rwRemoteLost(err) {
		violate(rwRemote, "w%d %s: %v", w, c.op, err)
	}
}

// rwRemoteLost reports whether RemoteValidity's error, for a lease that
// had not ended when it was asked, is a loss that no master's outage
// explains: the masters said the entry is gone or another's (ErrNotHeld,
// whether RemoteValidity's round found it or an Extend's or the tracker's
// meanwhile), or RemoteValidity's own round ended the lease, which it
// must leave as it was when too few masters answer. What it leaves out
// is an auto-extension that missed the quorum (ErrLockLost from
// ErrNoQuorum, or ErrLeaseExpired when it ran out of validity) in the
// round RemoteValidity waited for: Config.AutoExtend ends the lease
// then, on a loaded machine whose masters answer past the node timeout
// as on a hung one, and RemoteValidity answers that end
// (TestRemoteValidityDuringAFailingAutoExtension).
func rwRemoteLost(err error) bool {
	if !errors.Is(err, engine.ErrLockLost) {
		return false
	}
	var ve *engine.VotesError
	return errors.Is(err, engine.ErrNotHeld) || (errors.As(err, &ve) && ve.Op == "remote validity")
}

// checkRWCalls checks exclusion, the writers' fencing order and the
// readers' sharing over every pair of calls on one lock, and returns how
// many pairs of readers held a lock together.
func checkRWCalls(calls []*rwCall, slack time.Duration, violate func(kind, format string, args ...any)) int {
	sort.Slice(calls, func(i, j int) bool { return calls[i].got.Before(calls[j].got) })
	shared := 0
	for i, a := range calls {
		if a.le == nil {
			continue
		}
		for _, b := range calls[i+1:] {
			if b.le == nil || a.op.lock != b.op.lock {
				continue
			}
			// b returned no earlier than a.
			together := b.got.Before(a.until)
			switch {
			case together && (a.op.writer() || b.op.writer()):
				violate(rwExclusion, "lock%d: %s and %s were both trusted for %s", a.op.lock, a, b, a.until.Sub(b.got).Round(time.Microsecond))
			case together:
				shared++
			}
			// Token 0: that Locker does not fence.
			if a.op.writer() && b.op.writer() && a.got.Before(b.called) && a.le.Token() != 0 && b.le.Token() != 0 && b.le.Token() <= a.le.Token() {
				violate(rwFencing, "lock%d: %s was called after %s returned, with no larger token", a.op.lock, b, a)
			}
		}
	}
	for _, r := range calls {
		if r.op.writer() || !errors.Is(r.err, engine.ErrNotAcquired) {
			continue
		}
		busy := false
		for _, w := range calls {
			if w.op.writer() && w.op.lock == r.op.lock && w.called.Before(r.got) && r.called.Before(w.busyUntil(slack)) {
				busy = true
				break
			}
		}
		if !busy {
			violate(rwShare, "lock%d: %s, with no writer at work meanwhile", r.op.lock, r)
		}
	}
	return shared
}

// TestRWRemoteLostJudgesTheVerdict: rwRemoteLost counts every loss the
// masters declared and every lease RemoteValidity's own round ended, and
// only an auto-extension's missed quorum or expiry goes uncounted.
func TestRWRemoteLostJudgesTheVerdict(t *testing.T) {
	lost := func(op string, kind error) error {
		return fmt.Errorf("engine: remote validity \"r\": %w: %w", engine.ErrLockLost, &engine.VotesError{Op: op, Resource: "r", Kind: kind})
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{lost("remote validity", engine.ErrNotHeld), true},
		{lost("remote validity", engine.ErrNoQuorum), true},
		{lost("extend", engine.ErrNotHeld), true},
		{fmt.Errorf("engine: %w: tracker: %w", engine.ErrLockLost, engine.ErrNotHeld), true},
		{lost("extend", engine.ErrNoQuorum), false},
		{lost("extend", engine.ErrLeaseExpired), false},
		{&engine.VotesError{Op: "remote validity", Resource: "r", Kind: engine.ErrNoQuorum}, false},
		{&engine.VotesError{Op: "remote validity", Resource: "r", Kind: engine.ErrLeaseExpired}, false},
		{nil, false},
	} {
		if got := rwRemoteLost(c.err); got != c.want {
			t.Errorf("rwRemoteLost(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
