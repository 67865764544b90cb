package engine_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"pgregory.net/rapid"
)

// The semaphore's safety, as a stateful property: three Lockers on five
// real masters (two of them fencing, one auto-extending), two semaphores of 1 to 3 permits, and random sequences of
// TryAcquire, Acquire (in a goroutine, so that waiters queue and are
// woken), Release, Extend, time passing, masters paused (their votes late,
// their keys kept), killed and restarted (their keys forgotten: the
// quarantine's case), and slot keys lost on one or two masters. After
// every step the permits in hand must obey:
//
//   - at most P live permits (Err nil, Validity > 0) per semaphore, and
//     never two live in one slot, unless one of them lost its keys beyond
//     the fault model (fewer than a quorum of masters kept them for its
//     validity, see spMachine.lose);
//   - fencing: a permit acquired after another of the same slot returned
//     has a larger token;
//   - a permit's slot is in [0, P), and a released permit has ended.
const (
	spMasters = 5
	spQuorum  = spMasters/2 + 1
	spTTL     = 500 * time.Millisecond
	spSems    = 2
	spChecks  = 20
)

// TestSemaphorePermits checks the property over -rapid.checks runs (20 by
// default here) of about -rapid.steps actions each. Replay a failure with
//
//	go test -run 'TestSemaphorePermits$' -rapid.seed=N ./engine/
//
// REDLOCK_MUTATION names a switch of internal/mutation to turn on, to see
// the property fail without the guard it undoes:
//
//	REDLOCK_MUTATION=semaphore-split-vote go test -run 'TestSemaphorePermits$' ./engine/
func TestSemaphorePermits(t *testing.T) {
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
	if f := flag.Lookup("rapid.checks"); f != nil && !lcUserFlags()["rapid.checks"] {
		old := f.Value.String()
		f.Value.Set(strconv.Itoa(spChecks))
		t.Cleanup(func() { f.Value.Set(old) })
	}
	rapid.Check(t, func(rt *rapid.T) {
		m := newSpMachine(rt, e, spMain, nil)
		defer m.close()
		rt.Repeat(m.actions())
	})
}

// spMain draws every action; TryAcquire, Acquire and Release twice as
// often as the rest, so that the semaphores fill and empty.
var spMain = spOptions{actions: []string{"try", "try", "acquire", "acquire", "release", "release", "extend", "sleep",
	"pause", "resume", "restart", "delete"}}

// spControl narrows the machine to what splits a slot vote: two permits,
// attempts and keys lost on two masters. Fencing is off: its round, which
// raises the slot's counters only where the slot holds the permit, on a
// quorum, refuses a permit won on a split vote even with the check under
// test off.
var spControl = spOptions{permits: 2, deleteOn: 2, noFencing: true, actions: []string{"try", "delete"}}

// TestSemaphorePermitsControl is the control: with a permit granted on a
// quorum of yes votes whatever slot each master took
// (mutation.SemaphoreSplitVote, a count of free permits per master), the
// machine must see more live permits than permits, or two in one slot. It
// is narrowed to what splits a slot vote (see spControl), collects
// violations instead of failing, and runs on fixed seeds (rapid's
// Example) against simulated masters in virtual time: a step takes no
// time there, so no permit expires between the steps that split a vote,
// as it could on a loaded machine, and each seed's run is the same every
// time. The first seeds meet the violation; spControlSeeds leaves room for
// a change of the engine's draws. TestSemaphoreRefusesASplitSlotVoteControl
// is its deterministic twin on real masters.
func TestSemaphorePermitsControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.SemaphoreSplitVote.Set(true)()
	simTest(t, spMasters, func(t *testing.T, se *env) {
		e := &lcEnv{env: se, restarted: map[int]time.Time{}}
		steps := 0
		for seed := 1; seed <= spControlSeeds; seed++ {
			var found []lcViolation
			rapid.Custom(func(rt *rapid.T) bool {
				m := newSpMachine(rt, e, spControl, &found)
				defer m.close()
				rt.Repeat(m.actions())
				steps += m.steps
				return true
			}).Example(seed)
			for _, v := range found {
				if v.kind == spTooMany || v.kind == spShared {
					t.Logf("seed %d: %s: %s", seed, v.kind, v.msg)
					return
				}
			}
			for _, v := range found {
				t.Logf("seed %d, other violation: %s: %s", seed, v.kind, v.msg)
			}
		}
		t.Fatalf("no excess permit seen in %d seeds (%d steps) with split slot votes accepted: the property cannot fail", spControlSeeds, steps)
	})
}

