package engine_test

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/internal/simredis"
	"pgregory.net/rapid"
)

// The lease lifecycle, as a stateful property: two Lockers on five
// masters (real ones, or simulated ones in virtual time), a few resources,
// and random sequences of TryLock, Lock (in a goroutine, so that gated
// waiters queue and leases are handed on), Release, Extend, cancelled
// waits, time passing, key loss on some masters and master restarts (and
// on simulated masters, stopped and slow masters and broken connections).
// After every step the leases in hand must obey:
//
//   - exclusion: at most one live lease (Err nil, Validity > 0) per
//     resource, unless one of them lost its keys beyond the fault model
//     (see lifecycle.lose);
//   - an ended lease is never handed on: no hand-off carries the value of a
//     lease that had ended with an error other than ErrReleased when it was
//     released;
//   - fencing: a lease acquired after another one returned has a larger
//     token (only the order is compared: tokens come from the clocks);
//   - Done, Err and Validity agree at every call, and a lease whose
//     validity ran out shows it at the first call;
//   - after Release, the lease has ended (Err set, Validity 0, Done closed).
const (
	lcMasters     = 5
	lcQuorum      = lcMasters/2 + 1
	lcTTL         = 500 * time.Millisecond
	lcExtendEvery = 150 * time.Millisecond
	lcResources   = 3
	// lcChecks is the number of rapid runs of the properties on real
	// masters that share lcRapidDefaults, unless -rapid.checks (or
	// RAPID_CHECKS) says otherwise: each run takes up to a few seconds of
	// real time, and a test must stay under a minute with -race.
	lcChecks = 25
	// lcShrinkTime bounds the minimisation of a failure, for the same reason.
	lcShrinkTime = "25s"
)

// TestLeaseLifecycle checks the lifecycle property (see above) on real
// masters over -rapid.checks runs (lcRealChecks by default here) of about
// -rapid.steps actions each (rapid's average, 30 by default; runs are cut
// at twice that). A failure is shrunk to a short sequence of actions,
// printed with the seed; replay it with
//
//	go test -run 'TestLeaseLifecycle$' -rapid.seed=N ./engine/
//
// (timing makes some failures need a few tries). No fail file is written
// unless -rapid.nofailfile=false is given; -rapid.v logs every step of
// every run. TestLeaseLifecycleInVirtualTime runs the same machine, and
// more faults, many more times on simulated masters.
func TestLeaseLifecycle(t *testing.T) {
	lcMutation(t)
	e := newLifecycleEnv(t)
	lcRapidDefaults(t)
	setRapidChecks(t, lcRealChecks)
	rapid.Check(t, func(rt *rapid.T) {
		m := newLifecycle(rt, e, lcMain, nil)
		defer m.close()
		rt.Repeat(m.actions())
	})
}

// lcMutation turns on the switch of internal/mutation that
// REDLOCK_MUTATION names, if any, for the test, to see the property fail:
//
//	REDLOCK_MUTATION=stale-shorter-extend go test -run 'TestLeaseLifecycleInVirtualTime$' ./engine/
func lcMutation(t *testing.T) {
	mutation.Require(t)
	name := os.Getenv("REDLOCK_MUTATION")
	if name == "" {
		return
	}
	sw := mutation.ByName(name)
	if sw == nil {
		t.Fatalf("REDLOCK_MUTATION=%s: no such switch", name)
	}
	t.Cleanup(sw.Set(true))
}

// lcRealChecks: TestLeaseLifecycle's runs on real masters, where each
// takes seconds of real time; the virtual-time twin explores more.
const lcRealChecks = 10

// TestLeaseLifecycleInVirtualTime checks the lifecycle property on
// simulated masters in virtual time (a run takes a fraction of a second
// of real time, whatever the sleeps and timeouts in it), over
// -rapid.checks runs (lcSimChecks by default here) of about -rapid.steps
// actions (lcSimSteps by default), with lcSim's faults: besides key loss
// and restarts, masters stopped and resumed (at most two at once),
// masters slower than the node timeout, and connections broken with
// commands in flight delivered late or lost. The Lockers' random delays
// come from the run's draws. Replay a failure with
//
//	go test -run 'TestLeaseLifecycleInVirtualTime$' -rapid.seed=N ./engine/
func TestLeaseLifecycleInVirtualTime(t *testing.T) {
	lcMutation(t)
	lcRapidDefaults(t)
	lcRapidFlags(t, map[string]string{
		"rapid.checks":     strconv.Itoa(lcSimChecks),
		"rapid.steps":      strconv.Itoa(lcSimSteps),
		"rapid.shrinktime": lcSimShrinkTime,
	})
	rapid.Check(t, func(rt *rapid.T) {
		// Each run in a bubble of its own, on masters of its own: a run
		// that leaves a goroutine behind fails as a deadlock.
		rapid.SyncTest(rt, func(rt *rapid.T) {
			e := newSimLifecycleEnv(t, rt)
			defer e.close()
			m := newLifecycle(rt, e, lcSim, nil)
			defer m.close()
			rt.Repeat(m.actions())
		})
	})
}

