package bench

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redlock-bench/redlock/engine"
)

// ParseSentinel reads one --sentinel: a vote that is a master Redis
// Sentinel manages, MASTER@HOST:PORT,HOST:PORT: the name the sentinels
// monitor it under, then some of the sentinels' addresses (the engine
// learns the others from them).
func ParseSentinel(s string) (engine.SentinelVote, error) {
	master, addrs, ok := strings.Cut(strings.TrimSpace(s), "@")
	switch {
	case !ok:
		return engine.SentinelVote{}, errors.New("want MASTER@HOST:PORT,HOST:PORT: the master's name as the sentinels monitor it, \"@\", then some of the sentinels")
	case master == "" || strings.ContainsAny(master, " \t"):
		return engine.SentinelVote{}, fmt.Errorf("master name %q: want the name the sentinels monitor the master under, without spaces, before \"@\"", master)
	}
	list, err := engine.ParseMasters(addrs)
	if err != nil {
		return engine.SentinelVote{}, fmt.Errorf("sentinels of %q: %v", master, err)
	}
	return engine.SentinelVote{Master: master, Addrs: list}, nil
}

// FormatSentinel writes v as --sentinel reads it.
func FormatSentinel(v engine.SentinelVote) string { return v.Master + "@" + strings.Join(v.Addrs, ",") }

// formatSentinels writes the votes as summary.json's config holds them:
// each as --sentinel reads it, separated by spaces.
func formatSentinels(vs []engine.SentinelVote) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = FormatSentinel(v)
	}
	return strings.Join(out, " ")
}

// validateSentinels checks --sentinel against the rest of the run: only
// the redlock engine votes on them, on every vote (not NAME@N); faults
// act on plain masters only.
func (c *Config) validateSentinels() error {
	if len(c.Sentinels) == 0 {
		return nil
	}
	value := FormatSentinel(c.Sentinels[0])
	switch {
	case !c.Engine.IsRedlock() || c.Engine.Votes > 0:
		return cfgErr("sentinel", value, "only the redlock engines voting on every vote can use a Sentinel vote, not %s", c.Engine)
	case len(c.Faults) > 0:
		return cfgErr("fault", c.Faults, "acts on plain masters only, not on Sentinel votes")
	case c.ClusterShards > 0:
		return cfgErr("sentinel", value, "cannot be combined with --cluster-shards: local votes are started, a Sentinel vote is given")
	}
	return nil
}
