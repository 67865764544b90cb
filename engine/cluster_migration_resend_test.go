package engine_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// A script that a cluster vote refused because the resource's slot was
// migrating is sent again once the slot is handed over. Two cases, each
// with the slot's migration begun after the set-up and ended after the
// script was refused:
//   - quit: B waits for "mq", held by A, and gives up during the
//     migration; its quit leaves the queue on the two masters, and the
//     cluster refuses it. Left queued there, B would be given a turn at
//     each release (a turn nobody uses, while the next waiter sleeps);
//   - release: A releases "mr" during the migration; the masters delete
//     it, the cluster refuses. Left there, the lock would keep the
//     resource from that vote until it expires.
//
// How soon it is sent again, and the controls (with
// cluster-migration-no-resend on, each stays), are in
// TestClusterMigrationResendsRefusedScriptsInVirtualTime.
func TestClusterMigrationResendsRefusedScripts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		run  func(*testing.T, *migrationEnv) (key string, left func(addr string) bool)
	}{
		{"quit", quitDuringMigration}, {"release", releaseDuringMigration},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newMigrationEnv(t)
			ctx := context.Background()
			key, left := c.run(t, e)
			slot, from, to := e.shards(key)
			if !left(from.Addr()) {
				t.Fatal("the cluster ran the script during the migration: the test proves nothing")
			}
			if _, err := e.cluster.MigrateKeys(ctx, slot, from, to); err != nil {
				t.Fatal(err)
			}
			if err := e.cluster.FinishMigration(ctx, slot, from, to); err != nil {
				t.Fatal(err)
			}
			eventually(t, 60*time.Second, "the refused script sent again after the migration, and gone what it was to remove", func() bool {
				return !left(to.Addr())
			})
		})
	}
}

// withNotify lets a Locker of migrationEnv queue its waiters.
func withNotify(c *engine.Config) {
	c.Wait.DisableNotify = false
	resendSoon(c)
}

// resendSoon makes a script the cluster refused go again 5 s after (a
// retry delay and the node timeout), not 25: still patient for a
// loaded machine.
func resendSoon(c *engine.Config) { c.NodeTimeout = 5 * time.Second }

// quitDuringMigration: B gives up waiting for "mq" while its slot
// migrates; left reports whether B is still queued on a node.
func quitDuringMigration(t *testing.T, e *migrationEnv) (string, func(string) bool) {
	ctx := context.Background()
	a, b := e.locker(withNotify), e.locker(withNotify)
	holder, err := a.TryLock(ctx, "mq")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Release(context.Background()) })
	key := clusterKey("mq")
	queue := "\xffredlock:queue:" + key
	queued := func(addr string) bool {
		n, err := redistest.Do(addr, 5*time.Second, "ZCARD", queue)
		if err != nil {
			t.Fatalf("ZCARD on %s: %v", addr, err)
		}
		return n == ":1"
	}
	slot, from, to := e.shards(key)
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.Lock(bctx, "mq")
		done <- err
	}()
	eventually(t, 30*time.Second, "B queued on every vote", func() bool {
		return queued(e.masters.Nodes[0].Addr()) && queued(e.masters.Nodes[1].Addr()) && queued(from.Addr())
	})
	if err := e.cluster.BeginMigration(ctx, slot, from, to); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("B's Lock: %v, want context.Canceled", err)
	}
	eventually(t, 30*time.Second, "B's quit on the masters", func() bool {
		return !queued(e.masters.Nodes[0].Addr()) && !queued(e.masters.Nodes[1].Addr())
	})
	return key, queued
}

