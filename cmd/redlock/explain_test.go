package main

import (
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/multiplex"
)

func TestDurationsAsFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d              time.Duration
		short, roundUp string
	}{
		{0, "0s", "1s"},
		{300 * time.Millisecond, "300ms", "1s"},
		{29*time.Second + 100*time.Millisecond, "29.1s", "30s"},
		{time.Minute, "1m", "1m"},
		{90 * time.Second, "1m30s", "2m"},
		{59*time.Minute + 58*time.Second, "59m58s", "1h"},
		{time.Hour, "1h", "1h"},
		{time.Hour + time.Second, "1h0m1s", "2h"},
		{24 * time.Hour, "24h", "24h"},
	} {
		if got := shortDuration(c.d); got != c.short {
			t.Errorf("shortDuration(%s) = %q, want %q", c.d, got, c.short)
		}
		if got := roundUp(c.d); got != c.roundUp {
			t.Errorf("roundUp(%s) = %q, want %q", c.d, got, c.roundUp)
		}
	}
}

// Masters whose run_id changed are quarantined whatever --quarantine
// observed would trust: the advice is to wait, and names them once.
func TestQuarantineAdviceAfterRestart(t *testing.T) {
	t.Parallel()
	// Half a minute from a whole number of minutes: the advice rounds the
	// time left up to the minute, 3m, however long the test is held up
	// before it reads the clock (under 30s).
	until := time.Now().Add(2*time.Minute + 30*time.Second)
	q := func() engine.Vote {
		return engine.Vote{Outcome: engine.OutcomeFailed, Err: &engine.QuarantineError{Until: until, Restarted: true, MaxTTL: 30 * time.Second}}
	}
	ve := &engine.VotesError{Op: "acquire", Resource: "r", Kind: engine.ErrNoQuorum,
		Votes: []engine.Vote{q(), {Outcome: engine.OutcomeOK}, q()}, OK: 1, Failed: 2, Quorum: 2,
		Addrs: []string{"a:1", "b:2", "c:3"}}
	got := votesText(ve) + quarantineAdvice(ve, 0)
	for _, want := range []string{"a:1, c:3: restarted or failed over (run_id changed), quarantined", "until " + until.Format("15:04:05.000"),
		"--max-ttl 30s after that", "--wait 3m waits for it"} {
		if strings.Count(got, want) != 1 {
			t.Errorf("%q: want %q once", got, want)
		}
	}
	if strings.Contains(got, "--quarantine") || strings.Contains(got, "b:2") {
		t.Errorf("%q: suggests --quarantine, or names a master that voted", got)
	}
	// A master down besides: the quarantine did not decide alone.
	ve.Votes[1] = engine.Vote{Outcome: engine.OutcomeTimeout, Err: multiplex.ErrTimeout}
	ve.OK, ve.Timeout = 0, 1
	if onlyQuarantined(ve) {
		t.Errorf("onlyQuarantined with a master timed out")
	}
}
