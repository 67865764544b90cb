package engine_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// exampleLocker is a Locker on the test pool's masters, configured as
// Example's is for freshly started masters on a busy machine.
func exampleLocker(mutate func(*engine.Config)) *engine.Locker {
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved
	cfg.NodeTimeout = time.Second
	if mutate != nil {
		mutate(&cfg)
	}
	locker, err := engine.New(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	return locker
}

// A TTL for one acquisition: a short job takes a short lease, so that a
// crash frees the resource sooner, while the Locker's TTL (here 10s)
// stays the default. WithTTL is checked before anything is sent: at most
// Config.MaxTTL.
func ExampleWithTTL() {
	ctx := context.Background()
	locker := exampleLocker(func(c *engine.Config) { c.TTL = 10 * time.Second })
	defer locker.Close()

	lease, err := locker.TryLock(ctx, "example:report", engine.WithTTL(3*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	fmt.Println("valid for at most 3s:", lease.Validity() <= 3*time.Second)

	_, err = locker.TryLock(ctx, "example:other", engine.WithTTL(time.Hour))
	fmt.Println(err)
	// Output:
	// valid for at most 3s: true
	// engine: acquire "example:other": invalid lock option: WithTTL(1h0m0s): above Config.MaxTTL (10s)
}

// Owner metadata says who holds a lease: Config.Owner for every lease of
// the Locker, WithOwner for one. Inspect shows it to whoever looks at the
// lock, in this process or another.
func ExampleWithOwner() {
	ctx := context.Background()
	locker := exampleLocker(func(c *engine.Config) { c.Owner = "host=web-1 pid=4242" })
	defer locker.Close()

	lease, err := locker.TryLock(ctx, "example:invoice", engine.WithOwner("host=web-1 pid=4242 req=7f3a"))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)

	in, err := locker.Inspect(ctx, "example:invoice")
	if err != nil {
		log.Fatal(err)
	}
	h := in.Holders[0]
	fmt.Println(in.Kind, h.Owner, h.Value == lease.Value())
	fmt.Println(engine.OwnerOf(lease.Value()))
	// Output:
	// mutex host=web-1 pid=4242 req=7f3a true
	// host=web-1 pid=4242 req=7f3a
}

// An operator clears a lock whose holder crashed: Inspect names the
// holder's value, Unlock releases it where that value still holds (and
// wakes the first waiter, as a release does), and nothing else.
func ExampleLocker_Unlock() {
	ctx := context.Background()
	crashed := exampleLocker(nil)
	if _, err := crashed.TryLock(ctx, "example:stuck", engine.WithOwner("pid=99")); err != nil {
		log.Fatal(err)
	}
	crashed.Close() // the process is gone; its lease stays until its TTL

	operator := exampleLocker(nil)
	defer operator.Close()
	in, err := operator.Inspect(ctx, "example:stuck")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held by", in.Holders[0].Owner)
	if _, err := operator.Unlock(ctx, "example:stuck", in.Holders[0].Value); err != nil {
		log.Fatal(err)
	}
	in, err = operator.Inspect(ctx, "example:stuck")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(in.Kind)
	// Output:
	// held by pid=99
	// free
}
