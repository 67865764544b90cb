package sim

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Violation is an invariant a history broke.
type Violation struct {
	Checker string
	// At is the virtual instant it shows, for the history's window.
	At time.Duration
	// A and B are the leases at fault.
	A, B   Grant
	Detail string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s at %s: %s\n  %s\n  %s", v.Checker, fmtDur(v.At), v.Detail, v.A, v.B)
}

// CheckMutualExclusion is checker 1: no two leases of one resource are
// trusted at once. A lease is trusted from the instant its holder got it
// (Granted) to the instant it stopped trusting it (End); two leases
// overlap when each began before the other ended. Meeting at one instant
// (a hand-off, a release that wakes a waiter) is not an overlap: virtual
// time does not order events within an instant.
func CheckMutualExclusion(grants []Grant) []Violation {
	byResource := make(map[string][]Grant)
	for _, g := range grants {
		byResource[g.Resource] = append(byResource[g.Resource], g)
	}
	names := make([]string, 0, len(byResource))
	for r := range byResource {
		names = append(names, r)
	}
	slices.Sort(names)
	var out []Violation
	for _, r := range names {
		gs := byResource[r]
		slices.SortFunc(gs, func(a, b Grant) int { return cmp.Or(cmp.Compare(a.Granted, b.Granted), cmp.Compare(a.ID, b.ID)) })
		var open []Grant // granted earlier, still trusted at the current grant
		for _, g := range gs {
			open = slices.DeleteFunc(open, func(p Grant) bool { return p.End <= g.Granted })
			if g.End > g.Granted {
				for _, p := range open {
					out = append(out, Violation{
						Checker: "mutual exclusion",
						At:      g.Granted,
						A:       p, B: g,
						Detail: fmt.Sprintf("%s granted to c%d/w%d while lease#%d of c%d/w%d was trusted for %s more",
							r, g.Client, g.Worker, p.ID, p.Client, p.Worker, p.End-g.Granted),
					})
				}
				open = append(open, g)
			}
		}
	}
	return out
}
