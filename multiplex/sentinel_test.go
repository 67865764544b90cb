package multiplex_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

type sentinelVote = struct {
	Master string
	Addrs  []string
}

// A Sentinel vote votes through the master its sentinels name. After a
// failover it is a promoted replica, which may lack the keys the old master
// took just before: the pool sees its new run_id and keeps the vote out for
// MaxTTL, as after a restart (and until MaxTTL after the promotion the
// sentinels report), and Status names the new master.
func TestSentinelVoteQuarantinedAfterFailover(t *testing.T) {
	g := redistest.StartSentinelsT(t, redistest.SentinelOptions{})
	c := redistest.StartT(t, 2)
	// Observed: fresh servers vote at once, and a run_id change keeps the
	// vote out for a MaxTTL far longer than the checks below take.
	const maxTTL = 10 * time.Minute
	p, err := multiplex.Dial(context.Background(), multiplex.Options{
		Addrs: c.Addrs(), Sentinels: []sentinelVote{{g.Master, g.SentinelAddrs()}},
		Quarantine: quarantine.Observed, MaxTTL: maxTTL, NodeTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	before := p.Status()[2]
	if before.State != multiplex.StateUp || before.Master != g.Data[0].Addr() || before.RunID == "" ||
		!strings.HasPrefix(before.Addr, "sentinel("+g.Master+"@") {
		t.Fatalf("before the failover: %+v, want up on %s", before, g.Data[0].Addr())
	}
	if tally := p.Fanout(context.Background(), setCmd("s"), classifySet, nil, nil); tally.OK != 3 {
		t.Fatalf("before the failover: %+v", tally)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	promoted, err := g.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The event: the vote's client follows the sentinels to the promoted
	// master. The deadline is generous; nothing here depends on speed.
	deadline := time.Now().Add(time.Minute)
	for p.Status()[2].Master != promoted {
		if time.Now().After(deadline) {
			t.Fatalf("the vote did not follow the failover to %s within a minute: %+v", promoted, p.Status()[2])
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := p.Status()[2]
	if st.State != multiplex.StateQuarantined || st.Restarts != 1 || st.RunID == before.RunID || st.RunID == "" {
		t.Fatalf("after the failover: want quarantined with 1 restart and a new run_id, got %+v (before %+v)", st, before)
	}
	if left := time.Until(st.QuarantinedUntil); left <= 0 || left > maxTTL {
		t.Fatalf("quarantined for %v more, want up to MaxTTL %v", left, maxTTL)
	}
	// The promoted master answers, but its yes does not count. Two rules
	// keep it out (its run_id changed; the sentinels promoted it just
	// now): the error is that of the later deadline, either.
	tally := p.Fanout(context.Background(), setCmd("after"), classifySet, nil, nil)
	var qe *quarantine.Error
	if v := tally.Votes[2]; v.Outcome != multiplex.Failed || !errors.As(v.Err, &qe) || !(qe.Restarted || qe.Promoted && qe.PromotedAgo < maxTTL) {
		t.Fatalf("the promoted master's vote: %+v, want failed as quarantined (run_id changed, or promoted)", v)
	}
	if tally.OK != 2 {
		t.Fatalf("the plain masters' votes: %+v", tally)
	}
}

// A Sentinel vote whose master is also given as a plain master is one
// server with two votes: Dial refuses it.
func TestSentinelVoteSameServerAsMasterRefused(t *testing.T) {
	g := redistest.StartSentinelsT(t, redistest.SentinelOptions{})
	c := redistest.StartT(t, 1)
	p, err := multiplex.Dial(context.Background(), multiplex.Options{
		Addrs: []string{c.Nodes[0].Addr(), g.Data[0].Addr()}, Sentinels: []sentinelVote{{g.Master, g.SentinelAddrs()}},
		Quarantine: quarantine.Off, NodeTimeout: 5 * time.Second,
	})
	if err == nil {
		p.Close()
		t.Fatal("Dial accepted a Sentinel vote whose master is also a plain master")
	}
	if !errors.Is(err, multiplex.ErrNotIndependent) || !strings.Contains(err.Error(), "same run_id") {
		t.Fatalf("Dial: %v, want ErrNotIndependent naming the run_id", err)
	}
}

// Bad Sentinel votes are refused before anything is dialled, naming the
// vote and what is wrong.
func TestSentinelVoteRefusedAtDial(t *testing.T) {
	for _, tc := range []struct {
		votes []sentinelVote
		want  string
	}{
		{[]sentinelVote{{"", []string{"127.0.0.1:1"}}}, "Sentinels[0]: master name"},
		{[]sentinelVote{{"m", nil}}, "Sentinels[0]: no sentinel addresses"},
		{[]sentinelVote{{"m", []string{"127.0.0.1"}}}, `Sentinels[0].Addrs[0] "127.0.0.1": want host:port`},
		{[]sentinelVote{{"m", []string{"127.0.0.1:1", "127.0.0.1:1"}}}, "given twice"},
		{[]sentinelVote{{"m", []string{"127.0.0.1:2"}}}, "a sentinel is not a master"},
		{[]sentinelVote{{"m", []string{"127.0.0.1:1"}}, {"m", []string{"127.0.0.1:1"}}}, "one master cannot vote twice"},
	} {
		p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: []string{"127.0.0.1:2"}, Sentinels: tc.votes, Quarantine: quarantine.Off})
		if err == nil {
			p.Close()
			t.Errorf("%+v accepted", tc.votes)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want it to say %q", tc.votes, err, tc.want)
		}
	}
}
