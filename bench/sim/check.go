package sim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// The checkers' names, as violations carry them.
const (
	CheckerExclusion = "mutual exclusion"      // (1)
	CheckerPermits   = "semaphore permits"     // (1)
	CheckerAllKeys   = "all or nothing"        // (1)
	CheckerHandoff   = "ended lease handed on" // (1)
	CheckerFencing   = "fencing order"         // (2)
	CheckerStore     = "fenced store"          // (2)
	CheckerExpiry    = "trusted past expiry"   // (3)
	CheckerWait      = "liveness: waiter"      // (4)
	CheckerTurn      = "liveness: turn"        // (4)
	CheckerLeftover  = "liveness: leftover"    // (4)
	CheckerClose     = "liveness: close"       // (4)
	CheckerErrors    = "honest errors"         // (5)
)

// Violation is an invariant a history broke.
type Violation struct {
	Checker string
	// At is the virtual instant it shows, for the history's window.
	At time.Duration
	// Leases are the leases at fault, if any.
	Leases []Grant
	Detail string
	// Resource and Client name what it concerns, when it does (the
	// history's window is narrowed to them); Client -1 for none.
	Resource string
	Client   int
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s at %s: %s", v.Checker, fmtDur(v.At), v.Detail)
	for _, g := range v.Leases {
		b.WriteString("\n  ")
		b.WriteString(g.String())
	}
	return b.String()
}

// Bounds are what the liveness checker allows, from the Lockers'
// configuration. Span is a round's longest span (MaxRoundSpan: the node
// timeout plus a watchdog period).
type Bounds struct {
	Span time.Duration
	// Tight: once a release, an undo or a quit made the resource free (or
	// held only by turn tokens) on a quorum, with no fault anywhere near,
	// a Lock waiter waiting since before gets it within Tight: a wake-up,
	// and twice the back-off after a turn token, and five rounds (an
	// attempt refused where a release is still on its way, then an
	// attempt and its fencing round, with room).
	Tight time.Duration
	// Loose: however the resource became free on a quorum of healthy
	// masters, a Lock waiter of a healthy client gets it within Loose:
	// its fallback, and what Tight allows besides.
	Loose time.Duration
	// Close: Locker.Close returns within Close: the three round spans it
	// waits for calls under way, and one more for the rest.
	Close time.Duration
	// Quarantine is how long a restarted master sits out (MaxTTL).
	Quarantine time.Duration
	// Settle is how long after a fault the checkers treat its master or
	// client as still affected (reconnections, the notifier's retry).
	Settle time.Duration
}

const (
	engineTurnGrace = 50 * time.Millisecond // engine's turnGrace
	quietBefore     = 2 * time.Second       // notifier's longest retry, twice
)

func boundsOf(ec engine.Config) Bounds {
	span := ec.NodeTimeout + min(max(ec.NodeTimeout/4, time.Millisecond), 25*time.Millisecond)
	backoff := engineTurnGrace + ec.Wait.RetryDelayMax
	return Bounds{
		Span:       span,
		Tight:      2*backoff + 5*span,
		Loose:      ec.Wait.FallbackMax + 2*backoff + 6*span,
		Close:      4 * span,
		Quarantine: ec.MaxTTL,
		Settle:     quietBefore,
	}
}

func (b Bounds) String() string {
	return fmt.Sprintf("round span %s; waiter woken by a release within %s, any waiter within %s of a free quorum; Close within %s",
		b.Span, b.Tight, b.Loose, b.Close)
}

// Check runs every checker over a run's history and the masters' logs.
func Check(res *Result) []Violation {
	h := res.History
	grants := h.Grants()
	keys := buildSpans(res.keyLogs, res.clocks, h.start)
	fenced := !res.Config.NoFencing
	var out []Violation
	out = append(out, CheckMutualExclusion(grants)...)
	out = append(out, CheckPermits(grants)...)
	out = append(out, CheckAllOrNothing(res.allAttempts, grants, keys)...)
	out = append(out, CheckHandoffs(grants)...)
	if fenced {
		out = append(out, CheckFencing(grants)...)
		out = append(out, CheckStore(h.Writes())...)
	}
	out = append(out, CheckExpiry(grants, keys, res.quorum)...)
	faults := h.Faults()
	out = append(out, CheckWaiters(h.Events(), grants, keys, faults, res.quorum, res.Config.Masters, res.bounds)...)
	out = append(out, CheckTurns(h.Events(), grants, keys, res.leaves, faults, res.bounds)...)
	out = append(out, CheckLeftovers(res.Leftovers, res.Virtual)...)
	out = append(out, CheckClose(h.Closes(), res.bounds)...)
	errs := CheckErrors(h.Events(), grants, keys, faults, res.bounds)
	if res.Config.PermitMismatch {
		// The handle of another count meets ErrPermitCount, and so do
		// the others where its check set its count (on a master that
		// restarted without one).
		errs = slices.DeleteFunc(errs, func(v Violation) bool {
			return v.Resource == semName(0) && strings.Contains(v.Detail, "ErrPermitCount")
		})
		out = append(out, CheckPermitCount(grants, keys, res.Config.Masters, res.quorum, res.bounds.Quarantine)...)
	}
	out = append(out, errs...)
	out = append(out, CheckRemoteValidity(h.Events(), grants, keys, res.quorum)...)
	out = append(out, checkRW(res, grants, keys, faults)...)
	return out
}

// CheckMutualExclusion is checker 1: no two leases of one unit are
// trusted at once: of one resource, whether each holds it alone or with
// others (a multi-resource lease is a holder of each of its resources),
// or of one semaphore's slot. A lease is trusted from the instant its
// holder got it (Granted) to the instant it stopped trusting it (End); two
// leases overlap when each began before the other ended. Meeting at one
// instant (a hand-off, a release that wakes a waiter) is not an overlap:
// virtual time does not order events within an instant.
func CheckMutualExclusion(grants []Grant) []Violation {
	var out []Violation
	for u, gs := range byUnit(grants) {
		var open []Grant // granted earlier, still trusted at the current grant
		for _, g := range gs {
			open = slices.DeleteFunc(open, func(p Grant) bool { return p.End <= g.Granted })
			if g.End > g.Granted {
				for _, p := range open {
					out = append(out, Violation{
						Checker: CheckerExclusion, At: g.Granted, Leases: []Grant{p, g}, Resource: unitResource(u), Client: -1,
						Detail: fmt.Sprintf("%s granted to c%d/w%d (lease#%d) while lease#%d of c%d/w%d was trusted for %s more",
							u, g.Client, g.Worker, g.ID, p.ID, p.Client, p.Worker, p.End-g.Granted),
					})
				}
				open = append(open, g)
			}
		}
	}
	return sortViolations(out)
}

