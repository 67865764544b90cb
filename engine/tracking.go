package engine

import (
	"context"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// tracker tells a watched lease at once that its keys changed on the
// masters, instead of at its next extension: when they are gone, or
// another's, on so many masters that fewer than a quorum still hold them,
// the lease ends with ErrLockLost and Done closes.
//
// It keeps one dedicated connection per master (opened when the first
// lease is watched) with client-side-caching tracking on (RESP3 CLIENT
// TRACKING, default mode). It reads each watched key there with GET (a
// read/write lock's holder: ZSCORE of its member at the key), which
// both tells whether the key holds the lease's value (member) and asks the
// master to push an invalidation when the key next changes: a write by
// anyone (DEL, SET, an expiry, FLUSHALL, PEXPIRE), on any connection.
// An invalidation is one-shot: the tracker reads the key again, which
// checks it and asks for the next one. A change that came before a read
// shows in the read; one that comes after is pushed after the read's
// reply, on the same connection. So the tracker's view of each master
// lags the master by one push and one read, never by an extension
// period.
//
// An invalidation says that a key changed, not that it is lost: the
// holder's own extensions change the key's TTL, waiters of other
// Lockers append their mark to its value, and a read/write lock's other
// holders come and go. The read decides: the key
// holds the lease's value (marked or not), or it does not. A lease ends
// only once the masters whose last read found some key of it gone or
// another's are more than N − quorum; masters not read yet, or whose
// connection is down, count as holding, so that the tracker never ends
// a lease that an extension would keep. It ends before the lease's own
// Release sends its deletes (see Lease.release), so its own release is
// not a loss, and ignores invalidations of keys it does not watch.
//
// Why invalidations rather than the release notifications' pub/sub (see
// notifier): nothing publishes when a key is deleted or overwritten by
// someone else, expires, or is flushed, which are the losses to notice;
// keyspace notifications would, but need the masters configured
// (notify-keyspace-events), which the engine cannot assume. The masters'
// price is a tracking-table entry per watched key, and a lookup in that
// table per write while any client tracks.
type tracker struct {
	pool   *multiplex.Pool
	addrs  []string
	quorum int
	// wait bounds turning tracking on for a new connection.
	wait time.Duration
	ctx  context.Context // ends at shut
	stop context.CancelFunc
	wg   sync.WaitGroup
	// reads counts the keys read and judged, for the tests: a read
	// counts once the leases it found lost have ended.
	reads atomic.Int64

	// mu guards the fields below and every tracked's. Nothing waits for
	// the network while holding it, and it is taken after Lease.mu,
	// never before.
	mu   sync.Mutex
	keys map[string][]trackRef // watched keys, and who watches each
	// batches numbers the batches of reads, on every master, as each
	// takes its keys.
	batches uint64
	nodes   []*trackNode
	closed  bool
}

// tracked is a watched lease's state in the tracker.
type tracked struct {
	le   *Lease
	keys []string // the lease's keys: one, or a multi-resource lease's
	// lost has, per key, the masters whose last read found it gone or
	// another's; gone is their union: the masters that no longer hold
	// every key, as an extension counts them.
	lost  []uint64
	gone  uint64
	ended bool // the tracker ended the lease, or it left the tracker
	// since has, per master, the last batch taken before the lease's
	// acquire was answered there: a read of an earlier batch may have run
	// before the lease's SET (or, for a key watched before, its earlier
	// holder's), and is not the lease's to judge. Masters whose answer
	// has not arrived (answered clear) are not judged until it does.
	since    []uint64
	answered uint64
	// until is the lease's validUntil, kept in step by setValidUntil: a
	// key of it that may expire on a master before then is read again at
	// that moment (see serve).
	until time.Time
}

// trackRef is one watcher of a key: its lease's state and the key's
// index among the lease's keys.
type trackRef struct {
	tr *tracked
	k  int
}

// Connection states of a trackNode.
const (
	trackIdle = iota // no goroutine yet
	trackUp          // connection open, tracking on
	trackDown        // no connection; retried in the background
	trackOff         // the master does not track (no CLIENT TRACKING, or RESP2)
)

// trackNode is one master's tracking connection. Only its goroutine
// (run) sends on it.
type trackNode struct {
	i int
	// Under tracker.mu.
	state int
	// dirty are the keys to read (again) on this master; true for those
	// that changed since the last read (an invalidation), whose TTL is
	// read too: a shortened one is read again when it may expire.
	dirty map[string]bool
	// again are the keys to read again when they may have expired, and
	// when: an expiry is pushed only when the master deletes the key,
	// up to a tenth of a second later (its active expiry cycle, hz 10).
	again map[string]*reread
	// kick wakes run when a key turns dirty; room for one.
	kick chan struct{}
	// busy: a batch of reads is under way (taken, not yet judged, its
	// lost leases not yet ended). Under tracker.mu; for the tests, which
	// wait for the tracker to settle.
	busy bool
}

// mark has key read on the node's next batch, with its TTL if changed.
// The caller holds tracker.mu.
func (tn *trackNode) mark(key string, changed bool) {
	tn.dirty[key] = tn.dirty[key] || changed
}

// reread is a read of a key scheduled for when it may have expired.
type reread struct {
	at    time.Time
	timer *time.Timer
}

// maxReads bounds the keys read in one batch.
const maxReads = 512

// newTracker watches a Locker's leases on its votes: the first len(addrs)
// of them plain masters, the rest cluster votes.
func newTracker(pool *multiplex.Pool, addrs []string, votes, quorum int, wait time.Duration) *tracker {
	ctx, stop := context.WithCancel(context.Background())
	t := &tracker{pool: pool, addrs: addrs, quorum: quorum, wait: max(wait, time.Second),
		ctx: ctx, stop: stop, keys: make(map[string][]trackRef)}
	t.nodes = make([]*trackNode, votes)
	for i := range t.nodes {
		t.nodes[i] = &trackNode{i: i, dirty: make(map[string]bool), again: make(map[string]*reread), kick: make(chan struct{}, 1)}
	}
	return t
}

// add starts watching le's keys, and returns its state for remove. The
// caller holds le.mu, and le has not ended.
func (t *tracker) add(le *Lease) *tracked {
	keys := []string{le.key}
	if le.all != nil {
		keys = le.all.keys
	}
	bits := make([]uint64, len(keys)+len(t.nodes))
	tr := &tracked{le: le, keys: keys, lost: bits[:len(keys):len(keys)], since: bits[len(keys):],
		until: le.validUntil, answered: le.answered}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		tr.ended = true
		return tr
	}
	for i := range tr.since {
		tr.since[i] = t.batches
	}
	for k, key := range keys {
		t.keys[key] = append(t.keys[key], trackRef{tr, k})
	}
	for _, tn := range t.nodes {
		if tn.state == trackIdle {
			tn.state = trackDown
			t.wg.Add(1)
			go t.run(tn)
		}
		if tn.state == trackUp {
			for _, key := range keys {
				tn.mark(key, false)
			}
		}
		t.kickLocked(tn)
	}
	return tr
}

