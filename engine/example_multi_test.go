package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// TryLockAll takes several resources under one lease, all or nothing: if
// one of them is held, it takes none and says which.
func ExampleLocker_TryLockAll() {
	ctx := context.Background()
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved // fresh test masters, see Example
	cfg.NodeTimeout = time.Second              // a busy test machine, see Example
	locker, err := engine.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	audit, err := locker.TryLock(ctx, "ledger:audit")
	if err != nil {
		log.Fatal(err)
	}
	_, err = locker.TryLockAll(ctx, "ledger:march", "ledger:audit")
	var ve *engine.VotesError
	if errors.As(err, &ve) && errors.Is(err, engine.ErrNotAcquired) {
		fmt.Println("refused, held:", ve.Held)
	}
	// Nothing was taken: ledger:march is free.
	march, err := locker.TryLock(ctx, "ledger:march")
	fmt.Println("ledger:march free:", err == nil)
	march.Release(ctx)
	audit.Release(ctx)

	lease, err := locker.TryLockAll(ctx, "ledger:march", "ledger:audit")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", lease.Resources())
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// refused, held: ledger:audit
	// ledger:march free: true
	// holding [ledger:audit ledger:march]
}

// Transfers between two accounts need both. Transfers in opposite
// directions, each naming its accounts in its own order, cannot deadlock:
// LockAll takes both at once or waits holding nothing, woken by the
// other's release. The lease's fencing token is above every earlier token
// of each account, so that each account's store can refuse a stale holder.
func ExampleLocker_LockAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := engine.DefaultConfig(exampleMasters...)
	cfg.Quarantine = engine.QuarantineObserved // fresh test masters, see Example
	cfg.NodeTimeout = time.Second              // a busy test machine, see Example
	cfg.Fencing = true
	locker, err := engine.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	var mu sync.Mutex // guards the bookkeeping below, not the accounts
	busy := map[string]bool{}
	transfers, overlaps := 0, 0
	transfer := func(from, to string) {
		lease, err := locker.LockAll(ctx, from, to)
		if err != nil {
			log.Fatal(err)
		}
		defer lease.Release(context.Background())
		mu.Lock()
		if busy[from] || busy[to] {
			overlaps++ // another transfer holds one of the accounts
		}
		busy[from], busy[to] = true, true
		transfers++
		mu.Unlock()
		time.Sleep(time.Millisecond) // the transfer itself
		mu.Lock()
		busy[from], busy[to] = false, false
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(2)
		go func() { defer wg.Done(); transfer("account:alice", "account:bob") }()
		go func() { defer wg.Done(); transfer("account:bob", "account:alice") }()
	}
	wg.Wait()
	fmt.Println("transfers:", transfers, "overlapping:", overlaps)
	// Output: transfers: 20 overlapping: 0
}
