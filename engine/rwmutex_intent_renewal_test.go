package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/simredis"
)

// A waiting writer's intent must outlive the writer's sleep between
// attempts, or it lapses and a reader that began after it is admitted
// while the readers admitted before hold on. Two ways to sleep past it:
// a per-call TTL shorter than the Locker's (the fallback is drawn up to
// the Locker's TTL), and masters whose clocks run fast (the intent lives
// less than its TTL in real time, and the fallback may be a whole TTL).
// Here a reader holds (auto-extended, so no release wakes the writer),
// the writer waits with the longest fallback, and a reader of a third
// Locker keeps trying: none of its attempts may be granted until the
// writer has held the lock. In virtual time, so the writer's schedule is
// exactly its fallback and the reader tries at every step of it.
func TestRWWriterIntentOutlivesItsFallback(t *testing.T) {
	for _, c := range []struct {
		name string
		rate float64 // the masters' clock rate
		opts []engine.LockOption
	}{
		{"per-call TTL", 1, []engine.LockOption{engine.WithTTL(500 * time.Millisecond)}},
		{"fast clocks", 1.01, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			simTestWith(t, 3, simredis.MasterOptions{Uptime: time.Hour, Rate: c.rate}, func(t *testing.T, e *env) {
				ctx := context.Background()
				cfg := fallbackIsTTL(time.Second)
				holderL, writerL, readerL := e.locker(e.steady(cfg)), e.locker(e.steady(cfg)), e.locker(e.steady(cfg))
				const name = "intent-renewal"
				held, err := rwMutex(t, holderL, name).RLock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				wrote := make(chan error, 1)
				var writerHeld atomic.Bool
				go func() {
					wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					le, err := rwMutex(t, writerL, name).Lock(wctx, c.opts...)
					if err == nil {
						writerHeld.Store(true)
						le.Release(ctx)
					}
					wrote <- err
				}()
				// Virtual time: the writer's two attempts (the second
				// registers its intent) are done long before this.
				time.Sleep(100 * time.Millisecond)
				release := time.AfterFunc(3*time.Second, func() { held.Release(ctx) })
				defer release.Stop()
				rm := rwMutex(t, readerL, name)
				tries := 0
				for {
					select {
					case err := <-wrote:
						if err != nil {
							t.Fatalf("the writer did not acquire: %v", err)
						}
						if tries < 1000 {
							t.Fatalf("only %d reader attempts while the writer waited: the test proves nothing", tries)
						}
						return
					default:
					}
					tries++
					if le, err := rm.TryRLock(ctx); err == nil {
						if !writerHeld.Load() {
							t.Fatalf("a reader that began after the writer's intent was granted before the writer held (attempt %d)", tries)
						}
						le.Release(ctx)
					}
					time.Sleep(2 * time.Millisecond)
				}
			})
		})
	}
}