// remove stops watching tr's lease. The caller may hold its le.mu.
func (t *tracker) remove(tr *tracked) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr.ended = true
	for _, key := range tr.keys {
		refs := t.keys[key]
		for j, r := range refs {
			if r.tr == tr {
				refs = append(refs[:j], refs[j+1:]...)
				break
			}
		}
		if len(refs) == 0 {
			delete(t.keys, key)
		} else {
			t.keys[key] = refs
		}
	}
}

// answer tells the tracker that the lease's acquire was answered on
// node, late: its reads there are judged from the next batch on. The
// caller holds the lease's mu.
func (t *tracker) answer(tr *tracked, node int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr.answered&(1<<node) != 0 {
		return
	}
	tr.answered |= 1 << node
	tr.since[node] = t.batches
	if tn := t.nodes[node]; tn.state == trackUp {
		for _, key := range tr.keys {
			tn.mark(key, false)
		}
		t.kickLocked(tn)
	}
}

// setUntil keeps tr's copy of its lease's validity in step. The caller
// holds the lease's mu.
func (t *tracker) setUntil(tr *tracked, until time.Time) {
	t.mu.Lock()
	tr.until = until
	t.mu.Unlock()
}

func (t *tracker) kickLocked(tn *trackNode) {
	select {
	case tn.kick <- struct{}{}:
	default:
	}
}

