package engine_test

import (
	"context"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// The faults the family's property machines (semaphore, read/write lock,
// lock sets) inject, on real masters of their own (ownEnv) or on
// simulated ones (simTest) alike. Unlike env's kill, pause and restart,
// they return their error, for a machine that reports it from a goroutine
// of its own or through rapid.

// nodeKill stops master i at once, as SIGKILL does.
func (e *env) nodeKill(i int) error {
	if e.sim != nil {
		e.sim[i].Kill()
		return nil
	}
	return e.cluster.Nodes[i].Kill()
}

// nodeRestart starts master i again, empty, killing it first if it runs.
func (e *env) nodeRestart(i int) error {
	if e.sim != nil {
		e.sim[i].Restart()
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.cluster.Nodes[i].Restart(ctx)
}

// nodePause freezes master i, as SIGSTOP does.
func (e *env) nodePause(i int) error {
	if e.sim != nil {
		e.sim[i].Pause()
		return nil
	}
	return e.cluster.Nodes[i].Pause()
}

// nodeResume lets a paused master i answer again.
func (e *env) nodeResume(i int) error {
	if e.sim != nil {
		e.sim[i].Resume()
		return nil
	}
	return e.cluster.Nodes[i].Resume()
}

// flushAll empties real masters between a machine's runs. Simulated ones
// are the test's alone and each run's names are its own: nothing to do.
func (e *env) flushAll() error {
	if e.sim != nil {
		return nil
	}
	for _, n := range e.cluster.Nodes {
		if _, err := redistest.Do(n.Addr(), 5*time.Second, "FLUSHALL"); err != nil {
			return err
		}
	}
	return nil
}

// newPropLocker is engine.New for the property machines' Lockers. With
// Fencing, New refuses masters whose clocks, as measured on connecting,
// differ by MaxTTL/2 or more; the measurement is off by up to half the
// connecting round trip, which a loaded machine stretches past these
// Lockers' MaxTTL/2 (200 to 250 ms) although every real master here
// runs on this host's clock. So New is asked again after that refusal
// alone, until a minute has passed. (Simulated masters' clocks are
// exact.)
func newPropLocker(c engine.Config) (*engine.Locker, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := engine.New(ctx, c)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "Config.Fencing: the masters' clocks differ") || time.Now().After(deadline) {
			return l, err
		}
	}
}

// slack is a property's time bound on e: exact in virtual time. On real
// masters, where a loaded machine may hold a goroutine or a master for a
// while, it is what only a call that ignored its deadline, or a trace
// left for good, outlasts; each such property has a twin in virtual time
// that checks the exact bound.
func (e *env) slack(exact time.Duration) time.Duration {
	if e.sim != nil {
		return exact
	}
	return 30 * time.Second
}