// Waiting writers of one lock share its intents' key on each master, so
// that key must live as long as its longest-lived intent: one writer's
// intent, shorter than another's (a shorter per-call TTL), must not cut
// the other's short. Here a reader holds, writer A waits with a long TTL
// and writer B with a short one, then B's process stops (its connections
// frozen, so it neither renews nor takes its intent out); a reader of
// another Locker keeps trying, and none of its attempts may be granted
// until A has held the lock. In virtual time.
func TestRWShortIntentKeepsAnothersAlive(t *testing.T) {
	simTest(t, 3, func(t *testing.T, e *env) {
		ctx := context.Background()
		cfg := func(c *engine.Config) {
			fallbackIsTTL(time.Second)(c)
			c.MaxTTL = 10 * time.Second
		}
		// Lockers are the network's clients c1, c2 ... in the order made.
		holderL, aL, bL, readerL := e.locker(e.steady(cfg)), e.locker(e.steady(cfg)), e.locker(e.steady(cfg)), e.locker(e.steady(cfg))
		const bClient = "c3"
		const name = "intents-share-a-key"
		held, err := rwMutex(t, holderL, name).RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var aHeld atomic.Bool
		lock := func(l *engine.Locker, ctx context.Context, ttl time.Duration, held *atomic.Bool) <-chan error {
			done := make(chan error, 1)
			go func() {
				le, err := rwMutex(t, l, name).Lock(ctx, engine.WithTTL(ttl))
				if err == nil {
					held.Store(true)
					le.Release(context.Background())
				}
				done <- err
			}()
			return done
		}
		actx, cancelA := context.WithTimeout(ctx, 20*time.Second)
		defer cancelA()
		aDone := lock(aL, actx, 5*time.Second, &aHeld)
		time.Sleep(100 * time.Millisecond) // A's intent is in (virtual time)
		bctx, cancelB := context.WithCancel(ctx)
		var bHeld atomic.Bool
		bDone := lock(bL, bctx, 200*time.Millisecond, &bHeld)
		time.Sleep(150 * time.Millisecond) // and B's, renewed since
		select {
		case err := <-bDone:
			t.Fatalf("B ended while a reader held: %v", err)
		default:
		}
		e.net.Freeze(bClient)
		release := time.AfterFunc(4*time.Second, func() { held.Release(ctx) })
		defer release.Stop()
		rm := rwMutex(t, readerL, name)
		tries := 0
		for done := false; !done; {
			select {
			case err := <-aDone:
				if err != nil {
					t.Fatalf("A did not acquire: %v", err)
				}
				if tries < 1000 {
					t.Fatalf("only %d reader attempts while A waited: the test proves nothing", tries)
				}
				done = true
				continue
			default:
			}
			tries++
			if le, err := rm.TryRLock(ctx); err == nil {
				if !aHeld.Load() {
					t.Fatalf("a reader was granted while A's intent lived, before A held (attempt %d)", tries)
				}
				le.Release(ctx)
			}
			time.Sleep(2 * time.Millisecond)
		}
		cancelB()
		e.net.Thaw(bClient)
		if err := <-bDone; err == nil || bHeld.Load() {
			t.Fatalf("B, frozen, acquired: %v", err)
		}
	})
}

