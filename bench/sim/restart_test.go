package sim

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// The engine sees a simulated restart as it sees a real one: the master's
// new run_id on the reconnection quarantines it, and its scripts are
// loaded again.
func TestMasterRestartSeenByEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := simredis.NewNetwork(1)
		var addrs []string
		var ms []*simredis.Master
		for i := range 3 {
			m := simredis.NewMaster(n, 1, i, "m"+strconv.Itoa(i)+":6379", simredis.MasterOptions{Uptime: time.Hour})
			defer m.Close()
			ms, addrs = append(ms, m), append(addrs, m.Addr)
		}
		cfg := engine.DefaultConfig(addrs...)
		cfg.TTL = time.Second
		cfg.Quarantine = engine.QuarantineObserved
		cfg.Conn.DialContext = n.Dialer("c0")
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ms[0].Restart()
		for st := l.Nodes()[0]; st.Restarts != 1 || st.State != engine.StateQuarantined; st = l.Nodes()[0] {
			if le, err := l.TryLock(context.Background(), "probe"); err == nil {
				le.Release(context.Background())
			}
			time.Sleep(100 * time.Millisecond)
			if time.Since(ms[0].BootedAt()) > cfg.TTL {
				t.Fatalf("restart not seen within the quarantine: %+v", st)
			}
		}
		// The restarted master answers the scripts again once its
		// quarantine ends: every vote is a yes.
		time.Sleep(cfg.TTL)
		le, err := l.TryLock(context.Background(), "after")
		if err != nil {
			t.Fatal(err)
		}
		defer le.Release(context.Background())
		if keys := ms[0].Keys(); !strings.Contains(strings.Join(keys, " "), "after=") {
			t.Fatalf("restarted master's keys %q: want the lock set there", keys)
		}
	})
}