// newSimLifecycleEnv starts simulated masters, up for an hour, for one
// run of the machine, inside its bubble, on a network seeded by the run;
// close stops them. The env's t is the test's, outside the bubble: the
// machine reports through the run's rapid.T, and uses the env only for
// its masters, clients and faults.
func newSimLifecycleEnv(t *testing.T, rt *rapid.T) *lcEnv {
	nw := simredis.NewNetwork(rapid.Uint64().Draw(rt, "network seed"))
	ms, addrs := simredis.NewMasters(nw, lcMasters, simredis.MasterOptions{Uptime: time.Hour})
	e := &lcEnv{env: &env{t: t, net: nw, sim: ms, addrs: addrs}, restarted: map[int]time.Time{}}
	dial := nw.Dialer("direct")
	for _, a := range addrs {
		cl, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{a}, ForceSingleClient: true, DisableCache: true,
			ClientSetInfo: rueidis.DisableClientSetInfo,
			DialCtxFn: func(ctx context.Context, addr string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
				return dial(ctx, addr)
			},
		})
		if err != nil {
			e.close()
			rt.Fatalf("direct client %s: %v", a, err)
		}
		e.direct = append(e.direct, cl)
	}
	return e
}

// close stops a run's simulated masters and their direct clients.
func (e *lcEnv) close() {
	for _, c := range e.direct {
		c.Close()
	}
	for _, m := range e.env.sim {
		m.Close()
	}
}

const (
	lcSimChecks = 30
	lcSimSteps  = 60
	// lcSimShrinkTime is virtual time: the runs replayed while shrinking
	// take it, not the machine's.
	lcSimShrinkTime = "30m"
)

// lcMain is the machine of TestLeaseLifecycle: two resources, so that the
// Lockers meet often, and Lock and Release drawn twice as often as the
// rest, so that gated waiters queue and leases are handed on.
var lcMain = lcOptions{resources: 2, actions: []string{"trylock", "lock", "lock", "release", "release", "extend", "cancel", "sleep", "delete", "restart"}}

// lcSim is lcMain with the faults of simulated masters, the Lock and
// Release that make hand-offs drawn more often still, so that the faults
// do not crowd them out.
var lcSim = lcOptions{resources: 2, actions: []string{"trylock", "trylock", "lock", "lock", "lock", "release", "release", "release",
	"extend", "cancel", "sleep", "sleep", "delete", "restart", "pause", "slow", "break"}}

// lcControl is the machine of the control: one resource, the gated,
// auto-extending Locker only. Fencing is off: the hand-off's fence round
// raises the counters only where the key is still the lease's, so with
// fencing a lost lease is not handed on even without the check under
// test.
var lcControl = lcOptions{resources: 1, lockers: 1, noFencing: true}

// TestLeaseLifecycleCatchesHandoffOfEndedLease is the control: with the
// engine's check that keeps an ended lease from being handed on turned
// off, the lifecycle machine must see a hand-off of a lost lease. It runs
// the machine's steps on a schedule, in virtual time, where the hazard
// cannot be missed: the gated, auto-extending Locker takes the resource
// and two more of its goroutines queue behind it; its key goes from a
// majority of the masters; its next auto-extension finds the lease lost,
// and the next goroutine in line wins the masters; then the lost lease is
// released, which, with the check off, hands it to the third. The
// machine collects violations instead of failing at the first, so that
// the control can assert that the checker fails. (Random runs of a
// machine narrowed to these steps, on real masters, met this sequence
// only for some seeds, depending on timing.)
func TestLeaseLifecycleCatchesHandoffOfEndedLease(t *testing.T) {
	mutation.Require(t)
	engine.SkipHandoffEndCheck(true)
	defer engine.SkipHandoffEndCheck(false)
	synctest.Test(t, func(t *testing.T) {
		var found []lcViolation
		rapid.Custom(func(rt *rapid.T) bool {
			e := newSimLifecycleEnv(t, rt)
			defer e.close()
			m := newLifecycle(rt, e, lcControl, &found)
			defer m.close()
			for _, step := range []func(){
				func() { m.doLock(0, 0, 2*time.Second) },
				func() { m.doLock(0, 0, 2*time.Second) },
				func() { m.doLock(0, 0, 2*time.Second) },
				func() { m.doDelete(0, []int{0, 1, 2}) },
				func() { m.doSleep(lcExtendEvery + 50*time.Millisecond) },
				func() {
					if held := m.held(); len(held) > 0 {
						m.doRelease(held[0])
					}
				},
				func() { m.doSleep(10 * time.Millisecond) },
			} {
				step()
				m.check(rt)
			}
			return true
		}).Example(1)
		for _, v := range found {
			t.Logf("%s: %s", v.kind, v.msg)
			if v.kind == lcHandoff {
				return
			}
		}
		t.Fatal("no hand-off of an ended lease seen with the engine's check off: the lifecycle property cannot fail")
	})
}

// lcEnv is the masters of one top-level test, shared by its runs.
type lcEnv struct {
	*env
	// restarted: when each master last restarted. A Locker made in a
	// later run still sees it young and keeps it out of the vote.
	restarted map[int]time.Time
}

