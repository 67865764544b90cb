package sim

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// A simulated cluster lists its replicas in CLUSTER SLOTS from the start,
// as a real one does once they have replicated anything: a Locker's
// cluster client knows them, and sends a command without a key to any
// node, replicas included. New over such a vote succeeds every time: it
// reads the vote's INFO server from a primary (a replica's connection is
// refused, and New failed with "is a replica" when the read went there).
func TestNewOverClusterWithReplicas(t *testing.T) {
	if failed := newOverClusterFailing(t, 16); failed != nil {
		t.Fatal(failed)
	}
}

// The control: with cluster-info-any-node, New fails over such a vote.
func TestNewOverClusterWithReplicasControl(t *testing.T) {
	mutation.Require(t)
	defer mutation.ClusterInfoAnyNode.Set(true)()
	failed := newOverClusterFailing(t, 40)
	t.Log(failed)
	if failed == nil {
		t.Fatal("with cluster-info-any-node forty Lockers started: the test cannot fail")
	}
}

// newOverClusterFailing makes up to count Lockers over a simulated
// cluster vote of two shards, each with a replica, and returns the first
// New's error.
func newOverClusterFailing(t *testing.T, count int) (failed error) {
	synctest.Test(t, func(t *testing.T) {
		n := simredis.NewNetwork(1)
		cl, nodes := simredis.NewCluster(n, 1, 0, 2, true, simredis.MasterOptions{Uptime: time.Hour})
		for _, m := range nodes {
			defer m.Close()
		}
		for i := range count {
			cfg := engine.DefaultConfig()
			cfg.Masters, cfg.Clusters = nil, [][]string{cl.Seeds()}
			cfg.Conn.DialContext = n.Dialer("c" + strconv.Itoa(i))
			l, err := engine.New(context.Background(), cfg)
			if err != nil {
				failed = fmt.Errorf("Locker %d: %w", i, err)
				break // to the drain: a failed New's refresh ends there too
			}
			l.Close()
		}
		// rueidis's cluster client ends, in the bubble, the goroutines of
		// its lazy refreshes and the connections they replaced (5s).
		time.Sleep(5*time.Second + 100*time.Millisecond)
	})
	return failed
}
