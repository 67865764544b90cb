package engine

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Listed is a name Walk found held on a quorum of the masters.
type Listed struct {
	// Name is the lock's, semaphore's or read/write lock's name, as it
	// was acquired: KeyPrefix and a cluster vote's slot tag taken off.
	Name string
	// Masters is how many masters Walk found holding it: at least a
	// quorum (it stops asking once a quorum does, see Walk).
	Masters int
	at      *listAt
}

// Cursor is where the walk was when it yielded this name: WalkFrom
// resumes it just after the name. It is printable (base64url), and
// about a hundred bytes plus the name.
func (n Listed) Cursor() string {
	if n.at == nil {
		return ""
	}
	pos := slices.Clone(n.at.pos)
	pos[n.at.m].After = n.Name
	return encodeCursor(n.at.prefix, pos)
}

// listAt is the walk's position when a batch of master m's names was
// yielded: each master's, as far as the names yielded before it went.
type listAt struct {
	prefix string
	m      int
	pos    []walkPos
}

// walkPos is where the walk of one master is: which keys (the locks',
// then the semaphores' slots), which node (a cluster vote's shards one
// after the other, by address), which SCAN cursor.
type walkPos struct {
	State  byte   // posNew, posWalking or posDone
	Sem    bool   // in the semaphores' slot keys
	Node   string // the node's address
	Cursor uint64 // the SCAN cursor of the batch
	Fin    bool   // Node is walked to the end
	After  string // the batch's last name yielded
}

// The states of a master's walk.
const (
	posNew     = iota // not walked
	posWalking        // walked, from walkPos on
	posDone           // walked to the end
)

// ErrBadCursor: WalkFrom was given what is not a Listed.Cursor of a
// walk of the same prefix on as many masters.
var ErrBadCursor = errors.New("not a cursor of a walk of this prefix on these masters")

// listAskTimeout bounds each question of a walk to one master: the node
// timeout, but at least a second. A listing is an operator's command,
// which a loaded master may answer slowly without harm, while a question
// it misses twice costs the walk that master (ErrIncomplete).
func (l *Locker) listAskTimeout() time.Duration { return max(l.cfg.NodeTimeout, time.Second) }

// ErrIncomplete: a master failed during a walk that a quorum still
// answered, so a name a bare quorum held with that master may be
// missing from what the walk yielded.
var ErrIncomplete = errors.New("a master failed during the walk: names a bare quorum holds with it may be missing")

// ListBatch is the COUNT Walk asks of each SCAN call, and the most names
// it asks a master about at once: how many keys a master looks at per
// call, which bounds how long one call holds it.
const ListBatch = 1000

// Walk yields, as it finds them, the names of the locks, semaphores and
// read/write locks whose key starts with KeyPrefix + prefix and that a
// quorum of the masters holds as one kind: a lock's (or read/write
// lock's) key, or a slot of a semaphore's; in the order the masters'
// SCAN returns them, not sorted. It walks the masters' keys with SCAN and
// MATCH, never KEYS, ListBatch keys per call, so that a master with
// millions of keys answers its other clients between calls; and it holds
// at most one batch per master it walks and the names of the one before
// it (see below), plus the batch being yielded, whatever the number of
// keys. Breaking out of the loop stops the walk;
// the last name's Cursor resumes it (WalkFrom). The engine's internal
// keys (queues, fencing counters, marks) are skipped; a semaphore is one
// name. Glob characters (*?[\) in prefix are matched literally.
//
// A name held on a quorum throughout the walk is yielded, once, whatever
// it is held as: one a quorum holds both as a lock and as a semaphore is
// yielded by the walk of the lock keys. One taken or released meanwhile
// may or may not be (and may be twice, if it changed kind). SCAN answers
// a key again when the master's key table shrank between two calls: the
// keys SCAN's earlier calls found in the old buckets that fold into the
// bucket it resumes at, which it visited in a row (Redis's cursor runs
// through the high bits first). Each walked master's batch skips the
// names of its previous batch, which holds all of those unless that run
// of buckets held more than ListBatch keys: unless the master's keys
// fell more than about ListBatch-fold between two calls (a table shrinks
// to the power of two at or above its keys). Left: a name yielded again
// after a walked master failed and another took its place (the names
// the failed one yielded are not kept), a repeat past that bound, and
// the names of a batch whose question to a walked master failed (a
// timeout: that batch only is yielded by both).
// The walk ends with an error yielded once:
// ErrNoQuorum when more than votes − quorum masters could not be
// walked; ErrIncomplete, after every name the others prove, when fewer
// failed (walked, or asked twice about one batch); or ctx's.
//
// Cost: votes − quorum + 1 masters' keys are walked (any that many hold
// at least one key of each name on a quorum), and each name found costs
// each other master an EXISTS, pipelined a batch at a time (a
// semaphore: a read-only script call per 64 of them, and an EXISTS on
// each master for its lock key).
func (l *Locker) Walk(ctx context.Context, prefix string) iter.Seq2[Listed, error] {
	return l.WalkFrom(ctx, prefix, "")
}

