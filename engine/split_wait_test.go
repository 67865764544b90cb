package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
)

// Waiters woken at once by a release may split the masters among their
// attempts so that none reaches a quorum: each is refused on a quorum by
// the others' entries and undoes its own. Nobody will publish (undos are
// silent), so a waiter must tell such a split from one holder and try
// again after a back-off, or the lock, free, waits for a fallback. These
// tests force the split: each waiter reaches each master through a gate
// that holds its commands back, and the gates open in the order that
// gives waiter 0 masters 0 and 1, waiter 1 master 2, waiter 2 masters 3
// and 4 (as the simulator's seed 1795691397 had it), then let every
// refusal in before any undo. The fallback is long (undoFallback); the
// waiters must all acquire within undoPrompt of the undos, a fraction of
// it, and none by a fallback. The read/write ones run in virtual time,
// where a control's window cannot be eaten by a loaded machine.
const (
	undoFallback = 30 * time.Second
	undoPrompt   = 6 * time.Second
)

// undoSplit is the masters each of the three waiters is admitted on in
// the forced split: 2, 1 and 2 of 5.
var undoSplit = [3][]int{{0, 1}, {2}, {3, 4}}

// gateProxy forwards a Locker's connections to one master; while shut,
// what the Locker sends toward the master is held back, in order, and
// open delivers it and lets the rest through. Replies and published
// messages always pass.
type gateProxy struct {
	*proxy
	mu    sync.Mutex
	shut  bool
	conns []*gatedConn
}

type gatedConn struct {
	server net.Conn
	held   []byte
}

func newGateProxy(e *env, target string) *gateProxy {
	e.t.Helper()
	g := &gateProxy{}
	g.proxy = startProxy(e, target, func(_ *proxy, c, s net.Conn) {
		gc := &gatedConn{server: s}
		g.mu.Lock()
		g.conns = append(g.conns, gc)
		g.mu.Unlock()
		go io.Copy(c, s)
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				g.mu.Lock()
				if g.shut {
					gc.held = append(gc.held, buf[:n]...)
				} else {
					s.Write(buf[:n])
				}
				g.mu.Unlock()
			}
			if err != nil {
				s.Close()
				return
			}
		}
	})
	return g
}

func (g *gateProxy) close() {
	g.mu.Lock()
	g.shut = true
	g.mu.Unlock()
}

// open delivers what the gate held and lets the rest through.
func (g *gateProxy) open() { g.deliver(false) }

// flush delivers what the gate held and goes on holding: commands sent
// from now on wait for open.
func (g *gateProxy) flush() { g.deliver(true) }

func (g *gateProxy) deliver(shut bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, gc := range g.conns {
		if len(gc.held) > 0 {
			gc.server.Write(gc.held)
			gc.held = nil
		}
	}
	g.shut = shut
}

// holding reports whether a connection holds commands back.
func (g *gateProxy) holding() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, gc := range g.conns {
		if len(gc.held) > 0 {
			return true
		}
	}
	return false
}

// gatedLocker is a Locker (mutate as for e.locker) that reaches each
// master through its own gate, returned in the masters' order.
func (e *env) gatedLocker(mutate func(*engine.Config)) (*engine.Locker, []*gateProxy) {
	var gates []*gateProxy
	for _, a := range e.addrs {
		gates = append(gates, newGateProxy(e, a))
	}
	return e.locker(func(c *engine.Config) {
		if mutate != nil {
			mutate(c)
		}
		c.Masters = nil
		for _, g := range gates {
			c.Masters = append(c.Masters, g.addr())
		}
	}), gates
}

// undoWakeConfig: a fallback far beyond the test, a node timeout that
// outlasts the gates' holds, so that only a notification wakes a waiter
// in time.
func undoWakeConfig(c *engine.Config) {
	c.TTL, c.MaxTTL = undoFallback, undoFallback
	c.Wait.FallbackMin, c.Wait.FallbackMax = undoFallback, undoFallback
	c.NodeTimeout = 5 * time.Second
	c.Fencing = false
}

// waited is one waiter's outcome.
type waited struct {
	who  int
	wait engine.WaitInfo
	err  error
}

