package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redlock-bench/redlock/internal/addrcheck"
)

// SentinelVote is a vote that is a master Redis Sentinel manages
// (Config.Sentinels): the name the sentinels monitor it under, and the
// host:port of one or more of the sentinels (the client learns the
// others from them). The vote is whichever server the sentinels name the
// master, and follows their failovers; see docs/library.md,
// "Sentinel-managed votes".
type SentinelVote struct {
	Master string
	Addrs  []string
}

// votes is how many votes c has: masters, clusters and Sentinel votes.
func (c *Config) votes() int { return len(c.Masters) + len(c.Clusters) + len(c.Sentinels) }

// validateSentinels checks Config.Sentinels with the other votes, as New
// does.
func (c *Config) validateSentinels() error {
	if len(c.Sentinels) == 0 {
		return nil
	}
	err := addrcheck.AllVotes(c.Masters, c.Clusters, c.sentinelChecks())
	var se *addrcheck.SentinelError
	if errors.As(err, &se) {
		// The vote's other listing, in the Config's words.
		return errors.New("engine: Config." + strings.Replace(err.Error(), "as Addrs[", "as Masters[", 1))
	}
	if err != nil {
		return fmt.Errorf("engine: Config: %w", err)
	}
	return nil
}

func (c *Config) sentinelChecks() []addrcheck.Sentinel {
	out := make([]addrcheck.Sentinel, len(c.Sentinels))
	for i, v := range c.Sentinels {
		out[i] = addrcheck.Sentinel(v)
	}
	return out
}

func cloneSentinels(s []SentinelVote) []SentinelVote {
	if s == nil {
		return nil
	}
	out := make([]SentinelVote, len(s))
	for i, v := range s {
		out[i] = SentinelVote{Master: v.Master, Addrs: append([]string(nil), v.Addrs...)}
	}
	return out
}

// sentinelOptions are s as multiplex.Options.Sentinels takes them.
func sentinelOptions(s []SentinelVote) []struct {
	Master string
	Addrs  []string
} {
	out := make([]struct {
		Master string
		Addrs  []string
	}, len(s))
	for i, v := range s {
		out[i] = struct {
			Master string
			Addrs  []string
		}(v)
	}
	return out
}
