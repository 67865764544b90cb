package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// Listed is a name Walk found held on a quorum of the masters.
type Listed struct {
	// Name is the lock's, semaphore's or read/write lock's name, as it
	// was acquired: KeyPrefix and a cluster vote's slot tag taken off.
	Name string
	// Masters is how many masters held a key for it when Walk asked
	// them: at least a quorum.
	Masters int
}

// ListBatch is the COUNT Walk asks of each SCAN call, and the most names
// it asks a master about at once: how many keys a master looks at per
// call, which bounds how long one call holds it.
const ListBatch = 1000

// Walk yields, as it finds them, the names of the locks, semaphores and
// read/write locks whose key starts with KeyPrefix + prefix and that a
// quorum of the masters holds a key for: in the order the masters' SCAN
// returns them, not sorted. It walks the masters' keys with SCAN and
// MATCH, never KEYS, ListBatch keys per call, so that a master with
// millions of keys answers its other clients between calls; and it holds
// at most one batch per master it walks, plus the batch being yielded,
// whatever the number of keys. Breaking out of the loop stops the walk.
// The engine's internal keys (queues, fencing counters, marks) are
// skipped; a semaphore is one name. Glob characters (*?[\) in prefix are
// matched literally.
//
// A name held on a quorum throughout the walk is yielded, once; one
// taken or released meanwhile may or may not be. A name may be yielded
// twice when a master's key table shrinks during the walk (SCAN returns
// some keys twice then), or after a master failed and another took its
// place. The walk ends with an error yielded once: ErrNoQuorum when more
// than votes − quorum masters could not be walked, or ctx's.
//
// Cost: votes − quorum + 1 masters' keys are walked (any that many hold
// at least one key of each name on a quorum), and each batch of names
// found costs each other master one read-only script call over them.
func (l *Locker) Walk(ctx context.Context, prefix string) iter.Seq2[Listed, error] {
	return func(yield func(Listed, error) bool) {
		if l.closed.Load() {
			yield(Listed{}, fmt.Errorf("engine: list: %w", ErrClosed))
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := l.newWalk(prefix)
		out := make(chan []Listed)
		var err error
		go func() {
			err = w.run(ctx, out)
			close(out)
		}()
		stopped := false
		for b := range out {
			for _, n := range b {
				if !stopped && !yield(n, nil) {
					stopped = true
					cancel() // the walkers stop at their next call or send
				}
			}
			w.release(len(b))
		}
		if !stopped && err != nil {
			yield(Listed{}, err)
		}
	}
}

// Why Walk walks only votes − quorum + 1 masters and asks the others,
// rather than walking every master and counting. SCAN's order is each
// master's own (its hash table's, seeded at random at start), so a name
// one master returns first another may return last: counting reports
// per name would keep every name seen on some masters and not yet on
// the others, a set that grows with the keyspace, not with the batch,
// and a bound on it could only be kept by dropping names (missing them)
// or by walking again. Splitting the walk by key prefix, so that each
// part is merged before the next, does not help either: SCAN's MATCH
// filters after the walk, so each part costs a walk of every key.
// Instead: any votes − quorum + 1 masters hold a key of each name that a
// quorum holds, so walking those finds every such name; for each batch
// one read-only call per other master tells which of the batch's names
// it holds, so the count is known at once and nothing waits. A name
// found on walked master i is left to an earlier walked master that
// holds it too, whose own walk yields it: each name once.

// walk is one Walk's state, shared by its walkers.
type walk struct {
	l        *Locker
	prefix   string
	batch    int
	lockPat  string
	semPat   string
	walked   []atomic.Bool // master i's keys are (or were) walked
	dead     []atomic.Bool // master i failed a call: it holds nothing now
	pending  atomic.Int64  // keys read and names not yet yielded
	mu       sync.Mutex
	next     int // the master that takes a failed walked master's place
	failures []error
}

func (l *Locker) newWalk(prefix string) *walk {
	w := &walk{l: l, prefix: prefix, batch: ListBatch,
		walked: make([]atomic.Bool, l.votes), dead: make([]atomic.Bool, l.votes),
		next: l.votes - l.quorum + 1}
	if l.listBatch > 0 {
		w.batch = l.listBatch
	}
	w.lockPat = globEscape(l.cfg.KeyPrefix+prefix) + "*"
	w.semPat = globEscape(semPrefix+l.cfg.KeyPrefix+"{"+prefix) + "*"
	if l.clustered {
		w.lockPat = "*" + w.lockPat // a slot tag may come first (see key)
		w.semPat = globEscape(semPrefix) + "*"
	}
	for i := range w.next {
		w.walked[i].Store(true)
	}
	return w
}

// hold counts n more keys or names held, for the tests' bound.
func (w *walk) hold(n int) {
	p := w.pending.Add(int64(n))
	if w.l.listPending != nil {
		w.l.listPending(int(p))
	}
}

// release counts n keys or names let go.
func (w *walk) release(n int) { w.pending.Add(-int64(n)) }

// run walks votes − quorum + 1 masters at once, each sending its
// batches of names to out, until each has walked to the end.
func (w *walk) run(ctx context.Context, out chan<- []Listed) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Bool
	for m := range w.l.votes - w.l.quorum + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := w.walkMaster(ctx, m, out)
				if err == nil || ctx.Err() != nil {
					return
				}
				w.dead[m].Store(true)
				w.mu.Lock()
				w.failures = append(w.failures, fmt.Errorf("%s: %w", w.l.addrs[m], err))
				if w.next == w.l.votes {
					w.mu.Unlock()
					failed.Store(true)
					cancel()
					return
				}
				m = w.next
				w.next++
				w.walked[m].Store(true)
				w.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed.Load() {
		return errorf("list %q: %v: %d of %d masters could not be walked, %d may fail: %v", w.prefix, ErrNoQuorum,
			len(w.failures), w.l.votes, w.l.votes-w.l.quorum, errors.Join(w.failures...))
	}
	return context.Cause(ctx)
}

