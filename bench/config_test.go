package bench

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/fault"
)

func TestParseDistribution(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Distribution
		ok   bool
	}{
		{"uniform", Distribution{}, true},
		{"zipf:1.1", Distribution{Zipf: true, S: 1.1}, true},
		{"zipf:2", Distribution{Zipf: true, S: 2}, true},
		{"zipf:1", Distribution{}, false},
		{"zipf:0.5", Distribution{}, false},
		{"zipf:-3", Distribution{}, false},
		{"zipf:NaN", Distribution{}, false},
		{"zipf:Inf", Distribution{}, false},
		{"zipf:", Distribution{}, false},
		{"zipf", Distribution{}, false},
		{"Uniform", Distribution{}, false},
		{"", Distribution{}, false},
	} {
		got, err := ParseDistribution(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseDistribution(%q) = %+v, %v; want %+v, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestParseHold(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Hold
		ok   bool
	}{
		{"0", Hold{}, true},
		{"0s", Hold{}, true},
		{"1ms", Hold{D: time.Millisecond}, true},
		{"exp:2ms", Hold{Kind: HoldExp, D: 2 * time.Millisecond}, true},
		{"uniform:1ms-5ms", Hold{Kind: HoldUniform, Min: time.Millisecond, Max: 5 * time.Millisecond}, true},
		{"uniform:0s-1s", Hold{Kind: HoldUniform, Max: time.Second}, true},
		{"uniform:3ms-3ms", Hold{Kind: HoldUniform, Min: 3 * time.Millisecond, Max: 3 * time.Millisecond}, true},
		{"-1ms", Hold{}, false},
		{"exp:0", Hold{}, false},
		{"exp:-1ms", Hold{}, false},
		{"exp:", Hold{}, false},
		{"uniform:5ms-1ms", Hold{}, false},
		{"uniform:-1ms-5ms", Hold{}, false},
		{"uniform:1ms", Hold{}, false},
		{"uniform:a-b", Hold{}, false},
		{"1", Hold{}, false},
		{"soon", Hold{}, false},
		{"", Hold{}, false},
	} {
		got, err := ParseHold(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseHold(%q) = %+v, %v; want %+v, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestValidateNamesTheFlagAndValue(t *testing.T) {
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Workers = 0 }, "--workers: must be > 0, got 0"},
		{func(c *Config) { c.Workers = -3 }, "--workers: must be > 0, got -3"},
		{func(c *Config) { c.Clients = 0 }, "--clients: must be > 0, got 0"},
		{func(c *Config) { c.Clients = 65 }, "--clients: must be <= --workers (64)"},
		{func(c *Config) { c.Resources = 0 }, "--resources: must be > 0, got 0"},
		{func(c *Config) { c.LocalMasters = 0 }, "--local-masters: must be > 0, got 0"},
		{func(c *Config) { c.TTL = 0 }, "--ttl: must be > 0, got 0s"},
		{func(c *Config) { c.Duration = -time.Second }, "--duration: must be > 0, got -1s"},
		{func(c *Config) { c.Warmup = -time.Second }, "--warmup: must be >= 0, got -1s"},
		{func(c *Config) { c.WaitTimeout = 0 }, "--wait-timeout: must be > 0"},
		{func(c *Config) { c.Rate = -1 }, "--rate: must be 0"},
		{func(c *Config) { c.Mode = "block" }, "--mode: must be try or wait, got block"},
		{func(c *Config) { c.Label = "a/b" }, "--label: may hold only"},
		{func(c *Config) { c.Masters = []string{"nohost"} }, "--masters: address \"nohost\""},
		{func(c *Config) { c.Distribution = Distribution{Zipf: true, S: 0.5} }, "--distribution: zipf exponent"},
		{func(c *Config) { c.Hold = Hold{Kind: HoldExp} }, "--hold: exp mean must be > 0"},
	} {
		cfg := DefaultConfig()
		c.change(&cfg)
		err := cfg.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Validate() = %v, want a ConfigError starting %q", err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("error %q spans lines", err)
		}
	}
	d := DefaultConfig()
	if err := d.Validate(); err != nil {
		t.Errorf("DefaultConfig is invalid: %v", err)
	}
	d.Ops, d.Duration = 100, 0
	if err := d.Validate(); err != nil {
		t.Errorf("--ops without --duration must be valid: %v", err)
	}
}

func TestDeriveLabel(t *testing.T) {
	c := DefaultConfig()
	if got := DeriveLabel(c); got != "redlock-w64-r1000-try" {
		t.Errorf("default label = %q", got)
	}
	c.Distribution = Distribution{Zipf: true, S: 1.1}
	c.Mode = ModeWait
	c.Hold = Hold{Kind: HoldUniform, Min: 500 * time.Microsecond, Max: time.Millisecond}
	c.Rate = 5000
	c.Clients = 4
	got := DeriveLabel(c)
	if got != "redlock-w64-r1000-c4-zipf1.1-wait-holduniform500us-1ms-rate5000" {
		t.Errorf("label = %q", got)
	}
	if err := ValidateLabel(got); err != nil {
		t.Errorf("derived label %q is not a valid label: %v", got, err)
	}
	c.Rate = 0
	c.Extend, c.Fencing, c.DisableGate, c.DisableNotify = true, true, true, true
	c.Faults = fault.Schedule{{Action: fault.Pause, Node: 1, At: time.Second, For: time.Second}}
	if got := DeriveLabel(c); got != "redlock-w64-r1000-c4-zipf1.1-wait-holduniform500us-1ms-extend-fencing-nogate-nonotify-faults" {
		t.Errorf("label = %q", got)
	}
	c.Rate = 1e21
	if err := ValidateLabel(DeriveLabel(c)); err != nil {
		t.Errorf("derived label %q is not a valid label: %v", DeriveLabel(c), err)
	}
}