// CheckPermits is checker 1 for semaphores: at no instant are more of a
// semaphore's permits trusted than it has, and each permit's slot is one
// of its own (that no two trusted permits share a slot is
// CheckMutualExclusion's, a slot being a unit). Where handles disagree on
// the count (Config.PermitMismatch), the bound is the larger count, which
// the engine keeps whatever its count check sees (every count takes the
// same slots from 0); CheckPermitCount holds the check itself.
func CheckPermits(grants []Grant) []Violation {
	byName := make(map[string][]Grant)
	most := make(map[string]int)
	for _, g := range grants {
		if g.Permits > 0 {
			byName[g.Resource] = append(byName[g.Resource], g)
			most[g.Resource] = max(most[g.Resource], g.Permits)
		}
	}
	var out []Violation
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		gs := byName[name]
		slices.SortFunc(gs, func(a, b Grant) int { return cmp.Or(cmp.Compare(a.Granted, b.Granted), cmp.Compare(a.ID, b.ID)) })
		var open []Grant
		for _, g := range gs {
			if g.Permit < 0 || g.Permit >= g.Permits {
				out = append(out, Violation{Checker: CheckerPermits, At: g.Granted, Leases: []Grant{g}, Resource: name, Client: g.Client,
					Detail: fmt.Sprintf("lease#%d of c%d/w%d holds slot %d of %s, which has %d permits", g.ID, g.Client, g.Worker, g.Permit, name, g.Permits)})
			}
			open = slices.DeleteFunc(open, func(p Grant) bool { return p.End <= g.Granted })
			if g.End <= g.Granted {
				continue
			}
			open = append(open, g)
			if bound := most[name]; len(open) > bound {
				var ids []string
				for _, p := range open {
					ids = append(ids, fmt.Sprintf("lease#%d (slot %d)", p.ID, p.Permit))
				}
				out = append(out, Violation{Checker: CheckerPermits, At: g.Granted, Leases: slices.Clone(open), Resource: name, Client: -1,
					Detail: fmt.Sprintf("%s, of %d permits, had %d trusted at once: %s", name, bound, len(open), strings.Join(ids, ", "))})
			}
		}
	}
	return sortViolations(out)
}

// CheckAllOrNothing is checker 1 for locks on several resources, from the
// masters' logs: a master's acquire of several resources takes all their
// keys or none, in one step, and every later script (extend, release,
// undo) acts on all of them at once; so from the instant the acquire ran
// on a master until none of its keys holds its value there, either all
// of them hold it or none. A master that holds a strict subset answered
// yes, or counted, for keys it does not hold. Attempts that failed are
// judged too: the engine undoes them, but the script's guard is the same.
func CheckAllOrNothing(attempts []simredis.AllAttempt, grants []Grant, keys keySpans) []Violation {
	byValue := make(map[string]Grant)
	for _, g := range grants {
		if g.Resources != nil {
			byValue[g.Value] = g
		}
	}
	var out []Violation
	for _, a := range attempts {
		// Each key holds the value from the acquire on, in one stretch
		// (nothing sets it again), or not at all: the stretches must end
		// together.
		ends := make([]time.Duration, len(a.Keys))
		first, last := never, a.At
		for i, k := range a.Keys {
			ends[i] = heldUntil(keys[k], a.Master, a.At, a.Value)
			first, last = min(first, ends[i]), max(last, ends[i])
		}
		if first == last {
			continue
		}
		var have, lack []string
		for i, k := range a.Keys {
			if ends[i] > first {
				have = append(have, k)
			} else {
				lack = append(lack, k)
			}
		}
		at := max(first, a.At)
		v := Violation{Checker: CheckerAllKeys, At: at, Resource: lack[0], Client: -1,
			Detail: fmt.Sprintf("master%d: %s's acquire of %v at %s: its value held %v and not %v from %s",
				a.Master, a.Client, a.Keys, fmtDur(a.At), have, lack, fmtDur(at))}
		if g, ok := byValue[a.Value]; ok {
			v.Leases, v.Client = []Grant{g}, g.Client
		}
		out = append(out, v)
	}
	return sortViolations(out)
}

// heldUntil is the end of the stretch from instant at (after the changes
// made at it) during which, on master m, the key whose spans are ss held
// value v (marked or not); at itself if it did not hold it then.
// Stretches of no length (a script's steps within one instant) are
// passed over.
func heldUntil(ss [][]span, m int, at time.Duration, v string) time.Duration {
	if m >= len(ss) {
		return at
	}
	list := ss[m]
	// The last span that began at or before at: the state after at.
	i := sort.Search(len(list), func(i int) bool { return list[i].From > at }) - 1
	if i < 0 || list[i].To <= at || !list[i].holds(v) {
		return at
	}
	end := list[i].To
	for j := i + 1; j < len(list) && list[j].From == end; j++ {
		switch {
		case list[j].holds(v):
			end = list[j].To
		case list[j].To > list[j].From:
			return end
		}
	}
	return end
}

// byUnit groups grants by each unit they hold, each group in grant
// order, in the order of the units' names.
func byUnit(grants []Grant) func(yield func(string, []Grant) bool) {
	m := make(map[string][]Grant)
	for _, g := range grants {
		for _, u := range g.Units() {
			m[u] = append(m[u], g)
		}
	}
	return func(yield func(string, []Grant) bool) {
		for _, r := range slices.Sorted(maps.Keys(m)) {
			gs := m[r]
			slices.SortFunc(gs, func(a, b Grant) int { return cmp.Or(cmp.Compare(a.Granted, b.Granted), cmp.Compare(a.ID, b.ID)) })
			if !yield(r, gs) {
				return
			}
		}
	}
}