// TestRWWriterIntentOutlivesItsFallbackOnRealMasters is the per-call TTL
// case on real masters: a reader holds, a writer waits with a TTL a
// quarter of the Locker's (whose fallback is the Locker's TTL), and a
// reader of another Locker tries over and over while the writer renews
// its intent. It waits for events, not durations: the writer's intent
// on a quorum, then two renewals of it on one master (an intent that
// lapsed before its writer's next attempt lets the trying reader in
// before the first); only then does the holder release. A machine stall
// longer than half the intent's life between two of the writer's
// attempts is what could fail it falsely.
func TestRWWriterIntentOutlivesItsFallbackOnRealMasters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	ctx := context.Background()
	const ttl = 2 * time.Second
	cfg := func(c *engine.Config) {
		fallbackIsTTL(4 * ttl)(c)
		patientDownTo(ttl)(c)
	}
	holderL, writerL, readerL := e.locker(cfg), e.locker(cfg), e.locker(cfg)
	const name = "intent-renewal"
	intents := "\xffredlock:rw:" + e.key(name)
	held, err := rwMutex(t, holderL, name).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	wrote := make(chan error, 1)
	var writerHeld atomic.Bool
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() {
		le, err := rwMutex(t, writerL, name).Lock(wctx, engine.WithTTL(ttl))
		if err == nil {
			writerHeld.Store(true)
			le.Release(ctx)
		}
		wrote <- err
	}()
	score := func(i int) float64 {
		c := e.direct[i]
		zs, err := c.Do(ctx, c.B().Zrange().Key(intents).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil || len(zs) != 1 {
			return 0
		}
		return zs[0].Score
	}
	on := awaitOnQuorum(t, e, "the writer's intent", func(i int) bool { return score(i) > 0 }, wrote, "the writer returned while the reader held")
	rm := rwMutex(t, readerL, name)
	renewals, last, tries := 0, score(on), 0
	for renewals < 2 {
		select {
		case err := <-wrote:
			t.Fatalf("the writer returned while the reader held: %v", err)
		default:
		}
		tries++
		if le, err := rm.TryRLock(ctx); err == nil {
			le.Release(ctx)
			t.Fatalf("a reader that began after the writer's intent was granted while the writer waited (attempt %d, after %d renewals)", tries, renewals)
		}
		if s := score(on); s > last {
			renewals, last = renewals+1, s
		}
		time.Sleep(time.Millisecond) // a poll's pace, to spare the shared masters
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil || !writerHeld.Load() {
		t.Fatalf("the writer did not acquire once the reader released: %v", err)
	}
}

// TestRWShortIntentKeepsAnothersAliveOnRealMasters is the shared intents
// key on real masters: writer A waits with the Locker's long TTL, writer
// B (a Locker that reaches masters 1 and 2 through proxies) with a short
// per-call TTL, then B's commands to masters 1 and 2 are held back, so
// it neither renews nor takes out its intent there. A reader of another
// Locker tries until A has renewed its intent on master 1 twice since;
// had B's last attempt cut the key to B's life, A's intent would have
// gone with it on masters 1 and 2, a quorum, and the reader got in.
func TestRWShortIntentKeepsAnothersAliveOnRealMasters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	ctx := context.Background()
	cfg := func(c *engine.Config) {
		c.TTL = 4 * time.Second
		c.AutoExtend = true
		c.Wait.FallbackMin, c.Wait.FallbackMax = time.Second, 2*time.Second
		patient(c)
	}
	holderL, aL, readerL := e.locker(cfg), e.locker(cfg), e.locker(cfg)
	bL, sp := e.stalledLocker(4*time.Second, 0)
	const name = "intents-share-a-key"
	intents := "\xffredlock:rw:" + e.key(name)
	held, err := rwMutex(t, holderL, name).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	members := func(i int) []rueidis.ZScore {
		c := e.direct[i]
		zs, _ := c.Do(ctx, c.B().Zrange().Key(intents).Min("0").Max("-1").Withscores().Build()).AsZScores()
		return zs
	}
	lock := func(l *engine.Locker, ctx context.Context, opts ...engine.LockOption) <-chan error {
		done := make(chan error, 1)
		go func() {
			le, err := rwMutex(t, l, name).Lock(ctx, opts...)
			if err == nil {
				le.Release(context.Background())
			}
			done <- err
		}()
		return done
	}
	actx, cancelA := context.WithTimeout(ctx, time.Minute)
	defer cancelA()
	aDone := lock(aL, actx)
	eventually(t, 30*time.Second, "A's intent on masters 1 and 2", func() bool {
		return len(members(1)) == 1 && len(members(2)) == 1
	})
	bctx, cancelB := context.WithCancel(ctx)
	defer cancelB()
	bDone := lock(bL, bctx, engine.WithTTL(300*time.Millisecond))
	eventually(t, 30*time.Second, "B's intent beside A's on masters 1 and 2", func() bool {
		return len(members(1)) == 2 && len(members(2)) == 2
	})
	for _, p := range sp {
		p.stall.Store(true)
	}
	defer func() {
		for _, p := range sp {
			p.breakStalled()
			p.resume()
		}
	}()
	aScore := func() float64 {
		var s float64
		for _, z := range members(1) {
			s = max(s, z.Score)
		}
		return s
	}
	rm := rwMutex(t, readerL, name)
	renewals, last := 0, aScore()
	for renewals < 2 {
		select {
		case err := <-aDone:
			t.Fatalf("A returned while the reader held: %v", err)
		default:
		}
		if le, err := rm.TryRLock(ctx); err == nil {
			le.Release(ctx)
			t.Fatalf("a reader was granted while A waited (after %d of A's renewals): B's intent cut the key short", renewals)
		}
		if s := aScore(); s > last {
			renewals, last = renewals+1, s
		}
		time.Sleep(time.Millisecond) // a poll's pace, to spare the shared masters
	}
	cancelB()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-aDone; err != nil {
		t.Fatalf("A did not acquire once the reader released: %v", err)
	}
	<-bDone
}