// WalkFrom is Walk resumed just after the name whose Listed.Cursor is
// cursor ("": from the start), with the same prefix and masters: each
// master's walk goes on where it was, and the names yielded before are
// not yielded again, unless the batch a master's SCAN gives at that
// point changed meanwhile (its names are yielded again then: a name is
// never skipped for it). A cursor of another walk fails with
// ErrBadCursor.
func (l *Locker) WalkFrom(ctx context.Context, prefix, cursor string) iter.Seq2[Listed, error] {
	return func(yield func(Listed, error) bool) {
		if l.closed.Load() {
			yield(Listed{}, fmt.Errorf("engine: list: %w", ErrClosed))
			return
		}
		w, err := l.newWalk(prefix, cursor)
		if err != nil {
			yield(Listed{}, err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		out := make(chan listBatch)
		go func() {
			err = w.run(ctx, out)
			close(out)
		}()
		at := slices.Clone(w.start) // as far as the names yielded went
		stopped := false
		for b := range out {
			if !stopped && len(b.names) > 0 {
				snap := &listAt{prefix: prefix, m: b.m, pos: slices.Clone(at)}
				snap.pos[b.m] = b.pos
				for _, n := range b.names {
					n.at = snap
					if !yield(n, nil) {
						stopped = true
						cancel() // the walkers stop at their next call or send
						break
					}
				}
			}
			at[b.m] = b.next
			w.release(len(b.names))
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
// one pipeline per other master tells which of the batch's names it
// holds, so the count is known at once and nothing waits. A name
// found on walked master i is left to an earlier walked master that
// holds it too, whose own walk yields it: each name once.

// walk is one Walk's state, shared by its walkers.
type walk struct {
	l        *Locker
	prefix   string
	batch    int
	lockPat  string
	semPat   string
	start    []walkPos     // where each master's walk begins
	walked   []atomic.Bool // master i's keys are (or were) walked
	dead     []atomic.Bool // master i failed a call: it holds nothing now
	pending  atomic.Int64  // keys read and names not yet yielded
	mu       sync.Mutex
	spares   []int // the masters that take a failed walked master's place
	failures []error
}

// listBatch is a batch of master m's names, and its walk's position
// before and after it; a batch without names only moves the position.
type listBatch struct {
	m         int
	pos, next walkPos
	names     []Listed
}

func (l *Locker) newWalk(prefix, cursor string) (*walk, error) {
	w := &walk{l: l, prefix: prefix, batch: ListBatch, start: make([]walkPos, l.votes),
		walked: make([]atomic.Bool, l.votes), dead: make([]atomic.Bool, l.votes)}
	if l.listBatch > 0 {
		w.batch = l.listBatch
	}
	w.lockPat = globEscape(l.cfg.KeyPrefix+prefix) + "*"
	w.semPat = globEscape(semPrefix+l.cfg.KeyPrefix+"{"+prefix) + "*"
	if l.clustered {
		w.lockPat = "*" + w.lockPat // a slot tag may come first (see key)
		w.semPat = globEscape(semPrefix) + "*"
	}
	if cursor != "" {
		pos, err := decodeCursor(cursor, prefix, l.votes)
		if err != nil {
			return nil, err
		}
		w.start = pos
	}
	// A cursor holds votes − quorum + 1 masters under way or done, less
	// any that failed: the first others make up for them.
	walked := 0
	for _, p := range w.start {
		if p.State != posNew {
			walked++
		}
	}
	for i := range w.start {
		switch {
		case w.start[i].State != posNew:
			w.walked[i].Store(true)
		case walked < l.votes-l.quorum+1:
			w.start[i] = walkPos{State: posWalking}
			w.walked[i].Store(true)
			walked++
		default:
			w.spares = append(w.spares, i)
		}
	}
	return w, nil
}

// cursorVersion starts a cursor, so that another encoding is told apart.
const cursorVersion = 1

// encodeCursor is prefix and the masters' positions in bytes (uvarints
// and length-prefixed strings, which a name of any bytes survives), in
// base64url.
func encodeCursor(prefix string, pos []walkPos) string {
	b := []byte{cursorVersion}
	str := func(s string) { b = append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	str(prefix)
	b = binary.AppendUvarint(b, uint64(len(pos)))
	for _, p := range pos {
		flags := p.State
		if p.Sem {
			flags |= 4
		}
		if p.Fin {
			flags |= 8
		}
		b = append(b, flags)
		str(p.Node)
		b = binary.AppendUvarint(b, p.Cursor)
		str(p.After)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor is the masters' positions in cursor, a Listed.Cursor of
// a walk of prefix on votes masters.
func decodeCursor(cursor, prefix string, votes int) ([]walkPos, error) {
	bad := fmt.Errorf("engine: list %q: %w", prefix, ErrBadCursor)
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) == 0 || b[0] != cursorVersion {
		return nil, bad
	}
	b = b[1:]
	ok := true
	num := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			ok = false
			return 0
		}
		b = b[n:]
		return v
	}
	str := func() string {
		n := num()
		if !ok || n > uint64(len(b)) {
			ok = false
			return ""
		}
		s := string(b[:n])
		b = b[n:]
		return s
	}
	if str() != prefix || num() != uint64(votes) || !ok {
		return nil, bad
	}
	pos := make([]walkPos, votes)
	for i := range pos {
		if len(b) == 0 || b[0]&^(4|8) > posDone {
			return nil, bad
		}
		flags := b[0]
		b = b[1:]
		pos[i] = walkPos{State: flags &^ (4 | 8), Sem: flags&4 != 0, Fin: flags&8 != 0}
		pos[i].Node = str()
		pos[i].Cursor = num()
		pos[i].After = str()
	}
	if !ok || len(b) != 0 {
		return nil, bad
	}
	return pos, nil
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

// run walks the masters whose walk is under way at once, each sending
// its batches to out, until each has walked to the end; a spare master
// takes a failed one's place.
func (w *walk) run(ctx context.Context, out chan<- listBatch) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Bool
	for m, from := range w.start {
		if from.State != posWalking {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := w.walkMaster(ctx, m, from, out)
				if err == nil || ctx.Err() != nil {
					return
				}
				w.dead[m].Store(true)
				w.mu.Lock()
				w.failures = append(w.failures, fmt.Errorf("%s: %w", w.l.addrs[m], err))
				if len(w.spares) == 0 {
					w.mu.Unlock()
					failed.Store(true)
					cancel()
					return
				}
				m, w.spares = w.spares[0], w.spares[1:]
				from = walkPos{State: posWalking}
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
	if err := context.Cause(ctx); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.failures) > 0 {
		return errorf("list %q: %v: %v", w.prefix, ErrIncomplete, errors.Join(w.failures...))
	}
	return nil
}

// walkMaster walks master m's lock keys, then its semaphores' slot keys,
// from where from says, a batch at a time, and sends each batch's names
// that a quorum holds.
func (w *walk) walkMaster(ctx context.Context, m int, from walkPos, out chan<- listBatch) error {
	c := w.l.pool.Client(m)
	if c == nil {
		return errors.New("not connected")
	}
	send := func(b listBatch) error {
		select {
		case out <- b:
			return nil
		case <-ctx.Done():
			w.release(len(b.names))
			return ctx.Err()
		}
	}
	// The names of the node's previous batch, which a repeat of SCAN's
	// (see Walk) brings again in this one: they are not yielded twice.
	prev, prevNode := map[string]struct{}{}, ""
	defer func() { w.release(len(prev)) }()
	for _, sem := range []bool{false, true} {
		if from.Sem && !sem {
			continue
		}
		pat := w.lockPat
		if sem {
			pat = w.semPat
		}
		var start *walkPos
		if from.Sem == sem {
			start = &from
		}
		w.release(len(prev))
		clear(prev)
		err := scanNodes(ctx, c, pat, w.batch, start, func(node string, cursor, next uint64, keys []string) error {
			if w.l.listScan != nil {
				keys = w.l.listScan(m, keys)
			}
			w.hold(len(keys))
			names, err := w.quorumOf(ctx, m, sem, keys)
			if err == nil && start != nil && start.After != "" && node == start.Node && cursor == start.Cursor {
				// The batch the cursor's name was yielded from: go on
				// after it, or, if it is not there (the batch changed),
				// yield the batch again.
				if i := slices.IndexFunc(names, func(n Listed) bool { return n.Name == start.After }); i >= 0 {
					names = names[i+1:]
				}
			}
			if node != prevNode {
				w.release(len(prev))
				clear(prev)
				prevNode = node
			}
			names = slices.DeleteFunc(names, func(n Listed) bool { _, seen := prev[n.Name]; return seen })
			w.release(len(keys) - len(names))
			if err != nil {
				return err
			}
			w.release(len(prev))
			clear(prev)
			for _, n := range names {
				prev[n.Name] = struct{}{}
			}
			w.hold(len(prev))
			return send(listBatch{m: m, names: names,
				pos:  walkPos{State: posWalking, Sem: sem, Node: node, Cursor: cursor},
				next: walkPos{State: posWalking, Sem: sem, Node: node, Cursor: next, Fin: next == 0}})
		})
		if err != nil {
			return err
		}
	}
	return send(listBatch{m: m, next: walkPos{State: posDone}})
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
	// First, which names are this master's to yield: a semaphore found
	// by its first held slot here, and a name no earlier walked master
	// holds (its walk yields it), asking those one at a time about the
	// names still kept.
	if sem {
		has, err := w.holds(ctx, m, cands, true)
		if err != nil {
			return nil, err
		}
		cands = keepIf(cands, has, true)
	}
	for j := range m {
		if len(cands) > 0 && w.walked[j].Load() && !w.dead[j].Load() {
			if has := w.ask(ctx, []int{j}, cands)[0]; has != nil {
				cands = keepIf(cands, has, false)
			}
		}
	}
	// Then count the other masters' votes, asking at once as many as the
	// names still undecided need, so that a batch that the first ones
	// settle costs the others nothing.
	var rest []int
	for j := range l.votes {
		if j != m && !(j < m && w.walked[j].Load()) {
			rest = append(rest, j)
		}
	}
	for len(rest) > 0 && len(cands) > 0 {
		var open []int // undecided: not yet on a quorum, and may still be
		need := 0
		for i, c := range cands {
			if c.held < l.quorum && c.held+len(rest) >= l.quorum {
				open = append(open, i)
				need = max(need, l.quorum-c.held)
			}
		}
		if len(open) == 0 {
			break
		}
		wave := rest[:need]
		rest = rest[need:]
		asked := make([]listCand, len(open))
		for k, i := range open {
			asked[k] = cands[i]
		}
		for _, has := range w.ask(ctx, wave, asked) {
			for k, i := range open {
				if has != nil && has[k] {
					cands[i].held++
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var names []Listed
	for _, c := range cands {
		if c.held >= l.quorum {
			names = append(names, Listed{Name: c.name, Masters: c.held})
		}
	}
	if sem && len(names) > 0 {
		return w.notLocks(ctx, names)
	}
	return names, nil
}

// notLocks is the semaphores' names that no quorum holds as a lock's
// (or read/write lock's) key too: the walk of the lock keys yields
// those, and a name is yielded once, whatever it is held as. It asks
// every master at once, an EXISTS per name.
func (w *walk) notLocks(ctx context.Context, names []Listed) ([]Listed, error) {
	cands := make([]listCand, len(names))
	for i, n := range names {
		cands[i] = listCand{name: n.Name, slot: -1}
	}
	all := make([]int, w.l.votes)
	for j := range all {
		all[j] = j
	}
	held := make([]int, len(names))
	for _, has := range w.ask(ctx, all, cands) {
		for i := range has {
			if has[i] {
				held[i]++
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	i := 0
	return slices.DeleteFunc(names, func(Listed) bool { i++; return held[i-1] >= w.l.quorum }), nil
}

// keepIf is the candidates whose answer is want.
func keepIf(cands []listCand, has []bool, want bool) []listCand {
	i := 0
	return slices.DeleteFunc(cands, func(listCand) bool { i++; return has[i-1] != want })
}

// ask asks the masters js at once which of cands they hold, each an
// answer per candidate: nil for a master that is dead or failed. A
// question that fails is asked again once. A master that failed twice on
// one batch is dead for the rest of the walk then (a failure of the
// walk: ErrIncomplete), and holds nothing, unless its keys are walked: its walker's own calls tell
// whether it failed, since taking it for dead on one slow answer would
// have the other walkers yield, for the rest of the walk, the names its
// walk yields too (it holds nothing for this batch only).
func (w *walk) ask(ctx context.Context, js []int, cands []listCand) [][]bool {
	answers := make([][]bool, len(js))
	var wg sync.WaitGroup
	for a, j := range js {
		if w.dead[j].Load() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			has, err := w.holds(ctx, j, cands, false)
			if err != nil && ctx.Err() == nil {
				// Asked again once: a loaded master may miss one
				// timeout, and the names of the batch need its answer.
				has, err = w.holds(ctx, j, cands, false)
			}
			if err != nil {
				if ctx.Err() == nil && !w.walked[j].Load() && !w.dead[j].Swap(true) {
					w.mu.Lock()
					w.failures = append(w.failures, fmt.Errorf("%s: %w", w.l.addrs[j], err))
					w.mu.Unlock()
				}
				return
			}
			answers[a] = has
		}()
	}
	wg.Wait()
	return answers
}

// semFirstScript answers, for each semaphore whose permit-count key is
// a KEYS entry (its name less "permits" is the slots' base), its first
// held slot, −1 for none. It only reads, each semaphore's slots up to
// its first held one.
var semFirstScript = rueidis.NewLuaScript(`local out = {}
for i = 1, #KEYS do
  local first, base = -1, string.sub(KEYS[i], 1, -8)
  local n = redis.pcall("GET", KEYS[i])
  n = type(n) == "string" and tonumber(n) or 0
  for s = 0, n - 1 do
    if redis.call("EXISTS", base .. s) == 1 then first = s break end
  end
  out[i] = first
end
return out`)

// semAsk is the most semaphores one semFirstScript call reads: each
// may read up to its permit count of slots.
const semAsk = 64

// holds asks master j which of cands it holds: a lock's (or read/write
// lock's) key, with EXISTS, one command per name pipelined, so that the
// master serves its other clients between them; a semaphore's slots,
// with semFirstScript. With own (j is the master whose keys cands are),
// a lock is held (its key was just found there), and a semaphore is
// when the slot it was found as is its first held one there: each
// master's walk reports a semaphore once.
func (w *walk) holds(ctx context.Context, j int, cands []listCand, own bool) ([]bool, error) {
	c := w.l.pool.Client(j)
	if c == nil {
		return nil, errors.New("not connected")
	}
	if w.l.listAsk != nil {
		if err := w.l.listAsk(j); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, w.l.listAskTimeout())
	defer cancel()
	out := make([]bool, len(cands))
	var locks rueidis.Commands
	var lockAt, sems []int
	first := map[string]int{} // a semaphore's first held slot here
	var semKeys, semNames []string
	for i, cd := range cands {
		switch {
		case cd.slot >= 0:
			sems = append(sems, i)
			if _, ok := first[cd.name]; !ok {
				first[cd.name] = -1
				semKeys = append(semKeys, w.l.semBase(cd.name)+"permits")
				semNames = append(semNames, cd.name)
			}
		case own:
			out[i] = true
		default:
			locks = append(locks, c.B().Exists().Key(w.l.key(cd.name)).Build())
			lockAt = append(lockAt, i)
		}
	}
	if len(locks) > 0 {
		for k, r := range c.DoMulti(ctx, locks...) {
			n, err := r.AsInt64()
			if err != nil {
				return nil, err
			}
			out[lockAt[k]] = n == 1
		}
	}
	for len(semKeys) > 0 {
		keys, names := semKeys[:min(len(semKeys), semAsk)], semNames
		semKeys, semNames = semKeys[len(keys):], semNames[len(keys):]
		var firsts []int64
		if !w.l.clustered {
			res, err := semFirstScript.Exec(ctx, c, keys, nil).AsIntSlice()
			if err != nil {
				return nil, err
			}
			firsts = res
		} else { // each semaphore's keys are in its own slot
			execs := make([]rueidis.LuaExec, len(keys))
			for i := range keys {
				execs[i] = rueidis.LuaExec{Keys: keys[i : i+1]}
			}
			for _, r := range semFirstScript.ExecMulti(ctx, c, execs...) {
				res, err := r.AsIntSlice()
				if err != nil {
					return nil, err
				}
				firsts = append(firsts, res...)
			}
		}
		if len(firsts) != len(keys) {
			return nil, fmt.Errorf("list: %d answers for %d semaphores", len(firsts), len(keys))
		}
		for i, f := range firsts {
			first[names[i]] = int(f)
		}
	}
	for _, i := range sems {
		f := first[cands[i].name]
		out[i] = f >= 0 && (!own || f == cands[i].slot)
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
// that c reaches (one for a master; each primary for a cluster, in the
// order of their addresses), from where from says (nil: the start),
// calling f with each call's node, cursor, next cursor and keys; f's
// error stops it.
func scanNodes(ctx context.Context, c rueidis.Client, pat string, count int, from *walkPos, f func(node string, cursor, next uint64, keys []string) error) error {
	nodes := c.Nodes()
	for _, a := range slices.Sorted(maps.Keys(nodes)) {
		cursor := uint64(0)
		if from != nil && from.Node != "" {
			if a < from.Node || a == from.Node && from.Fin {
				continue
			}
			if a == from.Node {
				cursor = from.Cursor
			}
		}
		n := nodes[a]
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
			if err := f(a, cursor, e.Cursor, e.Elements); err != nil {
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
