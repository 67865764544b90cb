package engines

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// Spec is how a driver (run, sweep, compare, chaos) takes its locks,
// parsed once from its flags: the engine, the lock, and every setting of
// the engine that a flag sets. Open makes a client of it; EngineConfig is
// the one place that turns it into an engine.Config.
type Spec struct {
	// Engine is the lock implementation (--engine; --coalesce=false is
	// RedlockPerCommand).
	Engine Engine
	// Lock is what each operation takes (--lock).
	Lock Lock
	// TTL is the lock TTL (--ttl), every engine's.
	TTL time.Duration
	// NodeTimeout bounds how long an attempt waits for the masters'
	// answers before it counts the silent ones as failed (--node-timeout):
	// the redlock engine's NodeTimeout, rueidislock's TryNextAfter. 0 is
	// the engine's default: for the redlock engine TTL/100, at least
	// min(50ms, TTL/10) (see engine.Config.NodeTimeout); for rueidislock
	// 20ms.
	NodeTimeout time.Duration
	// Quarantine is the redlock engine's restart quarantine
	// (--quarantine).
	Quarantine Quarantine
	// Extend turns on the redlock engine's auto-extension (--extend),
	// Fencing its fencing tokens (--fencing).
	Extend, Fencing bool
	// DisableGate turns off the redlock engine's in-process gate
	// (--gate=false), DisableNotify its release notifications
	// (--notify=false).
	DisableGate, DisableNotify bool
	// KeyPrefix starts every resource name the driver locks
	// (--key-prefix), so that its keys can be told from others and
	// removed; rueidislock, which keeps keys of its own, puts its own
	// under it too.
	KeyPrefix string
	// Conn is how every engine reaches the masters.
	Conn Conn
	// Observer is set as the redlock engine's Config.Observer
	// (--metrics-addr); nil for none.
	Observer *engine.Observer
}

// Conn is how a client reaches the masters: credentials (--user,
// -a/--pass), TLS (--tls and its files), and, for the redlock engine, a
// dialer of its own (chaos dials through its fault proxies).
type Conn struct {
	Username, Password string
	TLS                *tls.Config
	Dial               func(ctx context.Context, addr string) (net.Conn, error)
}

// DefaultTTL is the TTL of every engine unless --ttl says otherwise: the
// redlock engine's default.
const DefaultTTL = engine.DefaultTTL

// DefaultSpec is the redlock engine, taking mutexes, with its defaults.
func DefaultSpec() Spec {
	return Spec{Engine: Engine{Base: Redlock}, TTL: DefaultTTL}
}

// Quarantine is --quarantine: the redlock engine's restart policy, or
// the default that depends on the masters.
type Quarantine uint8

// The policies of --quarantine.
const (
	// QuarantineDefault is observed on masters this process started
	// (empty: none can have forgotten a lock), always on others (a young
	// master may be one that just restarted): see For.
	QuarantineDefault Quarantine = iota
	QuarantineOff
	QuarantineObserved
	QuarantineAlways
)

// ParseQuarantine reads "off", "observed" or "always".
func ParseQuarantine(s string) (Quarantine, error) {
	switch s {
	case "off":
		return QuarantineOff, nil
	case "observed":
		return QuarantineObserved, nil
	case "always":
		return QuarantineAlways, nil
	}
	return 0, errors.New("must be off, observed or always")
}

// String is the inverse of ParseQuarantine; "" for the default.
func (q Quarantine) String() string {
	switch q {
	case QuarantineOff:
		return "off"
	case QuarantineObserved:
		return "observed"
	case QuarantineAlways:
		return "always"
	}
	return ""
}

// For is the policy on masters that this process started (local) or that
// were given: q itself unless it is the default.
func (q Quarantine) For(local bool) Quarantine {
	switch {
	case q != QuarantineDefault:
		return q
	case local:
		return QuarantineObserved
	}
	return QuarantineAlways
}

// Policy is q as the engine takes it; the default is the engine's own
// (always).
func (q Quarantine) Policy() engine.QuarantinePolicy {
	switch q {
	case QuarantineOff:
		return engine.QuarantineOff
	case QuarantineObserved:
		return engine.QuarantineObserved
	}
	return engine.QuarantineAlways
}

// Votes are where a client votes: plain masters, then Redis Clusters,
// each given by some of its nodes' addresses.
type Votes struct {
	Masters  []string
	Clusters [][]string
	// Sentinels are the votes that are masters Redis Sentinel manages,
	// after the clusters.
	Sentinels []SentinelVote
}

