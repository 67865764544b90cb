package bench

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/fault"
)

// faultConfig is a short run on three masters the run starts itself.
func faultConfig(t *testing.T, schedule string) Config {
	t.Helper()
	s, err := fault.Parse(schedule)
	if err != nil {
		t.Fatal(err)
	}
	cfg := shortConfig("redlock", nil)
	cfg.LocalMasters = 3
	cfg.Faults = s
	cfg.Warmup = 0
	cfg.Duration = 1200 * time.Millisecond
	cfg.TTL = time.Second
	return cfg
}

// slow and cut act through the proxies the engine then dials; the faults
// show in the summary and in the intervals they were active in, and the
// nodes report the masters by their own addresses.
func TestFaultsThroughProxies(t *testing.T) {
	noLeaks(t)
	// The cut lasts a second and is due to end 900ms before the run: it is
	// applied, and master 1 gets votes while it holds, with most of a
	// second to spare for a loaded machine's late timers and stalls.
	cfg := faultConfig(t, "slow:0=20ms@100ms+400ms,cut:1@600ms+1s")
	cfg.Duration = 2500 * time.Millisecond
	res := run(t, cfg)
	s := res.Summary
	if s.Violations != 0 {
		t.Fatalf("%d violations: %+v", s.Violations, s.ViolationExamples)
	}
	if len(s.Faults) != 2 {
		t.Fatalf("faults: %+v", s.Faults)
	}
	for _, f := range s.Faults {
		if !f.Ended || f.Error != "" || f.EndedS <= f.AppliedS || f.AppliedS < f.AtS {
			t.Errorf("fault %+v", f)
		}
	}
	if len(s.Nodes) != 3 {
		t.Fatalf("nodes %+v", s.Nodes)
	}
	for i, n := range s.Nodes {
		if n.Addr != s.Masters[i] || n.Via == "" || n.Via == n.Addr {
			t.Errorf("node %d: addr %s via %s, masters %v", i, n.Addr, n.Via, s.Masters)
		}
	}
	// Master 1 was cut for a second: its votes timed out meanwhile.
	if s.Nodes[1].TimedOut == 0 && s.Nodes[1].Failed == 0 {
		t.Errorf("cut master 1 never timed out or failed: %+v", s.Nodes[1])
	}
	var marked []string
	var noQuorum int64
	for _, iv := range res.Intervals {
		marked = append(marked, iv.FaultsActive...)
		noQuorum += iv.NoQuorum
		if len(iv.MasterRTTUs) != 3 {
			t.Errorf("interval at %vs: master round trips %v, want one per master", iv.TS, iv.MasterRTTUs)
		}
	}
	if noQuorum != s.Errors["no_quorum"] { // no warm-up: every interval is measured
		t.Errorf("the intervals count %d no_quorum errors, the summary %d", noQuorum, s.Errors["no_quorum"])
	}
	if !slices.Contains(marked, "slow:0=20ms@100ms+400ms") || !slices.Contains(marked, "cut:1@600ms+1s") {
		t.Errorf("intervals do not show the faults: %+v", res.Intervals)
	}
}

// A master restarted empty is quarantined (policy observed) and the
// summary's nodes say until when.
func TestRestartShowsInNodes(t *testing.T) {
	noLeaks(t)
	cfg := faultConfig(t, "restart:2@200ms")
	cfg.TTL = 5 * time.Second
	s := run(t, cfg).Summary
	if s.Violations != 0 {
		t.Fatalf("%d violations", s.Violations)
	}
	if len(s.Faults) != 1 || s.Faults[0].Error != "" {
		t.Fatalf("faults %+v", s.Faults)
	}
	n := s.Nodes[2]
	if n.Restarts == 0 || n.State != "quarantined" || n.QuarantinedUntil.IsZero() {
		t.Errorf("restarted master: %+v", n)
	}
	if s.Nodes[0].State != "up" {
		t.Errorf("master 0: %+v", s.Nodes[0])
	}
}

func TestFaultValidation(t *testing.T) {
	kill, _ := fault.Parse("kill:0@1s")
	stall, _ := fault.Parse("stall:0@1s+1s")
	far, _ := fault.Parse("pause:7@1s+1s")
	for _, c := range []struct {
		name string
		set  func(*Config)
		want string // in the error; "" for none
	}{
		{"kill on --masters", func(c *Config) { c.Masters = []string{"a:1", "a:2", "a:3"}; c.Faults = kill },
			`--fault: item 1 "kill:0@1s": kill needs control of the master's process`},
		{"stall on --masters", func(c *Config) { c.Masters = []string{"a:1", "a:2", "a:3"}; c.Faults = stall }, ""},
		{"kill on local masters", func(c *Config) { c.Faults = kill }, ""},
		{"node out of range", func(c *Config) { c.Faults = far }, "node 7 out of range: 5 masters"},
		{"no Redis", func(c *Config) { c.Engine = engines.MustParse("nolock"); c.Faults = kill }, "engine nolock uses no Redis masters"},
		{"start-at in the past", func(c *Config) { c.StartAt = time.Now().Add(-2 * time.Second) }, "--start-at: is more than a second in the past"},
		{"start-at just now", func(c *Config) { c.StartAt = time.Now().Add(-500 * time.Millisecond) }, ""},
	} {
		cfg := DefaultConfig()
		c.set(&cfg)
		err := cfg.Validate()
		var ce *ConfigError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ce)):
			t.Errorf("%s: got %v, want a *ConfigError containing %q", c.name, err, c.want)
		}
	}
}

// --start-at waits for the wall clock, and the warm-up starts then.
// In virtual time, where the set-up takes no time, a run asked to start
// at a moment starts exactly then.
func TestStartAtWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := shortConfig("nolock", nil)
		cfg.runtimeTimers = true
		cfg.Duration = 200 * time.Millisecond
		cfg.Warmup = 0
		at := time.Now().Add(700 * time.Millisecond).Truncate(time.Millisecond)
		cfg.StartAt = at
		s := run(t, cfg).Summary
		if !s.StartedAt.Equal(at) {
			t.Errorf("started at %s, asked for %s", s.StartedAt.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
		}
		if s.Config.StartAt != at.UTC().Format(time.RFC3339Nano) {
			t.Errorf("config start_at = %v", s.Config.StartAt)
		}
	})
}
