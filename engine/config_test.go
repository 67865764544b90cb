package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

func TestConfigValidation(t *testing.T) {
	good := func() engine.Config { return engine.DefaultConfig("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3") }
	tests := []struct {
		name   string
		mutate func(*engine.Config)
		want   string
	}{
		{"no masters", func(c *engine.Config) { c.Masters = nil }, "Config.Masters is empty"},
		{"zero ttl", func(c *engine.Config) { c.TTL = 0 }, "Config.TTL must be > 0, got 0s"},
		{"negative ttl", func(c *engine.Config) { c.TTL = -time.Second }, "Config.TTL must be > 0, got -1s"},
		{"sub-ms ttl", func(c *engine.Config) { c.TTL = 1500 * time.Microsecond }, "whole milliseconds"},
		{"ttl eaten by drift", func(c *engine.Config) { c.TTL = 2 * time.Millisecond; c.NodeTimeout = time.Microsecond }, "leaves no validity"},
		{"duplicate", func(c *engine.Config) { c.Masters = []string{"127.0.0.1:1", "127.0.0.1:1"} }, `Masters[1] "127.0.0.1:1" duplicates Masters[0]`},
		{"no port", func(c *engine.Config) { c.Masters = []string{"127.0.0.1"} }, `Masters[0] "127.0.0.1": want host:port`},
		{"bad port", func(c *engine.Config) { c.Masters = []string{"127.0.0.1:99999"} }, "port must be 1-65535"},
		{"drift negative", func(c *engine.Config) { c.DriftFactor = -0.1 }, "DriftFactor must be in [0, 1), got -0.1"},
		{"drift one", func(c *engine.Config) { c.DriftFactor = 1 }, "DriftFactor must be in [0, 1), got 1"},
		{"node timeout too long", func(c *engine.Config) { c.NodeTimeout = 6 * time.Second }, "NodeTimeout (6s) must be below half the TTL (10s)"},
		{"node timeout negative", func(c *engine.Config) { c.NodeTimeout = -1 }, "NodeTimeout must be > 0"},
		{"retry delays reversed", func(c *engine.Config) { c.Wait.RetryDelayMin = time.Second; c.Wait.RetryDelayMax = time.Millisecond }, "RetryDelayMax (1ms) is below RetryDelayMin (1s)"},
		{"pipeline multiplex", func(c *engine.Config) { c.Conn.PipelineMultiplex = 9 }, "PipelineMultiplex must be <= 8, got 9"},
		{"too many masters", func(c *engine.Config) {
			c.Masters = nil
			for i := 1; i <= 64; i++ {
				c.Masters = append(c.Masters, fmt.Sprintf("127.0.0.1:%d", i))
			}
		}, "64 votes, at most 63"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.mutate(&c)
			_, err := engine.New(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	c := good()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig does not validate: %v", err)
	}
}