// nodes are e's real masters, to flush before each run, unless opts
// gives the votes; none for simulated masters, whose runs' names are
// their own anyway.
func (e *lcEnv) nodes(opts lcOptions) []*redistest.Node {
	if opts.votes != nil || e.cluster == nil {
		return nil
	}
	return e.cluster.Nodes
}

// sim reports whether e's masters are simulated (virtual time).
func (e *lcEnv) sim() bool { return e.env != nil && e.env.sim != nil }

// newLifecycleEnv starts the masters once per top-level test and lets
// them age past a second, so that the Lockers' quarantine (which reads
// uptime in whole seconds) does not keep fresh masters out of the first run.
func newLifecycleEnv(t *testing.T) *lcEnv {
	e := ownEnv(t, lcMasters)
	time.Sleep(1100 * time.Millisecond)
	return &lcEnv{env: e, restarted: map[int]time.Time{}}
}

// lcUserFlags are the rapid flags given on the command line or in the
// environment, read before this file changes any.
var lcUserFlags = sync.OnceValue(func() map[string]bool {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"checks", "steps", "shrinktime", "nofailfile"} {
		if _, ok := os.LookupEnv("RAPID_" + strings.ToUpper(name)); ok {
			set["rapid."+name] = true
		}
	}
	return set
})

// lcRapidDefaults bounds the runs and the shrinking to what real masters
// allow in a minute, and writes no fail file into the package directory,
// unless the user chose otherwise; the flags are restored after the test.
func lcRapidDefaults(t *testing.T) {
	lcRapidFlags(t, map[string]string{
		"rapid.checks":     strconv.Itoa(lcChecks),
		"rapid.shrinktime": lcShrinkTime,
		"rapid.nofailfile": "true",
	})
}

// lcRapidFlags sets rapid's flags for the test, but those the user chose;
// they are restored after it.
func lcRapidFlags(t *testing.T, flags map[string]string) {
	user := lcUserFlags()
	for name, v := range flags {
		f := flag.Lookup(name)
		if f == nil || user[name] {
			continue
		}
		old := f.Value.String()
		if err := f.Value.Set(v); err != nil {
			t.Fatalf("set -%s=%s: %v", name, v, err)
		}
		t.Cleanup(func() { f.Value.Set(old) })
	}
}

// Violation kinds.
const (
	lcExclusion = "exclusion"
	lcHandoff   = "ended lease handed on"
	lcFencing   = "fencing order"
	lcAgree     = "Done/Err/Validity disagree"
	lcRelease   = "released lease not ended"
	lcExtend    = "failed Extend left the lease healthy"
)

type lcViolation struct{ kind, msg string }

// lcOptions narrow the machine; zero values select everything.
type lcOptions struct {
	resources int // 1..lcResources
	lockers   int // 1: only the gated, auto-extending Locker acts
	// actions names the actions to draw from; a name given n times is
	// drawn n times as often.
	actions   []string
	minDelete int           // fewest masters a delete hits
	minExtend time.Duration // shortest TTL a manual Extend asks for
	noFencing bool          // the gated Locker does not fence
	// votes, when set, gives the Lockers their votes instead of e's
	// masters, flush empties them before each run, and names are the
	// resources' name formats (run, index), for votes that are not e's
	// masters: Redis Clusters (see cluster_test.go). Without e's masters,
	// delete and restart cannot be drawn.
	votes func(*engine.Config)
	flush func() error
	names []string
}

// lcLease is a lease the machine holds.
type lcLease struct {
	id     int
	le     *engine.Lease
	locker int
	res    int
	via    string // "trylock", "lock" or "handoff"
	// begin and end bound the acquisition: a lease whose end is before
	// another's begin was acquired first.
	begin, end time.Time
	released   bool  // Release was called
	lastErr    error // Err() at the last check
}

func (l *lcLease) String() string {
	return fmt.Sprintf("lease#%d(L%d r%d %s value %.6s token %d)", l.id, l.locker, l.res, l.via, l.le.Value(), l.le.Token())
}

// lcWaiter is a Lock call running in a goroutine.
type lcWaiter struct {
	id          int
	locker, res int
	cancel      context.CancelFunc
	called      time.Time
	done        bool // its result was collected
	returned    atomic.Bool
}

type lcResult struct {
	w   *lcWaiter
	le  *engine.Lease
	err error
	at  time.Time
}

// lifecycle is the state machine of one rapid run.
type lifecycle struct {
	rt      *rapid.T
	e       *lcEnv
	opts    lcOptions
	lockers []*engine.Locker
	names   []string
	leases  []*lcLease
	waiters []*lcWaiter
	results chan lcResult
	wg      sync.WaitGroup
	nextID  int
	steps   int
	maxStep int
	// compromised: values whose keys were deleted until fewer than a
	// quorum of masters still held them for the lease's validity. That is
	// beyond what Redlock tolerates, so two live holders are expected.
	compromised map[string]string
	// endedAtRelease: values of leases released after they had ended with
	// an error other than ErrReleased; none may be handed on afterwards.
	endedAtRelease map[string]error
	// releasedAt: when the last Release of a lease with the value began;
	// a hand-off of the value is acquired no earlier.
	releasedAt map[string]time.Time
	collect    *[]lcViolation // nil: fail the run at the first violation
	failed     bool
	// paused and slowed: the simulated masters stopped, and those whose
	// latency is not a LAN's, until the run's end.
	paused, slowed map[int]bool
}