func sortViolations(vs []Violation) []Violation {
	slices.SortStableFunc(vs, func(a, b Violation) int { return cmp.Compare(a.At, b.At) })
	return vs
}

// CheckHandoffs is checker 1's second half: a lease that ended (lost or
// expired) before its holder released it is never handed on at the gate.
// A hand-off keeps the keys, so a successor of a lost lease holds keys
// that may belong to someone else already.
func CheckHandoffs(grants []Grant) []Violation {
	last := make(map[string]Grant) // by value: the lease's last holder so far
	var out []Violation
	gs := slices.Clone(grants)
	slices.SortFunc(gs, func(a, b Grant) int { return cmp.Or(cmp.Compare(a.Granted, b.Granted), cmp.Compare(a.ID, b.ID)) })
	for _, g := range gs {
		if p, ok := last[g.Value]; ok && g.Wake == engine.WakeHandoff.String() && p.Ended != "released" && p.Ended != "" {
			out = append(out, Violation{Checker: CheckerHandoff, At: g.Granted, Leases: []Grant{p, g}, Resource: g.Resource, Client: g.Client,
				Detail: fmt.Sprintf("lease#%d had ended (%s) before its holder released it, and was handed on to c%d/w%d", p.ID, p.Ended, g.Client, g.Worker)})
		}
		last[g.Value] = g
	}
	return out
}

// CheckFencing is checker 2: fencing tokens strictly increase per unit
// in grant order: per resource, across the leases on it alone and on
// several; per semaphore slot (the engine promises no order across a
// semaphore's slots). Leases without a token (a Locker without fencing)
// are left out: the others' tokens still increase.
func CheckFencing(grants []Grant) []Violation {
	var out []Violation
	fenced := slices.DeleteFunc(slices.Clone(grants), func(g Grant) bool { return g.Token == 0 })
	for u, gs := range byUnit(fenced) {
		for i := 1; i < len(gs); i++ {
			p, g := gs[i-1], gs[i]
			if g.Token <= p.Token {
				out = append(out, Violation{Checker: CheckerFencing, At: g.Granted, Leases: []Grant{p, g}, Resource: unitResource(u), Client: -1,
					Detail: fmt.Sprintf("%s: token %d granted after token %d", u, g.Token, p.Token)})
			}
		}
	}
	return sortViolations(out)
}

// CheckStore is checker 2 seen from the protected resource: with fencing,
// it rejects every stale write (by a holder after a later one with a
// token began), and accepts every write of the latest holder with a
// token. Writes without a token (a Locker without fencing) are not
// judged: the store cannot tell them apart.
func CheckStore(writes []StoreWrite) []Violation {
	var out []Violation
	for _, w := range writes {
		switch {
		case w.Token == 0:
		case w.Outrun && w.Accepted:
			out = append(out, Violation{Checker: CheckerStore, At: w.At, Resource: unitResource(w.Resource), Client: -1,
				Detail: fmt.Sprintf("stale write accepted: %s", w)})
		case !w.Outrun && !w.Accepted:
			out = append(out, Violation{Checker: CheckerStore, At: w.At, Resource: unitResource(w.Resource), Client: -1,
				Detail: fmt.Sprintf("the latest holder's write rejected (tokens went backwards): %s", w)})
		}
	}
	return out
}

// span is one stretch of a key's state on one master, from the master's
// log, in virtual time since the run started.
type span struct {
	From, To time.Duration
	Gone     bool
	Value    string
	// Cause began it ("expired" for a key gone because its deadline
	// passed, "restart", or the command); Client is the connection's
	// client, for a command.
	Cause  string
	Client string
	// Deadline is when the key would expire if nothing changed it
	// (virtual time; -1: never).
	Deadline time.Duration
	// Members are a read/write lock's sorted set's entries (see
	// simredis.KeyRecord's Scores), each with when it stops being live.
	Members map[string]rwEntry
}

// never is the end of spans that last to the end of the run.
const never = time.Duration(1<<63 - 1)

// keySpans is every key's spans, by key, then by master.
type keySpans map[string][][]span

// buildSpans turns the masters' logs into spans, splitting a key's life
// at its deadline: the key expired then, though the master noticed only
// when something looked. A key holds its value from the command that set
// it to the next change the master logged, at every instant its master's
// clock has not passed its deadline: a clock stepped back to before the
// deadline makes a key that nothing looked at meanwhile live again (a
// span "revived", until the clock passes the deadline again), as on
// Redis, which deletes an expired key only when a command finds it; the
// master logs each such deletion as a change.
func buildSpans(logs [][]simredis.KeyRecord, clocks []simredis.Clock, start time.Time) keySpans {
	out := make(keySpans)
	for m, log := range logs {
		byKey := make(map[string][]simredis.KeyRecord)
		for _, r := range log {
			byKey[r.Key] = append(byKey[r.Key], r)
		}
		for key, recs := range byKey {
			if out[key] == nil {
				out[key] = make([][]span, len(logs))
			}
			var ss []span
			for i, r := range recs {
				to := never
				if i+1 < len(recs) {
					to = recs[i+1].At
				}
				s := span{From: r.At, To: to, Gone: r.Gone, Value: r.Value, Cause: r.Cause, Client: r.Client, Deadline: -1}
				if r.Gone || r.ExpireAt.IsZero() {
					if r.Scores != nil {
						s.Members = rwEntries(r.Scores, clocks[m], start, start.Add(r.At))
					}
					ss = append(ss, s)
					continue
				}
				ss = append(ss, lifeSpans(s, r.Scores, r.ExpireAt, clocks[m], start)...)
			}
			out[key][m] = ss
		}
	}
	return out
}

