package scenario

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// kind is how an acquire attempt ended.
type kind uint8

const (
	kindAcquired    kind = iota
	kindNotAcquired      // ErrNotAcquired: contention
	kindNoQuorum         // ErrNoQuorum: too many masters failed
	kindOther            // anything else
)

func classify(err error) kind {
	switch {
	case err == nil:
		return kindAcquired
	case errors.Is(err, engine.ErrNoQuorum):
		return kindNoQuorum
	case errors.Is(err, engine.ErrNotAcquired):
		return kindNotAcquired
	}
	return kindOther
}

func (k kind) String() string {
	return [...]string{"acquired", "not-acquired", "no-quorum", "error"}[k]
}

type errKey struct {
	phase int32
	kind  kind
}

// sample is one acquire attempt: the phase it started in, when (since the
// load began), how long it took and how it ended; later is set when it
// returned in a later phase than it started in.
type sample struct {
	at, lat time.Duration
	phase   int32
	kind    kind
	later   bool
}

// load is a closed-loop workload: workers that TryLock a resource,
// register the hold with the oracle, and release it at once, as fast as
// they can. Shared, every worker picks among all resources at random, so
// that workers contend now and then and the oracle has something to watch.
// Disjoint, each worker cycles through its own slice of them, so that no
// attempt meets another's key: a master then refuses only if the lock
// itself is broken. The driver moves it through named phases; every attempt counts
// in the phase it started in. Each worker keeps its own samples, merged
// when the load stops, so that workers share nothing on the hot path.
type load struct {
	l        *engine.Locker
	res      []string
	disjoint bool
	or       *oracle
	begin    time.Time
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	phase    atomic.Int32
	// acquired counts successes, for drivers that wait for recovery.
	acquired atomic.Int64

	samples  [][]sample
	firstErr []map[errKey]string // per worker: the first error text by phase and kind

	// Driver-owned: the phases by name, and how long each lasted.
	names []string
	spans []time.Duration
	since time.Time
}

// startLoad starts workers on resources named prefix0..prefixN-1, in phase
// first. Disjoint gives each worker resources/workers of its own.
func startLoad(ctx context.Context, l *engine.Locker, or *oracle, workers, resources int, disjoint bool, prefix, first string) *load {
	ctx, cancel := context.WithCancel(ctx)
	ld := &load{l: l, or: or, cancel: cancel, begin: time.Now(), disjoint: disjoint,
		samples: make([][]sample, workers), firstErr: make([]map[errKey]string, workers)}
	for i := range resources {
		ld.res = append(ld.res, prefix+strconv.Itoa(i))
	}
	ld.names, ld.spans, ld.since = []string{first}, []time.Duration{0}, ld.begin
	for w := range workers {
		ld.wg.Add(1)
		go ld.work(ctx, w)
	}
	return ld
}

// failPause is how long a worker waits after a failed attempt, as a real
// client backs off, so that an outage does not turn the workers into a
// busy loop that starves the masters of CPU.
const failPause = time.Millisecond

func (ld *load) work(ctx context.Context, w int) {
	defer ld.wg.Done()
	who := "worker" + strconv.Itoa(w)
	errs := map[errKey]string{}
	var s []sample
	defer func() { ld.samples[w], ld.firstErr[w] = s, errs }()
	own := ld.res
	if ld.disjoint {
		per := max(1, len(ld.res)/len(ld.samples))
		own = ld.res[min(w*per, len(ld.res)-per):][:per]
	}
	for i := 0; ctx.Err() == nil; i++ {
		p := ld.phase.Load()
		r := own[rand.IntN(len(own))]
		if ld.disjoint {
			// In turn: a failed attempt is undone in the background, and
			// its key must be gone before this worker comes back to it.
			r = own[i%len(own)]
		}
		t0 := time.Now()
		lease, err := ld.l.TryLock(ctx, r)
		lat := time.Since(t0)
		if err != nil && ctx.Err() != nil {
			return // cut short by stop: not a measurement
		}
		k := classify(err)
		s = append(s, sample{at: t0.Sub(ld.begin), lat: lat, phase: p, kind: k, later: ld.phase.Load() != p})
		if err != nil {
			if key := (errKey{p, k}); errs[key] == "" {
				errs[key] = err.Error()
			}
			sleep(ctx, failPause)
			continue
		}
		ld.acquired.Add(1)
		now := time.Now()
		ld.or.acquire(r, who, now, lease.ValidUntil())
		ld.or.release(r, who, time.Now())
		// Not ctx: the lock must be released even when the load stops.
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		lease.Release(rctx)
		cancel()
	}
}

