package multiplex

import (
	"testing"
	"time"
)

// promotionAge takes the shortest time any sentinel saw the master in
// its role, and knows nothing when the sentinels of the latest
// configuration epoch do not all name it master: a failover not over,
// or a sentinel that saw it report another role.
func TestPromotionAgeTrustsTheLatestSentinelsOnly(t *testing.T) {
	const a, b = "10.0.0.1:6379", "10.0.0.2:6379"
	view := func(addr string, master bool, since time.Duration, epoch int64) sentinelView {
		return sentinelView{addr: addr, master: master, since: since, epoch: epoch}
	}
	for _, tc := range []struct {
		name  string
		views []sentinelView
		ago   time.Duration
		known bool
		epoch int64
	}{
		{"no answer", nil, 0, false, 0},
		{"never failed over", []sentinelView{view(a, true, time.Hour, 0), view(a, true, 2*time.Hour, 0)}, time.Hour, true, 0},
		{"the freshest account", []sentinelView{view(a, true, 5*time.Second, 1), view(a, true, 2*time.Second, 1)}, 2 * time.Second, true, 1},
		{"a stale sentinel's other master", []sentinelView{view(b, true, time.Hour, 0), view(a, true, 3*time.Second, 1)}, 3 * time.Second, true, 1},
		{"a stale sentinel's old account", []sentinelView{view(a, true, time.Hour, 0), view(a, true, 3*time.Second, 2)}, 3 * time.Second, true, 2},
		{"a failover not over", []sentinelView{view(a, true, time.Hour, 1), view(b, true, time.Second, 1)}, 0, false, 1},
		{"another role", []sentinelView{view(a, false, time.Hour, 1)}, 0, false, 1},
		{"only another master", []sentinelView{view(b, true, time.Hour, 1)}, 0, false, 1},
	} {
		ago, known, epoch := promotionAge(tc.views, a)
		if ago != tc.ago || known != tc.known || epoch != tc.epoch {
			t.Errorf("%s: %s, %v, epoch %d; want %s, %v, epoch %d", tc.name, ago, known, epoch, tc.ago, tc.known, tc.epoch)
		}
	}
}
