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
			patient(c)
		}
	}
}

// patient gives a Locker on real masters the longest node timeout its
// TTL allows (just under half of it; set it after the TTL), so that a
// master's answer slowed by a loaded machine is not taken for its
// failure and only the masters' answers decide what a test asserts.
// Tests that time rounds run in virtual time instead.
func patient(c *engine.Config) { c.NodeTimeout = c.TTL/2 - time.Millisecond }

// patientDownTo is patient for a Locker that takes leases as short as
// ttl (WithTTL, which must exceed twice the node timeout): the longest
// node timeout such a lease allows.
func patientDownTo(ttl time.Duration) func(*engine.Config) {
	return func(c *engine.Config) { c.NodeTimeout = ttl/2 - time.Millisecond }
}

// everyVoteAnswered is patient, with a dial timeout (30 s) that only a
// master that cannot answer reaches, for Lockers that dial while the
// machine is loaded.
func everyVoteAnswered(c *engine.Config) {
	patient(c)
	c.Conn.DialTimeout = 30 * time.Second
}
