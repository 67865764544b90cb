package engine_test

import (
	"context"
	"testing"

	"github.com/redlock-bench/redlock/engine"
)

// TestClusterInspectAndList: on votes that are Redis Clusters, Inspect
// reads a lock and a semaphore from the shard that owns their slot, and
// List walks every shard of each vote and finds both, named as they were
// acquired, the lock's slot tag and the semaphore's slots taken off.
func TestClusterInspectAndList(t *testing.T) {
	t.Parallel()
	ce := sharedClusters(t)
	ctx := context.Background()
	l := ce.locker(nil)
	le, err := l.TryLock(ctx, "ci:lock", engine.WithOwner("pid=3"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Semaphore("ci:sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	in, err := l.Inspect(ctx, "ci:lock")
	if err != nil || in.Kind != engine.KindMutex || len(in.Holders) != 1 || in.Holders[0].Value != le.Value() || in.Holders[0].Owner != "pid=3" {
		t.Fatalf("Inspect of a lock: %+v, %v", in, err)
	}
	in, err = l.Inspect(ctx, "ci:sem")
	if err != nil || in.Kind != engine.KindSemaphore || len(in.Holders) != 1 || in.Permits != 2 {
		t.Fatalf("Inspect of a semaphore: %+v, %v", in, err)
	}
	names, err := l.List(ctx, "ci:", 0)
	if err != nil || len(names) != 2 || names[0] != "ci:lock" || names[1] != "ci:sem" {
		t.Fatalf("List: %q, %v", names, err)
	}
}
