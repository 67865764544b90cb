package sim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// The read/write lock's checkers (engine/rwmutex.go: readers share, one
// writer, writers go first once their intent is on a quorum, writers
// fenced). Its leases are Grants with RW set; their Units are none, so
// that the lock's and the semaphore's checkers leave them alone.
const (
	CheckerRWExclusion = "rw: writer exclusion"      // (1)
	CheckerRWFencing   = "rw: writer fencing"        // (2)
	CheckerRWExpiry    = "rw: trusted past expiry"   // (3)
	CheckerRWIntent    = "rw: reader past an intent" // (4)
	CheckerRWWriter    = "liveness: rw writer"       // (4)
	CheckerRWErrors    = "rw: honest errors"         // (5)
)

// The read/write lock's keys (engine/keys.go, engine/rwmutex.go): the
// holders' sorted set is at the lock's key (the name: the simulation's
// Lockers have no KeyPrefix), the waiting writers' intents at rwPrefix +
// that key; rwMember marks the holders' set.
const (
	rwPrefix = "\xffredlock:rw:"
	rwMember = "#rwlock"
)

// rwEntry is one entry of a read/write lock's sorted set: live until
// Until (virtual time), and in each of Live (the first ending at Until),
// while it stays in the set; Writer: a writer's (negative score).
type rwEntry struct {
	Until  time.Duration
	Live   []window
	Writer bool
}

// rwEntries converts a sorted set's scores to virtual deadlines through
// the master's clock, as of from (when the record was made). The scripts
// compare each entry's score with the master's clock (TIME) and leave an
// expired one in place until they remove it (a change the master logs),
// so a clock stepped back to before its score makes it live again, as
// buildSpans does a key.
func rwEntries(scores map[string]float64, clock simredis.Clock, start, from time.Time) map[string]rwEntry {
	out := make(map[string]rwEntry, len(scores))
	for m, sc := range scores {
		if m == rwMember {
			continue
		}
		score := time.UnixMicro(int64(math.Abs(sc)))
		e := rwEntry{Until: never, Writer: sc < 0}
		for at := from; ; {
			v := clock.VirtualAt(score, at)
			if v.IsZero() {
				e.Live = append(e.Live, window{at.Sub(start), never})
				break
			}
			e.Live = append(e.Live, window{at.Sub(start), v.Sub(start)})
			if at = clock.BackBefore(score, v); at.IsZero() {
				break
			}
		}
		e.Until = e.Live[0].to
		out[m] = e
	}
	return out
}

// liveIn is e's stretches of life within span s.
func (e rwEntry) liveIn(s span) []window {
	var out []window
	for _, w := range e.Live {
		if from, to := max(w.from, s.From), min(w.to, s.To); from < to {
			out = append(out, window{from, to})
		}
	}
	return out
}

// liveDuring reports whether e, in span s, was live at some instant of
// [from, to].
func (e rwEntry) liveDuring(s span, from, to time.Duration) bool {
	return slices.ContainsFunc(e.liveIn(s), func(w window) bool { return w.from <= to && w.to > from })
}

// checkRW runs the read/write lock's checkers.
func checkRW(res *Result, grants []Grant, keys keySpans, faults []FaultRecord) []Violation {
	var out []Violation
	out = append(out, CheckRWExclusion(grants)...)
	if !res.Config.NoFencing {
		out = append(out, CheckRWFencing(grants)...)
	}
	out = append(out, CheckRWExpiry(grants, keys, res.quorum)...)
	out = append(out, CheckRWIntent(grants, keys, res.quorum)...)
	out = append(out, CheckRWWriters(res.History.Events(), grants, faults, res.bounds)...)
	out = append(out, CheckRWErrors(res.History.Events(), grants, keys, res.bounds, faults)...)
	return out
}

// rwByName groups the read/write locks' leases by name, each group in
// grant order.
func rwByName(grants []Grant) map[string][]Grant {
	m := make(map[string][]Grant)
	for _, g := range grants {
		if g.RW != "" {
			m[g.Resource] = append(m[g.Resource], g)
		}
	}
	for _, gs := range m {
		slices.SortFunc(gs, func(a, b Grant) int { return cmp.Or(cmp.Compare(a.Granted, b.Granted), cmp.Compare(a.ID, b.ID)) })
	}
	return m
}

