package sim

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// The checkers of what a holder asks the masters about its lease
// (Lease.RemoteValidity, with Config.RemoteValidity) and of a semaphore's
// permit count (with Config.PermitMismatch).
const (
	CheckerRemote = "remote validity" // (3), (5)
	CheckerCount  = "permit count"    // (1)
)

// CheckRemoteValidity judges each RemoteValidity call against the
// masters' logs, for every kind of lease (read/write ones by their entry
// in the lock's sorted set):
//   - a lease that a quorum of masters held, each without a gap from the
//     call to its return, is not reported lost (ErrLockLost): every
//     master of that quorum found it;
//   - the validity it vouches for is there: the lease's keys stay on a
//     quorum (in the masters' own view, as checker 3 counts) from the
//     call until the validity it answered ran out, or until the holder
//     next acted on the lease (an Extend may shorten its keys, a Release
//     deletes them), whichever comes first.
func CheckRemoteValidity(events []Event, grants []Grant, keys keySpans, quorum int) []Violation {
	// Each lease's later calls, for the end of what an answer vouches for.
	acts := make(map[int][]time.Duration)
	for _, e := range events {
		if e.Grant >= 0 && (e.Op == "extend" || e.Op == "release") {
			acts[e.Grant] = append(acts[e.Grant], e.Called)
		}
	}
	var out []Violation
	for _, e := range events {
		if e.Op != "remotevalidity" || e.Grant < 0 {
			continue
		}
		g := grants[e.Grant]
		switch e.Result {
		case "lost":
			if n := heldThrough(g, keys, e.Called, e.At); n >= quorum {
				out = append(out, Violation{Checker: CheckerRemote, At: e.At, Leases: []Grant{g}, Resource: g.Resource, Client: g.Client,
					Detail: fmt.Sprintf("c%d/w%d's RemoteValidity of lease#%d from %s reported it lost, but %d masters held it throughout: %v",
						e.Client, e.Worker, g.ID, fmtDur(e.Called), n, e.Err)})
			}
		case "ok":
			until := e.Called + e.Left
			for _, at := range acts[e.Grant] {
				if at >= e.At && at < until {
					until = at
				}
			}
			if short := shortFrom(g, keys, e.Called, quorum); short < until {
				out = append(out, Violation{Checker: CheckerRemote, At: short, Leases: []Grant{g}, Resource: g.Resource, Client: g.Client,
					Detail: fmt.Sprintf("c%d/w%d's RemoteValidity of lease#%d from %s vouched for %s, but its keys were on fewer than %d masters from %s",
						e.Client, e.Worker, g.ID, fmtDur(e.Called), e.Left, quorum, fmtDur(short))})
			}
		}
	}
	return sortViolations(out)
}

// heldThrough counts the masters that held every key of lease g (a
// read/write lease's entry, live) without a gap through [from, to], by
// what was there: a restart's amnesia is a gap.
func heldThrough(g Grant, keys keySpans, from, to time.Duration) int {
	through := func(own []window) bool {
		return slices.ContainsFunc(joinWindows(own), func(w window) bool { return w.from <= from && w.to > to })
	}
	n := 0
	for m := range masterCount(g, keys) {
		all := true
		if g.RW != "" {
			var own []window
			for _, s := range masterSpans(keys[g.Resource], m) {
				if e, ok := s.Members[g.Value]; !s.Gone && ok {
					own = append(own, window{s.From, min(s.To, e.Until)})
				}
			}
			all = through(own)
		} else {
			for _, u := range g.Units() {
				// A value's stretch on one master may be cut into spans
				// (a waiter marks it, an Extend moves its deadline):
				// joined, as checker 3 merges them.
				var own []window
				for _, s := range masterSpans(keys[unitKey(u)], m) {
					if s.holds(g.Value) {
						own = append(own, window{s.From, s.To})
					}
				}
				all = all && through(own)
			}
		}
		if all {
			n++
		}
	}
	return n
}

// shortFrom is the first instant from `from` on at which fewer than a
// quorum of masters held lease g's keys (its entry, for a read/write
// lease), as checker 3 counts them.
func shortFrom(g Grant, keys keySpans, from time.Duration, quorum int) time.Duration {
	if g.RW != "" {
		return firstShort(from, rwLive(keys[g.Resource], g.Value), quorum)
	}
	short := never
	for _, u := range g.Units() {
		short = min(short, expiryOf(Grant{Granted: from, Value: g.Value}, keys[unitKey(u)], quorum))
	}
	return short
}

// masterCount ranges over the masters the lease's keys' spans know.
func masterCount(g Grant, keys keySpans) func(func(int) bool) {
	n := len(keys[g.Resource])
	for _, u := range g.Units() {
		n = max(n, len(keys[unitKey(u)]))
	}
	return func(yield func(int) bool) {
		for m := range n {
			if !yield(m) {
				return
			}
		}
	}
}

func masterSpans(kss [][]span, m int) []span {
	if m >= len(kss) {
		return nil
	}
	return kss[m]
}

// joinWindows merges windows that touch (one ends where the next
// begins), in order.
func joinWindows(ws []window) []window {
	var out []window
	for _, w := range ws {
		if n := len(out); n > 0 && w.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, w.to)
			continue
		}
		out = append(out, w)
	}
	return out
}

// CheckPermitCount is checker 1 for a semaphore whose handles disagree
// on its permit count (Config.PermitMismatch): a handle's attempts carry
// the count check until a quorum of masters answered one without finding
// another count, and one every MaxTTL/2 after (engine/checkclock.go).
// So while at least Masters−quorum+1 masters kept another count (the
// others' handles keep it there), from MaxTTL before the attempt to its
// grant, no quorum could have answered this handle's check, and every
// attempt of it carried one, which those masters refuse: it is granted
// no permit. Its count is the larger by one, so a grant it got then would
// make it one holder more than the masters' count allows.
func CheckPermitCount(grants []Grant, keys keySpans, masters, quorum int, maxTTL time.Duration) []Violation {
	counts := make(map[string][]int)
	for _, g := range grants {
		if g.Permits > 0 && !slices.Contains(counts[g.Resource], g.Permits) {
			counts[g.Resource] = append(counts[g.Resource], g.Permits)
		}
	}
	var out []Violation
	for _, g := range grants {
		cs := counts[g.Resource]
		if g.Permits == 0 || len(cs) < 2 || g.Permits == slices.Min(cs) {
			continue
		}
		kept := strconv.Itoa(slices.Min(cs))
		from := g.Called - maxTTL
		n := 0
		for _, ss := range keys[semPrefix+"{"+g.Resource+"}:permits"] {
			if slices.ContainsFunc(joinWindows(valueWindows(ss, kept)), func(w window) bool { return w.from <= from && w.to > g.Granted }) {
				n++
			}
		}
		if n >= masters-quorum+1 {
			out = append(out, Violation{Checker: CheckerCount, At: g.Granted, Leases: []Grant{g}, Resource: g.Resource, Client: g.Client,
				Detail: fmt.Sprintf("c%d/w%d's handle of %d permits got slot %d of %s, while %d masters kept the count %s from %s on: its check must have refused it",
					g.Client, g.Worker, g.Permits, g.Permit, g.Resource, n, kept, fmtDur(max(from, 0)))})
		}
	}
	return sortViolations(out)
}

// valueWindows are the stretches in which one master's key (spans ss)
// held value v.
func valueWindows(ss []span, v string) []window {
	var out []window
	for _, s := range ss {
		if !s.Gone && s.Value == v {
			out = append(out, window{s.From, s.To})
		}
	}
	return out
}