var lcRun atomic.Int64

func newLifecycle(rt *rapid.T, e *lcEnv, opts lcOptions, collect *[]lcViolation) *lifecycle {
	if opts.resources == 0 {
		opts.resources = lcResources
	}
	if opts.lockers == 0 {
		opts.lockers = 2
	}
	run := lcRun.Add(1)
	if opts.flush != nil {
		if err := opts.flush(); err != nil {
			rt.Fatalf("flush: %v", err)
		}
	}
	for i, n := range e.nodes(opts) {
		if _, err := redistest.Do(n.Addr(), 5*time.Second, "FLUSHALL"); err != nil {
			rt.Fatalf("FLUSHALL on master %d: %v", i, err)
		}
	}
	m := &lifecycle{
		rt: rt, e: e, opts: opts, collect: collect,
		compromised:    map[string]string{},
		endedAtRelease: map[string]error{},
		releasedAt:     map[string]time.Time{},
		maxStep:        60,
		paused:         map[int]bool{},
		slowed:         map[int]bool{},
	}
	if f := flag.Lookup("rapid.steps"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			m.maxStep = 2 * n
		}
	}
	// One Lock per step at most: no goroutine ever blocks on its result.
	m.results = make(chan lcResult, m.maxStep)
	for i := 0; i < opts.resources; i++ {
		format := "lifecycle-%d-r%d"
		if len(opts.names) > 0 {
			format = opts.names[i%len(opts.names)]
		}
		m.names = append(m.names, fmt.Sprintf(format, run, i))
	}
	// Simulated masters: the Lockers' random delays come from the run's
	// draws, so that a seed replays its schedule as far as the
	// goroutines' order at one virtual instant allows.
	var seed uint64
	if e.sim() {
		seed = rapid.Uint64().Draw(rt, "rand seed")
	}
	base := func(i uint64) engine.Config {
		var c engine.Config
		if opts.votes != nil {
			c = engine.DefaultConfig()
			opts.votes(&c)
		} else {
			c = e.env.config()
		}
		if e.sim() {
			c.Wait.Rand = rand.New(rand.NewPCG(seed, i))
		}
		c.TTL, c.MaxTTL = lcTTL, lcTTL
		c.Quarantine = engine.QuarantineAlways
		c.Fencing = true
		c.Wait.RetryDelayMin, c.Wait.RetryDelayMax = 2*time.Millisecond, 20*time.Millisecond
		c.Wait.FallbackMin, c.Wait.FallbackMax = 10*time.Millisecond, 60*time.Millisecond
		return c
	}
	// L0: fenced, auto-extending. L1: fenced, extended only by hand. Both
	// gate their own Lock callers and hand leases on.
	c0 := base(0)
	c0.AutoExtend, c0.ExtendEvery = true, lcExtendEvery
	c0.Fencing = !opts.noFencing
	for _, c := range []engine.Config{c0, base(1)} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := engine.New(ctx, c)
		cancel()
		if err != nil {
			m.close()
			rt.Fatalf("engine.New: %v", err)
		}
		m.lockers = append(m.lockers, l)
	}
	return m
}

