package engine_test

import (
	"context"
	"errors"
	"flag"
	"math/bits"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"pgregory.net/rapid"
)

// The loss notice as a stateful property: one holder's lease at a time (a
// lock, a lease on two resources, or a semaphore's permit) on five real
// masters (CLIENT TRACKING is Redis's), watched through Done, while random
// steps
// extend it, release it, send waiters of another Locker after it (who
// mark its value and queue, and are given the turn by its release),
// delete or overwrite its keys from outside on a minority of the
// masters, let time pass, or take its keys from a quorum. After every
// step:
//
//   - while a quorum of masters still holds every key of the lease
//     (outside writes reached fewer than N − quorum + 1 masters, counting
//     a master once whichever of its keys they hit), Done is open and Err
//     nil: neither the holder's own writes nor its waiters' nor a
//     minority's look like a loss;
//   - once the keys are gone from a quorum, Done closes within tpBound,
//     with Err ErrLockLost: the tracker's doing, since no extension and no
//     expiry comes that soon;
//   - a Release ends the lease with ErrReleased, not as a loss.
const (
	tpMasters = 5
	tpQuorum  = tpMasters/2 + 1
	// tpTTL and tpEvery: the lease auto-extends, but not within a run
	// (seconds) nor within tpBound of a loss, so that only the tracker
	// can end it that soon. Its own writes are the extend step's.
	tpTTL   = 10 * time.Minute
	tpEvery = 3 * time.Minute
	// tpBound: the tracker takes milliseconds; the bound fails only when
	// it does not come at all, long before any extension would.
	tpBound = 30 * time.Second
	// tpChecks: runs unless -rapid.checks says otherwise.
	tpChecks = 20
)

// TestTrackingProperty checks the property over -rapid.checks runs (20 by
// default here). Replay a failure with
//
//	go test -run 'TestTrackingProperty$' -rapid.seed=N ./engine/
//
// REDLOCK_MUTATION names a switch of internal/mutation to turn on:
//
//	REDLOCK_MUTATION=loss-noticed-late go test -run 'TestTrackingProperty$' ./engine/
//
// fails at the first quorum loss, after tpBound.
func TestTrackingProperty(t *testing.T) {
	mutation.Require(t)
	if name := os.Getenv("REDLOCK_MUTATION"); name != "" {
		sw := mutation.ByName(name)
		if sw == nil {
			t.Fatalf("REDLOCK_MUTATION=%s: no such switch", name)
		}
		defer sw.Set(true)()
	}
	e := newEnv(t, tpMasters)
	holder := e.locker(func(c *engine.Config) {
		c.TTL, c.ExtendEvery, c.AutoExtend = tpTTL, tpEvery, true
	})
	waiters := e.locker(func(c *engine.Config) {
		c.TTL = tpTTL
		c.DisableTracking = true
	})
	lcRapidDefaults(t)
	setRapidChecks(t, tpChecks)
	var run int
	rapid.Check(t, func(rt *rapid.T) {
		run++
		m := &tpMachine{e: e, a: holder, b: waiters, prefix: "tp:" + strconv.Itoa(run) + ":"}
		defer m.close(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"take":    m.take,
			"extend":  m.extend,
			"wait":    m.wait,
			"outside": m.outside,
			"lose":    m.lose,
			"release": m.release,
			"sleep":   m.sleep,
			"":        m.check,
		})
	})
}

// setRapidChecks sets -rapid.checks to n for the test, unless the user
// chose it.
func setRapidChecks(t *testing.T, n int) {
	if f := flag.Lookup("rapid.checks"); f != nil && !lcUserFlags()["rapid.checks"] {
		old := f.Value.String()
		f.Value.Set(strconv.Itoa(n))
		t.Cleanup(func() { f.Value.Set(old) })
	}
}

type tpMachine struct {
	e      *env
	a, b   *engine.Locker // the holder's (tracking) and the waiters'
	prefix string         // this run's resources

	le    *engine.Lease
	kind  string
	names []string // the lease's resources, or its semaphore's name
	keys  []string
	done  <-chan struct{}
	// gone: per key of the lease, the masters where another client
	// deleted or overwrote it.
	gone    map[string]uint64
	waiting sync.WaitGroup
}

// lost is the masters that no longer hold every key.
func (m *tpMachine) lost() uint64 {
	var u uint64
	for _, g := range m.gone {
		u |= g
	}
	return u
}

func (m *tpMachine) take(rt *rapid.T) {
	if m.le != nil {
		rt.Skip("a lease is held")
	}
	ctx := context.Background()
	m.kind = rapid.SampledFrom([]string{"lock", "multi", "permit"}).Draw(rt, "kind")
	// The waiters are gone and the keys deleted (outside writes, marks,
	// turn tokens, the last lease's where its release was not needed),
	// so that every master takes the lease, and outside writes alone
	// decide how many hold it.
	m.waiting.Wait()
	for _, key := range m.allKeys() {
		for i := range tpMasters {
			m.e.del(i, key)
		}
	}
	var err error
	switch m.kind {
	case "lock":
		m.names = []string{m.prefix + "r"}
		m.le, err = m.a.TryLock(ctx, m.names[0])
	case "multi":
		m.names = []string{m.prefix + "a", m.prefix + "b"}
		m.le, err = m.a.TryLockAll(ctx, m.names...)
	case "permit":
		m.names = []string{m.prefix + "s"}
		var sem *engine.Semaphore
		if sem, err = m.a.Semaphore(m.names[0], 1); err == nil {
			m.le, err = sem.TryAcquire(ctx)
		}
	}
	if err != nil {
		// A waiter of the other Locker took it between our leases.
		m.le = nil
		rt.Skip(err.Error())
	}
	m.done = m.le.Done()
	m.keys = engine.LeaseKeys(m.le)
	m.gone = map[string]uint64{}
	// A master where a late reply of the other Locker's undone attempts
	// kept the key counts as written from outside.
	for _, key := range m.keys {
		for i := range tpMasters {
			if !within(tpBound, func() bool { return ownValue(m.e.get(i, key), m.le.Value()) }) {
				m.gone[key] |= 1 << i
			}
		}
	}
}

