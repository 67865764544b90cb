package engines

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

func TestParseClustersRoundTrips(t *testing.T) {
	for _, list := range []string{"a:1", "a:1,a:2/b:1", "[::1]:7000,[::1]:7001/h.example:7000"} {
		cl, err := ParseClusters(list)
		if err != nil {
			t.Fatalf("%q: %v", list, err)
		}
		if got := FormatClusters(cl); got != list {
			t.Errorf("FormatClusters(ParseClusters(%q)) = %q", list, got)
		}
	}
	for _, bad := range []string{"", " ", "a:1/", "/a:1", "a", "a:1,a:1", "a:0"} {
		if _, err := ParseClusters(bad); err == nil {
			t.Errorf("ParseClusters(%q) accepted it", bad)
		}
	}
}

// The engine's own rules refuse a spec by the flag whose value breaks
// them: the votes, the TTL or the node timeout, each tried in turn on
// the engine's defaults, not by the wording of the engine's message.
func TestEngineConfigNamesTheFlag(t *testing.T) {
	three := Votes{Masters: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}}
	var many Votes
	for i := range 64 {
		many.Masters = append(many.Masters, fmt.Sprintf("10.0.0.1:%d", 7000+i))
	}
	for _, c := range []struct {
		name string
		set  func(*Spec)
		v    Votes
		flag string
		want string
	}{
		{"ttl below the drift", func(s *Spec) { s.TTL = time.Millisecond }, three,
			"ttl", "--ttl: the engine refuses it: Config.TTL (1ms) leaves no validity after drift (2.01ms), got 1ms"},
		{"ttl not whole ms", func(s *Spec) { s.TTL = 1500 * time.Microsecond }, three,
			"ttl", "--ttl: the engine refuses it: Config.TTL must be whole milliseconds (PX), got 1.5ms"},
		{"node timeout of half the ttl", func(s *Spec) { s.TTL, s.NodeTimeout = time.Second, 500*time.Millisecond }, three,
			"node-timeout", "--node-timeout: the engine refuses it: Config.NodeTimeout (500ms) must be below half the TTL (1s), got 500ms"},
		{"too many masters", func(s *Spec) {}, many,
			"masters", "--masters: the engine refuses it: Config.Masters, Clusters and Sentinels have 64 votes, at most 63 are supported, got "},
		{"a cluster twice", func(s *Spec) {}, Votes{Clusters: [][]string{{"a:1"}, {"a:1"}}},
			"clusters", `--clusters: the engine refuses it: Config.Clusters[1][0] "a:1" duplicates Config.Clusters[0][0]: votes must be distinct, got a:1/a:1`},
		{"a cluster node as a master", func(s *Spec) {}, Votes{Masters: []string{"a:1"}, Clusters: [][]string{{"a:1"}}},
			"clusters", `--clusters: the engine refuses it: Config.Clusters[0][0] "a:1" duplicates Config.Masters[0]: votes must be distinct, got a:1`},
		// A bad TTL on bad votes: the votes are named first.
		{"votes before ttl", func(s *Spec) { s.TTL = time.Millisecond }, many,
			"masters", "--masters: the engine refuses it: Config.Masters, Clusters and Sentinels have 64 votes"},
	} {
		s := DefaultSpec()
		c.set(&s)
		_, err := s.EngineConfig(c.v)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Flag != c.flag || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want a ConfigError of --%s starting %q", c.name, err, c.flag, c.want)
		}
	}
	// Stand-ins of local masters are checked as the masters would be,
	// and named as --local-masters.
	s := DefaultSpec()
	s.TTL = time.Millisecond
	if err := s.Validate(StandIns(5, false), "local-masters"); err == nil || !strings.HasPrefix(err.Error(), "--ttl: the engine refuses it") {
		t.Errorf("local masters, ttl 1ms: %v", err)
	}
	if err := DefaultSpec().Validate(StandIns(64, true), "local-masters"); err == nil ||
		!strings.HasPrefix(err.Error(), "--local-masters: the engine refuses it: Config.Masters, Clusters and Sentinels have 64 votes, at most 63 are supported, got 64") {
		t.Errorf("64 local clusters: %v", err)
	}
	// What the engine accepts comes back whole: every field a flag sets.
	s = DefaultSpec()
	s.Engine.Base = RedlockPerCommand
	s.TTL, s.NodeTimeout, s.Quarantine, s.Extend, s.Fencing = 2*time.Second, 30*time.Millisecond, QuarantineObserved, true, true
	ec, err := s.EngineConfig(three)
	if err != nil || ec.TTL != 2*time.Second || ec.NodeTimeout != 30*time.Millisecond || ec.Quarantine != engine.QuarantineObserved ||
		!ec.AutoExtend || !ec.Fencing || !ec.Conn.DisableCoalesce || len(ec.Masters) != 3 {
		t.Errorf("EngineConfig: %+v, %v", ec, err)
	}
}

// A node timeout is the redlock engine's and rueidislock's alone: the
// other engines bound their attempts by their own share of the TTL.
func TestNodeTimeoutAppliesWhereAnEngineHasOne(t *testing.T) {
	for name, ok := range map[string]bool{"redlock": true, "redlock@1": true, "rueidislock": true, "redsync-rueidis": false, "bsm-redislock": false, "nolock": false} {
		s := DefaultSpec()
		s.Engine, s.NodeTimeout = MustParse(name), 30*time.Millisecond
		err := s.Validate(Votes{Masters: []string{"127.0.0.1:1"}}, "masters")
		if (err == nil) != ok {
			t.Errorf("%s with --node-timeout: %v", name, err)
		}
	}
}

// A handle made once is found again without an allocation: the worker's
// loop allocates nothing of its own, and a semaphore's or read/write
// lock's handle is looked up by name at every operation.
func TestHandlesFoundWithoutAllocating(t *testing.T) {
	var h handles[*int]
	h.make = func(string) (*int, error) { return new(int), nil }
	first, _ := h.get("rlb:7")
	name := "rlb:7"
	if n := testing.AllocsPerRun(1000, func() {
		if got, _ := h.get(name); got != first {
			t.Fatal("a second handle for one name")
		}
	}); n != 0 {
		t.Errorf("%v allocations per lookup", n)
	}
}
