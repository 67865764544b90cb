package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/fault"
)

// A run refuses an engine that votes on more masters than it has, and
// checks faults, and the redlock engine's rules, against the masters the
// engine votes on.
func TestValidateVoters(t *testing.T) {
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Engine, c.LocalMasters = engines.MustParse("redlock@4"), 3 }, "--engine: votes on the first 4 masters, and the run has 3, got redlock@4"},
		{func(c *Config) {
			c.Engine, c.Masters = engines.MustParse("redsync-rueidis@3"), []string{"127.0.0.1:1", "127.0.0.1:2"}
		},
			"--engine: votes on the first 3 masters, and the run has 2, got redsync-rueidis@3"},
		{func(c *Config) {
			c.Engine, c.LocalMasters = engines.MustParse("bsm-redislock"), 3
			c.Faults, _ = fault.Parse("kill:2@1s")
		}, `--fault: item 1 "kill:2@1s": node 2 out of range: 1 masters (0-0); nodes are 0-based, in --masters order, got kill:2@1s`},
	} {
		cfg := DefaultConfig()
		c.change(&cfg)
		if err := cfg.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("got %v\nwant %s", err, c.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Engine, cfg.Masters = engines.MustParse("redlock@1"), []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	if err := cfg.Validate(); err != nil || cfg.voters() != 1 {
		t.Errorf("redlock@1 on three masters: %v, voters %d", err, cfg.voters())
	}
	cfg.Engine = engines.MustParse("rueidislock")
	cfg.Masters = nil
	if err := cfg.Validate(); err != nil || cfg.voters() != 1 || len(cfg.Warnings()) > 0 {
		t.Errorf("rueidislock on local masters: %v, voters %d, warnings %v", err, cfg.voters(), cfg.Warnings())
	}
}

// A run of a one-master engine on local masters starts only the one it
// votes on.
func TestOneMasterRunStartsOneMaster(t *testing.T) {
	noLeaks(t)
	cfg := shortConfig("redlock@1", nil)
	cfg.LocalMasters = 3
	cfg.Warmup = 0
	byCount(&cfg, 300)
	s := run(t, cfg).Summary
	if len(s.Masters) != 1 || !s.LocalMasters || s.Acquired == 0 {
		t.Errorf("masters %v local %v acquired %d, want one local master", s.Masters, s.LocalMasters, s.Acquired)
	}
	if !strings.HasPrefix(s.Label, "redlock_1-w16-r4-try") {
		t.Errorf("label %q: the @ of redlock@1 must become a label character", s.Label)
	}
}

// In a comparison, an engine named NAME@N gets labels and a directory
// made of label characters, and keeps its name in the comparison.
func TestCompareLabelsEngineWithVoters(t *testing.T) {
	noLeaks(t)
	f := &fakeRuns{}
	cc := compareConfig(t, f, "bsm-redislock", "redlock@1")
	cmp, err := RunCompare(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.configs[1]; got.Engine.String() != "redlock@1" || got.Label != "t-1-redlock_1" {
		t.Errorf("run 2: engine %q label %q, want redlock@1, t-1-redlock_1", got.Engine, got.Label)
	}
	if r := cmp.Runs[1]; r.Engine != "redlock@1" || r.Dir != "1-redlock_1" {
		t.Errorf("compare.json run 2: engine %q dir %q", r.Engine, r.Dir)
	}
}