// lifeSpans splits s, the state a command left a key in with deadline
// expireAt on the master's clock, into the stretches it holds (the first
// s's own, the later ones "revived" by a clock stepped back) and the
// stretches it is gone ("expired"), up to s.To.
func lifeSpans(s span, scores map[string]float64, expireAt time.Time, clock simredis.Clock, start time.Time) []span {
	var out []span
	to := s.To
	for {
		if scores != nil {
			s.Members = rwEntries(scores, clock, start, start.Add(s.From))
		}
		v := clock.VirtualAt(expireAt, start.Add(s.From))
		if v.IsZero() {
			s.To = to
			return append(out, s)
		}
		s.Deadline = v.Sub(start)
		if s.Deadline >= to {
			s.To = to
			return append(out, s)
		}
		s.To = s.Deadline
		out = append(out, s)
		back := clock.BackBefore(expireAt, v)
		if back.IsZero() || back.Sub(start) >= to {
			return append(out, span{From: s.Deadline, To: to, Gone: true, Cause: "expired", Deadline: -1})
		}
		out = append(out, span{From: s.Deadline, To: back.Sub(start), Gone: true, Cause: "expired", Deadline: -1})
		s = span{From: back.Sub(start), Value: s.Value, Cause: "revived", Client: s.Client, Deadline: -1}
	}
}

// holds reports whether the span holds lease value v (marked by a waiter
// or not).
func (s span) holds(v string) bool {
	return !s.Gone && (s.Value == v || s.Value == v+"+")
}

// CheckExpiry is checker 3: no lease is trusted past the moment one of
// its keys (its resource's, each of a multi-resource lease's, a permit's
// slot's) expires on a quorum, in the masters' own view: on each master,
// the key holds the lease's value from a command until a command changes
// it or its deadline on that master's clock passes. A restart's amnesia
// does not count as expiry (the quarantine covers it): a key a restart
// wiped is counted until its deadline.
func CheckExpiry(grants []Grant, keys keySpans, quorum int) []Violation {
	var out []Violation
	for _, g := range grants {
		if g.End <= g.Granted {
			continue
		}
		expired, key := never, ""
		for _, u := range g.Units() {
			if e := expiryOf(g, keys[unitKey(u)], quorum); e < expired {
				expired, key = e, u
			}
		}
		if g.End > expired {
			out = append(out, Violation{Checker: CheckerExpiry, At: expired, Leases: []Grant{g}, Resource: unitResource(key), Client: g.Client,
				Detail: fmt.Sprintf("lease#%d of c%d/w%d trusted until %s, but its key of %s was on fewer than %d masters from %s",
					g.ID, g.Client, g.Worker, fmtDur(g.End), key, quorum, fmtDur(expired))})
		}
	}
	return sortViolations(out)
}

// expiryOf is the first instant from g's grant on at which fewer than a
// quorum of masters held its value in the key whose spans are kss.
func expiryOf(g Grant, kss [][]span, quorum int) time.Duration {
	// Each master's stretches holding the value, as [from, to).
	var ivs []window
	for _, ss := range kss {
		var own []window
		for i, s := range ss {
			if !s.holds(g.Value) {
				continue
			}
			to := s.To
			if i+1 < len(ss) && ss[i+1].Cause == "restart" && s.Deadline >= 0 {
				to = s.Deadline
			}
			own = append(own, window{s.From, to})
		}
		ivs = append(ivs, mergeWindows(own)...)
	}
	return firstShort(g.Granted, ivs, quorum)
}

// mergeWindows is the union of one master's stretches, which overlap
// after a failover: the promoted replica's older copy of a value while
// the value wiped with its primary still counts until its deadline.
func mergeWindows(ws []window) []window {
	if len(ws) < 2 {
		return ws
	}
	slices.SortFunc(ws, func(a, b window) int { return cmp.Compare(a.from, b.from) })
	out := ws[:1]
	for _, w := range ws[1:] {
		if last := &out[len(out)-1]; w.from <= last.to {
			last.to = max(last.to, w.to)
			continue
		}
		out = append(out, w)
	}
	return out
}

// firstShort is the first instant from granted on at which fewer than a
// quorum of the stretches ivs (each a master's, none of one master
// overlapping another of it) hold.
func firstShort(granted time.Duration, ivs []window, quorum int) time.Duration {
	// The first instant from Granted on at which fewer than a quorum
	// hold it: Granted, or the end of a stretch.
	candidates := []time.Duration{granted}
	for _, w := range ivs {
		if w.to >= granted && w.to != never {
			candidates = append(candidates, w.to)
		}
	}
	slices.Sort(candidates)
	expired := never
	for _, c := range candidates {
		n := 0
		for _, w := range ivs {
			if w.from <= c && c < w.to {
				n++
			}
		}
		if n < quorum {
			expired = c
			break
		}
	}
	return expired
}

// window is a stretch of virtual time.
type window struct{ from, to time.Duration }

func (w window) overlaps(from, to time.Duration) bool { return w.from < to && from < w.to }

// affected returns, per master and per client, the stretches during which
// faults affect them: while a fault lasts and Settle after (Quarantine
// more after a restart or a clock jump); and every fault's stretch, for
// the quiet windows.
func affected(faults []FaultRecord, masters int, b Bounds) (byMaster map[int][]window, byClient map[int][]window, all []window) {
	byMaster, byClient = make(map[int][]window), make(map[int][]window)
	for _, f := range faults {
		if f.Kind == FaultDriftQuorum {
			// Clocks fast within the bound stop nothing, delay nothing:
			// the keys there expire sooner, if anything.
			continue
		}
		w := window{f.At, f.End + b.Settle}
		if f.Kind == FaultRestart || f.Kind == FaultJumpClock {
			w.to += b.Quarantine
		}
		all = append(all, w)
		switch {
		case f.Kind == FaultStepBack:
			// The keys on those masters live Jump longer (masters 0:
			// the caller wants all alone).
			if masters > 0 {
				for _, m := range f.masters(masters) {
					byMaster[m] = append(byMaster[m], w)
				}
			}
		case f.Kind == FaultBreakConn:
			byMaster[f.Master] = append(byMaster[f.Master], w)
			byClient[f.Client] = append(byClient[f.Client], w)
		case f.Kind.onMaster():
			byMaster[f.Master] = append(byMaster[f.Master], w)
		case f.Kind.onClient():
			byClient[f.Client] = append(byClient[f.Client], w)
		}
	}
	return byMaster, byClient, all
}