// ownValue: v is value, marked by a waiter or not.
func ownValue(v, value string) bool { return v == value || v == value+"+" }

// allKeys are the keys of every kind of lease of the run.
func (m *tpMachine) allKeys() []string {
	e := m.e
	return []string{e.key(m.prefix + "r"), e.key(m.prefix + "a"), e.key(m.prefix + "b"), "\xffredlock:sem:" + e.prefix + "{" + m.prefix + "s}:0"}
}

func (m *tpMachine) extend(rt *rapid.T) {
	if m.le == nil {
		rt.Skip("no lease")
	}
	m.le.Extend(context.Background(), tpTTL) // a loss shows in check
}

// wait sends a waiter of the other Locker after the lease, in the
// background: its attempts mark the lease's value and queue it; a release
// meanwhile gives it the turn, and then the resource, which it gives back.
func (m *tpMachine) wait(rt *rapid.T) {
	if m.le == nil {
		rt.Skip("no lease")
	}
	d := time.Duration(rapid.IntRange(20, 300).Draw(rt, "ms")) * time.Millisecond
	name, kind := m.names[rapid.IntRange(0, len(m.names)-1).Draw(rt, "resource")], m.kind
	m.waiting.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		var le *engine.Lease
		var err error
		if kind == "permit" {
			var sem *engine.Semaphore
			if sem, err = m.b.Semaphore(name, 1); err == nil {
				le, err = sem.Acquire(ctx)
			}
		} else {
			le, err = m.b.Lock(ctx, name)
		}
		if err == nil {
			le.Release(context.Background())
		}
	})
}

// outside deletes or overwrites a key of the lease on one master, as long
// as a quorum still holds every key after it.
func (m *tpMachine) outside(rt *rapid.T) {
	if m.le == nil {
		rt.Skip("no lease")
	}
	key := rapid.SampledFrom(m.keys).Draw(rt, "key")
	i := rapid.IntRange(0, tpMasters-1).Draw(rt, "master")
	if bits.OnesCount64(m.lost()|1<<i) > tpMasters-tpQuorum {
		rt.Skip("that would take it from a quorum")
	}
	if rapid.Bool().Draw(rt, "overwrite") {
		m.e.set(i, key, "stranger")
	} else {
		m.e.del(i, key)
	}
	m.gone[key] |= 1 << i
}

// lose deletes a key of the lease from as many more masters as it takes
// to leave fewer than a quorum holding every key, and waits for Done.
func (m *tpMachine) lose(rt *rapid.T) {
	if m.le == nil {
		rt.Skip("no lease")
	}
	key := rapid.SampledFrom(m.keys).Draw(rt, "key")
	for i := 0; bits.OnesCount64(m.lost()) <= tpMasters-tpQuorum; i++ {
		if m.lost()&(1<<i) == 0 {
			m.e.del(i, key)
			m.gone[key] |= 1 << i
		}
	}
	select {
	case <-m.done:
	case <-time.After(tpBound):
		rt.Fatalf("%s: Done did not close within %s of its keys leaving masters %05b (Err %v)", m.kind, tpBound, m.lost(), m.le.Err())
	}
	if err := m.le.Err(); !errors.Is(err, engine.ErrLockLost) {
		rt.Fatalf("%s: lost on a quorum, Err %v, want ErrLockLost", m.kind, err)
	}
	m.le.Release(context.Background())
	m.le = nil
}

func (m *tpMachine) release(rt *rapid.T) {
	if m.le == nil {
		rt.Skip("no lease")
	}
	m.check(rt)
	m.le.Release(context.Background())
	if err := m.le.Err(); !errors.Is(err, engine.ErrReleased) {
		rt.Fatalf("%s: after Release, Err %v, want ErrReleased", m.kind, err)
	}
	m.le = nil
}

// sleep lets time pass, on real masters as it must: the waiters' Lock
// calls run out of time.
func (m *tpMachine) sleep(rt *rapid.T) {
	time.Sleep(time.Duration(rapid.IntRange(0, 400).Draw(rt, "ms")) * time.Millisecond)
}

// check: a lease that a quorum still holds has not ended.
func (m *tpMachine) check(rt *rapid.T) {
	if m.le == nil {
		return
	}
	select {
	case <-m.done:
		rt.Fatalf("%s: ended while masters %05b still hold every key (outside writes hit %05b): %v",
			m.kind, ^m.lost()&(1<<tpMasters-1), m.lost(), m.le.Err())
	default:
	}
	if err := m.le.Err(); err != nil {
		rt.Fatalf("%s: Err %v while a quorum holds it", m.kind, err)
	}
}

// close lets the last invalidations be read, checks once more, and ends
// the run: the lease released, the waiters returned.
func (m *tpMachine) close(rt *rapid.T) {
	defer m.waiting.Wait()
	if m.le == nil {
		return
	}
	// A loss would be read within milliseconds: let the tracker read
	// what the last steps changed before the last check (a sleep on real
	// masters; it can only miss a failure, not make one).
	time.Sleep(50 * time.Millisecond)
	defer m.le.Release(context.Background())
	if !rt.Failed() {
		m.check(rt)
	}
}