// releaseDuringMigration: A releases "mr" while its slot migrates; left
// reports whether the lock is still on a node.
func releaseDuringMigration(t *testing.T, e *migrationEnv) (string, func(string) bool) {
	ctx := context.Background()
	a := e.locker(resendSoon)
	held, err := a.TryLock(ctx, "mr")
	if err != nil {
		t.Fatal(err)
	}
	key := clusterKey("mr")
	exists := func(addr string) bool {
		n, err := redistest.Do(addr, 5*time.Second, "EXISTS", key)
		if err != nil {
			t.Fatalf("EXISTS on %s: %v", addr, err)
		}
		return n == ":1"
	}
	slot, from, to := e.shards(key)
	eventually(t, 30*time.Second, "A's lock on every vote", func() bool {
		return e.master(0, "EXISTS", key) == ":1" && e.master(1, "EXISTS", key) == ":1" && exists(from.Addr())
	})
	if err := e.cluster.BeginMigration(ctx, slot, from, to); err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release: %v (the masters' quorum should decide)", err)
	}
	return key, exists
}

// An attempt that a migrating slot refused did not run there (TRYAGAIN
// is a reply): its lease has nothing on that vote to release or undo. A
// fenced TryLock (a script) during a migration is refused by the cluster
// and granted by the masters; its release must send the cluster nothing.
// Before the refusal counted as a reply, the vote was taken for one whose
// connection broke mid-command, and the release sent it a release and an
// undo every tenth of a second for as long as the slot migrated.
func TestClusterMigrationReleaseSkipsTheRefusingVote(t *testing.T) {
	t.Parallel()
	e := newMigrationEnv(t)
	ctx := context.Background()
	// The cluster's refusal must reach the acquire in time to count
	// (patientVotes), and a release sent it would go at once.
	a := e.locker(func(c *engine.Config) { c.Fencing = true })
	key := clusterKey("mnr")
	slot, from, to := e.shards(key)
	if err := e.cluster.BeginMigration(ctx, slot, from, to); err != nil {
		t.Fatal(err)
	}
	seen := func() int { return scriptsSeen(t, from.Addr()) + scriptsSeen(t, to.Addr()) }
	beforeTo := scriptsSeen(t, to.Addr())
	held, err := a.TryLock(ctx, "mnr")
	if err != nil {
		t.Fatal(err)
	}
	// The masters' quorum decides; the cluster's refusals may come after.
	// Two rounds go to every vote: the acquire and the fence round (which
	// returns at the masters' quorum too). Each goes to the source, which
	// sends it on (ASK), then to the target, which refuses it (TRYAGAIN):
	// the target's count ends each round, and one refusal there may be
	// the acquire's alone, with the fence round's two hops to come.
	eventually(t, 30*time.Second, "the cluster's refusals of the acquire and of the fence round", func() bool {
		return scriptsSeen(t, to.Addr())-beforeTo >= 2
	})
	// The source sends on (ASK) a command for a key it does not have.
	if out, err := redistest.Do(from.Addr(), 5*time.Second, "EXISTS", key); err == nil || !strings.HasPrefix(err.Error(), "ASK") {
		t.Fatalf("EXISTS on the source: %q, %v; want ASK, the lock nowhere on the cluster", out, err)
	}
	before := seen()
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// Nothing happens here to wait for: a release sent the cluster would
	// go at once. A slow machine can only hide one, never show one that
	// was not sent.
	time.Sleep(time.Second)
	if n := seen() - before; n != 0 {
		t.Fatalf("the release of a lease refused by the migrating slot sent the cluster %d scripts in 1 s, want none", n)
	}
}

// scriptsSeen is how many scripts the node at addr was sent: run, failed,
// or refused before they ran (TRYAGAIN counts as rejected).
func scriptsSeen(t *testing.T, addr string) int {
	t.Helper()
	info, err := redistest.Info(addr, "commandstats")
	if err != nil {
		t.Fatalf("INFO commandstats on %s: %v", addr, err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_eval:") && !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		_, fields, _ := strings.Cut(line, ":")
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			if k == "calls" || k == "rejected_calls" || k == "failed_calls" {
				x, _ := strconv.Atoi(v)
				n += x
			}
		}
	}
	return n
}