func anyOverlap(ws []window, from, to time.Duration) bool {
	for _, w := range ws {
		if w.overlaps(from, to) {
			return true
		}
	}
	return false
}

// availability is a resource's stretches during which it is free or held
// by turn tokens only (nobody holds a lock) on at least a quorum of the
// counted masters, with how the last master that made the quorum became
// free: "command" (a release, undo or quit), "expired" or "restart".
type availability struct {
	from, to time.Duration
	cause    string
}

// available computes r's availability over the masters for which count
// reports true (a master's faults make it not count while they last),
// looking again at each instant of also, where count may change.
func available(ss [][]span, quorum int, count func(m int, from, to time.Duration) bool, also []time.Duration) []availability {
	type edge struct {
		at    time.Duration
		m     int
		avail bool
		cause string
	}
	var edges []edge
	for m, list := range ss {
		if len(list) > 0 && list[0].From > 0 {
			edges = append(edges, edge{0, m, true, "start"})
		}
		for _, s := range list {
			av := s.Gone || strings.HasPrefix(s.Value, turnPrefix)
			edges = append(edges, edge{s.From, m, av, s.Cause})
		}
	}
	if len(ss) == 0 {
		return nil
	}
	for _, at := range also {
		edges = append(edges, edge{at: at, m: -1})
	}
	slices.SortStableFunc(edges, func(a, b edge) int { return cmp.Compare(a.at, b.at) })
	state := make([]bool, len(ss))
	for m := range state {
		state[m] = len(ss[m]) == 0 // a key never written is free throughout
	}
	var out []availability
	var cur *availability
	for i, e := range edges {
		prev := e.avail
		if e.m >= 0 {
			prev, state[e.m] = state[e.m], e.avail
		}
		if i+1 < len(edges) && edges[i+1].at == e.at {
			continue
		}
		n := 0
		for m, av := range state {
			if av && count(m, e.at, e.at) {
				n++
			}
		}
		switch {
		case n >= quorum && cur == nil:
			// What freed the master that made the quorum.
			cause := "expired"
			if e.m >= 0 && e.avail && !prev && e.cause != "expired" && e.cause != "restart" && e.cause != "start" {
				cause = "command"
			}
			cur = &availability{from: e.at, to: never, cause: cause}
		case n < quorum && cur != nil:
			cur.to = e.at
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

// CheckWaiters is checker 4's first part: a Lock waiter never waits more
// than a stated bound while the resource is free on a quorum (see
// Bounds): Tight after a release, an undo or a quit freed it with no
// fault near (quietBefore before, to the bound after), Loose however it
// was freed, counting only healthy masters and waiters of healthy
// clients.
func CheckWaiters(events []Event, grants []Grant, keys keySpans, faults []FaultRecord, quorum, masters int, b Bounds) []Violation {
	byMaster, byClient, _ := affected(faults, masters, b)
	all := waiterQuiet(faults, b)
	waits := make(map[string][]Event)
	for _, e := range events {
		if e.Op == "lock" {
			waits[e.Resource] = append(waits[e.Resource], e)
		}
	}
	// The instants a master's health changes, for the loose check.
	var bounds []time.Duration
	for _, ws := range byMaster {
		for _, w := range ws {
			bounds = append(bounds, w.from, w.to)
		}
	}
	var out []Violation
	for _, r := range slices.Sorted(maps.Keys(waits)) {
		ss := keys[r]
		if ss == nil {
			continue
		}
		// Tight: every master counts, in quiet windows only.
		for _, a := range available(ss, quorum, func(int, time.Duration, time.Duration) bool { return true }, nil) {
			if a.cause != "command" || a.to-a.from <= b.Tight || anyOverlap(all, a.from-b.Settle, a.from+b.Tight) {
				continue
			}
			if e, ok := waiterThrough(waits[r], a.from, a.from+b.Tight, nil); ok {
				out = append(out, Violation{Checker: CheckerWait, At: a.from + b.Tight, Resource: r, Client: e.Client,
					Detail: fmt.Sprintf("%s was released to a free quorum at %s, and nobody took it for %s while c%d/w%d waited in Lock from %s (bound %s after a release)",
						r, fmtDur(a.from), durOrEnd(a), e.Client, e.Worker, fmtDur(e.Called), b.Tight)})
			}
		}
		healthy := func(m int, from, to time.Duration) bool { return !anyOverlap(byMaster[m], from, to+1) }
		for _, a := range available(ss, quorum, healthy, bounds) {
			if a.to-a.from <= b.Loose {
				continue
			}
			if e, ok := waiterThrough(waits[r], a.from, a.from+b.Loose, byClient); ok {
				out = append(out, Violation{Checker: CheckerWait, At: a.from + b.Loose, Resource: r, Client: e.Client,
					Detail: fmt.Sprintf("%s was free on a quorum of healthy masters from %s for %s while c%d/w%d waited in Lock from %s (bound %s)",
						r, fmtDur(a.from), durOrEnd(a), e.Client, e.Worker, fmtDur(e.Called), b.Loose)})
			}
		}
	}
	return sortViolations(out)
}

// waiterQuiet is affected's every-fault stretches for the waiter check's
// tight bound, but for a slot migration's, which ends at its hand-over:
// from then on the slot's commands go to the new owner at once (MOVED),
// and the sharded subscriptions the old owner ended (SUNSUBSCRIBE) are to
// be made again there, within the Settle a quiet window has before its
// release. A waiter that sleeps through a release later than that was
// left on an ended subscription.
func waiterQuiet(faults []FaultRecord, b Bounds) []window {
	var out []window
	for _, f := range faults {
		if f.Kind == FaultDriftQuorum {
			continue
		}
		w := window{f.At, f.End + b.Settle}
		switch f.Kind {
		case FaultRestart, FaultJumpClock:
			w.to += b.Quarantine
		case FaultMigrate:
			w.to = f.End
		}
		out = append(out, w)
	}
	return out
}

func durOrEnd(a availability) string {
	if a.to == never {
		return "the rest of the run"
	}
	return (a.to - a.from).String()
}

// waiterThrough finds a Lock call in progress from before from until
// after to, of a client that no fault affected meanwhile (byClient nil:
// any).
func waiterThrough(waits []Event, from, to time.Duration, byClient map[int][]window) (Event, bool) {
	for _, e := range waits {
		if e.Called <= from && e.At > to && (byClient == nil || !anyOverlap(byClient[e.Client], e.Called, to)) {
			return e, true
		}
	}
	return Event{}, false
}

// CheckTurns is checker 4's second part: a release, an undo or a quit
// gives the turn (a turn token, "~" and the waiter's id, see the engine's
// queue.go) only to a waiter that can use it:
//   - never to a gone waiter: a token whose waiter had left (no Lock
//     call of its client on the resource was under way) and held no
//     lease must be passed on (by the waiter's quit, or its release), not
//     expire unused while the next waiter sleeps;
//   - never by the late release of a marked lock while another lease of
//     the resource is trusted that had its place in that master's queue
//     since its Lock began, and whose leave (sent once it acquired) had
//     reached that master: the release must then pop that holder (whose
//     token then expires unused), not wake a waiter to be refused by a
//     quorum.
//     A late release on a master the holder never queued on (it took the
//     resource without queueing, or its attempt is still on its way
//     there), or a quit that passes on a free key, cannot know of it, and
//     the waiter it wakes costs one refused attempt.
//
// Its own holder's token (a late release that pops the waiter that has
// just acquired) is by design. Stretches near a fault (Settle before
// the token) are not judged: a quit lost with its connection is the
// fault's doing.
func CheckTurns(events []Event, grants []Grant, keys keySpans, leaves []simredis.Leave, faults []FaultRecord, b Bounds) []Violation {
	_, _, all := affected(faults, 0, b)
	// Locker ids → client, from the waiters' lock values each client set.
	lockers := make(map[string]int)
	for _, byMaster := range keys {
		for _, ss := range byMaster {
			for _, s := range ss {
				id, _, ok := strings.Cut(s.Value, ".")
				l, _, ok2 := strings.Cut(id, ":")
				var c int
				if ok && ok2 && !strings.HasPrefix(s.Value, turnPrefix) && s.Client != "" {
					if _, err := fmt.Sscanf(s.Client, "c%d", &c); err == nil {
						lockers[l] = c
					}
				}
			}
		}
	}
	var out []Violation
	for _, r := range slices.Sorted(maps.Keys(keys)) {
		for m, ss := range keys[r] {
			for i := 0; i < len(ss); i++ {
				s := ss[i]
				if s.Gone || !strings.HasPrefix(s.Value, turnPrefix) {
					continue
				}
				// The token from the command that gave it to its end: a
				// waiter's attempt that finds it marks it ("+") in place,
				// and a clock stepped back revives it after it expired.
				token := strings.TrimSuffix(s.Value, "+")
				last := i
				for {
					if last+1 < len(ss) && !ss[last+1].Gone && strings.TrimSuffix(ss[last+1].Value, "+") == token {
						last++
						continue
					}
					if last+2 < len(ss) && ss[last+1].Cause == "expired" && ss[last+2].Cause == "revived" {
						last += 2
						continue
					}
					break
				}
				end, expired := ss[last].To, last+1 < len(ss) && ss[last+1].Cause == "expired"
				first := i
				i = last
				if s.Cause == "restart" || anyOverlap(all, s.From-b.Settle, end+1) {
					continue
				}
				id := strings.TrimPrefix(token, turnPrefix)
				own := false
				var other *Grant
				for _, g := range grants {
					if !g.on(r) || g.Granted > s.From || g.End <= s.From {
						continue
					}
					if strings.HasPrefix(g.Value, id+".") {
						own = true
					} else if g.Granted < s.From {
						other = &g
					}
				}
				switch {
				case own:
				case other != nil && (s.Cause == "EVALSHA release" || s.Cause == "EVAL release") && first > 0 && lateLock(ss[first-1]) &&
					queuedBefore(keys[queuePrefix+r], m, other.Called, s.From, other.Value) && leftBefore(leaves, m, r, other.Called, s.From, other.Value):
					out = append(out, Violation{Checker: CheckerTurn, At: s.From, Resource: r, Client: -1, Leases: []Grant{*other},
						Detail: fmt.Sprintf("master%d gave %s's turn to waiter %s while lease#%d of c%d/w%d, queued there, held it", m, r, id, other.ID, other.Client, other.Worker)})
				case expired:
					l, _, _ := strings.Cut(id, ":")
					c, known := lockers[l]
					if !known || waitingDuring(events, c, r, s.From, end) {
						continue
					}
					out = append(out, Violation{Checker: CheckerTurn, At: s.From, Resource: r, Client: c,
						Detail: fmt.Sprintf("master%d gave %s's turn to waiter %s of c%d, which was gone, and the turn expired unused at %s", m, r, id, c, fmtDur(end))})
				}
			}
		}
	}
	return sortViolations(out)
}

// leftBefore reports whether the leave of the waiter whose lease value
// is value reached master m in [since, at): the engine had acted there on
// its acquisition (kept its place at the head, or left), so a late
// release after it must pop that holder. Before it, the release may pass
// the leave on the wire.
func leftBefore(leaves []simredis.Leave, m int, resource string, since, at time.Duration, value string) bool {
	id, _, ok := strings.Cut(value, ".")
	if !ok {
		return false
	}
	for _, l := range leaves {
		if l.Master == m && l.Resource == resource && l.ID == id && l.At >= since && l.At < at {
			return true
		}
	}
	return false
}

// lateLock reports whether span s held a lock marked by a waiter: the
// release that replaced it with a turn token was that lock's own, not a
// quit passing on a free key.
func lateLock(s span) bool {
	return !s.Gone && !strings.HasPrefix(s.Value, turnPrefix) && strings.HasSuffix(s.Value, "+")
}

// queuedBefore reports whether the waiter whose lease value is value (a
// queued waiter's starts with its id and ".") had a place in master m's
// queue at some instant of [since, at).
func queuedBefore(queue [][]span, m int, since, at time.Duration, value string) bool {
	id, _, ok := strings.Cut(value, ".")
	if !ok || m >= len(queue) {
		return false
	}
	for _, q := range queue[m] {
		if q.From < at && q.To > since && !q.Gone && slices.Contains(strings.Fields(strings.Trim(q.Value, "<>")), id) {
			return true
		}
	}
	return false
}

// waitingDuring reports whether a Lock call of client on resource, or a
// LockAll call on a set that holds it, was under way at some instant of
// [from, to].
func waitingDuring(events []Event, client int, resource string, from, to time.Duration) bool {
	for _, e := range events {
		if (e.Op == "lock" || e.Op == "lockall") && e.Client == client && e.on(resource) && e.Called <= to && e.At >= from {
			return true
		}
	}
	return false
}

// CheckLeftovers is checker 4's third part: no key (lock, queue entry,
// turn token) and no subscription outlives the run, once every client
// has closed and the keys' TTLs (twice the lock's, for the queues) ran
// out.
func CheckLeftovers(leftovers []string, end time.Duration) []Violation {
	var out []Violation
	for _, l := range leftovers {
		out = append(out, Violation{Checker: CheckerLeftover, At: end, Client: -1, Detail: "left on a master after every client closed: " + strings.ToValidUTF8(l, "?")})
	}
	return out
}

// CheckClose is checker 4's fourth part: Locker.Close returns within
// Bounds.Close.
func CheckClose(closes []CloseRecord, b Bounds) []Violation {
	var out []Violation
	for _, c := range closes {
		if d := c.Done - c.Began; d > b.Close {
			out = append(out, Violation{Checker: CheckerClose, At: c.Done, Client: c.Client,
				Detail: fmt.Sprintf("c%d's Close took %s (bound %s)", c.Client, d, b.Close)})
		}
	}
	return out
}

// CheckErrors is checker 5: errors are honest. ErrNotAcquired only when
// some holder existed while the call ran: a lease of another worker was
// trusted, or a key or turn token of another was on a master (for a
// refusal by the in-process gate, another worker of the client was in
// Lock or held the resource). For a semaphore, a master that refused held
// a slot key meanwhile; a split over which slot is free is contention too.
// For several resources, a master that refused held a key of one of them.
// ErrNoQuorum only with failed masters: the VotesError shows failures or
// timeouts, or a fault was active. ErrPermitCount never: every client
// uses the same permit count; nor ErrWrongType: no name is two kinds.
func CheckErrors(events []Event, grants []Grant, keys keySpans, faults []FaultRecord, b Bounds) []Violation {
	owner := make(map[string][]Grant) // lease value → its grants (hand-offs share it)
	for _, g := range grants {
		owner[g.Value] = append(owner[g.Value], g)
	}
	_, _, all := affected(faults, 0, b)
	slots := semSlots(keys)
	// A lease keeps its worker on the resource, at the gate, until its
	// Release returns (it hands the gate on after the deletes), or to the
	// end of the run if its Release, or its hold, was still under way.
	released := make(map[int]time.Duration)
	for _, e := range events {
		if e.Op == "release" && e.Grant >= 0 {
			released[e.Grant] = max(released[e.Grant], e.At)
		}
	}
	// Each worker's calls and holds, by (key, client, worker): gate, of
	// Lock and TryLock and their leases (the gate's), and busy, of every
	// acquisition and lease (a value a worker of the client set).
	gate := make(map[[3]any][]window)
	busy := make(map[[3]any][]window)
	for _, e := range events {
		if acquiring(e.Op) {
			for _, k := range opKeys(e, slots) {
				busy[[3]any{k, e.Client, e.Worker}] = append(busy[[3]any{k, e.Client, e.Worker}], window{e.Called, e.At})
			}
		}
		if e.Op == "lock" || e.Op == "trylock" {
			k := [3]any{e.Resource, e.Client, e.Worker}
			gate[k] = append(gate[k], window{e.Called, e.At})
		}
	}
	for i, g := range grants {
		end := max(g.End, g.Granted+1)
		if at, ok := released[i]; ok {
			end = max(end, at)
		} else if g.Ended == "released" || g.Ended == "" {
			end = never
		}
		for _, u := range g.Units() {
			busy[[3]any{unitKey(u), g.Client, g.Worker}] = append(busy[[3]any{unitKey(u), g.Client, g.Worker}], window{g.Granted, end})
		}
		if g.Permits == 0 && g.Resources == nil {
			k := [3]any{g.Resource, g.Client, g.Worker}
			gate[k] = append(gate[k], window{g.Granted, end})
		}
	}
	// othersIn reports whether another worker of e's client was in ops on
	// one of keys at some instant of [from, to).
	othersIn := func(ops map[[3]any][]window, e Event, keys []string, from, to time.Duration) bool {
		for k, ws := range ops {
			if slices.Contains(keys, k[0].(string)) && k[1] == e.Client && k[2] != e.Worker && anyOverlap(ws, from, to) {
				return true
			}
		}
		return false
	}
	var out []Violation
	for _, e := range events {
		if !acquiring(e.Op) && e.Op != "extend" && e.Op != "release" {
			continue
		}
		client := fmt.Sprintf("c%d", e.Client)
		ks := opKeys(e, slots)
		switch {
		case e.Result == "permit-count":
			out = append(out, Violation{Checker: CheckerErrors, At: e.At, Resource: e.Resource, Client: e.Client,
				Detail: fmt.Sprintf("c%d/w%d's %s got ErrPermitCount, though every client uses the same count: %v", e.Client, e.Worker, e.Op, e.Err)})
		case e.Result == "wrong-type":
			// No name is used as two kinds (r*, s*, rw*): a key of
			// another type is the engine's own (a cluster refusing a
			// script's key of another slot comes back as one).
			out = append(out, Violation{Checker: CheckerErrors, At: e.At, Resource: e.Resource, Client: e.Client,
				Detail: fmt.Sprintf("c%d/w%d's %s got ErrWrongType, though no name is used as two kinds: %v", e.Client, e.Worker, e.Op, e.Err)})
		case e.Result == "not-acquired" && acquiring(e.Op):
			var ve *engine.VotesError
			if !errors.As(e.Err, &ve) {
				if e.Op != "lock" && e.Op != "trylock" {
					out = append(out, Violation{Checker: CheckerErrors, At: e.At, Resource: e.Resource, Client: e.Client,
						Detail: fmt.Sprintf("c%d/w%d's %s got ErrNotAcquired without the masters' votes: %v", e.Client, e.Worker, e.Op, e.Err)})
					continue
				}
				// The in-process gate: another worker of the client.
				if !othersIn(gate, e, ks, e.Called-1, e.At+1) { // one instant either way: a head that left as this call came
					out = append(out, Violation{Checker: CheckerErrors, At: e.At, Resource: e.Resource, Client: e.Client,
						Detail: fmt.Sprintf("c%d/w%d's %s got ErrNotAcquired from the gate while no other worker of c%d used %s: %v", e.Client, e.Worker, e.Op, e.Client, e.Resource, e.Err)})
				}
				continue
			}
			if ve.Op != "acquire" {
				// A fence round refused: a higher counter, or our key gone.
				busyOthers := func(e Event, from, to time.Duration) bool { return othersIn(busy, e, ks, from, to) }
				if !heldByAnother(e, client, ks, grants, keys, owner, busyOthers) {
					out = append(out, Violation{Checker: CheckerErrors, At: e.At, Resource: e.Resource, Client: e.Client,
						Detail: fmt.Sprintf("c%d/w%d's %s from %s got ErrNotAcquired, but no other holder was trusted, nor any key of another on a master: %v", e.Client, e.Worker, e.Op, fmtDur(e.Called), e.Err)})
				}
				continue
			}
			// An attempt is never refused by its own value: each master
			// that refused held someone else's key or turn token (one of
			// the keys, for a semaphore or several resources).
			var empty []int
			for i, v := range ve.Votes {
				if v.Outcome != engine.OutcomeRefused {
					continue
				}
				held := false
				for _, k := range ks {
					held = held || keyDuring(keys[k], i, e.Called, e.At)
				}
				if !held {
					empty = append(empty, i)
				}
			}
			split := ve.Refused == 0 && (e.Op == "acquire" || e.Op == "tryacquire")
			if (ve.Refused == 0 && !split) || len(empty) > 0 {
				out = append(out, Violation{Checker: CheckerErrors, At: e.At, Resource: e.Resource, Client: e.Client,
					Detail: fmt.Sprintf("c%d/w%d's %s from %s got ErrNotAcquired, but masters %v that refused held no key of %s meanwhile: %v", e.Client, e.Worker, e.Op, fmtDur(e.Called), empty, e.Resource, e.Err)})
			}
		case e.Result == "no-quorum":
			var ve *engine.VotesError
			if errors.As(e.Err, &ve) && ve.Failed+ve.Timeout > 0 {
				continue
			}
			if anyOverlap(all, e.Called, e.At+1) {
				continue
			}
			out = append(out, Violation{Checker: CheckerErrors, At: e.At, Resource: e.Resource, Client: e.Client,
				Detail: fmt.Sprintf("c%d/w%d's %s from %s got ErrNoQuorum with no master failed or timed out, and no fault active: %v", e.Client, e.Worker, e.Op, fmtDur(e.Called), e.Err)})
		}
	}
	return sortViolations(out)
}

// acquiring reports whether op is an acquisition: of a lock, of several,
// of a semaphore's permit.
func acquiring(op string) bool {
	switch op {
	case "lock", "trylock", "lockall", "trylockall", "acquire", "tryacquire":
		return true
	}
	return false
}

// opKeys are the keys an acquisition asks for: its resource's, each of
// its set's, or every slot of its semaphore (slots: by name, see
// semSlots).
func opKeys(e Event, slots map[string][]string) []string {
	switch {
	case e.Resources != nil:
		return e.Resources
	case e.Op == "acquire" || e.Op == "tryacquire":
		return slots[e.Resource]
	}
	return []string{e.Resource}
}

// semSlots finds each semaphore's slot keys among the masters' keys, by
// the semaphore's name.
func semSlots(keys keySpans) map[string][]string {
	out := make(map[string][]string)
	for k := range keys {
		rest, ok := strings.CutPrefix(k, semPrefix+"{")
		if !ok {
			continue
		}
		name, i, ok := strings.Cut(rest, "}:")
		if _, err := strconv.Atoi(i); ok && err == nil {
			out[name] = append(out[name], k)
		}
	}
	for _, ks := range out {
		slices.Sort(ks)
	}
	return out
}

// keyDuring reports whether master m held key's spans ss with a value
// at some instant of [from, to].
func keyDuring(ss [][]span, m int, from, to time.Duration) bool {
	if m >= len(ss) {
		return false
	}
	for _, s := range ss[m] {
		if !s.Gone && s.From <= to && s.To > from {
			return true
		}
	}
	return false
}

// heldByAnother reports whether, while e ran, a lease of another worker
// on one of e's keys was trusted, or a master held a key or turn token of
// another there: a turn token (nobody's attempt is refused by its own),
// the value of a lease handed out (not the failed attempt's own), a value
// set by another client, or one set by e's client while another of its
// workers used the key.
func heldByAnother(e Event, client string, ks []string, grants []Grant, keys keySpans, owner map[string][]Grant,
	othersBusy func(Event, time.Duration, time.Duration) bool) bool {
	for _, g := range grants {
		if (g.Client != e.Client || g.Worker != e.Worker) && g.Granted < e.At && g.End > e.Called &&
			slices.ContainsFunc(g.Units(), func(u string) bool { return slices.Contains(ks, unitKey(u)) }) {
			return true
		}
	}
	for _, k := range ks {
		for _, ss := range keys[k] {
			for _, s := range ss {
				switch {
				case s.Gone || s.To <= e.Called || s.From > e.At:
				case strings.HasPrefix(s.Value, turnPrefix):
					return true
				case len(owner[strings.TrimSuffix(s.Value, "+")]) > 0:
					return true
				case s.Client != client || othersBusy(e, max(s.From, e.Called), min(s.To, e.At)+1):
					return true
				}
			}
		}
	}
	return false
}