// forceUndoSplit drives the three waiters' attempts, which the caller
// has let a release wake while every gate was shut (gates[w][i] is
// waiter w's gate to master i), into the split undoSplit: it opens each
// waiter's gates to its own masters and waits until landed says its
// entries are there, shuts them again, opens the rest (the refusals) and
// waits until every waiter's undo is held at its own gates. landed(i)
// reports whether master i holds exactly one waiter's entry. It returns
// once the undos are held: open releases them.
func forceUndoSplit(t *testing.T, gates [3][]*gateProxy, landed func(i int) bool) (open func()) {
	t.Helper()
	eventually(t, 5*time.Second, "every waiter's attempt held at each of its gates", func() bool {
		for _, gs := range gates {
			for _, g := range gs {
				if !g.holding() {
					return false
				}
			}
		}
		return true
	})
	own := func(w, i int) bool {
		for _, j := range undoSplit[w] {
			if j == i {
				return true
			}
		}
		return false
	}
	for w, ms := range undoSplit {
		for _, i := range ms {
			gates[w][i].open()
		}
	}
	eventually(t, 5*time.Second, "each master holds its one waiter's entry", func() bool {
		for i := range gates[0] {
			if !landed(i) {
				return false
			}
		}
		return true
	})
	for w, ms := range undoSplit {
		for _, i := range ms {
			gates[w][i].close()
		}
	}
	for w, gs := range gates {
		for i, g := range gs {
			if !own(w, i) {
				g.open()
			}
		}
	}
	// Refused on a quorum, each waiter decides and undoes its entries:
	// the undos wait at its own gates.
	eventually(t, 5*time.Second, "every waiter's undo held at its own gates", func() bool {
		for w, ms := range undoSplit {
			for _, i := range ms {
				if !gates[w][i].holding() {
					return false
				}
			}
		}
		return true
	})
	for i := range gates[0] {
		if !landed(i) {
			t.Fatalf("set-up: master %d lost its waiter's entry before the undos", i)
		}
	}
	return func() {
		for w, ms := range undoSplit {
			for _, i := range ms {
				gates[w][i].open()
			}
		}
	}
}

// collect gathers the three waiters' outcomes for undoPrompt after the
// undos went out, and reports how many acquired, each without a
// fallback; cancel ends the waits still under way.
func collect(t *testing.T, got <-chan waited, cancel func()) (acquired int) {
	t.Helper()
	timer := time.NewTimer(undoPrompt)
	defer timer.Stop()
	for n := 0; n < 3; n++ {
		select {
		case r := <-got:
			switch {
			case r.err != nil:
				t.Errorf("waiter %d: %v", r.who, r.err)
			case r.wait.Fallbacks != 0:
				t.Errorf("waiter %d acquired after a fallback: %+v", r.who, r.wait)
			default:
				t.Logf("waiter %d acquired: %+v", r.who, r.wait)
				acquired++
			}
		case <-timer.C:
			t.Logf("%d of 3 waiters acquired within %s of the undos (fallback %s)", acquired, undoPrompt, undoFallback)
			cancel()
			for ; n < 3; n++ {
				<-got
			}
			return acquired
		}
	}
	return acquired
}

// TestRWSplitWritersRetry: three writers, woken by a reader's release,
// split the masters 2, 1 and 2 and all undo; each was refused by two
// other writers, not one holder, so it backs off and tries again, and all
// three acquire, one after another, well before their fallback. The
// control turns on rw-split-waits-fallback: each takes the refusal for
// one holder's and sleeps on, the lock free.
func TestRWSplitWritersRetry(t *testing.T) {
	mutation.Require(t)
	for _, sleeps := range []bool{false, true} {
		t.Run(fmt.Sprintf("rw-split-waits-fallback=%v", sleeps), func(t *testing.T) {
			defer mutation.RWSplitWaitsFallback.Set(sleeps)()
			simTestWith(t, 5, steadyMasters, func(t *testing.T, e *env) {
				acquired := rwUndoSplit(t, e)
				switch {
				case sleeps && acquired != 0:
					t.Errorf("%d writers acquired though they take a split for a holder: the scenario cannot fail", acquired)
				case !sleeps && acquired != 3:
					t.Errorf("%d of 3 writers acquired within %s of the undos that freed the lock (fallback %s)", acquired, undoPrompt, undoFallback)
				}
			})
		})
	}
}

