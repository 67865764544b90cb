package engine_test

import (
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/engine"
)

// Sentinel votes count in the vote, may be the only votes, and a bad one
// is refused naming its field.
func TestSentinelVotesValidate(t *testing.T) {
	only := engine.DefaultConfig()
	only.Sentinels = []engine.SentinelVote{{Master: "m", Addrs: []string{"127.0.0.1:26379"}}}
	if err := only.Validate(); err != nil {
		t.Errorf("Sentinel votes alone: %v", err)
	}
	for _, tc := range []struct {
		vote engine.SentinelVote
		want string
	}{
		{engine.SentinelVote{Addrs: []string{"127.0.0.1:26379"}}, "engine: Config.Sentinels[0]: master name"},
		{engine.SentinelVote{Master: "m"}, "engine: Config.Sentinels[0]: no sentinel addresses"},
		{engine.SentinelVote{Master: "m", Addrs: []string{"127.0.0.1:6379"}}, `engine: Config.Sentinels[0].Addrs[0] "127.0.0.1:6379": also given as Masters[0]`},
	} {
		cfg := engine.DefaultConfig("127.0.0.1:6379")
		cfg.Sentinels = []engine.SentinelVote{tc.vote}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.vote, err, tc.want)
		}
	}
	many := engine.DefaultConfig()
	for range engine.MaxMasters + 1 {
		many.Sentinels = append(many.Sentinels, engine.SentinelVote{Master: "m", Addrs: []string{"127.0.0.1:1"}})
	}
	if err := many.Validate(); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d Sentinel votes: %v", len(many.Sentinels), err)
	}
}
