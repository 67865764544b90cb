package sim

import (
	"context"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// Why the workers wait for auto-extensions (see the package doc): the
// engine serialises a lease's Release and Extend with a sync.Mutex
// (Lease.opMu) that an auto-extension holds across its round trip. A
// goroutine waiting for a sync.Mutex is not durably blocked in a synctest
// bubble, so virtual time stops, and the round trip, which needs virtual
// time to pass, never ends: the bubble stalls for good. Until the engine's
// lock is one a bubble can wait on (a channel), the workers call Release
// and Extend only when no auto-extension of their lease is running or
// due within an operation's span. They learn when one ends from the
// Observer, and when the next is due by mirroring the engine's schedule
// (Lease.arm and Lease.autoExtend): ExtendEvery after the previous one
// ended, the first one min(ExtendEvery, max(validity − (TTL −
// ExtendEvery), 0)) after the grant, none after MaxExtensions or a
// failure.

// autoExtends follows one client's auto-extensions, by resource: the
// Observer reports each one's end, on the auto-extension's goroutine.
type autoExtends struct {
	mu         sync.Mutex
	byResource map[string]*autoLog
}

// autoLog is the auto-extensions of one resource's leases in one client,
// which holds at most one lease of a resource at a time.
type autoLog struct {
	ended     int       // auto-extensions that ended
	succeeded int       // of which succeeded
	last      time.Time // when the last one ended
	failed    bool      // the last one failed: its lease ended
	// changed is closed and replaced when one ends.
	changed chan struct{}
}

func newAutoExtends() *autoExtends {
	return &autoExtends{byResource: make(map[string]*autoLog)}
}

// logLocked returns resource's log. The caller holds a.mu.
func (a *autoExtends) logLocked(resource string) *autoLog {
	lg := a.byResource[resource]
	if lg == nil {
		lg = &autoLog{changed: make(chan struct{})}
		a.byResource[resource] = lg
	}
	return lg
}

// observe is the client's Observer.Extend.
func (a *autoExtends) observe(_ context.Context, e engine.ExtendEvent) {
	if !e.Auto {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	lg := a.logLocked(e.Resource)
	lg.ended++
	lg.failed = e.Err != nil
	if !lg.failed {
		lg.succeeded++
	}
	lg.last = time.Now()
	close(lg.changed)
	lg.changed = make(chan struct{})
}

// autoSchedule is one lease's auto-extension schedule, from its grant.
type autoSchedule struct {
	a        *autoExtends
	resource string
	cfg      engine.Config
	armed    time.Time     // the grant, when the engine armed the lease
	first    time.Duration // the first auto-extension's delay
	// The resource's log when the lease was granted.
	ended0, succeeded0 int
}

// schedule starts following le's auto-extensions. Call it at the
// instant Lock or TryLock returned le, when the engine armed it.
func (a *autoExtends) schedule(le *engine.Lease, cfg engine.Config) *autoSchedule {
	left := le.Validity()
	s := &autoSchedule{a: a, resource: le.Resource(), cfg: cfg, armed: time.Now(),
		first: min(cfg.ExtendEvery, max(left-(cfg.TTL-cfg.ExtendEvery), 0))}
	a.mu.Lock()
	lg := a.logLocked(s.resource)
	s.ended0, s.succeeded0 = lg.ended, lg.succeeded
	a.mu.Unlock()
	return s
}

// next returns when the lease's next auto-extension starts (ok false: no
// more will), and a channel closed when the running or next one ends.
func (s *autoSchedule) next() (at time.Time, ok bool, changed <-chan struct{}) {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	lg := s.a.logLocked(s.resource)
	switch n, won := lg.ended-s.ended0, lg.succeeded-s.succeeded0; {
	case n == 0:
		return s.armed.Add(s.first), true, lg.changed
	case lg.failed, s.cfg.MaxExtensions > 0 && won >= s.cfg.MaxExtensions:
		return time.Time{}, false, lg.changed
	}
	return lg.last.Add(s.cfg.ExtendEvery), true, lg.changed
}

// waitClear returns once le has ended, or no auto-extension of it runs
// now or starts within span: then a Release or Extend that lasts at most
// span cannot wait for the lease's lock while an auto-extension holds it.
func (s *autoSchedule) waitClear(le *engine.Lease, span time.Duration) {
	for le.Err() == nil {
		at, ok, changed := s.next()
		if !ok || time.Now().Add(span).Before(at) {
			return
		}
		select {
		case <-changed:
		case <-le.Done():
		}
	}
}
