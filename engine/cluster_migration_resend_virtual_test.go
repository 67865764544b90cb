package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// TestClusterMigrationResendsRefusedScripts in virtual time, on two
// simulated masters and a simulated cluster of two shards: a quit or a
// release that the cluster refused while the resource's slot migrated
// is sent again, a retry delay and a node timeout after each refusal, so
// that what it was to remove is gone within one such period of the
// hand-over, and a round trip by way of the old owner's MOVED (50 ms,
// a latency spike included); with cluster-migration-no-resend on (the
// control), it is still there 3 s after.
func TestClusterMigrationResendsRefusedScriptsInVirtualTime(t *testing.T) {
	mutation.Require(t)
	const bound = engine.DefaultRetryDelayMax + resendNodeTimeout + 50*time.Millisecond
	for _, c := range []struct {
		name string
		off  bool
		run  func(*testing.T, *simClusterEnv, *simMigration) (key string, left func(*simredis.Master) bool)
	}{
		{"quit", false, simQuitDuringMigration}, {"quit-control", true, simQuitDuringMigration},
		{"release", false, simReleaseDuringMigration}, {"release-control", true, simReleaseDuringMigration},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer mutation.ClusterMigrationNoResend.Set(c.off)()
			simClusterTest(t, simClusterOptions{Masters: 2, Clusters: 1, Shards: 2}, func(t *testing.T, e *simClusterEnv) {
				mg := &simMigration{e: e}
				key, left := c.run(t, e, mg)
				if !left(mg.from) {
					t.Fatal("the cluster ran the script during the migration: the test proves nothing")
				}
				mg.finish()
				handedOver := time.Now()
				for left(mg.to) && time.Since(handedOver) < 3*time.Second {
					time.Sleep(time.Millisecond)
				}
				gone := time.Since(handedOver)
				t.Logf("%s: gone from the new owner %v after the hand-over", key, gone)
				switch {
				case !c.off && gone > bound:
					t.Fatalf("%v after the migration ended (bound %v), the cluster still has what the refused script was to remove", gone, bound)
				case c.off && !left(mg.to):
					t.Fatalf("with %s on, the script ran after the migration: the test cannot catch it", mutation.ClusterMigrationNoResend.Name())
				}
			})
		})
	}
}

// resendNodeTimeout is the node timeout of the Lockers below, which a
// refused script waits, with a retry delay, before it is sent again.
const resendNodeTimeout = 100 * time.Millisecond

// simMigration is a migration of one slot of the env's cluster, from its
// owner (from) to the other shard's primary (to), begun and finished by
// the test.
type simMigration struct {
	e        *simClusterEnv
	from, to *simredis.Master
	stop     context.CancelFunc
	done     chan struct{}
}

// begin opens the migration of slot: until finish, the slot is
// migrating, its keys all on the source.
func (mg *simMigration) begin(t *testing.T, slot int) {
	c := mg.e.clusters[0]
	mg.from = mg.e.primary(0, slot)
	mg.to = c.Primary(0)
	if mg.to == mg.from {
		mg.to = c.Primary(1)
	}
	ctx, stop := context.WithCancel(context.Background())
	mg.stop, mg.done = stop, make(chan struct{})
	go func() {
		defer close(mg.done)
		// A key would move a day after the last: none does before
		// finish, which moves them all at once and hands the slot over.
		if report, ok := c.Migrate(ctx, slot, 0, 24*time.Hour); !ok {
			t.Error(report)
		}
	}()
	time.Sleep(time.Millisecond) // begun
}

// finish moves the slot's keys and hands it over.
func (mg *simMigration) finish() {
	mg.stop()
	<-mg.done
}

// simQuitDuringMigration: B gives up waiting for "mq" while its slot
// migrates; left reports whether B is still queued on a node.
func simQuitDuringMigration(t *testing.T, e *simClusterEnv, mg *simMigration) (string, func(*simredis.Master) bool) {
	ctx := context.Background()
	config := func(c *engine.Config) { c.TTL, c.NodeTimeout = time.Minute, resendNodeTimeout }
	a, b := e.locker(config), e.locker(config)
	holder, err := a.TryLock(ctx, "mq")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Release(context.Background()) })
	key := clusterKey("mq")
	queued := func(m *simredis.Master) bool { return e.queueLen(m, key) == 1 }
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.Lock(bctx, "mq")
		done <- err
	}()
	from := e.primary(0, keyslot.KeySlot(key))
	for !(queued(e.masters[0]) && queued(e.masters[1]) && queued(from)) {
		time.Sleep(time.Millisecond)
	}
	mg.begin(t, keyslot.KeySlot(key))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("B's Lock: %v, want context.Canceled", err)
	}
	for queued(e.masters[0]) || queued(e.masters[1]) {
		time.Sleep(time.Millisecond)
	}
	return key, queued
}

// simReleaseDuringMigration: A releases "mr" while its slot migrates;
// left reports whether the lock is still on a node.
func simReleaseDuringMigration(t *testing.T, e *simClusterEnv, mg *simMigration) (string, func(*simredis.Master) bool) {
	ctx := context.Background()
	a := e.locker(func(c *engine.Config) {
		c.TTL, c.NodeTimeout = time.Minute, resendNodeTimeout
		c.Wait.DisableNotify = true
	})
	held, err := a.TryLock(ctx, "mr")
	if err != nil {
		t.Fatal(err)
	}
	key := clusterKey("mr")
	exists := func(m *simredis.Master) bool { return e.exists(m, key) }
	from := e.primary(0, keyslot.KeySlot(key))
	for !(exists(e.masters[0]) && exists(e.masters[1]) && exists(from)) {
		time.Sleep(time.Millisecond)
	}
	mg.begin(t, keyslot.KeySlot(key))
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release: %v (the masters' quorum should decide)", err)
	}
	return key, exists
}
