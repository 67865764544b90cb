package engine_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// Work that may outlast the TTL runs under an auto-extending lease and
// watches Done: if an extension misses the quorum, Done closes and the work
// must stop, because another process may already hold the lock.
func ExampleConfig_autoExtend() {
	ctx := context.Background()
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved // fresh test masters, see Example
	cfg.TTL = 2 * time.Second
	cfg.NodeTimeout = 900 * time.Millisecond // a busy test machine, see Example; under TTL/2
	cfg.AutoExtend = true                    // every TTL/3 by default
	locker, err := engine.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lease, err := locker.Lock(ctx, "reindex")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.Background())

	work := time.After(3 * time.Second) // longer than the TTL
	select {
	case <-lease.Done():
		fmt.Println("lock lost, stopping:", lease.Err())
	case <-work:
		fmt.Println("work finished under the lock")
		fmt.Println("extended at least twice:", lease.Extensions() >= 2)
		fmt.Println("still valid:", lease.Validity() > 0)
	}
	// Output:
	// work finished under the lock
	// extended at least twice: true
	// still valid: true
}

// fencedStore stands for the protected resource: it remembers the highest
// token it has seen and refuses writes that carry a lower one.
type fencedStore struct{ highest int64 }

func (s *fencedStore) write(token int64, what string) error {
	if token < s.highest {
		return fmt.Errorf("refused %q: token is older than one already seen", what)
	}
	s.highest = token
	return nil
}

// With Fencing on, every lease carries a token that only grows per
// resource. A holder that was paused past its TTL still believes it holds
// the lock; the token lets the store refuse its late write.
func ExampleLease_Token() {
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
	store := &fencedStore{}

	first, err := locker.TryLock(ctx, "ledger")
	if err != nil {
		log.Fatal(err)
	}
	// The first holder stalls; its lock ends (here: released for it) and
	// a second holder takes over and writes.
	if err := first.Release(ctx); err != nil {
		log.Fatal(err)
	}
	second, err := locker.TryLock(ctx, "ledger")
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(context.Background())
	fmt.Println("tokens increase:", second.Token() > first.Token())
	fmt.Println("second writes:", store.write(second.Token(), "balance=20"))

	// The first holder wakes up and writes with its old token.
	fmt.Println("first writes late:", store.write(first.Token(), "balance=10"))
	// Output:
	// tokens increase: true
	// second writes: <nil>
	// first writes late: refused "balance=10": token is older than one already seen
}

// The work the lock protects runs under lease.WithContext(ctx): it stops
// when its caller gives up (here the caller's context is cancelled, as a
// Ctrl-C would) and when the lease ends (here it is released, as a lost
// lock would end it), whichever comes first.
func ExampleLease_WithContext() {
	ctx := context.Background()
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved // fresh test masters, see Example
	cfg.NodeTimeout = time.Second              // a busy test machine, see Example
	locker, err := engine.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	// The caller gives up.
	callerCtx, interrupt := context.WithCancel(ctx)
	lease, err := locker.TryLock(ctx, "export")
	if err != nil {
		log.Fatal(err)
	}
	workCtx, cancel := lease.WithContext(callerCtx)
	interrupt()
	<-workCtx.Done()
	fmt.Println("caller gave up:", context.Cause(workCtx))
	cancel()
	lease.Release(ctx)

	// The lease ends.
	lease, err = locker.TryLock(ctx, "export")
	if err != nil {
		log.Fatal(err)
	}
	workCtx, cancel = lease.WithContext(ctx)
	defer cancel()
	lease.Release(ctx)
	<-workCtx.Done()
	fmt.Println("lease ended:", context.Cause(workCtx))
	// Output:
	// caller gave up: context canceled
	// lease ended: lease released
}