// walkMaster walks master m's lock keys, then its semaphores' slot keys,
// a batch at a time, and sends each batch's names that a quorum holds.
func (w *walk) walkMaster(ctx context.Context, m int, out chan<- []Listed) error {
	c := w.l.pool.Client(m)
	if c == nil {
		return errors.New("not connected")
	}
	for _, sem := range []bool{false, true} {
		pat := w.lockPat
		if sem {
			pat = w.semPat
		}
		err := scanNodes(ctx, c, pat, w.batch, func(keys []string) error {
			w.hold(len(keys))
			names, err := w.quorumOf(ctx, m, sem, keys)
			w.release(len(keys) - len(names))
			if err != nil || len(names) == 0 {
				return err
			}
			select {
			case out <- names:
				return nil
			case <-ctx.Done():
				w.release(len(names))
				return ctx.Err()
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// listCand is a name a batch of master m's keys holds.
type listCand struct {
	name string
	slot int // the semaphore slot its key is, −1 for a lock key
	held int // masters known to hold it
}

// quorumOf is the names of keys (from master m's walk; semaphores' slot
// keys when sem) that a quorum holds and that no earlier walked master
// holds, asking the other masters.
func (w *walk) quorumOf(ctx context.Context, m int, sem bool, keys []string) ([]Listed, error) {
	l := w.l
	cands := make([]listCand, 0, len(keys))
	for _, k := range keys {
		internal := strings.HasPrefix(k, internalPrefix)
		if internal != sem { // the lock pattern may match internal keys
			continue
		}
		n, ok := l.nameOf(k, w.prefix)
		if !ok {
			continue
		}
		c := listCand{name: n, slot: -1, held: 1}
		if sem {
			s, err := strconv.Atoi(k[len(l.semBase(n)):])
			if err != nil {
				continue
			}
			c.slot = s
		}
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		return nil, nil
	}
	// First, which names are this master's to yield: not held on an
	// earlier walked master, and, for a semaphore, found by its first
	// held slot and not also a lock here (each master's walk reports a
	// name once: the lock walk did).
	var asks []int
	for j := range m {
		if w.walked[j].Load() && !w.dead[j].Load() {
			asks = append(asks, j)
		}
	}
	if sem {
		asks = append(asks, m)
	}
	if len(asks) > 0 {
		keep, err := w.ask(ctx, m, asks, cands, func(j int, has bool) bool { return has == (j == m) })
		if err != nil {
			return nil, err
		}
		i := 0
		cands = slices.DeleteFunc(cands, func(listCand) bool { i++; return !keep[i-1] })
	}
	// Then count the others.
	asks = asks[:0]
	for j := range l.votes {
		if j != m && !(j < m && w.walked[j].Load()) && !w.dead[j].Load() {
			asks = append(asks, j)
		}
	}
	if len(cands) > 0 && len(asks) > 0 {
		if _, err := w.ask(ctx, m, asks, cands, nil); err != nil {
			return nil, err
		}
	}
	var names []Listed
	for _, c := range cands {
		if c.held >= l.quorum {
			names = append(names, Listed{Name: c.name, Masters: c.held})
		}
	}
	return names, nil
}

// ask asks each master in asks at once which of cands it holds. With
// keepIf nil, each holder adds to a candidate's held count; otherwise
// it returns which candidates every master's answer keeps. A master
// other than m that fails is dead for the rest of the walk (it holds
// nothing); m's failure is the walk's.
func (w *walk) ask(ctx context.Context, m int, asks []int, cands []listCand, keepIf func(j int, has bool) bool) ([]bool, error) {
	answers := make([][]bool, len(asks))
	errs := make([]error, len(asks))
	var wg sync.WaitGroup
	for a, j := range asks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slot := j == m // m is asked about its own keys' slots
			answers[a], errs[a] = w.holds(ctx, j, cands, slot)
			if errs[a] != nil && j != m {
				w.dead[j].Store(true)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var keep []bool
	if keepIf != nil {
		keep = make([]bool, len(cands))
		for i := range keep {
			keep[i] = true
		}
	}
	for a, j := range asks {
		if errs[a] != nil {
			if j == m {
				return nil, errs[a]
			}
			continue // dead: holds nothing
		}
		for i := range cands {
			has := answers[a][i]
			if keepIf == nil {
				if has {
					cands[i].held++
				}
			} else if !keepIf(j, has) {
				keep[i] = false
			}
		}
	}
	return keep, nil
}

// holdsScript answers, for each name, whether the master holds a key of
// it: KEYS are, per name, its lock key and its semaphore's permit-count
// key (whose name less "permits" is the slots' base); ARGV per name is
// −1, or the slot its key on this master was found as, and then the
// answer is whether that slot is the name's first key here (no lock key,
// no lower slot). It only reads, each name's few keys.
var holdsScript = rueidis.NewLuaScript(`local out = {}
for i = 1, #KEYS, 2 do
  local slot, r = tonumber(ARGV[(i + 1) / 2]), 0
  local base = string.sub(KEYS[i + 1], 1, -8)
  if slot < 0 then
    if redis.call("EXISTS", KEYS[i]) == 1 then
      r = 1
    else
      local n = redis.pcall("GET", KEYS[i + 1])
      n = type(n) == "string" and tonumber(n)
      for s = 0, (n or 0) - 1 do
        if redis.call("EXISTS", base .. s) == 1 then r = 1 break end
      end
    end
  else
    r = 1
    if redis.call("EXISTS", KEYS[i]) == 1 then r = 0 end
    for s = 0, slot - 1 do
      if r == 1 and redis.call("EXISTS", base .. s) == 1 then r = 0 end
    end
  end
  out[#out + 1] = r
end
return out`)

// holds runs holdsScript on master j for cands: in one call on a plain
// master, one per name on a cluster vote (whose names' keys are in
// different slots, each on its shard). With slot, it asks about each
// candidate's own slot (see holdsScript).
func (w *walk) holds(ctx context.Context, j int, cands []listCand, slot bool) ([]bool, error) {
	c := w.l.pool.Client(j)
	if c == nil {
		return nil, errors.New("not connected")
	}
	ctx, cancel := context.WithTimeout(ctx, w.l.cfg.NodeTimeout)
	defer cancel()
	keys := make([]string, 0, 2*len(cands))
	args := make([]string, 0, len(cands))
	for _, cd := range cands {
		keys = append(keys, w.l.key(cd.name), w.l.semBase(cd.name)+"permits")
		s := -1
		if slot {
			s = cd.slot
		}
		args = append(args, strconv.Itoa(s))
	}
	out := make([]bool, len(cands))
	if !w.l.clustered {
		res, err := holdsScript.Exec(ctx, c, keys, args).AsIntSlice()
		if err != nil {
			return nil, err
		}
		if len(res) != len(cands) {
			return nil, fmt.Errorf("list: %d answers for %d names", len(res), len(cands))
		}
		for i, r := range res {
			out[i] = r == 1
		}
		return out, nil
	}
	execs := make([]rueidis.LuaExec, len(cands))
	for i := range cands {
		execs[i] = rueidis.LuaExec{Keys: keys[2*i : 2*i+2], Args: args[i : i+1]}
	}
	for i, r := range holdsScript.ExecMulti(ctx, c, execs...) {
		res, err := r.AsIntSlice()
		if err != nil {
			return nil, err
		}
		out[i] = len(res) == 1 && res[0] == 1
	}
	return out, nil
}

// List returns up to limit names (limit <= 0: no limit) that Walk finds,
// sorted: the first limit of them in byte order. It walks to the end (a
// sorted list's first name may be found last), keeping at most about
// 2·limit names when limit > 0. It fails as Walk does.
func (l *Locker) List(ctx context.Context, prefix string, limit int) ([]string, error) {
	var names []string
	for n, err := range l.Walk(ctx, prefix) {
		if err != nil {
			return nil, err
		}
		names = append(names, n.Name)
		if limit > 0 && len(names) >= 2*limit {
			names = firstSorted(names, limit)
		}
	}
	return firstSorted(names, limit), nil
}

// firstSorted is the first limit (<= 0: all) of names, sorted and each
// once, in names' array.
func firstSorted(names []string, limit int) []string {
	slices.Sort(names)
	names = slices.Compact(names)
	if limit > 0 && len(names) > limit {
		clear(names[limit:])
		names = names[:limit]
	}
	return names
}

// scanNodes runs SCAN MATCH pat COUNT count to the end on every node
// that c reaches (one for a master; each primary for a cluster), calling
// f with each call's keys; f's error stops it.
func scanNodes(ctx context.Context, c rueidis.Client, pat string, count int, f func([]string) error) error {
	for _, n := range c.Nodes() {
		cursor := uint64(0)
		for {
			e, err := n.Do(ctx, n.B().Scan().Cursor(cursor).Match(pat).Count(int64(count)).Build()).AsScanEntry()
			if err != nil {
				if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
					return err
				}
				if strings.Contains(err.Error(), "READONLY") || strings.Contains(err.Error(), "MOVED") {
					break // a replica of a cluster: its primary is walked
				}
				return err
			}
			if err := f(e.Elements); err != nil {
				return err
			}
			cursor = e.Cursor
			if cursor == 0 {
				break
			}
		}
	}
	return nil
}

// nameOf is the name key belongs to, if it is a lock's, a read/write
// lock's or a semaphore slot's key under KeyPrefix + prefix.
func (l *Locker) nameOf(key, prefix string) (string, bool) {
	kp := l.cfg.KeyPrefix
	if strings.HasPrefix(key, internalPrefix) {
		rest, ok := strings.CutPrefix(key, semPrefix)
		if !ok {
			return "", false
		}
		if l.clustered && strings.HasPrefix(rest, "{") {
			rest = rest[strings.IndexByte(rest, '}')+1:]
		}
		rest, ok = strings.CutPrefix(rest, kp+"{")
		if !ok {
			return "", false
		}
		j := strings.LastIndex(rest, "}:")
		if j < 0 || rest[j+2:] == "permits" || !strings.HasPrefix(rest[:j], prefix) {
			return "", false
		}
		return rest[:j], true
	}
	k := key
	if l.clustered && strings.HasPrefix(k, "{") {
		if j := strings.IndexByte(k, '}'); j > 0 {
			if n, ok := strings.CutPrefix(k[j+1:], kp); ok && l.key(n) == key {
				k = k[j+1:]
			}
		}
	}
	n, ok := strings.CutPrefix(k, kp)
	if !ok || n == "" || !strings.HasPrefix(n, prefix) || (l.clustered && l.key(n) != key) {
		return "", false
	}
	return n, true
}

// globEscape escapes SCAN MATCH's glob characters in s.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
