package sim

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// The workers' mirror of the engine's auto-extension schedule matches it:
// a wait for a clear window that begins just before an auto-extension is
// due returns only once it has ended, for a fresh lease and for one
// handed off at the gate with less validity left, and never after the
// last one (MaxExtensions). If the engine's schedule changed, the Release
// after it could stall the bubble (see autoextend.go).
func TestAutoScheduleMirrorsEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		var addrs []string
		for i := range 3 {
			m := NewMaster(n, 1, i, "m"+strconv.Itoa(i)+":6379", MasterOptions{Uptime: time.Hour,
				Latency: Latency{Min: 10 * time.Millisecond}})
			defer m.Close()
			addrs = append(addrs, m.Addr)
		}
		auto := newAutoExtends()
		cfg := engine.DefaultConfig(addrs...)
		cfg.TTL, cfg.AutoExtend, cfg.MaxExtensions = time.Second, true, 2
		cfg.DialContext = n.Dialer("c0")
		cfg.Observer = &engine.Observer{Extend: auto.observe}
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		cfg = l.Config()
		span := 50 * time.Millisecond
		ctx := context.Background()

		le, err := l.Lock(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		s := auto.schedule(le, cfg)
		for i := range cfg.MaxExtensions {
			at, ok, _ := s.next()
			if !ok {
				t.Fatalf("extension %d: the mirror expects none", i+1)
			}
			time.Sleep(time.Until(at) - span/2)
			if got := le.Extensions(); got != i {
				t.Fatalf("the mirror expects extension %d after it ran: %d done", i+1, got)
			}
			s.waitClear(le, span)
			if got := le.Extensions(); got != i+1 {
				t.Fatalf("waitClear before extension %d returned with %d extensions done", i+1, got)
			}
		}
		if _, ok, _ := s.next(); ok {
			t.Fatalf("the mirror expects an extension past MaxExtensions %d", cfg.MaxExtensions)
		}

		// A lease handed off at the gate is armed with the validity left.
		time.Sleep(cfg.ExtendEvery / 2)
		next := make(chan *engine.Lease, 1)
		go func() {
			le, err := l.Lock(ctx, "r")
			if err != nil {
				t.Error(err)
			}
			next <- le
		}()
		time.Sleep(time.Millisecond) // the second Lock queues at the gate
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
		le = <-next
		if le.Wait().Cause != engine.WakeHandoff {
			t.Fatalf("second lease %+v: want it handed off", le.Wait())
		}
		s = auto.schedule(le, cfg)
		at, _, _ := s.next()
		time.Sleep(max(time.Until(at)-span/2, 0))
		if got := le.Extensions(); got != 0 {
			t.Fatalf("handed-off lease: the mirror expects its first extension after it ran")
		}
		s.waitClear(le, span)
		if le.Extensions() != 1 {
			t.Fatalf("handed-off lease: waitClear returned with %d extensions done, want 1", le.Extensions())
		}
		le.Release(ctx)
	})
}