// close ends the run: no waiter left, every lease released, the Lockers
// closed. It checks nothing, so that it may run after a failure.
func (m *lifecycle) close() {
	via := map[string]int{}
	for _, l := range m.leases {
		via[l.via]++
	}
	m.rt.Logf("run: %d steps, leases %v, %d values compromised", m.steps, via, len(m.compromised))
	for i := range m.paused {
		m.e.env.sim[i].Resume()
	}
	for i := range m.slowed {
		m.e.env.sim[i].SetLatency(simredis.DefaultLatency)
	}
	for _, w := range m.waiters {
		w.cancel()
	}
	m.wg.Wait()
	for len(m.results) > 0 {
		if r := <-m.results; r.le != nil {
			m.leases = append(m.leases, &lcLease{le: r.le})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, l := range m.leases {
		if !l.released {
			l.le.Release(ctx)
		}
	}
	for _, l := range m.lockers {
		l.Close()
	}
}

// fail reports a violation: what it is, which stays the same from one
// replay to the next (rapid shrinks only while the failure message does
// not change), and the details of this occurrence, which are logged.
func (m *lifecycle) fail(kind, what, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	m.rt.Logf("VIOLATION %s: %s: %s", kind, what, detail)
	if m.collect == nil {
		m.rt.Fatalf("%s: %s (details in the log above)", kind, what)
	}
	*m.collect = append(*m.collect, lcViolation{kind, what + ": " + detail})
	m.failed = true
}

func (m *lifecycle) actions() map[string]func(*rapid.T) {
	step := func(f func(*rapid.T)) func(*rapid.T) {
		return func(rt *rapid.T) {
			// Past the cap, or once a collected run failed, steps do
			// nothing: rapid's step count has no upper bound.
			if m.steps >= m.maxStep || m.failed {
				return
			}
			m.steps++
			f(rt)
		}
	}
	all := map[string]func(*rapid.T){
		"trylock": step(m.tryLock),
		"lock":    step(m.lock),
		"release": step(m.release),
		"extend":  step(m.extend),
		"cancel":  step(m.cancelWait),
		"sleep":   step(m.sleep),
		"delete":  step(m.deleteKeys),
		"restart": step(m.restart),
		"pause":   step(m.pause),
		"slow":    step(m.slow),
		"break":   step(m.breakConns),
		"":        m.check,
	}
	if m.opts.actions == nil {
		if !m.e.sim() {
			delete(all, "pause")
			delete(all, "slow")
			delete(all, "break")
		}
		return all
	}
	some := map[string]func(*rapid.T){"": m.check}
	for _, name := range m.opts.actions {
		key := name
		for n := 2; some[key] != nil; n++ {
			key = fmt.Sprintf("%s %d", name, n)
		}
		some[key] = all[name]
	}
	return some
}

func (m *lifecycle) id() int {
	m.nextID++
	return m.nextID
}

// held returns the leases to pick from for Release and Extend: not yet
// released, and within their validity or lost (a lost lease can still be
// released, and must not be handed on). Expired leases are left out, so
// that the pick is not diluted by leases that can do nothing more; close
// releases them. It reads the end error the last check saw, since a call
// to Err here would end an expired lease before the check's first call to
// Done.
func (m *lifecycle) held() []*lcLease {
	var out []*lcLease
	now := time.Now()
	for _, l := range m.leases {
		lost := l.lastErr != nil && !errors.Is(l.lastErr, engine.ErrLeaseExpired)
		if !l.released && (lost || now.Before(l.le.ValidUntil())) {
			out = append(out, l)
		}
	}
	return out
}

// The steps: each draws its choices, then does them (the do functions,
// which the control's scheduled runs call directly).

func (m *lifecycle) tryLock(rt *rapid.T) {
	li := rapid.IntRange(0, m.opts.lockers-1).Draw(rt, "locker")
	ri := rapid.IntRange(0, m.opts.resources-1).Draw(rt, "resource")
	m.doTryLock(li, ri)
}

func (m *lifecycle) doTryLock(li, ri int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	begin := time.Now()
	le, err := m.lockers[li].TryLock(ctx, m.names[ri])
	end := time.Now()
	if err != nil {
		m.rt.Logf("TryLock L%d r%d: %v", li, ri, err)
		return
	}
	l := &lcLease{id: m.id(), le: le, locker: li, res: ri, via: "trylock", begin: begin, end: end}
	m.rt.Logf("TryLock L%d r%d: %s", li, ri, l)
	m.add(l)
}

func (m *lifecycle) lock(rt *rapid.T) {
	li := rapid.IntRange(0, m.opts.lockers-1).Draw(rt, "locker")
	ri := rapid.IntRange(0, m.opts.resources-1).Draw(rt, "resource")
	timeout := rapid.SampledFrom([]time.Duration{300 * time.Millisecond, time.Second, 2 * time.Second}).Draw(rt, "timeout")
	m.doLock(li, ri, timeout)
}

func (m *lifecycle) doLock(li, ri int, timeout time.Duration) {
	l := m.lockers[li]
	name := m.names[ri]
	gated, subs := l.GateWaiting(name), l.Subscriptions()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	w := &lcWaiter{id: m.id(), locker: li, res: ri, cancel: cancel, called: time.Now()}
	m.waiters = append(m.waiters, w)
	m.rt.Logf("Lock#%d L%d r%d timeout %s: started", w.id, li, ri, timeout)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		le, err := l.Lock(ctx, name)
		w.returned.Store(true)
		m.results <- lcResult{w: w, le: le, err: err, at: time.Now()}
	}()
	// Let the goroutine queue at the gate or reach the masters, so that
	// the next step meets it waiting (a step of time passing, on real
	// masters; exact in virtual time).
	for deadline := time.Now().Add(30 * time.Millisecond); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if w.returned.Load() || l.GateWaiting(name) > gated || l.Subscriptions() > subs {
			break
		}
	}
}

func (m *lifecycle) release(rt *rapid.T) {
	held := m.held()
	if len(held) == 0 {
		rt.Skip("no lease to release")
	}
	m.doRelease(held[rapid.IntRange(0, len(held)-1).Draw(rt, "lease")])
}

func (m *lifecycle) doRelease(l *lcLease) {
	v := l.le.Value()
	pre := l.le.Err()
	if pre != nil && !errors.Is(pre, engine.ErrReleased) {
		m.endedAtRelease[v] = pre
	}
	l.released = true
	m.releasedAt[v] = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := l.le.Release(ctx)
	cancel()
	m.rt.Logf("Release %s (Err before: %v; %d queued): %v", l, pre, m.lockers[l.locker].GateWaiting(m.names[l.res]), err)
	m.mustHaveEnded(lcRelease, l, "after Release returned")
}

