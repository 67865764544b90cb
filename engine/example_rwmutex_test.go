package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// Readers of a catalog share it; a writer holds it alone, with a fencing
// token, and once it waits no new reader gets in ahead of it. Each holder
// is a lease: Release lets go, and a holder that dies lets go when its
// TTL runs out.
func ExampleLocker_RWMutex() {
	ctx := context.Background()
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved // fresh test masters, see Example
	cfg.NodeTimeout = time.Second              // a busy test machine, see Example
	cfg.Fencing = true
	locker, err := engine.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	catalog, err := locker.RWMutex("catalog")
	if err != nil {
		log.Fatal(err)
	}
	r1, err := catalog.TryRLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r2, err := catalog.TryRLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two readers at once, no tokens:", r1.Token() == 0 && r2.Token() == 0)

	_, err = catalog.TryLock(ctx)
	fmt.Println("a writer is refused while they read:", errors.Is(err, engine.ErrNotAcquired))

	// Lock waits, here until both readers are done: the last release
	// wakes it.
	go func() {
		time.Sleep(100 * time.Millisecond)
		r1.Release(context.Background())
		r2.Release(context.Background())
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	w, err := catalog.Lock(wctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the writer holds it, with a token:", w.Token() > 0)

	_, err = catalog.TryRLock(ctx)
	fmt.Println("a reader is refused while it writes:", errors.Is(err, engine.ErrNotAcquired))

	// A name is one kind of lock: the plain lock of the same name is refused.
	_, err = locker.TryLock(ctx, "catalog")
	fmt.Println("the plain lock \"catalog\" is refused:", errors.Is(err, engine.ErrWrongKind))

	if err := w.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// two readers at once, no tokens: true
	// a writer is refused while they read: true
	// the writer holds it, with a token: true
	// a reader is refused while it writes: true
	// the plain lock "catalog" is refused: true
}
