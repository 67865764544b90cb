package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/redistest"
)

// chaosSentinelSeed draws, over 3 plain masters and 2 Sentinel votes at
// a TTL of 500 ms, a failover that loses a hold's write on one Sentinel
// vote at 0.75 s, a forced failover of the other at 1.1 s, then a client
// frozen (its links cut), and no fault on a master before them: nothing
// can leave a vote affected past its time and make the occupancy skip a
// failover, or leave the hazard's stray keys without a vote.
const chaosSentinelSeed = "266"

// With two of five votes masters Redis Sentinel manages, one failed over
// to a replica without a hold's write and the other failed over under
// load, the default quarantine keeps every hold exclusive and every token
// increasing: the second client of the hazard is refused while the first
// holds, the promoted master kept out. Every client follows each
// failover (its master's run_id changes), every failover settles, and no
// process is left running.
func TestChaosSentinelFailover(t *testing.T) {
	t.Parallel() // a soak in a process of its own that mostly waits for sentinels
	code, stdout, r := runChaos(t, "--sentinel-votes", "2", "--duration", "4s", "--ttl", "500ms", "--seed", chaosSentinelSeed)
	if code != 0 || !r.Passed {
		t.Fatalf("exit %d, verdict %s\n%s", code, r.Verdict, stdout)
	}
	if r.Violations != 0 || r.StaleTokens != 0 || r.Store.StaleAccepted != 0 || r.Quarantine != "always" {
		t.Errorf("violations %d stale tokens %d stale accepted %d, quarantine %s", r.Violations, r.StaleTokens, r.Store.StaleAccepted, r.Quarantine)
	}
	if r.SentinelVotes != 2 || len(r.Sentinels) != 2 || len(r.SentinelNodes) != 2 || len(r.Masters) != 3 {
		t.Fatalf("shape: %d Sentinel votes %v (data nodes %v), masters %v; want 2 and 3", r.SentinelVotes, r.Sentinels, r.SentinelNodes, r.Masters)
	}
	if r.Faults["sentinel-failover"] != 1 || r.Faults["sentinel-lost-write"] != 1 || len(r.FaultsSkipped) > 0 || len(r.FaultErrors) > 0 {
		t.Errorf("faults %v, skipped %v, errors %v: want a failover and one that loses a write, each applied and settled", r.Faults, r.FaultsSkipped, r.FaultErrors)
	}
	if lw := r.SentinelLostWrites; lw == nil || lw.SetUp != 1 || lw.Granted != 0 || lw.Quarantined != 1 {
		t.Errorf("lost writes %+v: want the hazard set up once, its second client refused with the promoted master quarantined", lw)
	}
	for v, n := range r.SentinelRunIDChanges {
		if n < 1 {
			t.Errorf("Sentinel vote %d: some client saw its master's run_id change %d times, want each failover followed", v, n)
		}
	}
	if len(r.SentinelRunIDChanges) != 2 {
		t.Errorf("run_id changes %v: want one count per Sentinel vote", r.SentinelRunIDChanges)
	}
	if r.Acquired < 20 || r.TokensChecked != r.Acquired {
		t.Errorf("too little was checked: %d locks, %d tokens", r.Acquired, r.TokensChecked)
	}
	if want := "--sentinel-votes 2 --local-masters 5"; !strings.Contains(stdout, want) || !strings.Contains(stdout, "--duration 4s") {
		t.Errorf("the replay lacks %q or the load's duration:\n%s", want, stdout)
	}
	var procs []string
	for i, v := range r.Sentinels {
		_, sentinels, _ := strings.Cut(v, "@")
		procs = append(append(procs, strings.Split(sentinels, ",")...), r.SentinelNodes[i]...)
	}
	for _, a := range procs {
		if err := redistest.Ping(a, 200*time.Millisecond); err == nil {
			t.Errorf("%s of a Sentinel vote still answers after the soak", a)
		}
	}
}

// What the quarantine buys: each failover that loses a hold's write
// (sentinel-lost-write) makes a quorum without the hold's key, the
// promoted master and the votes a competitor's stray keys left. With
// --quarantine off the second client is granted it while the first
// holds, and the oracle counts the overlap; with observed (which trusts
// the masters it first sees, but not a promoted one) it is refused. The
// seed draws the hazard at 0.66 s, alone on 3 votes (a minority is one).
func TestChaosSentinelLostWriteNeedsTheQuarantine(t *testing.T) {
	for _, c := range []struct {
		quarantine string
		double     bool
	}{
		{"off", true}, // the control
		{"observed", false},
	} {
		t.Run(c.quarantine, func(t *testing.T) {
			t.Parallel() // each soak in a process of its own, mostly waiting for sentinels
			code, stdout, r := runChaos(t, "--sentinel-votes", "1", "--local-masters", "3", "--quarantine", c.quarantine,
				"--duration", "2s", "--ttl", "500ms", "--seed", "1")
			lw := r.SentinelLostWrites
			if r.Faults["sentinel-lost-write"] != 1 || len(r.FaultErrors) > 0 || lw == nil || lw.SetUp != 1 {
				t.Fatalf("faults %v, errors %v, lost writes %+v: want the hazard set up once\n%s", r.Faults, r.FaultErrors, lw, stdout)
			}
			if c.double {
				if code != 1 || r.Passed || r.Violations < 1 || lw.Granted != 1 || len(r.ViolationExamples) == 0 || r.ViolationExamples[0].Resource != "sentinel-hazard" {
					t.Errorf("exit %d, violations %d %+v, lost writes %+v: want the hazard's double grant\n%s", code, r.Violations, r.ViolationExamples, lw, stdout)
				}
				return
			}
			if code != 0 || !r.Passed || r.Violations != 0 || lw.Granted != 0 || lw.Quarantined != 1 {
				t.Errorf("exit %d, violations %d, lost writes %+v: want the second client refused by the quarantine\n%s", code, r.Violations, lw, stdout)
			}
		})
	}
}

func TestChaosSentinelBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sentinel-votes", "5"}, "--sentinel-votes: must be in 0..4 (0: plain masters): each is a master, a replica and 3 sentinels, got 5"},
		{[]string{"--sentinel-votes", "-1"}, "--sentinel-votes: must be in 0..4 (0: plain masters): each is a master, a replica and 3 sentinels, got -1"},
		{[]string{"--sentinel-votes", "1", "--masters", "a:1"}, "--sentinel-votes: applies to local votes only, not --masters, got 1"},
		{[]string{"--sentinel-votes", "1", "--cluster-shards", "2"}, "--sentinel-votes: cannot be combined with --cluster-shards, got 1"},
		{[]string{"--sentinel-votes", "1", "--class", "out-of-model"}, "--sentinel-votes: applies to --class in-model only, got 1"},
		{[]string{"--sentinel-votes", "1", "--engine", "nolock"}, "--sentinel-votes: applies to --engine redlock only: the control votes nowhere, got 1"},
		{[]string{"--sentinel-votes", "3", "--local-masters", "3"}, "--sentinel-votes: must be below --local-masters (3): the plain masters take the restarts and pauses, got 3"},
	} {
		var stdout, stderr bytes.Buffer
		t.Chdir(t.TempDir())
		code := run(context.Background(), append([]string{"chaos"}, c.args...), &stdout, &stderr)
		if code != 2 || stderr.String() != "redlock-bench: "+c.want+"\n" {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, code, stderr.String(), c.want)
		}
	}
}