func (m *lifecycle) extend(rt *rapid.T) {
	held := m.held()
	if len(held) == 0 {
		rt.Skip("no lease to extend")
	}
	l := held[rapid.IntRange(0, len(held)-1).Draw(rt, "lease")]
	lo, hi := max(m.opts.minExtend, 50*time.Millisecond), lcTTL
	ttl := time.Duration(rapid.IntRange(int(lo/time.Millisecond), int(hi/time.Millisecond)).Draw(rt, "ttl ms")) * time.Millisecond
	m.doExtend(l, ttl)
}

func (m *lifecycle) doExtend(l *lcLease, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := l.le.Extend(ctx, ttl)
	cancel()
	m.rt.Logf("Extend %s by %s: %v", l, ttl, err)
	if errors.Is(err, engine.ErrNotHeld) {
		m.mustHaveEnded(lcExtend, l, fmt.Sprintf("after Extend failed with %v", err))
	}
}

func (m *lifecycle) cancelWait(rt *rapid.T) {
	var open []*lcWaiter
	for _, w := range m.waiters {
		if !w.done {
			open = append(open, w)
		}
	}
	if len(open) == 0 {
		rt.Skip("no Lock waiting")
	}
	w := open[rapid.IntRange(0, len(open)-1).Draw(rt, "waiter")]
	w.cancel()
	rt.Logf("cancel Lock#%d", w.id)
}

func (m *lifecycle) sleep(rt *rapid.T) {
	m.doSleep(rapid.SampledFrom([]time.Duration{2 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond,
		lcExtendEvery, 300 * time.Millisecond, lcTTL + 100*time.Millisecond}).Draw(rt, "sleep"))
}

// doSleep lets time pass: on real masters as it must, a sleep.
func (m *lifecycle) doSleep(d time.Duration) {
	m.rt.Logf("sleep %s", d)
	time.Sleep(d)
}

// deleteKeys loses a resource's key on one, two (a minority) or three (a
// majority) masters, as a master that forgets or an operator would.
func (m *lifecycle) deleteKeys(rt *rapid.T) {
	ri := rapid.IntRange(0, m.opts.resources-1).Draw(rt, "resource")
	k := rapid.IntRange(max(m.opts.minDelete, 1), lcQuorum).Draw(rt, "masters")
	order := rapid.Permutation([]int{0, 1, 2, 3, 4}).Draw(rt, "order")
	// Only masters the test's own clients reach: a stopped one would
	// hold the delete back until it resumes.
	var masters []int
	for _, i := range order {
		if len(masters) < k && !m.paused[i] {
			masters = append(masters, i)
		}
	}
	m.doDelete(ri, masters)
}

func (m *lifecycle) doDelete(ri int, masters []int) {
	m.collectResults() // know as many live values as possible
	key := m.e.key(m.names[ri])
	lost := map[string]bool{}
	for _, i := range masters {
		if v := m.direct(i, func(c rueidis.Client) rueidis.Completed {
			return c.B().Eval().Script(lcGetDel).Numkeys(1).Key(key).Build()
		}); v != "" {
			lost[strings.TrimSuffix(v, "+")] = true
		}
	}
	m.rt.Logf("delete r%d on masters %v: values %v", ri, masters, lostValues(lost))
	for v := range lost {
		m.lose(v, ri)
	}
}

// lcGetDel is GETDEL as a script, which the simulated masters run too.
const lcGetDel = `local v = redis.call("GET", KEYS[1]) redis.call("DEL", KEYS[1]) return v`

func lostValues(lost map[string]bool) []string {
	var out []string
	for v := range lost {
		out = append(out, fmt.Sprintf("%.6s", v))
	}
	return out
}

// lose marks value v compromised if fewer than a quorum of masters still
// hold it until the validity of its lease: then another client may win the
// resource while the lease is still valid, which no Redlock can prevent.
// A restarted master counts as lost too (it forgot the key), but restarts
// alone never compromise a lease: the quarantine is there for them.
func (m *lifecycle) lose(v string, ri int) {
	// The validity of the live lease with value v, if the machine holds
	// it; otherwise the longest there can be: a lease the machine has
	// not collected yet (a hand-off of one it released, say) may have it.
	// An ended lease's ValidUntil is when it ended, so it does not count.
	now := time.Now()
	validUntil := now.Add(lcTTL)
	for _, l := range m.leases {
		if u := l.le.ValidUntil(); l.le.Value() == v && u.After(now) {
			validUntil = u
		}
	}
	held := 0
	for i := 0; i < lcMasters; i++ {
		if got, until := m.keyOn(i, m.e.key(m.names[ri])); strings.TrimSuffix(got, "+") == v && until.After(validUntil) {
			held++
		}
	}
	if held < lcQuorum {
		why := fmt.Sprintf("held for its validity by %d masters after a delete", held)
		m.rt.Logf("value %.6s compromised: %s", v, why)
		m.compromised[v] = why
	}
}