// CheckRWExclusion is checker 1 for read/write locks: a writer's trusted
// validity overlaps no other holder's, reader or writer, of the lock.
// Readers overlap each other freely.
func CheckRWExclusion(grants []Grant) []Violation {
	var out []Violation
	byName := rwByName(grants)
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		var open []Grant
		for _, g := range byName[name] {
			open = slices.DeleteFunc(open, func(p Grant) bool { return p.End <= g.Granted })
			if g.End <= g.Granted {
				continue
			}
			for _, p := range open {
				if p.RW != "write" && g.RW != "write" {
					continue
				}
				out = append(out, Violation{Checker: CheckerRWExclusion, At: g.Granted, Leases: []Grant{p, g}, Resource: name, Client: -1,
					Detail: fmt.Sprintf("%s granted to %s c%d/w%d (lease#%d) while %s lease#%d of c%d/w%d was trusted for %s more",
						name, rwRole(g), g.Client, g.Worker, g.ID, rwRole(p), p.ID, p.Client, p.Worker, p.End-g.Granted)})
			}
			open = append(open, g)
		}
	}
	return sortViolations(out)
}

func rwRole(g Grant) string {
	if g.RW == "write" {
		return "writer"
	}
	return "reader"
}

// CheckRWFencing is checker 2 for read/write locks: writers' fencing
// tokens strictly increase in grant order, per lock. (The fenced store,
// to which writers write under the lock's name, is CheckStore's.)
// Writers without a token (an unfenced Locker) are left out.
func CheckRWFencing(grants []Grant) []Violation {
	var out []Violation
	byName := rwByName(grants)
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		var prev *Grant
		for _, g := range byName[name] {
			if g.RW != "write" || g.Token == 0 {
				continue
			}
			if prev != nil && g.Token <= prev.Token {
				out = append(out, Violation{Checker: CheckerRWFencing, At: g.Granted, Leases: []Grant{*prev, g}, Resource: name, Client: -1,
					Detail: fmt.Sprintf("%s: writer's token %d granted after writer's token %d", name, g.Token, prev.Token)})
			}
			prev = &g
		}
	}
	return sortViolations(out)
}

// rwLive is, on each master, the stretches during which the sorted set's
// entry value is live: in the set, and before its own deadline. A
// restart's amnesia is not expiry (the quarantine covers it): a wiped
// entry counts until its deadline.
func rwLive(kss [][]span, value string) []window {
	var ivs []window
	for _, ss := range kss {
		var own []window
		for i, s := range ss {
			e, ok := s.Members[value]
			if s.Gone || !ok {
				continue
			}
			live := e.liveIn(s)
			if i+1 < len(ss) && ss[i+1].Cause == "restart" && e.Until > s.From {
				live = append(live, window{s.From, e.Until})
			}
			own = append(own, live...)
		}
		ivs = append(ivs, mergeWindows(own)...)
	}
	return ivs
}

// CheckRWExpiry is checker 3 for read/write locks: no lease, reader's or
// writer's, is trusted past the first instant its entry is live on fewer
// than a quorum of masters, in the masters' own view (the entry's score
// on each master's clock, converted to virtual time).
func CheckRWExpiry(grants []Grant, keys keySpans, quorum int) []Violation {
	var out []Violation
	for _, g := range grants {
		if g.RW == "" || g.End <= g.Granted {
			continue
		}
		if expired := firstShort(g.Granted, rwLive(keys[g.Resource], g.Value), quorum); g.End > expired {
			out = append(out, Violation{Checker: CheckerRWExpiry, At: expired, Leases: []Grant{g}, Resource: g.Resource, Client: g.Client,
				Detail: fmt.Sprintf("%s lease#%d of c%d/w%d trusted until %s, but its entry in %s was live on fewer than %d masters from %s",
					rwRole(g), g.ID, g.Client, g.Worker, fmtDur(g.End), g.Resource, quorum, fmtDur(expired))})
		}
	}
	return sortViolations(out)
}

// rwIntents is, on master m, the stretches during which a waiting
// writer's intent was live in the lock's intents set (spans ss), merged.
func rwIntents(ss []span) []window {
	var out []window
	for _, s := range ss {
		if s.Gone {
			continue
		}
		for _, e := range s.Members {
			out = append(out, e.liveIn(s)...)
		}
	}
	return mergeWindows(out)
}