// next ends the current phase and starts the named one (which may be one
// used before: its spans add up).
func (ld *load) next(name string) {
	now := time.Now()
	ld.spans[ld.phase.Load()] += now.Sub(ld.since)
	ld.since = now
	i := slices.Index(ld.names, name)
	if i < 0 {
		ld.names, ld.spans = append(ld.names, name), append(ld.spans, 0)
		i = len(ld.names) - 1
	}
	ld.phase.Store(int32(i))
}

// stop ends the load and returns each phase's figures, in the order the
// phases were first entered.
func (ld *load) stop() []PhaseStats {
	ld.spans[ld.phase.Load()] += time.Since(ld.since)
	ld.cancel()
	ld.wg.Wait()
	out := make([]PhaseStats, len(ld.names))
	ok := make([][]time.Duration, len(ld.names))
	bad := make([][]time.Duration, len(ld.names))
	for i := range out {
		out[i].Phase, out[i].Seconds = ld.names[i], round3(ld.spans[i].Seconds())
		out[i].FirstAcquiredMs = -1
	}
	for _, ws := range ld.samples {
		for _, s := range ws {
			ps := &out[s.phase]
			ps.Attempts++
			switch s.kind {
			case kindAcquired:
				ps.Acquired++
				if s.later {
					ps.AcquiredLater++
				}
				ok[s.phase] = append(ok[s.phase], s.lat)
				if end := ms(s.at + s.lat); ps.FirstAcquiredMs < 0 || end < ps.FirstAcquiredMs {
					ps.FirstAcquiredMs = end
				}
			case kindNotAcquired:
				ps.NotAcquired++
			case kindNoQuorum:
				ps.NoQuorum++
			default:
				ps.Other++
			}
			if s.kind != kindAcquired {
				bad[s.phase] = append(bad[s.phase], s.lat)
			}
		}
	}
	for i := range out {
		ps := &out[i]
		if ps.Seconds > 0 {
			ps.AcquiredPerS = round3(float64(ps.Acquired) / ps.Seconds)
		}
		ps.Acquire, ps.Failed = summarize(ok[i]), summarize(bad[i])
	}
	// An example of each kind of error, from the lowest-numbered worker
	// that met it, so that a reader can see what the counts are made of.
	for _, errs := range ld.firstErr {
		for key, msg := range errs {
			ps := &out[key.phase]
			if ps.Errors == nil {
				ps.Errors = map[string]string{}
			}
			if ps.Errors[key.kind.String()] == "" {
				ps.Errors[key.kind.String()] = msg
			}
		}
	}
	return out
}

// PhaseStats are one phase of a load: how many attempts started in it, how
// they ended, and their latencies.
type PhaseStats struct {
	Phase   string  `json:"phase"`
	Seconds float64 `json:"seconds"`
	// Attempts started in the phase, and how they ended: acquired,
	// ErrNotAcquired (contention), ErrNoQuorum (outage), anything else.
	Attempts int `json:"attempts"`
	Acquired int `json:"acquired"`
	// AcquiredLater counts the acquires that started in the phase and
	// returned in a later one: they may have been granted in that one (a
	// worker held up between reading the phase and asking the masters).
	AcquiredLater int `json:"acquired_later,omitempty"`
	NotAcquired   int `json:"not_acquired"`
	NoQuorum      int `json:"no_quorum"`
	Other         int `json:"other_errors"`
	// AcquiredPerS is the phase's throughput.
	AcquiredPerS float64 `json:"acquired_per_s"`
	// Acquire is the latency of successful acquires; Failed of the rest.
	Acquire Latency `json:"acquire_latency"`
	Failed  Latency `json:"failed_latency"`
	// FirstAcquiredMs is when the phase's first successful acquire
	// returned, in ms since the load began; -1 if none did.
	FirstAcquiredMs float64 `json:"first_acquired_ms"`
	// Errors holds an example of each kind of failure, by kind.
	Errors map[string]string `json:"errors,omitempty"`
}

// Latency summarises a set of durations, in microseconds.
type Latency struct {
	N     int   `json:"n"`
	P50Us int64 `json:"p50_us"`
	P99Us int64 `json:"p99_us"`
	MaxUs int64 `json:"max_us"`
}

// summarize sorts ds and reads its percentiles by nearest rank.
func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	at := func(p float64) int64 {
		i := int(p*float64(len(ds))+0.999999) - 1
		return ds[max(0, min(i, len(ds)-1))].Microseconds()
	}
	return Latency{N: len(ds), P50Us: at(0.50), P99Us: at(0.99), MaxUs: ds[len(ds)-1].Microseconds()}
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// phase finds a phase by name; the zero PhaseStats if it is missing.
func phase(ps []PhaseStats, name string) (PhaseStats, bool) {
	for _, p := range ps {
		if p.Phase == name {
			return p, true
		}
	}
	return PhaseStats{Phase: name, FirstAcquiredMs: -1}, false
}
