package main

import (
	"strings"
	"testing"
)

// --sentinel, repeated, is in the run's recorded config, one vote after
// the other as the flag takes it, so that the summary says the run used
// Sentinel votes and the command that reproduces it gives them again.
func TestSentinelFlagsInRunConfig(t *testing.T) {
	args := []string{"--masters", "127.0.0.1:7000,127.0.0.1:7001",
		"--sentinel", "mymaster@127.0.0.1:26379,127.0.0.1:26380", "--sentinel", "other@127.0.0.1:26381"}
	cfg, _, err := parseRunFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	rc := cfg.RunConfig()
	if want := "mymaster@127.0.0.1:26379,127.0.0.1:26380 other@127.0.0.1:26381"; rc.Sentinel != want {
		t.Fatalf("config sentinel %q, want %q", rc.Sentinel, want)
	}
	// Each recorded vote, given back to --sentinel, is the same vote.
	again := []string{"--masters", rc.Masters}
	for _, v := range strings.Fields(rc.Sentinel) {
		again = append(again, "--sentinel", v)
	}
	cfg2, _, err := parseRunFlags(again)
	if err != nil {
		t.Fatalf("%q: %v", again, err)
	}
	if got := cfg2.RunConfig().Sentinel; got != rc.Sentinel || len(cfg2.Sentinels) != 2 {
		t.Errorf("rerun from the config: sentinel %q (%d votes), want %q", got, len(cfg2.Sentinels), rc.Sentinel)
	}
	if cfg, _, err := parseRunFlags([]string{"--local-masters", "3"}); err != nil || cfg.RunConfig().Sentinel != "" {
		t.Errorf("without --sentinel: %q, %v", cfg.RunConfig().Sentinel, err)
	}
}
