package engine_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// An Observer sees every operation as it ends, with its duration, result
// and each master's vote; package otelredlock turns the same events into
// OpenTelemetry metrics and spans.
func ExampleObserver() {
	ctx := context.Background()
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved // fresh test masters, see Example
	cfg.NodeTimeout = time.Second              // a busy test machine, see Example
	cfg.Observer = &engine.Observer{
		// Called on the caller's goroutine before TryLock or Lock returns:
		// it must not block.
		Acquire: func(ctx context.Context, e engine.AcquireEvent) {
			fmt.Printf("%s %s: %s, quorum said yes: %v\n", e.Op, e.Resource, e.Result,
				e.Votes.Count(engine.OutcomeOK) >= e.Quorum)
		},
		Release: func(ctx context.Context, e engine.ReleaseEvent) {
			fmt.Printf("release %s: %s\n", e.Resource, e.Result)
		},
	}
	locker, err := engine.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lease, err := locker.TryLock(ctx, "observed:1")
	if err != nil {
		log.Fatal(err)
	}
	locker.TryLock(ctx, "observed:1") // held: refused
	lease.Release(ctx)
	// Output:
	// try_lock observed:1: acquired, quorum said yes: true
	// try_lock observed:1: contended, quorum said yes: false
	// release observed:1: released
}