// SentinelVote is a vote that is a master Redis Sentinel manages
// (--sentinel): the name the sentinels monitor it under, and some of
// their addresses.
type SentinelVote = engine.SentinelVote

// Len is the number of votes.
func (v Votes) Len() int { return len(v.Masters) + len(v.Clusters) + len(v.Sentinels) }

// First is the first n votes: masters, then clusters, then Sentinel votes.
func (v Votes) First(n int) Votes {
	switch {
	case n >= v.Len():
		return v
	case n <= len(v.Masters):
		return Votes{Masters: v.Masters[:n]}
	case n <= len(v.Masters)+len(v.Clusters):
		return Votes{Masters: v.Masters, Clusters: v.Clusters[:n-len(v.Masters)]}
	}
	return Votes{Masters: v.Masters, Clusters: v.Clusters, Sentinels: v.Sentinels[:n-len(v.Masters)-len(v.Clusters)]}
}

// StandIns are n votes that stand in for local masters (clusters, with
// clustered) before they start, whose ports are not known yet: the
// engine's rules on everything but the addresses hold for them as for
// any distinct addresses the masters get.
func StandIns(n int, clustered bool) Votes {
	var v Votes
	for i := range n {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(i+1))
		if clustered {
			v.Clusters = append(v.Clusters, []string{addr})
		} else {
			v.Masters = append(v.Masters, addr)
		}
	}
	return v
}

// ParseMasters reads --masters, host:port,host:port,..., none twice, as
// the engine checks its masters.
func ParseMasters(list string) ([]string, error) { return engine.ParseMasters(list) }

// formatSentinels writes the Sentinel votes as --sentinel reads each,
// separated by spaces.
func formatSentinels(vs []SentinelVote) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Master + "@" + strings.Join(v.Addrs, ",")
	}
	return strings.Join(out, " ")
}

// clusterSep separates the votes of --clusters. Neither a host name nor an
// address holds it, and a shell or make reads it as it is.
const clusterSep = "/"

// ParseClusters reads --clusters: one Redis Cluster per vote, the votes
// separated by "/", each given by some of its nodes' addresses,
// host:port,host:port (the engine learns the rest from them).
func ParseClusters(list string) ([][]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("give one or more clusters, host:port,host:port/host:port,... (\"/\" between votes)")
	}
	var out [][]string
	for i, vote := range strings.Split(list, clusterSep) {
		if strings.TrimSpace(vote) == "" {
			return nil, fmt.Errorf("cluster %d is empty: give some of its nodes, host:port,host:port, with \"/\" between clusters", i+1)
		}
		seeds, err := engine.ParseMasters(vote)
		if err != nil {
			return nil, fmt.Errorf("cluster %d: %v", i+1, err)
		}
		out = append(out, seeds)
	}
	return out, nil
}

// FormatClusters writes clusters as --clusters reads them; "" for none.
func FormatClusters(clusters [][]string) string {
	votes := make([]string, len(clusters))
	for i, seeds := range clusters {
		votes[i] = strings.Join(seeds, ",")
	}
	return strings.Join(votes, clusterSep)
}

// Validate checks the spec before anything starts, on the votes the
// client will have: the lock against the engine, and, for the redlock
// engine, everything the engine itself checks (EngineConfig). Errors are
// *ConfigError naming the flag; votesFlag names the flag of the votes
// ("masters", "local-masters").
func (s Spec) Validate(v Votes, votesFlag string) error {
	if s.Engine.Base == 0 {
		return flagErr("engine", "", "no engine")
	}
	if err := s.Lock.Check(); err != nil {
		return flagErr("lock", s.Lock, "%v", err)
	}
	if err := s.Lock.Takes(s.Engine); err != nil {
		return flagErr("lock", s.Lock, "%v", err)
	}
	if s.TTL <= 0 {
		return flagErr("ttl", s.TTL, "must be > 0")
	}
	if s.NodeTimeout < 0 {
		return flagErr("node-timeout", s.NodeTimeout, "must be >= 0 (0: the engine's default)")
	}
	if s.NodeTimeout > 0 && !s.Engine.IsRedlock() && s.Engine.Base != Rueidislock {
		return flagErr("node-timeout", s.NodeTimeout, "applies to the redlock engines and rueidislock (its TryNextAfter) only, not %s", s.Engine)
	}
	if strings.ContainsAny(s.KeyPrefix, " \r\n") {
		return flagErr("key-prefix", s.KeyPrefix, "must not contain spaces or line breaks")
	}
	if !s.Engine.IsRedlock() {
		return nil
	}
	_, err := s.engineConfig(v, votesFlag)
	return err
}