// keyOn returns key's value on master i ("" when absent) and how long it
// lives at least. Simulated masters are read from their key log, which
// needs no connection (a master may be stopped); real ones with GET and
// PTTL.
func (m *lifecycle) keyOn(i int, key string) (string, time.Time) {
	if m.e.sim() {
		sm := m.e.env.sim[i]
		var last *simredis.KeyRecord
		log := sm.KeyLog()
		for j := range log {
			if log[j].Key == key {
				last = &log[j]
			}
		}
		now := sm.Now()
		if last == nil || last.Gone || !last.ExpireAt.IsZero() && !now.Before(last.ExpireAt) {
			return "", time.Time{}
		}
		if last.ExpireAt.IsZero() {
			return last.Value, time.Now().Add(24 * time.Hour)
		}
		return last.Value, sm.VirtualAt(last.ExpireAt, time.Now())
	}
	before := time.Now()
	got := m.direct(i, func(c rueidis.Client) rueidis.Completed { return c.B().Get().Key(key).Build() })
	if got == "" {
		return "", time.Time{}
	}
	// The key lives at least until before + pttl, less the master's
	// millisecond rounding.
	return got, before.Add(time.Duration(m.pttl(i, key))*time.Millisecond - time.Millisecond)
}

// direct runs a string command on master i through the test's own client,
// retrying on a connection broken by a restart; "" is nil.
func (m *lifecycle) direct(i int, build func(rueidis.Client) rueidis.Completed) string {
	c := m.e.direct[i]
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var v string
		v, err = c.Do(ctx, build(c)).ToString()
		cancel()
		if rueidis.IsRedisNil(err) {
			return ""
		}
		if err == nil {
			return v
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.rt.Fatalf("master %d: %v", i, err)
	return ""
}

func (m *lifecycle) pttl(i int, key string) int64 {
	c := m.e.direct[i]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		return 0
	}
	return n
}

// restart restarts a master without persistence: it forgets every key and
// counter, and the Lockers keep it out of the vote for MaxTTL. At most two
// masters are young at once, so that a quorum can still be reached.
func (m *lifecycle) restart(rt *rapid.T) {
	m.doRestart(rapid.IntRange(0, lcMasters-1).Draw(rt, "master"))
}

func (m *lifecycle) doRestart(i int) {
	young := 0
	for _, at := range m.e.restarted {
		if time.Since(at) < 2*time.Second {
			young++
		}
	}
	if at, ok := m.e.restarted[i]; young >= 2 && !(ok && time.Since(at) < 2*time.Second) {
		m.rt.Logf("restart master %d: skipped, two masters restarted lately", i)
		return
	}
	if m.paused[i] {
		// A new process runs: the stopped one is gone.
		m.e.env.sim[i].Resume()
		delete(m.paused, i)
	}
	m.e.env.restart(i)
	m.e.restarted[i] = time.Now()
	m.rt.Logf("restart master %d", i)
}

// The faults that only simulated masters take cheaply.

// pause stops a master as SIGSTOP does, or lets a stopped one run again;
// at most two are stopped at once, so that a quorum can answer.
func (m *lifecycle) pause(rt *rapid.T) {
	i := rapid.IntRange(0, lcMasters-1).Draw(rt, "master")
	switch {
	case m.paused[i]:
		m.e.env.sim[i].Resume()
		delete(m.paused, i)
		rt.Logf("resume master %d", i)
	case len(m.paused) >= 2:
		rt.Skip("two masters stopped")
	default:
		m.e.env.sim[i].Pause()
		m.paused[i] = true
		rt.Logf("pause master %d", i)
	}
}

// slow sets a master's latency: a LAN's, or slower than the node timeout
// (lcTTL/10) now and then, or always.
func (m *lifecycle) slow(rt *rapid.T) {
	i := rapid.IntRange(0, lcMasters-1).Draw(rt, "master")
	l := rapid.SampledFrom([]simredis.Latency{simredis.DefaultLatency,
		{Min: 5 * time.Millisecond, Jitter: 20 * time.Millisecond, SpikeP: 0.2, Spike: 100 * time.Millisecond},
		{Min: 60 * time.Millisecond, Jitter: 60 * time.Millisecond}}).Draw(rt, "latency")
	m.e.env.sim[i].SetLatency(l)
	m.slowed[i] = l != simredis.DefaultLatency
	rt.Logf("master %d latency %+v", i, l)
}

// breakConns breaks every connection to a master, with what is in
// flight delivered late, or lost.
func (m *lifecycle) breakConns(rt *rapid.T) {
	i := rapid.IntRange(0, lcMasters-1).Draw(rt, "master")
	late := rapid.SampledFrom([]time.Duration{-1, 0, 20 * time.Millisecond, 200 * time.Millisecond}).Draw(rt, "late")
	n := m.e.env.sim[i].BreakConnections(late)
	rt.Logf("break %d connections to master %d (late %s)", n, i, late)
}

// collectResults takes in the Lock calls that returned.
func (m *lifecycle) collectResults() {
	for {
		select {
		case r := <-m.results:
			m.onResult(r)
		default:
			return
		}
	}
}