// CheckRWIntent is checker 4's guard of a waiting writer: no reader is
// granted whose whole call (every attempt it made) fell within stretches
// during which a quorum of masters each held a live intent of a waiting
// writer. Such a master admits no new reader, and a reader needs a
// quorum of admissions, which would share a master with that quorum.
// This is what bounds a writer's wait while readers keep coming (see
// CheckRWWriters).
func CheckRWIntent(grants []Grant, keys keySpans, quorum int) []Violation {
	var out []Violation
	intents := make(map[string][][]window)
	for _, g := range grants {
		if g.RW != "read" {
			continue
		}
		ws, ok := intents[g.Resource]
		if !ok {
			for _, ss := range keys[rwPrefix+g.Resource] {
				ws = append(ws, rwIntents(ss))
			}
			intents[g.Resource] = ws
		}
		var blocked []int
		for m, list := range ws {
			for _, w := range list {
				if w.from <= g.Called && w.to > g.Granted {
					blocked = append(blocked, m)
					break
				}
			}
		}
		if len(blocked) >= quorum {
			out = append(out, Violation{Checker: CheckerRWIntent, At: g.Granted, Leases: []Grant{g}, Resource: g.Resource, Client: g.Client,
				Detail: fmt.Sprintf("reader lease#%d of c%d/w%d granted (called at %s) while masters %v held a waiting writer's intent on %s throughout",
					g.ID, g.Client, g.Worker, fmtDur(g.Called), blocked, g.Resource)})
		}
	}
	return sortViolations(out)
}

// CheckRWWriters is checker 4's bound on a writer's wait while readers
// keep coming: with no fault from Settle before a writer's Lock to its
// return, and no other writer trying the lock meanwhile (writers have no
// order among themselves), the writer holds the lock within Tight of the
// end of every lease of the lock granted before its intent could be on a
// quorum (Tight after its call: two attempts), if they were all released
// (the last release publishes), within Loose if one expired (the
// fallback), whatever readers come after. Without the intent, readers
// that overlap each other keep it out for as long as they keep coming.
func CheckRWWriters(events []Event, grants []Grant, faults []FaultRecord, b Bounds) []Violation {
	_, _, all := affected(faults, 0, b)
	byName := rwByName(grants)
	writers := make(map[string][]Event)
	for _, e := range events {
		if e.Op == "wlock" || e.Op == "trywlock" {
			writers[e.Resource] = append(writers[e.Resource], e)
		}
	}
	var out []Violation
	for _, e := range events {
		if e.Op != "wlock" || anyOverlap(all, e.Called-b.Settle, e.At+1) {
			continue
		}
		intent := e.Called + b.Tight
		if slices.ContainsFunc(writers[e.Resource], func(o Event) bool {
			return (o.Client != e.Client || o.Worker != e.Worker || o.Called != e.Called) && o.Called < e.At && o.At > intent
		}) {
			continue
		}
		free, released := e.Called, true
		for _, g := range byName[e.Resource] {
			if g.Granted < intent && g.End > e.Called {
				free = max(free, g.End)
				released = released && g.Ended == "released"
			}
		}
		// The last release that frees the lock publishes, and wakes
		// the writer (Tight, as for a Lock waiter); an entry that
		// expires instead leaves it to the fallback (Loose).
		limit := b.Loose
		if released {
			limit = b.Tight
		}
		bound := free + limit
		if e.At <= bound || (e.Result == "ok" && e.Grant >= 0 && grants[e.Grant].Granted <= bound) {
			continue
		}
		out = append(out, Violation{Checker: CheckerRWWriter, At: bound, Resource: e.Resource, Client: e.Client,
			Detail: fmt.Sprintf("c%d/w%d's write Lock of %s from %s waited past %s (%s after the leases granted before its intent ended at %s), until %s (%s), with no fault and no other writer",
				e.Client, e.Worker, e.Resource, fmtDur(e.Called), fmtDur(bound), limit, fmtDur(free), fmtDur(e.At), e.Result)})
	}
	return sortViolations(out)
}

