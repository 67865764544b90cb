package engine_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// A fenced lease is handed out only if more validity is left, once its
// counters are raised, than a competing round can last: a round that
// began before the counters were raised and ended after the keys expired
// could read only old counters and issue the same token.
func TestFencedAcquireKeepsARoundSpanOfValidity(t *testing.T) {
	e := newEnv(t, 3)
	const ttl = 2 * time.Second
	const nodeTimeout = 950 * time.Millisecond // span about 975ms
	for _, tc := range []struct {
		delay   time.Duration
		granted bool
	}{
		// Two rounds through a slow master: about 2×delay elapsed.
		{250 * time.Millisecond, true},  // 0.5s + 0.975s < 1.98s
		{600 * time.Millisecond, false}, // 1.2s + 0.975s > 1.98s
	} {
		slow1 := newLatencyProxy(t, e.cluster.Nodes[1].Addr(), 0, nil)
		slow2 := newLatencyProxy(t, e.cluster.Nodes[2].Addr(), 0, nil)
		cfg := engine.DefaultConfig(e.cluster.Nodes[0].Addr(), slow1.addr(), slow2.addr())
		cfg.Quarantine = engine.QuarantineObserved
		cfg.Fencing = true
		cfg.TTL = ttl
		cfg.NodeTimeout = nodeTimeout
		cfg.ConnTimeout = 10 * time.Second
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		slow1.delay.Store(int64(tc.delay))
		slow2.delay.Store(int64(tc.delay))
		res := "span-" + tc.delay.String()
		le, err := l.TryLock(context.Background(), res)
		switch {
		case tc.granted && err != nil:
			t.Errorf("delay %s: %v", tc.delay, err)
		case !tc.granted && err == nil:
			t.Errorf("delay %s: granted with %s of validity left after fencing; a round lasts up to about %s",
				tc.delay, le.Validity(), nodeTimeout)
		case !tc.granted && !errors.Is(err, engine.ErrNoQuorum):
			t.Errorf("delay %s: %v, want ErrNoQuorum", tc.delay, err)
		}
		if le != nil {
			le.Release(context.Background())
		}
		l.Close()
	}
}

// Fencing refuses masters whose clocks disagree by MaxTTL/2 or more: the
// tokens' clock floor would not hold across restarts.
func TestFencingRefusesMastersWithSkewedClocks(t *testing.T) {
	e := newEnv(t, 3)
	const skew = time.Hour
	ahead := newLatencyProxy(t, e.cluster.Nodes[2].Addr(), 0, func(b []byte) []byte {
		s := string(b)
		i := strings.Index(s, "server_time_usec:")
		if i < 0 {
			return b
		}
		j := i + len("server_time_usec:")
		k := j + strings.IndexAny(s[j:], "\r\n")
		us, err := strconv.ParseInt(s[j:k], 10, 64)
		if err != nil {
			return b
		}
		// Same number of digits, so the bulk length stays right.
		return []byte(s[:j] + strconv.FormatInt(us+skew.Microseconds(), 10) + s[k:])
	})
	addrs := []string{e.cluster.Nodes[0].Addr(), e.cluster.Nodes[1].Addr(), ahead.addr()}
	cfg := engine.DefaultConfig(addrs...)
	cfg.Quarantine = engine.QuarantineObserved
	cfg.Fencing = true
	_, err := engine.New(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "clocks differ") || !strings.Contains(err.Error(), ahead.addr()) {
		t.Fatalf("New with a master an hour ahead: %v", err)
	}
	cfg.Fencing = false
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("without fencing the clocks do not matter: %v", err)
	}
	l.Close()
}

// The expiry timer can fire between an Extend's last check and its update
// of the validity; the Extend must then not revive the lease: an ended
// lease stays ended, with no validity, and Extend says so. The window is
// a few nanoseconds wide, so this only stresses it (it did not catch the
// old code in 200 tries); the fix holds by construction: Extend re-checks
// under the lease's lock, and Validity is 0 once Err is set.
func TestExtendNeverRevivesAnEndedLease(t *testing.T) {
	e := newEnv(t, 3)
	l := e.locker(func(c *engine.Config) { c.TTL = 60 * time.Millisecond; c.NodeTimeout = 20 * time.Millisecond })
	for i := 0; i < 100; i++ {
		le, err := l.TryLock(context.Background(), "revive")
		if err != nil {
			continue
		}
		le.Done() // start the expiry timer
		time.Sleep(time.Until(le.ValidUntil()) - time.Duration(i%8)*100*time.Microsecond)
		err = le.Extend(context.Background(), 60*time.Millisecond)
		if le.Err() != nil && le.Validity() > 0 {
			t.Fatalf("round %d: ended (%v) with %s of validity; Extend said %v", i, le.Err(), le.Validity(), err)
		}
		if err == nil && le.Err() != nil {
			t.Fatalf("round %d: Extend succeeded on a lease that ended: %v", i, le.Err())
		}
		le.Release(context.Background())
	}
}
