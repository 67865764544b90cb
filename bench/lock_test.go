package bench

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseLock(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Lock
		err  string
	}{
		{"mutex", Lock{}, ""},
		{"semaphore:1", Lock{Kind: LockSemaphore, Permits: 1}, ""},
		{"semaphore:1024", Lock{Kind: LockSemaphore, Permits: 1024}, ""},
		{"multi:3", Lock{Kind: LockMulti, K: 3}, ""},
		{"multi:64", Lock{Kind: LockMulti, K: 64}, ""},
		{"rw:0.9", Lock{Kind: LockRW, ReadFraction: 0.9}, ""},
		{"rw:0", Lock{Kind: LockRW}, ""},
		{"semaphore:0", Lock{}, "the permits P of semaphore:P must be 1 to 1024"},
		{"semaphore:1025", Lock{}, "the permits P of semaphore:P must be 1 to 1024"},
		{"semaphore:-2", Lock{}, "the permits P of semaphore:P must be 1 to 1024"},
		{"semaphore", Lock{}, "semaphore needs a whole number after the colon"},
		{"semaphore:x", Lock{}, "semaphore needs a whole number after the colon"},
		{"multi:0", Lock{}, "the resources K of multi:K must be 1 to 64"},
		{"multi:65", Lock{}, "the resources K of multi:K must be 1 to 64"},
		{"multi:2.5", Lock{}, "multi needs a whole number after the colon"},
		{"rw:1.5", Lock{}, "the share of reads F of rw:F must be 0 to 1"},
		{"rw:NaN", Lock{}, "the share of reads F of rw:F must be 0 to 1"},
		{"rw", Lock{}, "rw needs the share of reads after the colon"},
		{"mutex:2", Lock{}, "mutex takes no :N"},
		{"", Lock{}, `unknown lock ""`},
		{"sem:3", Lock{}, `unknown lock "sem"`},
	} {
		got, err := ParseLock(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%q: %+v, %v; want %+v", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one starting %q", c.in, err, c.err)
		case c.err == "" && got.String() != c.in:
			t.Errorf("%q: String() %q", c.in, got.String())
		}
	}
}

// --lock is checked against the rest of the run before anything starts:
// an engine without the lock is refused in one line.
func TestValidateLock(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"no rw lock in redsync", func(c *Config) { c.Lock, c.Engine = Lock{Kind: LockRW, ReadFraction: 0.9}, engineRedsyncGoredis },
			"--lock: engine redsync-goredis has no read/write lock: only redlock has one over N masters (no baseline here does); redlock-mutex runs the same operations on our mutex, every one exclusive, got rw:0.9"},
		{"no rw lock in sequential", func(c *Config) { c.Lock, c.Engine = Lock{Kind: LockRW, ReadFraction: 0.9}, EngineSequential },
			"--lock: engine redlock-sequential differs from redlock in multi:K only (K mutexes one after another), got rw:0.9"},
		{"mutex is for rw", func(c *Config) { c.Lock, c.Engine = Lock{Kind: LockMulti, K: 2}, EngineMutex },
			"--lock: engine redlock-mutex differs from redlock in rw:F only (every operation its mutex, reads too), got multi:2"},
		{"too many rw handles", func(c *Config) { c.Lock, c.Resources, c.Clients = Lock{Kind: LockRW, ReadFraction: 0.5}, 1_000_001, 2 },
			"--lock: --resources × --clients must be at most 2000000 (each client keeps a handle per read/write lock, about 220 bytes), got rw:0.5"},
		{"K above the resources", func(c *Config) { c.Lock, c.Resources = Lock{Kind: LockMulti, K: 4}, 3 },
			"--lock: a lease on K distinct resources needs K <= --resources (3), got multi:4"},
		{"no semaphore in redsync", func(c *Config) { c.Lock, c.Engine = Lock{Kind: LockSemaphore, Permits: 2}, engineRedsyncRueidis },
			"--lock: engine redsync-rueidis has no semaphore: only redlock has one over N masters (no baseline here does), got semaphore:2"},
		{"no semaphore in rueidislock", func(c *Config) { c.Lock, c.Engine = Lock{Kind: LockSemaphore, Permits: 2}, engineRueidislock },
			"--lock: engine rueidislock has no semaphore: only redlock has one over N masters (no baseline here does), got semaphore:2"},
		{"sequential is for multi", func(c *Config) { c.Engine = EngineSequential },
			"--lock: engine redlock-sequential differs from redlock in multi:K only (K mutexes one after another), got mutex"},
		{"too many semaphore slots", func(c *Config) { c.Lock, c.Resources = Lock{Kind: LockSemaphore, Permits: 8}, 666_667 },
			"--lock: --resources × --clients × (P+4) must be at most 8000000 (each client keeps a handle per semaphore, about 50 bytes per permit and 200 more), got semaphore:8"},
		{"P out of range", func(c *Config) { c.Lock = Lock{Kind: LockSemaphore} },
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
		lock      Lock
		resources int
	}{
		{"redlock", Lock{Kind: LockSemaphore, Permits: 8}, 0},
		{"redlock@3", Lock{Kind: LockSemaphore, Permits: 8}, 0},
		{EnginePerCommand, Lock{Kind: LockSemaphore, Permits: 8}, 0},
		{"nolock", Lock{Kind: LockSemaphore, Permits: 8}, 0},
		{"redlock", Lock{Kind: LockMulti, K: 3}, 0},
		{EngineSequential, Lock{Kind: LockMulti, K: 3}, 0},
		{engineRedsyncGoredis, Lock{Kind: LockMulti, K: 3}, 0},
		{engineBsmRedislock, Lock{Kind: LockMulti, K: 3}, 0},
		{"redlock", Lock{Kind: LockRW, ReadFraction: 0.9}, 0},
		{"redlock@3", Lock{Kind: LockRW, ReadFraction: 1}, 0},
		{EnginePerCommand, Lock{Kind: LockRW}, 0},
		{EngineMutex, Lock{Kind: LockRW, ReadFraction: 0.9}, 0},
		{EngineMutex + "@3", Lock{Kind: LockRW, ReadFraction: 0.9}, 0},
		{"nolock", Lock{Kind: LockRW, ReadFraction: 0.5}, 0},
		{"redlock", Lock{Kind: LockRW, ReadFraction: 0.5}, 2_000_000},
	} {
		cfg := DefaultConfig()
		cfg.Engine, cfg.Lock = c.engine, c.lock
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
	cfg.Lock = Lock{Kind: LockSemaphore, Permits: 8}
	if DeriveLabel(cfg) != "redlock-w64-r1000-semaphore8-try" || cfg.RunConfig().Lock != "semaphore:8" {
		t.Errorf("semaphore: label %q lock %q", DeriveLabel(cfg), cfg.RunConfig().Lock)
	}
	cfg.Lock = Lock{Kind: LockMulti, K: 3}
	if DeriveLabel(cfg) != "redlock-w64-r1000-multi3-try" {
		t.Errorf("multi: label %q", DeriveLabel(cfg))
	}
	cfg.Lock = Lock{Kind: LockRW, ReadFraction: 0.9}
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
		cfg.Resources, cfg.Lock = c.resources, Lock{Kind: LockMulti, K: c.k}
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
