package engine_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
)

// setNames sets, in one pipeline per master, the lock key of name(i) for
// i in [0, n) on the masters whose bit is set in on(i).
func (e *env) setNames(n int, name func(int) string, on func(int) uint) {
	e.t.Helper()
	ctx := context.Background()
	for m, c := range e.direct {
		var cmds rueidis.Commands
		for i := range n {
			if on(i)&(1<<m) != 0 {
				cmds = append(cmds, c.B().Set().Key(e.key(name(i))).Value("v").Build())
			}
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				e.t.Fatalf("SET on master %d: %v", m, err)
			}
		}
	}
}

// maxOf keeps the largest value it is given, for Walk's pending count.
type maxOf struct{ v atomic.Int64 }

func (p *maxOf) see(n int) {
	for {
		old := p.v.Load()
		if int64(n) <= old || p.v.CompareAndSwap(old, int64(n)) {
			return
		}
	}
}

// TestWalkQuorumOnce: on five masters, a name of each of the 32 sets of
// masters that may hold it, many times over: Walk yields each name that
// three or more hold exactly once, vouched for by a quorum of them, and
// none that two or fewer hold; a semaphore (slots on several masters)
// once. Its batches are small, and the keys and names it holds at once
// stay within two SCAN answers per walked master and one being yielded,
// far fewer than the names: memory does not grow with the keyspace.
func TestWalkQuorumOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	ctx := context.Background()
	l := e.locker(patient)
	const batch, perSet = 8, 40
	var peak maxOf
	l.SetListBatch(batch, peak.see)
	name := func(i int) string { return fmt.Sprintf("w:%02d:%03d", i%32, i/32) }
	set := func(i int) uint { return uint(i % 32) }
	e.setNames(32*perSet, name, set)
	s, err := l.Semaphore("w:sem", 4)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.TryAcquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for n, err := range l.Walk(ctx, "w:") {
		if err != nil {
			t.Fatal(err)
		}
		seen[n.Name]++
		if n.Name == "w:sem" {
			if n.Masters < 3 {
				t.Errorf("%q on %d masters", n.Name, n.Masters)
			}
			continue
		}
		i, _ := strconv.Atoi(n.Name[2:4])
		if on := popcount(uint(i)); n.Masters < 3 || n.Masters > on {
			t.Errorf("%q vouched for by %d masters, want 3 to %d", n.Name, n.Masters, on)
		}
	}
	want := 1
	for i := range 32 * perSet {
		if popcount(set(i)) >= 3 {
			want++
			if seen[name(i)] != 1 {
				t.Errorf("%q (on masters %05b) yielded %d times, want once", name(i), set(i), seen[name(i)])
			}
		} else if seen[name(i)] != 0 {
			t.Errorf("%q (on masters %05b) yielded, on a minority", name(i), set(i))
		}
	}
	if seen["w:sem"] != 1 || len(seen) != want {
		t.Errorf("semaphore yielded %d times; %d names, want %d", seen["w:sem"], len(seen), want)
	}
	// Three masters walked (5 − 3 + 1) hold a SCAN answer each and the
	// names of the answer before it (against SCAN's repeats), and the
	// batch being yielded is one more. SCAN's COUNT stops at the first
	// bucket that reaches batch keys, so an answer is batch plus that
	// bucket's chain (less than 3·batch at Redis's load factor <= 1).
	bound := int64((2*3 + 1) * 4 * batch)
	if p := peak.v.Load(); p == 0 || p > bound {
		t.Errorf("Walk held up to %d keys and names at once, want 1 to %d (of %d names)", p, bound, 32*perSet)
	}
}