// TestRWBareQuorumHolderKeepsWritersQuiet: a writer holds the lock on
// exactly a quorum (masters 0 to 2) and three writers wait, woken at once
// by a publish on masters 3 and 4. Their attempts collide on those two
// masters, and each is refused on a quorum by the one holder: they sleep
// until its release or their fallback, a few attempts each. The control
// turns on rw-undo-wakes: each undo wakes the others, who collide again,
// for as long as the holder holds.
func TestRWBareQuorumHolderKeepsWritersQuiet(t *testing.T) {
	mutation.Require(t)
	for _, wakes := range []bool{false, true} {
		t.Run(fmt.Sprintf("rw-undo-wakes=%v", wakes), func(t *testing.T) {
			defer mutation.RWUndoWakes.Set(wakes)()
			// The control needs only to pass the bound, which a storm does
			// in a tenth of the window: hundreds of attempts each, which
			// cost the simulator seconds of CPU in the whole of it.
			window := stormFor
			if wakes {
				window = stormFor / 10
			}
			simTestWith(t, 5, steadyMasters, func(t *testing.T, e *env) {
				attempts := rwBareQuorumAttempts(t, e, window)
				t.Logf("attempts per writer in %s: %v", window, attempts)
				most := slices.Max(attempts)
				switch {
				case wakes && most <= stormBound:
					t.Errorf("attempts %v with the undos waking the waiters: the scenario cannot fail", attempts)
				case !wakes && most > stormBound:
					t.Errorf("attempts %v in %s while one writer held the lock on a bare quorum: want at most %d each", attempts, window, stormBound)
				}
			})
		})
	}
}

// The storm tests watch the waiters for stormFor; a quiet waiter makes
// its first attempt, the one that joins, and one per wake-up: at most
// stormBound.
const (
	stormFor   = 2 * time.Second
	stormBound = 10
)

