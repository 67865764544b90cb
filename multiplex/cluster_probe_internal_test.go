package multiplex

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/internal/simredis"
)

// A cluster's node that the vote's reconnect reads on a connection of
// its own (probe: a node the cluster client has not reached) accepted
// the connection and answers nothing: stopped (SIGSTOP), or behind a
// partition that holds what is sent. The connection is not the pool's,
// which Close cuts; the probe ends with its context, which Close ends,
// rather than at the dial timeout: Close waited for it (found by
// bench/sim, a Close of 954 ms against a bound of 250). In virtual time.
func TestProbeOfAHungNodeEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := simredis.NewNetwork(1)
		ms, addrs := simredis.NewMasters(net, 1, simredis.MasterOptions{Uptime: time.Hour})
		defer ms[0].Close()
		ms[0].Pause()
		defer ms[0].Resume()
		p := &Pool{}
		o := Options{DialTimeout: 10 * time.Second, DialContext: net.Dialer("c")}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		began := time.Now()
		if _, err := p.probe(ctx, addrs[0], o); err == nil {
			t.Fatal("probe of a stopped node: no error")
		}
		if took := time.Since(began); took > 200*time.Millisecond {
			t.Errorf("probe of a stopped node took %s, its context ending after 100ms (dial timeout %s)", took, o.DialTimeout)
		}
	})
}