// EngineConfig is the redlock engine's configuration of this spec on the
// votes v: the only place the bench builds one for its drivers. When the
// engine refuses it, the error is a *ConfigError naming the flag whose
// value it refuses: the first of the votes, --ttl and --node-timeout
// that, set in turn on the engine's defaults, makes it refuse.
func (s Spec) EngineConfig(v Votes) (engine.Config, error) {
	return s.engineConfig(v, "masters")
}

func (s Spec) engineConfig(v Votes, votesFlag string) (engine.Config, error) {
	ec := s.build(v)
	err := ec.Validate()
	if err == nil {
		return ec, nil
	}
	// Which flag: the engine's refusal of its defaults with only the
	// votes, then with the TTL, then with the node timeout, names the
	// first flag it refuses. The rest of the spec sets nothing the engine
	// can refuse.
	stages := []struct {
		flag  string
		value any
		set   func(*engine.Config)
	}{
		{votesFlag, strings.Join(v.Masters, ","), func(c *engine.Config) { c.Masters = v.Masters }},
		{"clusters", FormatClusters(v.Clusters), func(c *engine.Config) { c.Clusters = v.Clusters }},
		{"sentinel", formatSentinels(v.Sentinels), func(c *engine.Config) { c.Sentinels = v.Sentinels }},
		{"ttl", s.TTL, func(c *engine.Config) { c.TTL = s.TTL }},
		{"node-timeout", s.NodeTimeout, func(c *engine.Config) { c.NodeTimeout = s.NodeTimeout }},
	}
	if votesFlag == "local-masters" {
		stages[0].value, stages[1].flag, stages[1].value = v.Len(), votesFlag, v.Len()
	}
	c := engine.DefaultConfig()
	for _, st := range stages {
		st.set(&c)
		if len(c.Masters)+len(c.Clusters)+len(c.Sentinels) == 0 {
			continue // the votes come with the next stage
		}
		if serr := c.Validate(); serr != nil {
			msg := strings.TrimPrefix(serr.Error(), "engine: ")
			// The engine's message names the value already.
			msg = strings.TrimSuffix(msg, ", got "+fmt.Sprint(st.value))
			return engine.Config{}, flagErr(st.flag, st.value, "the engine refuses it: %s", msg)
		}
	}
	return engine.Config{}, flagErr("engine", s.Engine, "the engine refuses this configuration: %v", err)
}

// build is the engine's configuration, unchecked.
func (s Spec) build(v Votes) engine.Config {
	ec := engine.DefaultConfig(v.Masters...)
	ec.Clusters = v.Clusters
	ec.Sentinels = v.Sentinels
	ec.TTL = s.TTL
	ec.NodeTimeout = s.NodeTimeout
	ec.Quarantine = s.Quarantine.Policy()
	ec.AutoExtend = s.Extend
	ec.Fencing = s.Fencing
	ec.Wait.DisableGate = s.DisableGate
	ec.Wait.DisableNotify = s.DisableNotify
	ec.Conn.DisableCoalesce = s.Engine.Base == RedlockPerCommand
	ec.Observer = s.Observer
	ec.Conn.Username, ec.Conn.Password, ec.Conn.TLS = s.Conn.Username, s.Conn.Password, s.Conn.TLS
	ec.Conn.DialContext = s.Conn.Dial
	return ec
}

// ConfigError is a bad configuration value. Its message names the flag and
// the value, e.g. "--workers: must be > 0, got 0".
type ConfigError struct {
	Flag   string // without the leading dashes
	Value  string
	Reason string
}

func (e *ConfigError) Error() string {
	v := e.Value
	if v == "" || strings.ContainsAny(v, " \t\r\n\"") {
		v = strconv.Quote(v)
	}
	return fmt.Sprintf("--%s: %s, got %s", e.Flag, e.Reason, v)
}

// flagErr is the *ConfigError of flag's value.
func flagErr(flag string, value any, format string, a ...any) error {
	return &ConfigError{Flag: flag, Value: fmt.Sprint(value), Reason: fmt.Sprintf(format, a...)}
}
