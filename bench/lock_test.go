package bench

import (
	"errors"
	"slices"
	"testing"

	"github.com/redlock-bench/redlock/bench/engines"
)

// --lock is checked against the rest of the run before anything starts:
// an engine without the lock is refused in one line.
func TestValidateLock(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"no rw lock in redsync", func(c *Config) {
			c.Lock, c.Engine = engines.Lock{Kind: engines.LockRW, ReadFraction: 0.9}, engines.MustParse(engines.RedsyncGoredis.String())
		},
			"--lock: engine redsync-goredis has no read/write lock: only redlock has one over N masters (no baseline here does); redlock-mutex runs the same operations on our mutex, every one exclusive, got rw:0.9"},
		{"no rw lock in sequential", func(c *Config) {
			c.Lock, c.Engine = engines.Lock{Kind: engines.LockRW, ReadFraction: 0.9}, engines.MustParse(engines.RedlockSequential.String())
		},
			"--lock: engine redlock-sequential differs from redlock in multi:K only (K mutexes one after another), got rw:0.9"},
		{"mutex is for rw", func(c *Config) {
			c.Lock, c.Engine = engines.Lock{Kind: engines.LockMulti, K: 2}, engines.MustParse(engines.RedlockMutex.String())
		},
			"--lock: engine redlock-mutex differs from redlock in rw:F only (every operation its mutex, reads too), got multi:2"},
		{"too many rw handles", func(c *Config) {
			c.Lock, c.Resources, c.Clients = engines.Lock{Kind: engines.LockRW, ReadFraction: 0.5}, 1_000_001, 2
		},
			"--lock: --resources × --clients must be at most 2000000 (each client keeps a handle per read/write lock, about 220 bytes), got rw:0.5"},
		{"K above the resources", func(c *Config) { c.Lock, c.Resources = engines.Lock{Kind: engines.LockMulti, K: 4}, 3 },
			"--lock: a lease on K distinct resources needs K <= --resources (3), got multi:4"},
		{"no semaphore in redsync", func(c *Config) {
			c.Lock, c.Engine = engines.Lock{Kind: engines.LockSemaphore, Permits: 2}, engines.MustParse(engines.RedsyncRueidis.String())
		},
			"--lock: engine redsync-rueidis has no semaphore: only redlock has one over N masters (no baseline here does), got semaphore:2"},
		{"no semaphore in rueidislock", func(c *Config) {
			c.Lock, c.Engine = engines.Lock{Kind: engines.LockSemaphore, Permits: 2}, engines.MustParse(engines.Rueidislock.String())
		},
			"--lock: engine rueidislock has no semaphore: only redlock has one over N masters (no baseline here does), got semaphore:2"},
		{"sequential is for multi", func(c *Config) { c.Engine = engines.Engine{Base: engines.RedlockSequential} },
			"--lock: engine redlock-sequential differs from redlock in multi:K only (K mutexes one after another), got mutex"},
		{"too many semaphore slots", func(c *Config) { c.Lock, c.Resources = engines.Lock{Kind: engines.LockSemaphore, Permits: 8}, 666_667 },
			"--lock: --resources × --clients × (P+4) must be at most 8000000 (each client keeps a handle per semaphore, about 50 bytes per permit and 200 more), got semaphore:8"},
		{"P out of range", func(c *Config) { c.Lock = engines.Lock{Kind: engines.LockSemaphore} },
			"--lock: the permits P of semaphore:P must be 1 to 1024, got semaphore:0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.set(&cfg)
			err := cfg.Validate()
			var ce *ConfigError
			if err == nil || err.Error() != c.want || !errors.As(err, &ce) || ce.Flag != "lock" {
				t.Errorf("got %v\nwant %s", err, c.want)
			}
		})
	}
	for _, c := range []struct {
		engine    string
		lock      engines.Lock
		resources int
	}{
		{"redlock", engines.Lock{Kind: engines.LockSemaphore, Permits: 8}, 0},
		{"redlock@3", engines.Lock{Kind: engines.LockSemaphore, Permits: 8}, 0},
		{engines.RedlockPerCommand.String(), engines.Lock{Kind: engines.LockSemaphore, Permits: 8}, 0},
		{"nolock", engines.Lock{Kind: engines.LockSemaphore, Permits: 8}, 0},
		{"redlock", engines.Lock{Kind: engines.LockMulti, K: 3}, 0},
		{engines.RedlockSequential.String(), engines.Lock{Kind: engines.LockMulti, K: 3}, 0},
		{engines.RedsyncGoredis.String(), engines.Lock{Kind: engines.LockMulti, K: 3}, 0},
		{engines.BsmRedislock.String(), engines.Lock{Kind: engines.LockMulti, K: 3}, 0},
		{"redlock", engines.Lock{Kind: engines.LockRW, ReadFraction: 0.9}, 0},
		{"redlock@3", engines.Lock{Kind: engines.LockRW, ReadFraction: 1}, 0},
		{engines.RedlockPerCommand.String(), engines.Lock{Kind: engines.LockRW}, 0},
		{engines.RedlockMutex.String(), engines.Lock{Kind: engines.LockRW, ReadFraction: 0.9}, 0},
		{engines.RedlockMutex.String() + "@3", engines.Lock{Kind: engines.LockRW, ReadFraction: 0.9}, 0},
		{"nolock", engines.Lock{Kind: engines.LockRW, ReadFraction: 0.5}, 0},
		{"redlock", engines.Lock{Kind: engines.LockRW, ReadFraction: 0.5}, 2_000_000},
	} {
		cfg := DefaultConfig()
		cfg.Engine, cfg.Lock = engines.MustParse(c.engine), c.lock
		if c.resources > 0 {
			cfg.Resources = c.resources
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s with %s: %v", c.engine, c.lock, err)
		}
	}
}

