package bench

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redistest"
)

func TestParseSentinel(t *testing.T) {
	v, err := ParseSentinel("mymaster@127.0.0.1:26379,127.0.0.1:26380")
	if err != nil || v.Master != "mymaster" || len(v.Addrs) != 2 || FormatSentinel(v) != "mymaster@127.0.0.1:26379,127.0.0.1:26380" {
		t.Fatalf("%+v, %v", v, err)
	}
	for bad, want := range map[string]string{
		"127.0.0.1:26379":           "want MASTER@HOST:PORT",
		"@127.0.0.1:26379":          "master name",
		"my master@127.0.0.1:1":     "without spaces",
		"m@":                        `sentinels of "m"`,
		"m@127.0.0.1":               `sentinels of "m"`,
		"m@127.0.0.1:1,127.0.0.1:1": "twice",
	} {
		if _, err := ParseSentinel(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSentinel(%q): %v, want it to say %q", bad, err, want)
		}
	}
	cfg := shortConfig("redlock@2", []string{"127.0.0.1:1", "127.0.0.1:2"})
	cfg.Sentinels = []engine.SentinelVote{{Master: "m", Addrs: []string{"127.0.0.1:3"}}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--sentinel") {
		t.Errorf("redlock@2 with a Sentinel vote: %v", err)
	}
	cfg.Engine = engines.MustParse("redlock")
	cfg.Sentinels[0].Addrs[0] = "127.0.0.1:1"
	if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "--sentinel: ") || !strings.Contains(err.Error(), "a sentinel is not a master") {
		t.Errorf("a sentinel that is also a master: %v", err)
	}
}

// A run on two plain masters and a Sentinel vote goes on through a
// failover of the Sentinel vote: the promoted master is quarantined (its
// run_id changed), the plain masters keep the quorum, and the oracle
// finds no overlapping holds.
func TestRunThroughSentinelFailoverIsSafe(t *testing.T) {
	noLeaks(t)
	masters := redistest.StartT(t, 2)
	g := redistest.StartSentinelsT(t, redistest.SentinelOptions{})
	cfg := shortConfig("redlock", masters.Addrs())
	cfg.Sentinels = []engine.SentinelVote{{Master: g.Master, Addrs: g.SentinelAddrs()}}
	// The run lasts until the test has seen what it waits for; TTL and
	// so MaxTTL outlast it, so the quarantine is still on at its end.
	cfg.Duration, cfg.TTL = 10*time.Minute, time.Minute
	var acquired atomic.Int64
	started, quarantined := make(chan struct{}), make(chan struct{})
	var startOnce, quarantineOnce atomic.Bool
	cfg.Observer = &engine.Observer{
		Acquire: func(_ context.Context, e engine.AcquireEvent) {
			if e.Err == nil && acquired.Add(1) > 0 && !startOnce.Swap(true) {
				close(started)
			}
		},
		NodeState: func(e engine.NodeStateEvent) {
			if e.Node == 2 && e.State == engine.StateQuarantined && !quarantineOnce.Swap(true) {
				close(quarantined)
			}
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := Run(ctx, cfg)
		done <- outcome{res, err}
	}()
	await := func(what string, c <-chan struct{}) {
		t.Helper()
		select {
		case <-c:
		case o := <-done:
			t.Fatalf("the run ended before %s: %v", what, o.err)
		case <-time.After(2 * time.Minute):
			t.Fatalf("no %s within 2 minutes", what)
		}
	}
	await("first acquisition", started)
	fctx, fcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer fcancel()
	promoted, err := g.Failover(fctx)
	if err != nil {
		t.Fatal(err)
	}
	await("quarantine of the Sentinel vote", quarantined)
	// The load goes on on the plain masters' quorum after the failover.
	after := acquired.Load()
	more := make(chan struct{})
	go func() {
		for acquired.Load() < after+500 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		close(more)
	}()
	await("500 acquisitions after the failover", more)
	cancel()
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	s := o.res.Summary
	if s.Violations != 0 {
		t.Fatalf("%d violations: %v", s.Violations, s.ViolationExamples)
	}
	if len(s.Nodes) != 3 {
		t.Fatalf("nodes %+v: want 2 masters and the Sentinel vote", s.Nodes)
	}
	if n := s.Nodes[2]; n.State != string(engine.StateQuarantined) || n.Restarts != 1 {
		t.Errorf("the Sentinel vote at the end: %+v, want quarantined after 1 run_id change (promoted %s)", n, promoted)
	}
}
