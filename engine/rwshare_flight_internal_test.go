package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/internal/simredis"
)

// The tests below run in virtual time: simredis's latency is at most
// 20 ms a way, a second is far beyond every round trip, and a waiter's
// fallback takes a minute, so a reader that acquires within a second of
// a release was woken by it. Each holds the flight its readers find, and
// makes the flight's attempt itself, so that the order of the readers'
// subscriptions, the attempt and the releases is the one the case needs.

// flightEnv is a readers' Locker and a writer's on three simulated
// masters, the writer holding the lock, and a flight of the readers'
// Locker that the test holds, with its maker (subscribed) and the
// RWMutex: the readers subscribe before their first attempt, as after a
// wait (see RWMutex.wait).
type flightEnv struct {
	masters []*simredis.Master
	mr      *RWMutex
	writer  *Lease
	f       *rwFlight
	// maker makes the flight's attempt, with makerOpts.
	maker     *rwWaiter
	makerOpts []LockOption
}

func newFlightEnv(t *testing.T, makerTTL time.Duration) *flightEnv {
	ctx := context.Background()
	nw := simredis.NewNetwork(1)
	masters, addrs := simredis.NewMasters(nw, 3, simredis.MasterOptions{Uptime: time.Hour})
	for _, m := range masters {
		t.Cleanup(m.Close)
	}
	locker := func(client string) *Locker {
		cfg := DefaultConfig(addrs...)
		cfg.Quarantine = QuarantineObserved
		cfg.TTL = 30 * time.Second
		cfg.Wait.FallbackMin, cfg.Wait.FallbackMax = time.Minute, time.Minute
		cfg.Conn.DialContext, cfg.DisableTracking = nw.Dialer(client), true
		l, err := New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	lr, lw := locker("readers"), locker("writer")
	mr, err := lr.RWMutex("flight")
	if err != nil {
		t.Fatal(err)
	}
	mw, err := lw.RWMutex("flight")
	if err != nil {
		t.Fatal(err)
	}
	w, err := mw.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the writer's attempt and fence reach every master
	e := &flightEnv{masters: masters, mr: mr, writer: w, f: &rwFlight{done: make(chan struct{})}}
	if makerTTL != 0 {
		e.makerOpts = []LockOption{WithTTL(makerTTL)}
	}
	o, err := lr.resolve(rwOp(false), mr.name, e.makerOpts)
	if err != nil {
		t.Fatal(err)
	}
	lr.shareMu.Lock()
	lr.flights[mr.key] = e.f
	lr.shareMu.Unlock()
	e.maker = mr.newWaiter(ctx, false, time.Now(), &WaitInfo{}, o)
	e.maker.join()
	t.Cleanup(func() { e.maker.leave(nil) })
	return e
}

// marks counts, on each master, the times a refused marked attempt set
// the lock's mark (a count of scripts would miss coalesced calls).
func (e *flightEnv) marks() (n []int) {
	for _, m := range e.masters {
		set := 0
		for _, r := range m.KeyLog() {
			if r.Key == rwMarkPrefix+e.mr.key && !r.Gone {
				set++
			}
		}
		n = append(n, set)
	}
	return n
}

// readers starts n RLocks, which find the flight and wait for it.
func (e *flightEnv) readers(t *testing.T, n int) <-chan *Lease {
	got := make(chan *Lease, n)
	for range n {
		go func() {
			le, err := e.mr.RLock(context.Background())
			if err != nil {
				t.Errorf("reader: %v", err)
			}
			got <- le
		}()
	}
	time.Sleep(time.Second) // every reader subscribed and waits for the flight
	return got
}

// attempt makes the flight's attempt, its maker's marked one, once the
// test's flight is out of try's way, and returns its refusal; send: note
// the flight sent first.
func (e *flightEnv) attempt(t *testing.T, send bool) error {
	l := e.mr.l
	if send {
		e.f.send(e.maker)
	}
	l.shareMu.Lock()
	delete(l.flights, e.mr.key)
	l.shareMu.Unlock()
	o, err := l.resolve(rwOp(false), e.mr.name, e.makerOpts)
	if err != nil {
		t.Fatal(err)
	}
	_, refused := e.mr.try(context.Background(), false, e.maker, o)
	if ve := findVotes(refused); ve == nil || !rwHeld(ve) {
		t.Fatalf("the flight's attempt: %v, want refused by the writer", refused)
	}
	l.shareMu.Lock()
	l.flights[e.mr.key] = e.f
	l.shareMu.Unlock()
	return refused
}

// land ends the flight with its attempt's refusal.
func (e *flightEnv) land(refused error) {
	l := e.mr.l
	l.shareMu.Lock()
	delete(l.flights, e.mr.key)
	l.shareMu.Unlock()
	e.f.refused = refused
	close(e.f.done)
}

// acquired takes n readers' leases, each acquired within a second of
// since, and releases them.
func acquired(t *testing.T, got <-chan *Lease, n int, since time.Time) {
	for range n {
		le := <-got
		if le == nil {
			continue
		}
		if d := time.Since(since); d > time.Second {
			t.Errorf("a reader acquired %s after the lock was free, not woken by its release", d)
		}
		if err := le.Release(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// Readers that subscribed before the flight's marked attempt was sent
// take its refusal as their own: they sleep on its mark with no attempt
// of their own, and the writer's release wakes them.
func TestRWReadersTakeTheirFlightsRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFlightEnv(t, 0)
		before := e.marks()
		const n = 4
		got := e.readers(t, n)
		e.land(e.attempt(t, true))
		time.Sleep(time.Second) // the readers' attempts, if any, are done: they sleep
		after := e.marks()
		for i := range after {
			if d := after[i] - before[i]; d != 1 {
				t.Errorf("master %d: %d marks set for the flight and %d readers, want the flight's alone", i, d, n)
			}
		}
		released := time.Now()
		if err := e.writer.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		acquired(t, got, n, released)
	})
}

// A reader that subscribed after a release was delivered, which came
// after the flight's attempt was sent, makes an attempt of its own: that
// release may have taken the flight's mark (here it did: the writer's),
// and nothing would wake the reader but its fallback.
func TestRWReaderAfterADeliveryTriesItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFlightEnv(t, 0)
		refused := e.attempt(t, true)
		if err := e.writer.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // its publish is delivered
		got := e.readers(t, 1)
		landed := time.Now()
		e.land(refused)
		acquired(t, got, 1, landed)
	})
}

// A reader whose mark would live longer than the flight's (here the
// flight's maker asked a shorter TTL: its mark lives 10 s + 10 s, the
// reader's 30 s + 30 s) makes an attempt of its own: the flight's mark
// may be gone before the release that frees the lock, which would then
// publish nothing, and the reader would wait for its fallback.
func TestRWReaderThatOutlivesItsFlightsMarkTriesItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFlightEnv(t, 10*time.Second)
		got := e.readers(t, 1)
		e.land(e.attempt(t, true))
		time.Sleep(25 * time.Second) // the flight's mark has expired
		released := time.Now()
		if err := e.writer.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		acquired(t, got, 1, released)
	})
}