func popcount(x uint) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// TestWalkStopsEarly: breaking out of Walk at its first name stops the
// walk of the masters: the first walked master, whose every batch holds
// names to yield, answered no more SCAN calls than the two its walker
// makes before it waits to hand its second batch on, and the one it may
// have begun as the loop broke; a walk to the end takes hundreds.
func TestWalkStopsEarly(t *testing.T) {
	t.Parallel()
	e := ownEnv(t, 3)
	ctx := context.Background()
	l := e.locker(patient)
	l.SetListBatch(8, nil)
	const n = 5000
	e.setNames(n, func(i int) string { return "s:" + strconv.Itoa(i) }, func(int) uint { return 0b111 })
	for _, err := range l.Walk(ctx, "s:") {
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	if calls := scanCalls(t, e, 0); calls > 3 {
		t.Errorf("master 0 answered %d SCAN calls after a break at the first name, want at most 3", calls)
	}
	names, err := l.List(ctx, "s:", 3)
	if err != nil || len(names) != 3 || names[0] != "s:0" || names[1] != "s:1" || names[2] != "s:10" {
		t.Fatalf("List limit 3: %q, %v", names, err)
	}
	if calls := scanCalls(t, e, 0); calls < n/8 {
		t.Errorf("a walk to the end: %d SCAN calls on master 0, want at least %d", calls, n/8)
	}
}

var scanStat = regexp.MustCompile(`cmdstat_scan:calls=([0-9]+)`)

// scanCalls is how many SCAN calls master i answered.
func scanCalls(t *testing.T, e *env, i int) int {
	t.Helper()
	c := e.direct[i]
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	m := scanStat.FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestWalkMasterDown: with the first of three masters down, the walk
// takes the third in its place: names on the two others are yielded
// once, a name the dead master shared with one other is not (one
// answering master holds it) and the walk ends with ErrIncomplete, which
// names the dead master; with a second master down the walk fails with
// ErrNoQuorum.
func TestWalkMasterDown(t *testing.T) {
	t.Parallel()
	e := ownEnv(t, 3)
	ctx := context.Background()
	l := e.locker(patient)
	l.SetListBatch(8, nil)
	const n = 300
	name := func(i int) string { return "d:" + strconv.Itoa(i) }
	on := func(i int) uint { return []uint{0b011, 0b110, 0b101, 0b111}[i%4] }
	e.setNames(n, name, on)
	e.kill(0)
	seen := map[string]int{}
	var end error
	for x, err := range l.Walk(ctx, "d:") {
		if err != nil {
			end = err
			break
		}
		seen[x.Name]++
	}
	if !errors.Is(end, engine.ErrIncomplete) || !strings.Contains(end.Error(), e.addrs[0]) {
		t.Errorf("walk with master 0 down ended with %v, want ErrIncomplete naming %s", end, e.addrs[0])
	}
	for i := range n {
		want := 0
		if on(i)&0b110 == 0b110 {
			want = 1
		}
		if seen[name(i)] != want {
			t.Errorf("%q (on masters %03b, master 0 down) yielded %d times, want %d", name(i), on(i), seen[name(i)], want)
		}
	}
	e.kill(1)
	var err error
	for _, err = range l.Walk(ctx, "d:") {
		if err != nil {
			break
		}
	}
	if !errors.Is(err, engine.ErrNoQuorum) {
		t.Errorf("two of three masters down: %v, want ErrNoQuorum", err)
	}
}

// TestWalkRepeatedKeys: SCAN may answer a key again in the call after
// the one that answered it, when the master's key table shrank between
// the calls (Redis's SCAN guarantee: a key present throughout is
// returned at least once, maybe more). Each walked master's answers here
// repeat the previous call's keys (the worst such a shrink does, see
// Walk): Walk still yields each name once.
func TestWalkRepeatedKeys(t *testing.T) {
	t.Parallel()
	e := ownEnv(t, 3)
	ctx := context.Background()
	l := e.locker(patient)
	l.SetListBatch(8, nil)
	var mu sync.Mutex
	prev := map[int][]string{}
	l.SetListScan(func(m int, keys []string) []string {
		mu.Lock()
		defer mu.Unlock()
		repeated := append(slices.Clone(keys), prev[m]...)
		prev[m] = keys
		return repeated
	})
	const n = 300
	name := func(i int) string { return "k:" + strconv.Itoa(i) }
	on := func(i int) uint { return []uint{0b011, 0b110, 0b101, 0b111}[i%4] }
	e.setNames(n, name, on)
	seen := map[string]int{}
	for x, err := range l.Walk(ctx, "k:") {
		if err != nil {
			t.Fatal(err)
		}
		seen[x.Name]++
	}
	for i := range n {
		if seen[name(i)] != 1 {
			t.Errorf("%q (on masters %03b) yielded %d times, want once", name(i), on(i), seen[name(i)])
		}
	}
}

// TestWalkNameOfTwoKinds: a name held on a quorum both as a lock and as
// a semaphore is yielded once (by the walk of the lock keys), and a
// semaphore's name that is no lock's once too.
func TestWalkNameOfTwoKinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	ctx := context.Background()
	l := e.locker(patient)
	e.setNames(1, func(int) string { return "t:both" }, func(int) uint { return 0b111 })
	for _, name := range []string{"t:both", "t:sem"} {
		s, err := l.Semaphore(name, 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.TryAcquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for x, err := range l.Walk(ctx, "t:") {
		if err != nil {
			t.Fatal(err)
		}
		seen[x.Name]++
	}
	if seen["t:both"] != 1 || seen["t:sem"] != 1 || len(seen) != 2 {
		t.Errorf("yielded %v, want t:both and t:sem once each", seen)
	}
}

// TestWalkAskFailsOnce: one question to a walked master that fails (a
// timeout on a loaded master, say) costs the walk that batch's
// decision, not the master's part in the rest of the walk. Masters 0 and
// 1 are walked, and every name is on all three, so master 0 yields them
// all and master 1 leaves each to it, asking master 0; its second
// question to master 0 fails. Each name is yielded, and no more than
// one batch of them twice (master 1 yields the batch it could not
// settle); were master 0 taken for dead then, master 1 would yield
// every name of its later batches again.
func TestWalkAskFailsOnce(t *testing.T) {
	t.Parallel()
	e := ownEnv(t, 3)
	ctx := context.Background()
	l := e.locker(patient)
	const batch, n = 8, 300
	l.SetListBatch(batch, nil)
	var asked atomic.Int64
	l.SetListAsk(func(j int) error {
		if j == 0 && asked.Add(1) == 2 {
			return errors.New("injected: no answer")
		}
		return nil
	})
	name := func(i int) string { return "f:" + strconv.Itoa(i) }
	e.setNames(n, name, func(int) uint { return 0b111 })
	seen := map[string]int{}
	for x, err := range l.Walk(ctx, "f:") {
		if err != nil {
			t.Fatal(err)
		}
		seen[x.Name]++
	}
	twice := 0
	for i := range n {
		switch c := seen[name(i)]; {
		case c == 0 || c > 2:
			t.Errorf("%q yielded %d times, want once (twice if in the batch master 1 could not settle)", name(i), c)
		case c == 2:
			twice++
		}
	}
	// A SCAN answer is less than 3·batch keys (see TestWalkQuorumOnce).
	if twice > 3*batch || asked.Load() < 2 {
		t.Errorf("%d names yielded twice, want at most one batch's (%d); %d questions to master 0", twice, 3*batch, asked.Load())
	}
}

// TestWalkResume: a walk broken off every 37 names and resumed from the
// last name's cursor yields, over its pages, each name a quorum of three
// masters holds exactly once (the keys do not change meanwhile, so each
// master's SCAN gives the same batches again); a cursor of another
// prefix fails with ErrBadCursor.
func TestWalkResume(t *testing.T) {
	t.Parallel()
	e := ownEnv(t, 3)
	ctx := context.Background()
	l := e.locker(patient)
	l.SetListBatch(8, nil)
	const n, page = 800, 37
	name := func(i int) string { return "r:" + strconv.Itoa(i) }
	on := func(i int) uint { return uint(i%7) + 1 }
	e.setNames(n, name, on)
	seen := map[string]int{}
	cursor, pages := "", 0
	for {
		got, last := 0, ""
		for x, err := range l.WalkFrom(ctx, "r:", cursor) {
			if err != nil {
				t.Fatal(err)
			}
			seen[x.Name]++
			if got++; got == page {
				last = x.Cursor()
				break
			}
		}
		pages++
		if last == "" {
			break
		}
		cursor = last
	}
	want := 0
	for i := range n {
		if popcount(on(i)) >= 2 {
			want++
			if seen[name(i)] != 1 {
				t.Errorf("%q (on masters %03b) yielded %d times over the pages, want once", name(i), on(i), seen[name(i)])
			}
		} else if seen[name(i)] != 0 {
			t.Errorf("%q (on masters %03b) yielded, on a minority", name(i), on(i))
		}
	}
	if len(seen) != want || pages < want/page {
		t.Errorf("%d names in %d pages, want %d in %d or more", len(seen), pages, want, want/page)
	}
	for _, err := range l.WalkFrom(ctx, "other:", cursor) {
		if !errors.Is(err, engine.ErrBadCursor) {
			t.Errorf("a cursor of another prefix: %v, want ErrBadCursor", err)
		}
	}
}

// TestWalkAskedMasterFails: of three masters, 0 and 1 are walked and 2 is
// only asked. A question master 2 fails once is asked again, and every
// name a quorum holds is yielded; when it fails every time, the walk
// yields what the other two prove and ends with ErrIncomplete naming it,
// never silently short.
func TestWalkAskedMasterFails(t *testing.T) {
	t.Parallel()
	e := ownEnv(t, 3)
	ctx := context.Background()
	const n = 300
	name := func(i int) string { return "g:" + strconv.Itoa(i) }
	on := func(i int) uint { return []uint{0b011, 0b110, 0b101, 0b111}[i%4] }
	e.setNames(n, name, on)
	for _, always := range []bool{false, true} {
		l := e.locker(patient)
		l.SetListBatch(8, nil)
		var asked atomic.Int64
		l.SetListAsk(func(j int) error {
			if j == 2 && (always || asked.Add(1) == 1) {
				return errors.New("injected: no answer")
			}
			return nil
		})
		seen := map[string]int{}
		var end error
		for x, err := range l.Walk(ctx, "g:") {
			if err != nil {
				end = err
				break
			}
			seen[x.Name]++
		}
		switch {
		case !always && end != nil:
			t.Errorf("one failed question: the walk ended with %v", end)
		case always && (!errors.Is(end, engine.ErrIncomplete) || !strings.Contains(end.Error(), e.addrs[2])):
			t.Errorf("master 2 failing: the walk ended with %v, want ErrIncomplete naming %s", end, e.addrs[2])
		}
		for i := range n {
			want := 1
			if always && on(i)&0b011 != 0b011 {
				want = 0 // only master 2 could prove it
			}
			if seen[name(i)] != want {
				t.Errorf("always=%v: %q (on masters %03b) yielded %d times, want %d", always, name(i), on(i), seen[name(i)], want)
			}
		}
	}
}
