package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sort"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// At most three exports run at once, across every process that uses the
// semaphore "exports" on these masters. Each permit is a lease: Release
// gives it back, and a holder that dies gives it back when its TTL runs
// out.
func ExampleLocker_Semaphore() {
	ctx := context.Background()
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved // fresh test masters, see Example
	cfg.NodeTimeout = time.Second              // a busy test machine, see Example
	locker, err := engine.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	exports, err := locker.Semaphore("exports", 3)
	if err != nil {
		log.Fatal(err)
	}
	var permits []*engine.Lease
	var slots []int
	for i := 0; i < 3; i++ {
		p, err := exports.TryAcquire(ctx)
		if err != nil {
			log.Fatal(err)
		}
		permits = append(permits, p)
		slots = append(slots, p.Permit())
	}
	sort.Ints(slots)
	fmt.Println("three permits, in slots", slots)

	_, err = exports.TryAcquire(ctx)
	fmt.Println("a fourth is refused:", errors.Is(err, engine.ErrNotAcquired))

	// Acquire waits, here until the first export is done: its release
	// wakes the waiter, which takes the slot it freed.
	go func() {
		time.Sleep(100 * time.Millisecond)
		permits[0].Release(context.Background())
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	next, err := exports.Acquire(wctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the next export runs in the freed slot:", next.Permit() == permits[0].Permit())
	for _, p := range append(permits[1:], next) {
		if err := p.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// three permits, in slots [0 1 2]
	// a fourth is refused: true
	// the next export runs in the freed slot: true
}
