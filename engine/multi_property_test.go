package engine_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"pgregory.net/rapid"
)

// The multi-resource lock as a concurrent property: three Lockers (two
// fenced, one of them auto-extending) on five real masters and four
// goroutines, each running a drawn plan of TryLockAll and LockAll over
// random overlapping sets of five resources (named in random order, some
// twice), mixed with TryLock and Lock of single ones; each lease is held a
// drawn while, extended or not, then released or abandoned to expire. A
// drawn master may be killed for a while and come back empty (its restart
// quarantine keeps it out of the vote). After the run:
//
//   - exclusion: no two leases that cover one resource were trusted at the
//     same time, from the moment their acquisition returned to their
//     ValidUntil once they ended (the release, the expiry or the loss);
//   - fencing: a lease whose acquisition began after another on one of its
//     resources had returned has the larger token;
//   - no deadlock: every Lock and LockAll returned by its context's
//     deadline (within mpSlack in virtual time; on real masters within
//     env.slack's), and every goroutine finished.
const (
	mpMasters   = 5
	mpResources = 5
	mpTTL       = 400 * time.Millisecond
	mpWorkers   = 4
	// mpChecks is the number of rapid runs unless -rapid.checks says
	// otherwise: a run takes a few seconds of real time.
	mpChecks = 8
	// mpSlack is how long past its deadline a waiting call may return: a
	// round in flight ends with the context.
	mpSlack = 500 * time.Millisecond
)

// TestMultiLockProperty checks the property above over -rapid.checks runs
// (8 by default here). A failure is shrunk and printed with its seed;
// replay it with
//
//	go test -run 'TestMultiLockProperty$' -rapid.seed=N ./engine/
//
// (the goroutines' interleaving is the machine's, so a replay may need a
// few tries); -rapid.v logs every operation.
func TestMultiLockProperty(t *testing.T) {
	e := newLifecycleEnv(t)
	lcRapidDefaults(t)
	if !lcUserFlags()["rapid.checks"] {
		f := flag.Lookup("rapid.checks")
		old := f.Value.String()
		f.Value.Set(strconv.Itoa(mpChecks))
		t.Cleanup(func() { f.Value.Set(old) })
	}
	rapid.Check(t, func(rt *rapid.T) {
		if vs := runMultiProperty(rt, e); len(vs) > 0 {
			for _, v := range vs {
				rt.Logf("VIOLATION %s: %s", v.kind, v.msg)
			}
			rt.Fatalf("%s (details in the log above)", vs[0].kind)
		}
	})
}

// TestMultiLockPropertyInVirtualTime checks the property against
// simulated masters in virtual time, each run in a bubble of its own on
// masters of its own, where each wait's return is held to its deadline
// within mpSlack exactly, however loaded the machine. Replay a failure
// with
//
//	go test -run 'TestMultiLockPropertyInVirtualTime$' -rapid.seed=N ./engine/
func TestMultiLockPropertyInVirtualTime(t *testing.T) {
	lcRapidDefaults(t)
	lcRapidFlags(t, map[string]string{"rapid.checks": strconv.Itoa(mpChecks)})
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			e := newSimLifecycleEnv(t, rt)
			defer e.close()
			if vs := runMultiProperty(rt, e); len(vs) > 0 {
				for _, v := range vs {
					rt.Logf("VIOLATION %s: %s", v.kind, v.msg)
				}
				rt.Fatalf("%s (details in the log above)", vs[0].kind)
			}
		})
	})
}

// TestMultiLockPropertyCatchesPartialAcquisition is the property's
// control: with the script's guard undone (mutation.AcquireAllPartial: it
// sets the keys that are free and answers yes although another is held),
// the machine must see two trusted leases on one resource. It runs the
// machine on fixed seeds against simulated masters in virtual time, where
// the plans' holds, waits and TTLs are exact: the overlapping leases a
// seed draws overlap every time, as on a loaded machine they need not.
func TestMultiLockPropertyCatchesPartialAcquisition(t *testing.T) {
	mutation.Require(t)
	defer mutation.AcquireAllPartial.Set(true)()
	simTest(t, mpMasters, func(t *testing.T, se *env) {
		e := &lcEnv{env: se, restarted: map[int]time.Time{}}
		for seed := 1; seed <= mpControlSeeds; seed++ {
			var found []lcViolation
			rapid.Custom(func(rt *rapid.T) bool {
				found = runMultiProperty(rt, e)
				return true
			}).Example(seed)
			for _, v := range found {
				if v.kind == mpExclusion {
					t.Logf("seed %d: %s: %s", seed, v.kind, v.msg)
					return
				}
			}
			for _, v := range found {
				t.Logf("seed %d, other violation: %s: %s", seed, v.kind, v.msg)
			}
		}
		t.Fatalf("no resource with two trusted leases in %d seeds with partial acquisition: the property cannot fail", mpControlSeeds)
	})
}