// CheckRWErrors is checker 5 for read/write locks: a refusal is
// contention. A master that refused a reader held a live writer or a
// waiting writer's live intent at some instant of the call; one that
// refused a writer held a live entry of another (reader or writer). A
// writer's fence round that refused had another writer trusted, or an
// entry of another on a master, meanwhile (a failed attempt's own entry
// is not told apart: lenient). ErrNoQuorum only with a failed or timed
// out master, or a fault active, as CheckErrors says for the others.
func CheckRWErrors(events []Event, grants []Grant, keys keySpans, b Bounds, faults []FaultRecord) []Violation {
	_, _, all := affected(faults, 0, b)
	var out []Violation
	for _, e := range events {
		if !rwOp(e.Op) {
			continue
		}
		var ve *engine.VotesError
		hasVotes := errors.As(e.Err, &ve)
		if e.Result == "no-quorum" && !(hasVotes && ve.Failed+ve.Timeout > 0) && !anyOverlap(all, e.Called, e.At+1) {
			out = append(out, Violation{Checker: CheckerRWErrors, At: e.At, Resource: e.Resource, Client: e.Client,
				Detail: fmt.Sprintf("c%d/w%d's %s from %s got ErrNoQuorum with no master failed or timed out, and no fault active: %v", e.Client, e.Worker, e.Op, fmtDur(e.Called), e.Err)})
		}
		if e.Result != "not-acquired" {
			continue
		}
		writer := e.Op == "wlock" || e.Op == "trywlock"
		if !hasVotes {
			continue // no attempt reached a decision (the gate, Close)
		}
		holders := keys[e.Resource]
		intents := keys[rwPrefix+e.Resource]
		if ve.Op != "acquire" {
			if !rwAnother(grants, holders, e) {
				out = append(out, Violation{Checker: CheckerRWErrors, At: e.At, Resource: e.Resource, Client: e.Client,
					Detail: fmt.Sprintf("c%d/w%d's %s from %s got ErrNotAcquired from its fence round, but no other writer was trusted nor another's entry on a master: %v",
						e.Client, e.Worker, e.Op, fmtDur(e.Called), e.Err)})
			}
			continue
		}
		var empty []int
		for i, v := range ve.Votes {
			if v.Outcome != engine.OutcomeRefused {
				continue
			}
			var held bool
			if writer {
				held = rwEntryDuring(holders, i, e.Called, e.At, func(rwEntry) bool { return true })
			} else {
				held = rwEntryDuring(holders, i, e.Called, e.At, func(x rwEntry) bool { return x.Writer }) ||
					rwEntryDuring(intents, i, e.Called, e.At, func(rwEntry) bool { return true })
			}
			if !held {
				empty = append(empty, i)
			}
		}
		if len(empty) > 0 {
			what := "a live entry"
			if !writer {
				what = "a live writer or a writer's intent"
			}
			out = append(out, Violation{Checker: CheckerRWErrors, At: e.At, Resource: e.Resource, Client: e.Client,
				Detail: fmt.Sprintf("c%d/w%d's %s from %s got ErrNotAcquired, but masters %v that refused held no %s of %s meanwhile: %v",
					e.Client, e.Worker, e.Op, fmtDur(e.Called), empty, what, e.Resource, e.Err)})
		}
	}
	return sortViolations(out)
}

// rwOp reports whether op is a read/write lock's acquisition.
func rwOp(op string) bool {
	switch op {
	case "rlock", "tryrlock", "wlock", "trywlock":
		return true
	}
	return false
}

// rwEntryDuring reports whether master m's sorted set (spans kss) held an
// entry that match accepts, live, at some instant of [from, to].
func rwEntryDuring(kss [][]span, m int, from, to time.Duration, match func(rwEntry) bool) bool {
	if m >= len(kss) {
		return false
	}
	for _, s := range kss[m] {
		if s.Gone || s.From > to || s.To <= from {
			continue
		}
		for _, x := range s.Members {
			if match(x) && x.liveDuring(s, from, to) {
				return true
			}
		}
	}
	return false
}

// rwAnother reports whether, while e ran, another writer's lease of the
// lock was trusted, or a master held a live entry that no lease of e's
// worker granted in the call carries.
func rwAnother(grants []Grant, holders [][]span, e Event) bool {
	own := ""
	if e.Grant >= 0 {
		own = grants[e.Grant].Value
	}
	for _, g := range grants {
		if g.RW != "" && g.Resource == e.Resource && (g.Client != e.Client || g.Worker != e.Worker) && g.Granted < e.At && g.End > e.Called {
			return true
		}
	}
	for _, ss := range holders {
		for _, s := range ss {
			if s.Gone || s.From > e.At || s.To <= e.Called {
				continue
			}
			for v, x := range s.Members {
				if v != own && x.liveDuring(s, e.Called, e.At) {
					return true
				}
			}
		}
	}
	return false
}