func TestLockInLabelAndConfig(t *testing.T) {
	cfg := DefaultConfig()
	if DeriveLabel(cfg) != "redlock-w64-r1000-try" || cfg.RunConfig().Lock != "mutex" {
		t.Errorf("mutex: label %q lock %q; labels of mutex runs stay as they were", DeriveLabel(cfg), cfg.RunConfig().Lock)
	}
	cfg.Lock = engines.Lock{Kind: engines.LockSemaphore, Permits: 8}
	if DeriveLabel(cfg) != "redlock-w64-r1000-semaphore8-try" || cfg.RunConfig().Lock != "semaphore:8" {
		t.Errorf("semaphore: label %q lock %q", DeriveLabel(cfg), cfg.RunConfig().Lock)
	}
	cfg.Lock = engines.Lock{Kind: engines.LockMulti, K: 3}
	if DeriveLabel(cfg) != "redlock-w64-r1000-multi3-try" {
		t.Errorf("multi: label %q", DeriveLabel(cfg))
	}
	cfg.Lock = engines.Lock{Kind: engines.LockRW, ReadFraction: 0.9}
	if DeriveLabel(cfg) != "redlock-w64-r1000-rw0.9-try" || cfg.RunConfig().Lock != "rw:0.9" {
		t.Errorf("rw: label %q lock %q", DeriveLabel(cfg), cfg.RunConfig().Lock)
	}
}

// A multi-resource operation takes K distinct resources, drawn by the
// distribution (the hot ones most often) and sorted by name; K equal to
// the resources takes them all.
func TestPickSet(t *testing.T) {
	for _, c := range []struct {
		resources, k int
		zipf         bool
	}{{10, 3, false}, {10, 3, true}, {3, 3, true}, {64, 64, false}, {100, 2, true}} {
		cfg := DefaultConfig()
		cfg.Resources, cfg.Lock = c.resources, engines.Lock{Kind: engines.LockMulti, K: c.k}
		if c.zipf {
			cfg.Distribution = Distribution{Zipf: true, S: 1.5}
		}
		r := newRunner(cfg, nil)
		w := &worker{r: r, rng: newRand(1, 0), set: make([]int, c.k), setNames: make([]string, c.k)}
		w.zipf = newZipf(w.rng, cfg)
		hits := make([]int, c.resources)
		for range 2000 {
			w.pickSet()
			if !slices.IsSorted(w.setNames) {
				t.Fatalf("%+v: names not sorted: %v", c, w.setNames)
			}
			seen := map[int]bool{}
			for i, ri := range w.set {
				if seen[ri] || w.setNames[i] != r.names[ri] {
					t.Fatalf("%+v: set %v names %v", c, w.set, w.setNames)
				}
				seen[ri] = true
				hits[ri]++
			}
		}
		if c.zipf && c.resources > c.k && hits[0] <= hits[c.resources-1] {
			t.Errorf("%+v: zipf drew the hottest %d times, the coldest %d", c, hits[0], hits[c.resources-1])
		}
	}
}