// mpControlSeeds is how many seeds the control runs at most.
const mpControlSeeds = 10

// Violation kinds.
const (
	mpExclusion = "two trusted leases on one resource"
	mpFencing   = "fencing order"
	mpDeadlock  = "a wait outlived its deadline"
	mpHang      = "a goroutine did not finish"
)

// mpOp is one step of a goroutine's plan.
type mpOp struct {
	kind    string // "trylockall", "lockall", "trylock" or "lock"
	locker  int
	names   []string // as passed: any order, maybe a duplicate
	wait    time.Duration
	hold    time.Duration
	extend  bool
	release bool // false: abandoned to expire
}

func (o mpOp) String() string {
	s := fmt.Sprintf("%s L%d %v", o.kind, o.locker, o.names)
	if o.kind == "lock" || o.kind == "lockall" {
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

// mpHold is a lease a goroutine acquired.
type mpHold struct {
	op     mpOp
	worker int
	le     *engine.Lease
	// called and got: when the acquisition was called and returned.
	called, got time.Time
	until       time.Time // ValidUntil once the run is over
}

func (h *mpHold) String() string {
	return fmt.Sprintf("w%d %s (value %.6s token %d, held %s..%s)", h.worker, h.op, h.le.Value(), h.le.Token(),
		h.got.Format("05.000"), h.until.Format("05.000"))
}

var mpRun = 0

// runMultiProperty draws a plan, runs it, and returns what it violated.
func runMultiProperty(rt *rapid.T, e *lcEnv) []lcViolation {
	mpRun++
	names := make([]string, mpResources)
	for i := range names {
		names[i] = fmt.Sprintf("multi-%d-r%d", mpRun, i)
	}
	plans := make([][]mpOp, mpWorkers)
	for w := range plans {
		n := rapid.IntRange(2, 5).Draw(rt, "ops")
		for range n {
			plans[w] = append(plans[w], drawOp(rt, names))
		}
	}
	kill := rapid.Bool().Draw(rt, "kill a master")
	victim := rapid.IntRange(0, mpMasters-1).Draw(rt, "master")
	killAt := time.Duration(rapid.IntRange(0, 1000).Draw(rt, "kill at ms")) * time.Millisecond
	down := time.Duration(rapid.IntRange(50, 800).Draw(rt, "down ms")) * time.Millisecond

	if err := e.flushAll(); err != nil {
		rt.Fatalf("FLUSHALL: %v", err)
	}
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
		c.TTL, c.MaxTTL = mpTTL, mpTTL
		c.Quarantine = engine.QuarantineAlways
		// L2 does not fence: with fencing, the fence round, which raises
		// the counters only where every key is the lease's, refuses a
		// lease that does not hold them all, and would hide a fault of
		// the acquire script from the check of exclusion.
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
	}

	var mu sync.Mutex
	var holds []*mpHold
	var violations []lcViolation
	violate := func(kind, format string, args ...any) {
		mu.Lock()
		violations = append(violations, lcViolation{kind, fmt.Sprintf(format, args...)})
		mu.Unlock()
	}
	var wg sync.WaitGroup
	start := time.Now()
	if kill {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
		}()
	}
	for w, plan := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, op := range plan {
				h := runOp(rt, lockers[op.locker], op, w, start, e.slack(mpSlack), violate)
				if h != nil {
					mu.Lock()
					holds = append(holds, h)
					mu.Unlock()
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		violate(mpHang, "the goroutines did not finish within 60s")
		return violations
	}
	// Every lease has ended by the time its validity runs out: read the
	// end of its trust then.
	for _, h := range holds {
		if d := time.Until(h.le.ValidUntil()); d > 0 {
			time.Sleep(d)
		}
		h.le.Err()
		h.until = h.le.ValidUntil()
	}
	kinds := map[string]int{}
	for _, h := range holds {
		kinds[h.op.kind]++
	}
	rt.Logf("run: %d leases %v, a master killed: %v", len(holds), kinds, kill)
	checkHolds(holds, violate)
	return violations
}

func drawOp(rt *rapid.T, names []string) mpOp {
	op := mpOp{
		kind:   rapid.SampledFrom([]string{"trylockall", "lockall", "lockall", "trylock", "lock"}).Draw(rt, "kind"),
		locker: rapid.IntRange(0, 2).Draw(rt, "locker"),
		wait:   time.Duration(rapid.IntRange(50, 800).Draw(rt, "wait ms")) * time.Millisecond,
		hold:   time.Duration(rapid.IntRange(0, int(mpTTL*3/2/time.Millisecond)).Draw(rt, "hold ms")) * time.Millisecond,
		extend: rapid.Bool().Draw(rt, "extend"),
	}
	// The auto-extending Locker's leases would be extended for ever.
	op.release = op.locker == 0 || rapid.IntRange(0, 3).Draw(rt, "abandon") > 0
	order := rapid.Permutation(names).Draw(rt, "order")
	if strings.HasSuffix(op.kind, "all") {
		op.names = slices.Clone(order[:rapid.IntRange(1, 4).Draw(rt, "size")])
		if rapid.IntRange(0, 4).Draw(rt, "duplicate") == 0 {
			op.names = append(op.names, op.names[0])
		}
	} else {
		op.names = order[:1]
	}
	return op
}

// runOp runs op on l for worker w, and returns the lease it acquired.
func runOp(rt *rapid.T, l *engine.Locker, op mpOp, w int, start time.Time, slack time.Duration, violate func(kind, format string, args ...any)) *mpHold {
	wait := op.wait
	if strings.HasPrefix(op.kind, "try") {
		wait = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	deadline, _ := ctx.Deadline()
	called := time.Now()
	var le *engine.Lease
	var err error
	switch op.kind {
	case "trylockall":
		le, err = l.TryLockAll(ctx, op.names...)
	case "lockall":
		le, err = l.LockAll(ctx, op.names...)
	case "trylock":
		le, err = l.TryLock(ctx, op.names[0])
	case "lock":
		le, err = l.Lock(ctx, op.names[0])
	}
	got := time.Now()
	at := got.Sub(start).Round(time.Millisecond)
	if late := got.Sub(deadline); late > slack {
		violate(mpDeadlock, "w%d %s returned %s after its deadline: %v", w, op, late.Round(time.Millisecond), err)
	}
	if err != nil {
		rt.Logf("%s: w%d %s: %v", at, w, op, err)
		return nil
	}
	h := &mpHold{op: op, worker: w, le: le, called: called, got: got}
	rt.Logf("%s: w%d %s: acquired %v token %d", at, w, op, le.Resources(), le.Token())
	time.Sleep(op.hold / 2)
	if op.extend {
		ectx, ecancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := le.Extend(ectx, mpTTL)
		ecancel()
		rt.Logf("%s: w%d extend %v: %v", time.Since(start).Round(time.Millisecond), w, le.Resources(), err)
	}
	time.Sleep(op.hold / 2)
	if op.release {
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := le.Release(rctx)
		rcancel()
		rt.Logf("%s: w%d release %v: %v", time.Since(start).Round(time.Millisecond), w, le.Resources(), err)
	}
	return h
}

// checkHolds checks exclusion and fencing over every pair of leases that
// share a resource.
func checkHolds(holds []*mpHold, violate func(kind, format string, args ...any)) {
	sort.Slice(holds, func(i, j int) bool { return holds[i].got.Before(holds[j].got) })
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			shared := ""
			for _, r := range a.le.Resources() {
				if slices.Contains(b.le.Resources(), r) {
					shared = r
					break
				}
			}
			if shared == "" {
				continue
			}
			// b returned no earlier than a.
			if b.got.Before(a.until) {
				violate(mpExclusion, "%s: %s and %s were both trusted for %s", shared, a, b, a.until.Sub(b.got).Round(time.Microsecond))
			}
			// Token 0: that Locker does not fence.
			if a.got.Before(b.called) && a.le.Token() != 0 && b.le.Token() != 0 && b.le.Token() <= a.le.Token() {
				violate(mpFencing, "%s: %s was called after %s returned, with no larger token", shared, b, a)
			}
		}
	}
}