func TestFlagsCoverEveryFlag(t *testing.T) {
	f := DefaultConfig().Flags().Map()
	for _, k := range []string{"engine", "masters", "local_masters", "workers", "clients", "resources",
		"distribution", "mode", "wait_timeout", "hold", "ttl", "duration", "ops", "warmup", "rate",
		"check", "label", "seed", "key_prefix", "quarantine", "extend", "fencing", "gate", "notify", "fault", "start_at"} {
		if _, ok := f[k]; !ok {
			t.Errorf("Flags() lacks %q", k)
		}
	}
}

// The parsers take user input: they must never panic, and whatever they
// accept must print back to a string that parses to the same value.

func FuzzParseHold(f *testing.F) {
	for _, s := range []string{"0", "1ms", "exp:1ms", "uniform:1ms-5ms", "uniform:-1ms-2ms", "exp:", "1h2m3.5s", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHold(s)
		if err != nil {
			return
		}
		back, err := ParseHold(h.String())
		if err != nil || back != h {
			t.Fatalf("ParseHold(%q) = %+v, printed %q, parsed back %+v, %v", s, h, h.String(), back, err)
		}
	})
}

func FuzzParseDistribution(f *testing.F) {
	for _, s := range []string{"uniform", "zipf:1.1", "zipf:1e3", "zipf:0x1p1", "zipf:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDistribution(s)
		if err != nil {
			return
		}
		back, err := ParseDistribution(d.String())
		if err != nil || back != d {
			t.Fatalf("ParseDistribution(%q) = %+v, printed %q, parsed back %+v, %v", s, d, d.String(), back, err)
		}
	})
}

// The engine's own rules refuse what would fail only once the masters are
// up: Validate asks the engine, so they are refused before anything starts.
func TestValidateAsksTheEngine(t *testing.T) {
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.TTL = time.Millisecond }, "--ttl: the engine refuses it: Config.TTL (1ms) leaves no validity after drift (2.01ms), got 1ms"},
		{func(c *Config) { c.TTL = 2 * time.Millisecond }, "--ttl: the engine refuses it: Config.TTL (2ms) leaves no validity after drift"},
		{func(c *Config) { c.TTL = 1500 * time.Microsecond }, "--ttl: the engine refuses it: Config.TTL must be whole milliseconds (PX), got 1.5ms"},
		{func(c *Config) { c.LocalMasters = 64 }, "--local-masters: the engine refuses it: Config.Masters, Clusters and Sentinels have 64 votes, at most 63 are supported, got 64"},
		{func(c *Config) {
			for i := range 64 {
				c.Masters = append(c.Masters, fmt.Sprintf("10.0.0.1:%d", 7000+i))
			}
		}, "--masters: the engine refuses it: Config.Masters, Clusters and Sentinels have 64 votes"},
	} {
		cfg := DefaultConfig()
		c.change(&cfg)
		err := cfg.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Validate() = %v, want a ConfigError starting %q", err, c.want)
		}
	}
	// The other engines have rules of their own; a short TTL is theirs to judge.
	cfg := DefaultConfig()
	cfg.Engine, cfg.TTL = engines.MustParse("nolock"), time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Errorf("nolock with --ttl 1ms: %v", err)
	}
	cfg = DefaultConfig()
	cfg.TTL, cfg.Extend = 3*time.Millisecond, true
	if err := cfg.Validate(); err != nil {
		t.Errorf("a TTL just above the drift: %v", err)
	}
}

func TestWarningsNameHoldsBeyondTheTTL(t *testing.T) {
	for _, c := range []struct {
		hold   string
		extend bool
		want   string // "" for none
	}{
		{"2s", false, "--hold 2s is not below --ttl 1s and --extend is off: every lease expires"},
		{"1s", false, "--hold 1s is not below --ttl 1s"},
		{"2s", true, ""},
		{"999ms", false, ""},
		{"uniform:10ms-2s", false, "--hold uniform:10ms-2s may reach --ttl 1s and --extend is off: some leases"},
		{"uniform:1s-2s", false, "every lease expires"},
		{"exp:500ms", false, "some leases"},
		{"exp:100ms", false, ""},
		{"0", false, ""},
	} {
		cfg := DefaultConfig()
		cfg.TTL, cfg.Extend = time.Second, c.extend
		var err error
		if cfg.Hold, err = ParseHold(c.hold); err != nil {
			t.Fatal(err)
		}
		w := cfg.Warnings()
		switch {
		case c.want == "" && len(w) > 0:
			t.Errorf("--hold %s extend %v: unexpected warning %q", c.hold, c.extend, w)
		case c.want != "" && (len(w) != 1 || !strings.Contains(w[0], c.want) || !strings.Contains(w[0], "add --extend or raise --ttl")):
			t.Errorf("--hold %s extend %v: warnings %q, want one with %q", c.hold, c.extend, w, c.want)
		}
	}
}

// More workers than the CPUs serve are warned about at start, with the
// most that measure capacity here; as many as they serve are not.
func TestWarningOfMoreWorkersThanTheCPUsServe(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	cfg := DefaultConfig()
	cfg.Workers = WorkersPerCPU * procs
	if w := cfg.Warnings(); len(w) != 0 {
		t.Errorf("%d workers on %d CPUs: warnings %q", cfg.Workers, procs, w)
	}
	cfg.Workers++
	w := cfg.Warnings()
	if want := fmt.Sprintf("--workers %d or fewer measure capacity", WorkersPerCPU*procs); len(w) != 1 || !strings.Contains(w[0], want) {
		t.Errorf("%d workers on %d CPUs: warnings %q, want one with %q", cfg.Workers, procs, w, want)
	}
}