// invalidated marks keys (nil: all, after a FLUSHALL or FLUSHDB) to be
// read again on node tn. It runs on rueidis's reading goroutine: it must
// be quick.
func (t *tracker) invalidated(tn *trackNode, keys []rueidis.RedisMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tn.state != trackUp {
		return // a new connection reads every key anyway
	}
	if keys == nil {
		for key := range t.keys {
			tn.mark(key, true)
		}
	}
	for _, m := range keys {
		if key, err := m.ToString(); err == nil && t.keys[key] != nil {
			tn.mark(key, true)
		}
	}
	if len(tn.dirty) > 0 {
		t.kickLocked(tn)
	}
}

// run owns node tn's tracking connection until shut: it opens it, turns
// tracking on, reads the dirty keys, and when the connection cannot be
// opened or breaks, tries again in the background. A master that cannot
// track is left alone: its leases learn of a loss there at their next
// extension.
func (t *tracker) run(tn *trackNode) {
	defer t.wg.Done()
	const minRetry, maxRetry = 100 * time.Millisecond, time.Second
	retry := minRetry
	for {
		dc, errs, off := t.open(tn)
		if dc != nil {
			if t.serve(tn, dc, errs) {
				retry = minRetry // it worked for a while
			}
			dc.Close()
		}
		t.mu.Lock()
		tn.state = trackDown
		tn.busy = false
		if off {
			tn.state = trackOff
		}
		clear(tn.dirty)
		for _, r := range tn.again {
			r.timer.Stop()
		}
		clear(tn.again)
		t.mu.Unlock()
		if off {
			return
		}
		select {
		case <-t.ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(2*retry, maxRetry)
		// With nothing watched there is nothing to read: reopen when a
		// lease is watched (its add kicks after this check).
		select {
		case <-tn.kick:
		default:
		}
		t.mu.Lock()
		idle := len(t.keys) == 0
		t.mu.Unlock()
		if idle {
			select {
			case <-t.ctx.Done():
				return
			case <-tn.kick:
			}
		}
	}
}

// open opens node tn's tracking connection, or returns nil; off when the
// master refused tracking. The dial runs inside Dedicate, which takes no
// context, so it runs on a goroutine of its own that shut does not wait
// for (as the notifier's does).
func (t *tracker) open(tn *trackNode) (dc rueidis.DedicatedClient, errs <-chan error, off bool) {
	if tn.i >= len(t.addrs) { // a cluster vote
		// A dedicated connection reaches one node of the cluster, and an
		// MGET of keys in several slots fails there: a cluster vote is
		// left to the extensions.
		return nil, nil, true
	}
	client := t.pool.Client(tn.i)
	if client == nil {
		return nil, nil, false // not connected; the pool reconnects it
	}
	type opened struct {
		dc   rueidis.DedicatedClient
		errs <-chan error
	}
	ch := make(chan opened, 1)
	go func() {
		dc, _ := client.Dedicate()
		ch <- opened{dc, dc.SetOnInvalidations(func(keys []rueidis.RedisMessage) { t.invalidated(tn, keys) })}
	}()
	var o opened
	select {
	case o = <-ch:
	case <-t.ctx.Done():
		go func() { (<-ch).dc.Close() }()
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.wait)
	defer cancel()
	err := o.dc.Do(ctx, o.dc.B().ClientTracking().On().Build()).Error()
	if err != nil {
		o.dc.Close()
		_, reply := rueidis.IsRedisErr(err)
		return nil, nil, reply // a master without CLIENT TRACKING says so
	}
	return o.dc, o.errs, false
}

// serve reads the dirty keys on dc until it breaks or the tracker shuts,
// and ends the leases it finds lost. A batch is one MGET of every dirty
// key a lock, permit or multi-resource lease watches (a key of another
// type reads as nil: not the lease's), a ZSCORE of each read/write
// holder's member at its key (nil or WRONGTYPE: not the lease's), and a
// PTTL of each key that changed (see trackNode.dirty). It reports
// whether a batch succeeded.
func (t *tracker) serve(tn *trackNode, dc rueidis.DedicatedClient, errs <-chan error) (worked bool) {
	t.mu.Lock()
	tn.state = trackUp
	clear(tn.dirty)
	for key := range t.keys {
		tn.mark(key, false) // a new connection tracks nothing yet
	}
	t.mu.Unlock()
	var keys, ttls, plain []string
	members := make(map[member]int) // a read/write holder's, to its command
	vs := make(map[string]rueidis.RedisMessage)
	cmds := make(rueidis.Commands, 0, 8)
	for {
		keys, ttls, cmds = keys[:0], ttls[:0], cmds[:0]
		t.mu.Lock()
		t.batches++
		batch := t.batches
		for key, changed := range tn.dirty {
			keys = append(keys, key)
			if changed {
				ttls = append(ttls, key)
			}
			delete(tn.dirty, key)
			if len(keys) == maxReads {
				t.kickLocked(tn) // the rest in the next batch
				break
			}
		}
		// The previous batch, if any, is over: its leases have ended.
		tn.busy = len(keys) > 0
		// A read/write lock's holder is a member of the sorted set at its
		// key: a ZSCORE of it reads (and tracks) the key, and tells
		// whether the member is there, whatever the other holders do. A
		// lease watched after this is not judged by this batch (since).
		plain = plain[:0]
		clear(members)
		for _, key := range keys {
			hasPlain := false
			for _, r := range t.keys[key] {
				if r.tr.le.rw && !faults.RWTrackedAsPlain.On() {
					members[member{key, r.tr.le.value}] = -1
				} else {
					hasPlain = true
				}
			}
			if hasPlain {
				plain = append(plain, key)
			}
		}
		t.mu.Unlock()
		if len(keys) == 0 {
			select {
			case <-tn.kick:
				continue
			case <-errs:
				return worked
			case <-t.ctx.Done():
				return worked
			}
		}
		if len(plain) > 0 {
			cmds = append(cmds, dc.B().Mget().Key(plain...).Build())
		}
		for m := range members {
			members[m] = len(cmds)
			cmds = append(cmds, dc.B().Zscore().Key(m.key).Member(m.value).Build())
		}
		// The master's clock judges a member's score: an entry expired
		// there stays in the set (only a writer's attempt or the key's end
		// takes it out), while a reader may already be admitted past it.
		clock := -1
		if len(members) > 0 && !faults.RWTrackedByPresence.On() {
			clock = len(cmds)
			cmds = append(cmds, dc.B().Time().Build())
		}
		ttl0 := len(cmds)
		for _, key := range ttls {
			cmds = append(cmds, dc.B().Pttl().Key(key).Build())
		}
		if len(cmds) == 0 {
			continue // nobody watches these keys any more
		}
		sent := time.Now()
		// No deadline of its own: a master that stops answering has its
		// connection closed after Config.Conn.ConnTimeout, and shut cancels.
		res := dc.DoMulti(t.ctx, cmds...)
		var vals []rueidis.RedisMessage
		var err error
		if len(plain) > 0 {
			vals, err = res[0].ToArray()
		}
		for j := range ttl0 {
			if e := res[j].Error(); err == nil && broken(e) {
				err = e
			}
		}
		if err != nil {
			if broken(err) {
				// The connection failed: what it tracks is unknown now.
				// The next one reads every key again.
				return worked
			}
			continue // refused (NOPERM, LOADING, ...): nothing learnt
		}
		for i, key := range plain {
			vs[key] = vals[i]
		}
		var lost []*tracked
		t.mu.Lock()
		for _, key := range keys {
			v, vok := vs[key]
			for _, r := range t.keys[key] {
				if r.tr.answered&(1<<tn.i) == 0 || batch <= r.tr.since[tn.i] {
					continue
				}
				var ours bool
				if j, ok := members[member{key, r.tr.le.value}]; ok && r.tr.le.rw {
					// Its member is there, live by the master's clock: a
					// score (the entry's expiry), not nil nor WRONGTYPE.
					ours = rwLive(res[j], res, clock)
				} else if vok {
					s, err := v.ToString()
					ours = err == nil && ownValue(s, r.tr.le.value)
				} else {
					continue // came in after the batch was made: read next
				}
				if r.tr.read(tn.i, r.k, ours) && t.lostLocked(r.tr) {
					lost = append(lost, r.tr)
				}
			}
		}
		clear(vs)
		for j, key := range ttls {
			// The key expires on this master no sooner than sent + pttl;
			// if that is before its lease's validity ends (someone
			// shortened it), read it again then.
			pttl, err := res[ttl0+j].AsInt64()
			if err != nil || pttl < 0 {
				continue
			}
			at := sent.Add(time.Duration(pttl) * time.Millisecond)
			for _, r := range t.keys[key] {
				if at.Before(r.tr.until) {
					t.rereadLocked(tn, key, at)
					break
				}
			}
		}
		t.mu.Unlock()
		t.endAll(lost)
		t.reads.Add(int64(len(keys)))
		worked = true
	}
}

// rwLive reports whether score, a ZSCORE of a read/write holder's
// member, is there and live by the master's clock (res[clock], its TIME;
// clock < 0: presence alone): a reader's expiry ahead of the clock, a
// writer's (negated) too, as the acquire script counts them.
func rwLive(score rueidis.RedisResult, res []rueidis.RedisResult, clock int) bool {
	s, err := score.AsFloat64()
	if err != nil {
		return false
	}
	if clock < 0 {
		return true
	}
	tm, err := res[clock].AsStrSlice()
	if err != nil || len(tm) != 2 {
		return true // the clock unread: presence, as before the check
	}
	sec, err1 := strconv.ParseInt(tm[0], 10, 64)
	us, err2 := strconv.ParseInt(tm[1], 10, 64)
	if err1 != nil || err2 != nil {
		return true
	}
	now := float64(sec*1e6 + us)
	return s > now || s < -now
}

// member is a read/write lock's holder: its key and its member there.
type member struct{ key, value string }

// broken: err is not a reply from the master, nor its nil.
func broken(err error) bool {
	if err == nil || rueidis.IsRedisNil(err) {
		return false
	}
	_, reply := rueidis.IsRedisErr(err)
	return !reply
}

// rereadLocked reads key on node tn again at at, a millisecond past the
// earliest it may expire, unless a read is due sooner. The caller holds
// t.mu.
func (t *tracker) rereadLocked(tn *trackNode, key string, at time.Time) {
	at = at.Add(time.Millisecond)
	if r := tn.again[key]; r != nil {
		if !r.at.After(at) {
			return
		}
		r.timer.Stop()
	}
	r := &reread{at: at}
	r.timer = time.AfterFunc(time.Until(at), func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if tn.again[key] != r {
			return
		}
		delete(tn.again, key)
		if tn.state == trackUp && t.keys[key] != nil {
			tn.mark(key, true)
			t.kickLocked(tn)
		}
	})
	tn.again[key] = r
}

