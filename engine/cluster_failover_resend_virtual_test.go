package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/simredis"
	"github.com/redlock-bench/redlock/multiplex"
)

// Right after a failover a cluster vote's client still routes the
// shard's slots to the old primary, now a replica, until it refreshes its
// slot map; the vote refuses the connection to a replica, so a script
// sent meanwhile never leaves the process. A release (or a quit, a
// leave) is sent without waiting for it: lost there, the lock would stay
// on the promoted replica until it expires. So it is sent again, a retry
// delay and a node timeout later, as one a migrating slot refused.
//
// In virtual time, on one simulated cluster of one shard, P with a
// replica R, the only vote: A holds "fr" on P; A is cut off from P and R
// (see cutter), and its client drops its connection to P, while P is
// killed, R promoted with A's key, and P started again as R's replica;
// then A may reach P again. Every slot map A's client could fetch
// meanwhile is the old one or none (P out of reach, then refused; R out
// of reach), so A's release goes to P and is refused there, which Release
// reports (the vote decides alone). Once A can reach R again, the release
// is sent again and deletes A's key on R within a second (the client's
// refresh delay) and three resend periods. With
// cluster-replica-no-resend on (the control), A's key is still on R then.
func TestClusterReleaseRefusedByTheDemotedPrimaryResentInVirtualTime(t *testing.T) {
	mutation.Require(t)
	// Each refusal sends the release again within a period (a retry delay
	// and a node timeout), and has the client refresh its slot map within
	// a second unless a refresh is pending or under way. So, once A can
	// reach R: a refusal within a period, or two if a refresh under way
	// then (it fails) swallows the first; the refresh a second after it;
	// the release at R within a period of that; and 100 ms for the round
	// trips, latency spikes included.
	const period = engine.DefaultRetryDelayMax + resendNodeTimeout
	const bound = 3*period + time.Second + 100*time.Millisecond
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "resent", true: "control"}[off], func(t *testing.T) {
			defer mutation.ClusterReplicaNoResend.Set(off)()
			simClusterTest(t, simClusterOptions{Clusters: 1, Shards: 1, Replicas: true}, func(t *testing.T, e *simClusterEnv) {
				ctx := context.Background()
				c := e.clusters[0]
				p, r := e.nodes[0][0], e.nodes[0][1]
				var cut *cutter
				a := e.locker(func(cfg *engine.Config) {
					cfg.TTL, cfg.NodeTimeout = time.Minute, resendNodeTimeout
					cut = newCutter(cfg.Conn.DialContext)
					cfg.Conn.DialContext = cut.dial
				})
				held, err := a.TryLock(ctx, "fr")
				if err != nil {
					t.Fatal(err)
				}
				key := clusterKey("fr")
				exists := func(m *simredis.Master) bool { return e.exists(m, key) }
				cut.set(p.Addr, true)
				cut.set(r.Addr, true)
				// A's client sees its connection to P end (a release on it
				// would fail as sent, not refused): in the bubble, every
				// goroutine has run before the clock moves.
				time.Sleep(time.Millisecond)
				// The replica's copy is taken now, with A's key.
				if old, ok := c.Failover(ctx, 0, 0); !ok || old != p {
					t.Fatal("no failover to R")
				}
				p.Start()
				if !exists(r) {
					t.Fatal("set-up: A's key is not on the promoted replica")
				}
				cut.set(p.Addr, false)
				err = held.Release(ctx)
				if err == nil || !strings.Contains(err.Error(), "is a replica") {
					t.Fatalf("Release: %v; want the vote's refusal of the demoted primary: the test proves nothing", err)
				}
				if !errors.Is(err, multiplex.ErrReplica) || !errors.Is(err, multiplex.ErrNotSent) {
					t.Errorf("Release: %v; the refusal is not ErrReplica and ErrNotSent", err)
				}
				if !exists(r) {
					t.Fatal("A's key left R though the release was refused")
				}
				cut.set(r.Addr, false)
				reachable := time.Now()
				for exists(r) && time.Since(reachable) < bound {
					time.Sleep(time.Millisecond)
				}
				gone := time.Since(reachable)
				t.Logf("A's key gone from R %v after A could reach it", gone)
				switch {
				case !off && gone >= bound:
					t.Fatalf("%v after A could reach R (bound %v), A's released key is still there", gone, bound)
				case off && !exists(r):
					t.Fatalf("with %s on, the release ran on R: the test cannot catch it", mutation.ClusterReplicaNoResend.Name())
				}
			})
		})
	}
}