// spControlSeeds is how many seeds the control runs at most.
const spControlSeeds = 10

// Violation kinds.
const (
	spTooMany = "more live permits than permits"
	spShared  = "two live permits in one slot"
	spFencing = "a permit acquired after another of its slot returned has no larger token"
	spRange   = "a permit's slot is outside the semaphore's"
	spRelease = "a released permit has not ended"
)

type spOptions struct {
	permits   int      // every semaphore's count; 0 draws 1..3 per run
	deleteOn  int      // masters a delete hits; 0 draws 1 or 2
	noFencing bool     // no Locker fences (by default L0 and L1 do)
	actions   []string // as lcOptions.actions
}

type spPermit struct {
	id         int
	le         *engine.Lease
	locker     int
	sem        int
	via        string
	begin, end time.Time
	released   bool
}

func (p *spPermit) String() string {
	return fmt.Sprintf("permit#%d(L%d s%d slot %d %s value %.6s token %d)", p.id, p.locker, p.sem, p.le.Permit(), p.via, p.le.Value(), p.le.Token())
}

type spWaiter struct {
	id          int
	locker, sem int
	cancel      context.CancelFunc
	called      time.Time
	returned    atomic.Bool
}

type spResult struct {
	w   *spWaiter
	le  *engine.Lease
	err error
	at  time.Time
}

// spMachine is the state machine of one rapid run.
type spMachine struct {
	rt      *rapid.T
	e       *lcEnv
	lockers []*engine.Locker
	sems    [][]*engine.Semaphore // [locker][semaphore]
	names   []string
	permits []int
	held    []*spPermit
	waiters []*spWaiter
	results chan spResult
	wg      sync.WaitGroup
	paused  map[int]bool
	// compromised: values whose keys were lost until fewer than a quorum
	// of masters held them for the permit's validity: beyond the model.
	compromised map[string]string
	opts        spOptions
	nextID      int
	steps       int
	maxStep     int
	collect     *[]lcViolation
	failed      bool
}

var spRun atomic.Int64

func newSpMachine(rt *rapid.T, e *lcEnv, opts spOptions, collect *[]lcViolation) *spMachine {
	run := spRun.Add(1)
	if err := e.flushAll(); err != nil {
		rt.Fatalf("FLUSHALL: %v", err)
	}
	m := &spMachine{rt: rt, e: e, opts: opts, collect: collect, paused: map[int]bool{}, compromised: map[string]string{}, maxStep: 60}
	if f := flag.Lookup("rapid.steps"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			m.maxStep = 2 * n
		}
	}
	m.results = make(chan spResult, m.maxStep)
	for k := 0; k < spSems; k++ {
		m.names = append(m.names, fmt.Sprintf("sem-%d-s%d", run, k))
		p := opts.permits
		if p == 0 {
			p = rapid.IntRange(1, 3).Draw(rt, fmt.Sprintf("permits of s%d", k))
		}
		m.permits = append(m.permits, p)
	}
	// In virtual time the Lockers' random delays come from the run's
	// draws too, so that a seed replays the run.
	seed := uint64(0)
	if e.env.sim != nil {
		seed = rapid.Uint64().Draw(rt, "lockers' seed")
	}
	for li := 0; li < 3; li++ {
		c := e.config()
		if e.env.sim != nil {
			c.Wait.Rand = rand.New(rand.NewPCG(seed, uint64(li)))
		}
		c.TTL, c.MaxTTL = spTTL, spTTL
		c.Quarantine = engine.QuarantineAlways
		c.Fencing = li < 2 && !opts.noFencing
		c.Wait.RetryDelayMin, c.Wait.RetryDelayMax = 2*time.Millisecond, 20*time.Millisecond
		c.Wait.FallbackMin, c.Wait.FallbackMax = 10*time.Millisecond, 60*time.Millisecond
		if li == 0 {
			c.AutoExtend, c.ExtendEvery = true, 150*time.Millisecond
		}
		l, err := newPropLocker(c)
		if err != nil {
			m.close()
			rt.Fatalf("engine.New: %v", err)
		}
		m.lockers = append(m.lockers, l)
		var sems []*engine.Semaphore
		for k, name := range m.names {
			s, err := l.Semaphore(name, m.permits[k])
			if err != nil {
				m.close()
				rt.Fatal(err)
			}
			sems = append(sems, s)
		}
		m.sems = append(m.sems, sems)
	}
	rt.Logf("semaphores %v with %v permits", m.names, m.permits)
	return m
}

