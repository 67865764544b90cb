package sim

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	flagShrinkTries = flag.Int("sim.shrinktries", 3, "a shrinking candidate still fails if one of this many runs fails (replay is not exact)")
	flagShrinkRuns  = flag.Int("sim.shrinkruns", 80, "the most runs a shrink may take")
)

// shrinker searches for a smaller case that fails like the original:
// a violation of the same checker in one of tries runs.
type shrinker struct {
	t       *testing.T
	checker string
	tries   int
	runs    int // runs left
	last    *Result
}

// fails reports whether cfg still fails, running it up to s.tries times.
func (s *shrinker) fails(cfg Config) bool {
	for range s.tries {
		if s.runs <= 0 {
			return false
		}
		s.runs--
		res := runSeed(s.t, cfg)
		if res == nil {
			return false
		}
		for _, v := range res.Violations {
			if v.Checker == s.checker {
				s.last = res
				return true
			}
		}
	}
	return false
}

// Shrink looks for a smaller case that fails like res, in this order
// and again while any step helps: a shorter run (to just past the
// violation), fewer faults (none, halves, one less), fewer clients,
// workers and resources, then clients and workers made idle one by one. It returns the smallest case found, and its
// failing run (nil if nothing smaller failed).
func Shrink(t *testing.T, res *Result, tries, runs int) (Config, *Result) {
	s := &shrinker{t: t, checker: res.Violations[0].Checker, tries: tries, runs: runs}
	cfg := res.Config
	if cfg.Nemesis && cfg.Keep == nil {
		cfg.Keep = make([]int, len(DrawFaults(cfg)))
		for i := range cfg.Keep {
			cfg.Keep[i] = i
		}
	}
	try := func(c Config) bool {
		if s.fails(c) {
			cfg = c
			return true
		}
		return false
	}
	at := res.Violations[0].At
	for progress := true; progress && s.runs > 0; {
		progress = false
		if d := (at + cfg.TTL).Truncate(cfg.TTL/2) + cfg.TTL/2; d < cfg.Duration {
			c := cfg
			c.Duration = d
			if try(c) {
				progress = true
				at = s.last.Violations[0].At
			}
		}
		if len(cfg.Keep) > 0 {
			c := cfg
			c.Keep = []int{}
			if try(c) {
				progress = true
			} else {
				for half := len(cfg.Keep) / 2; half >= 1 && s.runs > 0; half /= 2 {
					for i := 0; i+half <= len(cfg.Keep); i += half {
						c := cfg
						c.Keep = append(append([]int{}, cfg.Keep[:i]...), cfg.Keep[i+half:]...)
						if try(c) {
							progress = true
							i -= half
						}
					}
				}
			}
		}
		for _, f := range []func(*Config) *int{
			func(c *Config) *int { return &c.Clients },
			func(c *Config) *int { return &c.Workers },
			func(c *Config) *int { return &c.Resources },
		} {
			for *f(&cfg) > 1 && s.runs > 0 {
				c := cfg
				*f(&c)--
				if !try(c) {
					break
				}
				progress = true
			}
		}
		// Then clients, and workers, one at a time: the others' draws do
		// not move.
		for ci := 0; ci < cfg.Clients && s.runs > 0; ci++ {
			name := fmt.Sprintf("c%d", ci)
			if slices.Contains(cfg.Idle, name) {
				continue
			}
			c := cfg
			c.Idle = append(slices.Clone(cfg.Idle), name)
			if try(c) {
				progress = true
				continue
			}
			for wi := 0; wi < cfg.Workers && s.runs > 0; wi++ {
				w := fmt.Sprintf("%s/w%d", name, wi)
				if slices.Contains(cfg.Idle, w) {
					continue
				}
				c := cfg
				c.Idle = append(slices.Clone(cfg.Idle), w)
				if try(c) {
					progress = true
				}
			}
		}
	}
	cfg.Idle = tidyIdle(cfg)
	return cfg, s.last
}

// tidyIdle drops from cfg.Idle the workers of idle clients and what
// names clients cfg no longer has.
func tidyIdle(cfg Config) []string {
	var out []string
	for _, x := range cfg.Idle {
		c, w, _ := strings.Cut(x, "/")
		var n int
		if _, err := fmt.Sscanf(c, "c%d", &n); err != nil || n >= cfg.Clients || (w != "" && slices.Contains(cfg.Idle, c)) {
			continue
		}
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// shrinkAndReport shrinks a failing run and logs the shrunk case.
func shrinkAndReport(t *testing.T, res *Result) {
	began := time.Now()
	cfg, shrunk := Shrink(t, res, *flagShrinkTries, *flagShrinkRuns)
	if shrunk == nil {
		t.Logf("shrinking found no smaller case that fails (%s)", time.Since(began).Round(time.Millisecond))
		return
	}
	t.Logf("shrunk in %s to %s, which fails with:\n%s", time.Since(began).Round(time.Millisecond), describeCase(cfg), Report(shrunk))
}

// describeCase says what a case runs.
func describeCase(cfg Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d clients × %d workers, %d resources, %s", cfg.Seed, cfg.Clients, cfg.Workers, cfg.Resources, cfg.Duration)
	if len(cfg.Idle) > 0 {
		fmt.Fprintf(&b, ", idle %s", strings.Join(cfg.Idle, ","))
	}
	switch {
	case !cfg.Nemesis:
		b.WriteString(", no faults")
	case cfg.Keep != nil:
		fmt.Fprintf(&b, ", faults %v of the drawn schedule", cfg.Keep)
	default:
		b.WriteString(", the drawn faults")
	}
	if cfg.Mutation != "" {
		b.WriteString(", mutation " + cfg.Mutation)
	}
	if cfg.NoRW {
		b.WriteString(", no read/write locks")
	}
	if cfg.DriftQuorum {
		b.WriteString(", a quorum of clocks fast now and then")
	}
	if cfg.Expiry {
		b.WriteString(", counters expiring")
	}
	if cfg.OutOfModel {
		b.WriteString(", faults out of the model")
	}
	if cfg.Clusters > 0 {
		fmt.Fprintf(&b, ", %d cluster votes of %d shards", cfg.Clusters, cfg.Shards)
		if cfg.NoReplicas {
			b.WriteString(" without replicas")
		}
	}
	return b.String()
}