// ownValue: v is the lease's value, marked by a waiter or not.
func ownValue(v, value string) bool {
	return v == value || (len(v) == len(value)+len(waitMark) && strings.HasPrefix(v, value) && strings.HasSuffix(v, waitMark))
}

// read records what a read of key k on node found, and reports whether
// the masters that hold the lease's keys changed. The caller holds
// tracker.mu.
func (tr *tracked) read(node, k int, ours bool) bool {
	bit := uint64(1) << node
	if ours {
		tr.lost[k] &^= bit
	} else {
		tr.lost[k] |= bit
	}
	var gone uint64
	for _, l := range tr.lost {
		gone |= l
	}
	changed := gone != tr.gone
	tr.gone = gone
	return changed
}

// lostLocked reports whether tr's lease is to end now: fewer than a
// quorum of masters can still hold all its keys. The caller holds
// tracker.mu; it ends the lease once it has let go of it.
func (t *tracker) lostLocked(tr *tracked) bool {
	if tr.ended || bits.OnesCount64(tr.gone) <= len(t.nodes)-t.quorum || faults.LossNoticedLate.On() {
		return false
	}
	tr.ended = true
	return true
}

// endAll ends the leases found lost, each with the masters where it was.
func (t *tracker) endAll(lost []*tracked) {
	for _, tr := range lost {
		t.mu.Lock()
		gone := tr.gone
		t.mu.Unlock()
		var where []string
		for i := range t.nodes {
			if gone&(1<<i) != 0 {
				where = append(where, t.addrs[i])
			}
		}
		what := "its key is"
		if len(tr.keys) > 1 {
			what = "a key of it is"
		} else if tr.le.rw {
			what = "its entry at its key is"
		}
		le := tr.le
		le.end(errorf("%v: %q: %v: %s gone or another's on %d of %d masters (%s), fewer than a quorum of %d hold it",
			ErrLockLost, le.resource, ErrNotHeld, what, len(where), len(t.nodes), strings.Join(where, ", "), t.quorum), true)
	}
}

// shut stops the tracker's goroutines without waiting for them: a read
// waiting on a hung master ends when the pool cuts the connections.
func (t *tracker) shut() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	t.stop()
}

// close waits for the tracker's goroutines, after shut and the pool's
// Close.
func (t *tracker) close() { t.wg.Wait() }
