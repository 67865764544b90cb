package engine_test

import (
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// steady completes mutate for a Locker on the pool's masters, which
// nothing breaks: unless the test chose one, the node timeout is the
// longest the TTL allows (just under half of it), so that a master's
// answer slowed by a loaded machine is not taken for its failure (the
// default is TTL/100, 100 ms). On masters of the test's own or simulated
// ones, which a test may break or slow on purpose, mutate is left as is.
func (e *env) steady(mutate func(*engine.Config)) func(*engine.Config) {
	if e.cluster != nil || e.sim != nil {
		return mutate
	}
	return func(c *engine.Config) {
		if mutate != nil {
			mutate(c)
		}
		if c.NodeTimeout == 0 {
			c.NodeTimeout = c.TTL/2 - time.Millisecond
		}
	}
}