// rwBareQuorumAttempts runs TestRWBareQuorumHolderKeepsWritersQuiet's
// scenario for window and returns each writer's attempts.
func rwBareQuorumAttempts(t *testing.T, e *env, window time.Duration) []int {
	const name = "bare-quorum"
	ctx := context.Background()
	live := strconv.FormatInt(-time.Now().Add(time.Minute).UnixMicro(), 10)
	for i := 0; i < 3; i++ {
		c := e.direct[i]
		if err := c.Do(ctx, c.B().Arbitrary("ZADD").Keys(e.key(name)).Args("0", "#rwlock", live, "holder").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	errs := make(chan error, 3)
	for range 3 {
		m := rwMutex(t, e.locker(undoWakeConfig), name)
		go func() {
			_, err := m.Lock(wctx)
			errs <- err
		}()
	}
	intents := "\xffredlock:rw:" + e.key(name)
	eventually(t, window/2, "three writers subscribed on every master", func() bool {
		for i := range e.direct {
			if e.subscribers(i, "redlock:released:"+intents) != 3 {
				return false
			}
		}
		return true
	})
	for i := 3; i < 5; i++ {
		c := e.direct[i]
		if err := c.Do(ctx, c.B().Publish().Channel("redlock:released:"+intents).Message("").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	var attempts []int
	for range 3 {
		err := <-errs
		var n int
		if i := strings.Index(fmt.Sprint(err), "gave up after "); err == nil || i < 0 {
			t.Fatalf("a writer's Lock while the holder held: %v", err)
		} else if _, serr := fmt.Sscanf(fmt.Sprint(err)[i:], "gave up after %d attempts", &n); serr != nil {
			t.Fatalf("attempts in %q: %v", err, serr)
		}
		attempts = append(attempts, n)
	}
	return attempts
}

// rwUndoSplit runs TestRWSplitWritersRetry's scenario and reports how
// many writers acquired without a fallback within undoPrompt.
func rwUndoSplit(t *testing.T, e *env) int {
	const name = "undo-split"
	ctx := context.Background()
	r, err := rwMutex(t, e.locker(undoWakeConfig), name).TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var gates [3][]*gateProxy
	got := make(chan waited, 3)
	for w := range gates {
		l, gs := e.gatedLocker(undoWakeConfig)
		gates[w] = gs
		m := rwMutex(t, l, name)
		go func() {
			le, err := m.Lock(wctx)
			if err != nil {
				got <- waited{who: w, err: err}
				return
			}
			got <- waited{who: w, wait: le.Wait()}
			le.Release(context.Background())
		}()
	}
	// The writers wait: each one's intent is on every master, and each
	// is subscribed there.
	awaitWriters(t, e, name, 3)
	// The reader's entry goes from masters 1 to 4 silently (as an
	// expiry does), so that its release publishes on master 0 alone:
	// each writer wakes once, and no late notification of it can wake
	// one again after the split.
	for i := 1; i < len(e.direct); i++ {
		c := e.direct[i]
		if err := c.Do(ctx, c.B().Zrem().Key(e.key(name)).Member(r.Value()).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for _, gs := range gates {
		for _, g := range gs {
			g.close()
		}
	}
	// The writers wake together, and their attempts wait at the gates.
	// (The release says the lease was not held: a minority had it.)
	r.Release(ctx)
	open := forceUndoSplit(t, gates, func(i int) bool {
		c := e.direct[i]
		// The lock's marker member and one writer's entry.
		n, err := c.Do(ctx, c.B().Zcard().Key(e.key(name)).Build()).AsInt64()
		return err == nil && n == 2
	})
	open()
	return collect(t, got, cancel)
}

// TestRWWonAttemptUndoWakesTheWriters: a fenced writer's attempt wins
// every master, and its fence round is held back while another writer
// tries, is refused by that one writer's entries, takes it for the
// holder and sleeps; then the fence round is refused (a higher counter
// on a quorum, as another writer's later token leaves it), and the
// attempt is undone. The undo frees the lock, and must wake the waiter as
// a release does. The control turns on rw-won-undo-silent: the undo
// publishes nothing, and the waiter sleeps on towards its 30 s fallback.
func TestRWWonAttemptUndoWakesTheWriters(t *testing.T) {
	mutation.Require(t)
	for _, silent := range []bool{false, true} {
		t.Run(fmt.Sprintf("rw-won-undo-silent=%v", silent), func(t *testing.T) {
			defer mutation.RWWonUndoSilent.Set(silent)()
			simTestWith(t, 5, steadyMasters, func(t *testing.T, e *env) {
				woken := rwWonUndo(t, e)
				switch {
				case silent && woken:
					t.Error("the waiter acquired though the undo was silent: the scenario cannot fail")
				case !silent && !woken:
					t.Errorf("the waiter did not acquire within %s of the undo that freed the lock (fallback %s)", undoPrompt, undoFallback)
				}
			})
		})
	}
}

// rwWonUndo runs TestRWWonAttemptUndoWakesTheWriters' scenario and
// reports whether the waiter acquired within undoPrompt of the undo,
// without a fallback.
func rwWonUndo(t *testing.T, e *env) bool {
	const name = "won-undo"
	ctx := context.Background()
	la, gates := e.gatedLocker(func(c *engine.Config) {
		undoWakeConfig(c)
		c.Fencing = true
	})
	// The scripts loaded on every master: each step below is one command
	// per master, not a NOSCRIPT and its EVAL.
	warm, err := rwMutex(t, la, name+"-warm").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	warm.Release(ctx)
	eventually(t, 5*time.Second, "the warm-up released on every master", func() bool {
		for _, c := range e.direct {
			if n, err := c.Do(ctx, c.B().Exists().Key(e.key(name+"-warm")).Build()).AsInt64(); err != nil || n != 0 {
				return false
			}
		}
		return true
	})
	for _, g := range gates {
		g.close()
	}
	failed := make(chan error, 1)
	go func() {
		le, err := rwMutex(t, la, name).TryLock(ctx)
		if err == nil {
			le.Release(ctx)
		}
		failed <- err
	}()
	eventually(t, 5*time.Second, "the attempt held at every gate", func() bool {
		for _, g := range gates {
			if !g.holding() {
				return false
			}
		}
		return true
	})
	for _, g := range gates {
		g.flush()
	}
	eventually(t, 5*time.Second, "the attempt's entry on every master, its fence round held at every gate", func() bool {
		for i, c := range e.direct {
			n, err := c.Do(ctx, c.B().Zcard().Key(e.key(name)).Build()).AsInt64()
			if err != nil || n != 2 || !gates[i].holding() {
				return false
			}
		}
		return true
	})
	lb := e.locker(undoWakeConfig)
	got := make(chan waited, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		le, err := rwMutex(t, lb, name).Lock(wctx)
		if err != nil {
			got <- waited{err: err}
			return
		}
		got <- waited{wait: le.Wait()}
		le.Release(ctx)
	}()
	awaitWriters(t, e, name, 1)
	for i := range 3 {
		c := e.direct[i]
		if err := c.Do(ctx, c.B().Set().Key(engine.FenceKey(e.key(name))).Value("9000000000000000000").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range gates {
		g.open()
	}
	if err := <-failed; !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("set-up: the attempt whose fence round met a higher counter: %v, want ErrNotAcquired", err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the waiter: %v", r.err)
		}
		t.Logf("the waiter acquired: %+v", r.wait)
		return r.wait.Fallbacks == 0
	case <-time.After(undoPrompt):
		return false
	}
}

// awaitWriters waits until n writers wait for the lock name: their
// intents on every master, each subscribed there.
func awaitWriters(t *testing.T, e *env, name string, n int64) {
	t.Helper()
	intents := "\xffredlock:rw:" + e.key(name)
	eventually(t, 5*time.Second, fmt.Sprintf("%d writers' intents on every master, each subscribed", n), func() bool {
		for i, c := range e.direct {
			k, err := c.Do(context.Background(), c.B().Zcard().Key(intents).Build()).AsInt64()
			if err != nil || k != n || e.subscribers(i, "redlock:released:"+intents) != n {
				return false
			}
		}
		return true
	})
}