// close ends the run: masters resumed, no waiter left, every permit
// released, the Lockers closed. It checks nothing.
func (m *spMachine) close() {
	for i := range m.paused {
		m.e.nodeResume(i)
	}
	via := map[string]int{}
	for _, p := range m.held {
		via[p.via]++
	}
	m.rt.Logf("run: %d steps, permits %v, %d values compromised", m.steps, via, len(m.compromised))
	for _, w := range m.waiters {
		w.cancel()
	}
	m.wg.Wait()
	for len(m.results) > 0 {
		if r := <-m.results; r.le != nil {
			m.held = append(m.held, &spPermit{le: r.le})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, p := range m.held {
		if !p.released {
			p.le.Release(ctx)
		}
	}
	for _, l := range m.lockers {
		l.Close()
	}
}

// fail reports a violation of kind, which stays the same from one replay
// to the next (rapid shrinks only while the message does not change), with
// this occurrence's details in the log.
func (m *spMachine) fail(kind, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	m.rt.Logf("VIOLATION %s: %s", kind, detail)
	if m.collect == nil {
		m.rt.Fatalf("%s (details in the log above)", kind)
	}
	*m.collect = append(*m.collect, lcViolation{kind, detail})
	m.failed = true
}

func (m *spMachine) actions() map[string]func(*rapid.T) {
	step := func(f func(*rapid.T)) func(*rapid.T) {
		return func(rt *rapid.T) {
			if m.steps >= m.maxStep || m.failed {
				return
			}
			m.steps++
			f(rt)
		}
	}
	all := map[string]func(*rapid.T){
		"try": step(m.try), "acquire": step(m.acquire), "release": step(m.release), "extend": step(m.extend),
		"sleep": step(m.sleep), "pause": step(m.pause), "resume": step(m.resume), "restart": step(m.restart),
		"delete": step(m.delete),
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

func (m *spMachine) id() int {
	m.nextID++
	return m.nextID
}

// unreleased returns the permits not released yet.
func (m *spMachine) unreleased() []*spPermit {
	var out []*spPermit
	for _, p := range m.held {
		if !p.released {
			out = append(out, p)
		}
	}
	return out
}

func (m *spMachine) try(rt *rapid.T) {
	li := rapid.IntRange(0, len(m.lockers)-1).Draw(rt, "locker")
	k := rapid.IntRange(0, spSems-1).Draw(rt, "semaphore")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	begin := time.Now()
	le, err := m.sems[li][k].TryAcquire(ctx)
	end := time.Now()
	if err != nil {
		rt.Logf("TryAcquire L%d s%d: %v", li, k, err)
		return
	}
	p := &spPermit{id: m.id(), le: le, locker: li, sem: k, via: "try", begin: begin, end: end}
	rt.Logf("TryAcquire L%d s%d: %s", li, k, p)
	m.add(p)
}

func (m *spMachine) acquire(rt *rapid.T) {
	li := rapid.IntRange(0, len(m.lockers)-1).Draw(rt, "locker")
	k := rapid.IntRange(0, spSems-1).Draw(rt, "semaphore")
	timeout := rapid.SampledFrom([]time.Duration{200 * time.Millisecond, time.Second, 2 * time.Second}).Draw(rt, "timeout")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	w := &spWaiter{id: m.id(), locker: li, sem: k, cancel: cancel, called: time.Now()}
	m.waiters = append(m.waiters, w)
	rt.Logf("Acquire#%d L%d s%d timeout %s: started", w.id, li, k, timeout)
	s := m.sems[li][k]
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		le, err := s.Acquire(ctx)
		w.returned.Store(true)
		m.results <- spResult{w: w, le: le, err: err, at: time.Now()}
	}()
	// Let it make its first attempts, so that the next step meets it
	// waiting or holding.
	for deadline := time.Now().Add(20 * time.Millisecond); time.Now().Before(deadline) && !w.returned.Load(); {
		time.Sleep(time.Millisecond)
	}
}

func (m *spMachine) release(rt *rapid.T) {
	held := m.unreleased()
	if len(held) == 0 {
		rt.Skip("no permit to release")
	}
	p := held[rapid.IntRange(0, len(held)-1).Draw(rt, "permit")]
	p.released = true
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err := p.le.Release(ctx)
	cancel()
	rt.Logf("Release %s: %v", p, err)
	if p.le.Err() == nil || p.le.Validity() != 0 || !isClosed(p.le.Done()) {
		m.fail(spRelease, "%s: Err %v, Validity %s", p, p.le.Err(), p.le.Validity())
	}
}

func (m *spMachine) extend(rt *rapid.T) {
	held := m.unreleased()
	if len(held) == 0 {
		rt.Skip("no permit to extend")
	}
	p := held[rapid.IntRange(0, len(held)-1).Draw(rt, "permit")]
	ttl := time.Duration(rapid.IntRange(50, int(spTTL/time.Millisecond)).Draw(rt, "ttl ms")) * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err := p.le.Extend(ctx, ttl)
	cancel()
	rt.Logf("Extend %s by %s: %v", p, ttl, err)
}

func (m *spMachine) sleep(rt *rapid.T) {
	d := rapid.SampledFrom([]time.Duration{5 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond, spTTL + 100*time.Millisecond}).Draw(rt, "sleep")
	rt.Logf("sleep %s", d)
	time.Sleep(d)
}

// out is the number of masters paused or restarted lately (kept out of
// the vote by their quarantine).
func (m *spMachine) out() int {
	n := len(m.paused)
	for i, at := range m.e.restarted {
		if time.Since(at) < 2*time.Second && !m.paused[i] {
			n++
		}
	}
	return n
}

// pause stops a master (SIGSTOP): its votes come late, its keys stay. At
// most two masters are out at once, so that a quorum remains.
func (m *spMachine) pause(rt *rapid.T) {
	i := rapid.IntRange(0, spMasters-1).Draw(rt, "master")
	if m.paused[i] || m.out() >= 2 {
		rt.Logf("pause master %d: skipped", i)
		return
	}
	if err := m.e.nodePause(i); err != nil {
		rt.Fatalf("pause master %d: %v", i, err)
	}
	m.paused[i] = true
	rt.Logf("pause master %d", i)
}

func (m *spMachine) resume(rt *rapid.T) {
	if len(m.paused) == 0 {
		rt.Skip("no master paused")
	}
	var ps []int
	for i := range m.paused {
		ps = append(ps, i)
	}
	sort.Ints(ps)
	i := ps[rapid.IntRange(0, len(ps)-1).Draw(rt, "paused master")]
	if err := m.e.nodeResume(i); err != nil {
		rt.Fatalf("resume master %d: %v", i, err)
	}
	delete(m.paused, i)
	rt.Logf("resume master %d", i)
}

// restart kills a master and starts it again without persistence: it
// forgets every slot and counter, and the Lockers keep it out of the vote
// for MaxTTL.
func (m *spMachine) restart(rt *rapid.T) {
	i := rapid.IntRange(0, spMasters-1).Draw(rt, "master")
	young := false
	if at, ok := m.e.restarted[i]; ok && time.Since(at) < 2*time.Second {
		young = true
	}
	if m.paused[i] || (!young && m.out() >= 2) {
		rt.Logf("restart master %d: skipped", i)
		return
	}
	if err := m.e.nodeRestart(i); err != nil {
		rt.Fatalf("restart master %d: %v", i, err)
	}
	m.e.restarted[i] = time.Now()
	rt.Logf("restart master %d", i)
}

// delete loses a live permit's slot key on one or two of the masters that
// hold it, as a master that forgets or an operator would, leaving it on a
// quorum: in the model, but the masters no longer agree on which slots
// are free, which is where counting permits per master goes wrong.
func (m *spMachine) delete(rt *rapid.T) {
	m.collectResults()
	var live []*spPermit
	for _, p := range m.unreleased() {
		if p.le.Err() == nil && p.le.Validity() > 0 && m.outOfModel(p) == "" {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		rt.Skip("no live permit")
	}
	p := live[rapid.IntRange(0, len(live)-1).Draw(rt, "permit")]
	key := slotKey(m.names[p.sem], p.le.Permit())
	var holders []int
	for _, i := range rapid.Permutation([]int{0, 1, 2, 3, 4}).Draw(rt, "order") {
		if !m.paused[i] && strings.TrimSuffix(m.direct(i, "GET", key), "+") == p.le.Value() {
			holders = append(holders, i)
		}
	}
	spare := len(holders) - spQuorum
	if spare <= 0 {
		rt.Logf("delete %s: skipped, held by %d masters", p, len(holders))
		return
	}
	n := m.opts.deleteOn
	if n == 0 {
		n = rapid.IntRange(1, 2).Draw(rt, "masters")
	}
	n = min(n, spare)
	for _, i := range holders[:n] {
		m.direct(i, "DEL", key)
	}
	rt.Logf("delete %s on masters %v", p, holders[:n])
	m.lose(p.le.Value(), key)
}

// lose marks value v compromised if fewer than a quorum of masters (that
// answer) still hold it in key for its permit's validity: then another
// holder may win the slot, which no Redlock can prevent.
func (m *spMachine) lose(v, key string) {
	now := time.Now()
	validUntil := now.Add(spTTL)
	for _, p := range m.held {
		if u := p.le.ValidUntil(); p.le.Value() == v && u.After(now) {
			validUntil = u
		}
	}
	held := 0
	for i := 0; i < spMasters; i++ {
		if m.paused[i] {
			continue
		}
		before := time.Now()
		if strings.TrimSuffix(m.direct(i, "GET", key), "+") != v {
			continue
		}
		ms, _ := strconv.Atoi(m.direct(i, "PTTL", key))
		if before.Add(time.Duration(ms)*time.Millisecond - time.Millisecond).After(validUntil) {
			held++
		}
	}
	if held < spQuorum {
		why := fmt.Sprintf("held for its validity by %d masters after a delete", held)
		m.rt.Logf("value %.6s compromised: %s", v, why)
		m.compromised[v] = why
	}
}

// direct runs a command on master i through the test's own client; ""
// for nil. Integer replies are formatted.
func (m *spMachine) direct(i int, args ...string) string {
	c := m.e.direct[i]
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		res := c.Do(ctx, c.B().Arbitrary(args...).Build())
		cancel()
		if msg, merr := res.ToMessage(); merr == nil && msg.IsInt64() {
			n, _ := msg.ToInt64()
			return strconv.FormatInt(n, 10)
		}
		var v string
		v, err = res.ToString()
		if rueidis.IsRedisNil(err) {
			return ""
		}
		if err == nil {
			return v
		}
		// A restarted master's connection is being dialled again.
		time.Sleep(20 * time.Millisecond)
	}
	m.rt.Fatalf("master %d: %s: %v", i, args[0], err)
	return ""
}

func (m *spMachine) collectResults() {
	for {
		select {
		case r := <-m.results:
			w := r.w
			if r.err != nil {
				m.rt.Logf("Acquire#%d L%d s%d: %v", w.id, w.locker, w.sem, r.err)
				continue
			}
			p := &spPermit{id: m.id(), le: r.le, locker: w.locker, sem: w.sem, via: "acquire", begin: w.called, end: r.at}
			m.rt.Logf("Acquire#%d L%d s%d: %s (%+v)", w.id, w.locker, w.sem, p, r.le.Wait())
			m.add(p)
		default:
			return
		}
	}
}

// add records a new permit after checking its slot and its token
// against every permit of the same slot acquired before it began.
func (m *spMachine) add(b *spPermit) {
	if s := b.le.Permit(); s < 0 || s >= m.permits[b.sem] {
		m.fail(spRange, "%s of %d permits", b, m.permits[b.sem])
	}
	for _, a := range m.held {
		// Token 0: that Locker does not fence.
		if a.sem != b.sem || a.le.Permit() != b.le.Permit() || !a.end.Before(b.begin) || a.le.Token() == 0 || b.le.Token() == 0 || a.le.Token() < b.le.Token() {
			continue
		}
		if m.outOfModel(a, b) != "" {
			continue
		}
		m.fail(spFencing, "%s was acquired %s after %s returned", b, b.begin.Sub(a.end), a)
	}
	m.held = append(m.held, b)
}

func (m *spMachine) outOfModel(ps ...*spPermit) string {
	for _, p := range ps {
		if why, ok := m.compromised[p.le.Value()]; ok {
			return fmt.Sprintf(" (%s was compromised: %s)", p, why)
		}
	}
	return ""
}

// check runs after every step.
func (m *spMachine) check(rt *rapid.T) {
	m.collectResults()
	for k := range m.names {
		var live []*spPermit
		trusted := 0
		for _, p := range m.held {
			if p.sem != k || p.le.Err() != nil || p.le.Validity() <= 0 {
				continue
			}
			live = append(live, p)
			if m.outOfModel(p) == "" {
				trusted++
			}
		}
		var desc []string
		for _, p := range live {
			desc = append(desc, fmt.Sprintf("%s validity %s%s", p, p.le.Validity(), m.outOfModel(p)))
		}
		if trusted > m.permits[k] {
			m.fail(spTooMany, "s%d has %d permits and %d live: %s", k, m.permits[k], len(live), strings.Join(desc, "; "))
		}
		for i, a := range live {
			for _, b := range live[i+1:] {
				if a.le.Permit() == b.le.Permit() && m.outOfModel(a, b) == "" {
					m.fail(spShared, "s%d: %s and %s", k, a, b)
				}
			}
		}
	}
}