func (m *lifecycle) onResult(r lcResult) {
	w := r.w
	w.done = true
	if r.err != nil {
		m.rt.Logf("Lock#%d L%d r%d: %v", w.id, w.locker, w.res, r.err)
		return
	}
	l := &lcLease{id: m.id(), le: r.le, locker: w.locker, res: w.res, via: "lock", begin: w.called, end: r.at}
	v := r.le.Value()
	if r.le.Wait().Cause == engine.WakeHandoff {
		l.via = "handoff"
		if err, ok := m.endedAtRelease[v]; ok {
			m.fail(lcHandoff, "a hand-off carries the value of a lease that was lost before its Release", "%s (Lock#%d) was handed a lease whose holder had ended with %q before its Release", l, w.id, err)
		}
		// The hand-off happened inside the Release of the value's last
		// holder, so the acquisition began no earlier.
		if at, ok := m.releasedAt[v]; ok && at.After(l.begin) {
			l.begin = at
		}
	}
	m.rt.Logf("Lock#%d L%d r%d: %s", w.id, w.locker, w.res, l)
	m.add(l)
}

// add records a new lease after checking its token against every lease of
// the resource acquired before it began.
func (m *lifecycle) add(b *lcLease) {
	for _, a := range m.leases {
		// Token 0: that Locker does not fence.
		if a.res != b.res || !a.end.Before(b.begin) || a.le.Token() == 0 || b.le.Token() == 0 || a.le.Token() < b.le.Token() {
			continue
		}
		m.fail(lcFencing, "a lease acquired after another returned has no larger token", "%s was acquired %s after %s returned, but its token is not larger%s",
			b, b.begin.Sub(a.end), a, m.outOfModel(a, b))
	}
	m.leases = append(m.leases, b)
}

func (m *lifecycle) outOfModel(ls ...*lcLease) string {
	for _, l := range ls {
		if why, ok := m.compromised[l.le.Value()]; ok {
			return fmt.Sprintf(" (%s was compromised: %s)", l, why)
		}
	}
	return ""
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// mustHaveEnded checks a lease that must have ended by now.
func (m *lifecycle) mustHaveEnded(kind string, l *lcLease, when string) {
	if err := l.le.Err(); err == nil {
		m.fail(kind, "Err() is nil", "%s %s", l, when)
	}
	if v := l.le.Validity(); v != 0 {
		m.fail(kind, "Validity() > 0", "%s %s: Validity() = %s", l, when, v)
	}
	if !isClosed(l.le.Done()) {
		m.fail(kind, "Done() not closed", "%s %s", l, when)
	}
}

// agree checks that Done, Err and Validity tell the same story. Done is
// not called on a plain TryLock lease until it has ended, so that its
// first call after the validity ran out is the one checked.
func (m *lifecycle) agree(l *lcLease) {
	le := l.le
	// The clock is read before ValidUntil: an extension that commits in
	// between shows in ValidUntil, and none can commit after it once the
	// validity it reports has passed.
	if now, u := time.Now(), le.ValidUntil(); !now.Before(u) {
		if !isClosed(le.Done()) {
			m.fail(lcAgree, "validity ran out but Done() is not closed at the call", "%s: validity ran out %s ago", l, time.Since(u))
		}
		if le.Err() == nil || le.Validity() != 0 {
			m.fail(lcAgree, "validity ran out but Err() is nil or Validity() > 0", "%s: validity ran out %s ago; Err() = %v, Validity() = %s", l, time.Since(u), le.Err(), le.Validity())
		}
	}
	if err := le.Err(); err != nil {
		if v := le.Validity(); v != 0 {
			m.fail(lcAgree, "Err() is set but Validity() > 0", "%s: Err() = %q, Validity() = %s", l, err, v)
		}
		if !isClosed(le.Done()) {
			m.fail(lcAgree, "Err() is set but Done() is not closed", "%s: Err() = %q", l, err)
		}
	} else if l.locker == 0 || l.via != "trylock" {
		if isClosed(le.Done()) && le.Err() == nil {
			m.fail(lcAgree, "Done() is closed but Err() is nil", "%s", l)
		}
	}
	if l.released {
		m.mustHaveEnded(lcRelease, l, "after Release")
	}
	l.lastErr = le.Err()
}

// check runs after every step.
func (m *lifecycle) check(rt *rapid.T) {
	m.collectResults()
	live := make([][]*lcLease, lcResources)
	for _, l := range m.leases {
		m.agree(l)
		if l.le.Err() == nil && l.le.Validity() > 0 {
			live[l.res] = append(live[l.res], l)
		}
	}
	for ri, ls := range live {
		if len(ls) < 2 {
			continue
		}
		if why := m.outOfModel(ls...); why != "" {
			rt.Logf("r%d: %d live leases, expected%s", ri, len(ls), why)
			continue
		}
		var desc []string
		for _, l := range ls {
			desc = append(desc, fmt.Sprintf("%s validity %s", l, l.le.Validity()))
		}
		m.fail(lcExclusion, "two live leases on one resource", "r%d has %d live leases: %s", ri, len(ls), strings.Join(desc, "; "))
	}
}
