package sim

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/mutation"
)

var (
	flagHunt      = flag.String("sim.hunt", "", "TestHunt: the mutation switches to hunt, by name, separated by commas, or all")
	flagHuntSeeds = flag.Int("sim.huntseeds", 10000, "TestHunt: the most seeds per switch")
)

// expected names the checkers that a switch's bug must trip: a violation
// of another checker (a finding of the engine with every fix on, say)
// does not count as finding it.
var expected = map[string][]string{
	mutation.HandOffEndedLease.Name():        {CheckerHandoff, CheckerExclusion},
	mutation.StaleShorterExtend.Name():       {CheckerExpiry, CheckerExclusion},
	mutation.LateReleaseWakesNext.Name():     {CheckerTurn, CheckerWait},
	mutation.SplitVoteStaleEntry.Name():      {CheckerTurn, CheckerWait},
	mutation.QuitKeepsTurn.Name():            {CheckerTurn, CheckerWait},
	mutation.GhostInQueue.Name():             {CheckerTurn, CheckerWait},
	mutation.FencingWithoutClockFloor.Name(): {CheckerFencing, CheckerStore},
}

// found returns the first violation of res that a checker of the switch
// reports.
func found(res *Result, sw string) (Violation, bool) {
	for _, v := range res.Violations {
		if slices.Contains(expected[sw], v.Checker) {
			return v, true
		}
	}
	return Violation{}, false
}

// alsoWithout reports whether cfg without its mutation trips checker in
// one of two runs.
func alsoWithout(t *testing.T, cfg Config, checker string) bool {
	cfg.Mutation = ""
	for range 2 {
		res := runSeed(t, cfg)
		for _, v := range res.Violations {
			if v.Checker == checker {
				return true
			}
		}
	}
	return false
}

// TestHunt runs, for each switch of -sim.hunt, seeds from -sim.first with
// the switch on until a checker finds its bug (at most -sim.huntseeds),
// and reports the seeds it took, the wall time, and the case shrunk.
func TestHunt(t *testing.T) {
	if *flagHunt == "" {
		t.Skip("set -sim.hunt to the switches to hunt (or all)")
	}
	names := strings.Split(*flagHunt, ",")
	if *flagHunt == "all" {
		names = nil
		for _, s := range mutation.All {
			names = append(names, s.Name())
		}
	}
	var table []string
	for _, name := range names {
		if mutation.ByName(name) == nil {
			t.Fatalf("-sim.hunt: no switch %q (want one of %s)", name, mutationNames())
		}
		t.Run(name, func(t *testing.T) {
			began := time.Now()
			for i := range *flagHuntSeeds {
				seed := *flagFirst + uint64(i)
				cfg := simConfig(t, seed)
				cfg.Mutation = name
				res := runSeed(t, cfg)
				if res == nil {
					return
				}
				v, ok := found(res, name)
				if !ok {
					continue
				}
				// The bug's, not one the engine shows with every fix on:
				// the seed without the switch must not trip that checker.
				if alsoWithout(t, cfg, v.Checker) {
					t.Logf("%s: seed %d trips %s without the switch too; not counted", name, seed, v.Checker)
					continue
				}
				wall := time.Since(began)
				t.Logf("%s: found by %s at seed %d (%d seeds, %s):\n%s", name, v.Checker, seed, i+1, wall.Round(time.Millisecond), Report(res))
				row := fmt.Sprintf("%-28s %6d %10s  %-22s", name, i+1, wall.Round(time.Second), v.Checker)
				if *flagShrink {
					// Keep only the violations of this switch's checkers,
					// so that the shrink follows its bug.
					res.Violations = []Violation{v}
					small, shrunk := Shrink(t, res, *flagShrinkTries, *flagShrinkRuns)
					if shrunk != nil {
						t.Logf("%s: shrunk to %s:\nreplay: %s", name, describeCase(small), Replay(small))
						row += "  " + describeCase(small)
					}
				}
				table = append(table, row)
				return
			}
			t.Errorf("%s: not found in %d seeds (%s)", name, *flagHuntSeeds, time.Since(began).Round(time.Second))
			table = append(table, fmt.Sprintf("%-28s not found in %d seeds", name, *flagHuntSeeds))
		})
	}
	t.Logf("switch                        seeds       wall  checker                 shrunk case\n%s", strings.Join(table, "\n"))
}
