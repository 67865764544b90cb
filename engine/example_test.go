package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// exampleMasters are the pool's masters, for the Example functions, which
// cannot be given a testing.T.
var exampleMasters []string

func TestMain(m *testing.M) {
	if err := startPool(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exampleMasters = pool.cluster.Addrs()
	code := m.Run()
	stopClusters()
	stopPool()
	os.Exit(code)
}

func Example() {
	ctx := context.Background()
	cfg := engine.DefaultConfig(exampleMasters...) // five independent masters
	cfg.TTL = 5 * time.Second
	cfg.MaxTTL = 10 * time.Second // the longest Extend below
	// These masters were started a moment ago by the test and hold no
	// locks. By default (QuarantineAlways) masters younger than the TTL
	// are kept out of the vote until they are one TTL old.
	cfg.Quarantine = engine.QuarantineObserved
	// And they share a test machine that may be busy: each has a second
	// to answer, where the default node timeout is TTL/100 (at least
	// 50 ms), which a loaded machine can miss.
	cfg.NodeTimeout = time.Second
	locker, err := engine.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lease, err := locker.TryLock(ctx, "invoice:42")
	switch {
	case errors.Is(err, engine.ErrNotAcquired):
		fmt.Println("someone else holds it")
		return
	case err != nil: // ErrNoQuorum: too many masters down
		log.Fatal(err)
	}
	fmt.Println("held:", lease.Resource(), lease.Validity() > 4*time.Second)

	// A second attempt, as another process would make, is refused.
	_, err = locker.TryLock(ctx, "invoice:42")
	fmt.Println("second attempt refused:", errors.Is(err, engine.ErrNotAcquired))

	if err := lease.Extend(ctx, 10*time.Second); err != nil {
		log.Fatal(err)
	}
	fmt.Println("extended:", lease.Validity() > 9*time.Second)
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released")
	// Output:
	// held: invoice:42 true
	// second attempt refused: true
	// extended: true
	// released
}

func ExampleLocker_Lock() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved // fresh test masters, see Example
	cfg.NodeTimeout = time.Second              // a busy test machine, see Example
	locker, err := engine.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	// Lock retries with a random delay until it holds the lock or ctx ends.
	lease, err := locker.Lock(ctx, "report:daily")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.Background())
	fmt.Println("holding", lease.Resource())
	// Output: holding report:daily
}
