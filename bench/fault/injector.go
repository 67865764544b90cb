package fault

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/results"
)

// Process controls one local master's process. *redisproc.Node satisfies it;
// the interface keeps this package free of process management and lets the
// injector's timing be tested without servers.
type Process interface {
	// Kill sends SIGKILL and waits for the process to exit.
	Kill() error
	// Pause sends SIGSTOP.
	Pause() error
	// Resume sends SIGCONT.
	Resume() error
	// Restart kills the process if it runs and starts it again on the same
	// address, returning once it answers.
	Restart(ctx context.Context) error
}

// Defaults for Config's zero values.
const (
	// DefaultRestartTimeout bounds one restart, start-up and first PING
	// included.
	DefaultRestartTimeout = 10 * time.Second
	// DefaultStallGrace is how long past a stall's planned end the injector
	// waits for the master to answer again before it records an error.
	DefaultStallGrace = 5 * time.Second
)

// Config says what the injector acts on. Index i of every slice is master i
// of the schedule.
type Config struct {
	// Addrs are the masters' own addresses, never the proxies': stall talks
	// to a master directly, so that it works during a cut. Required.
	Addrs []string
	// Nodes are the processes of masters that redlock-bench started. Nil for
	// masters given with --masters, which allows stall only. Default: nil.
	Nodes []Process
	// Proxies sit between the engine and the masters; slow and cut act on
	// them. Default: nil, which rejects slow and cut.
	Proxies *Proxies
	// OnEvent, if set, is called when a timed fault has taken effect (Ended
	// false) and for every fault when it ends (Ended true), so that the
	// per-second intervals can be marked as the run goes. Kill, restart and
	// faults that failed to apply report only their end. It is called from
	// several goroutines at once and must not block. Default: nil.
	OnEvent func(results.FaultEvent)
	// RestartTimeout bounds each restart. Default: DefaultRestartTimeout.
	RestartTimeout time.Duration
	// StallGrace is added to a stall's length to bound the wait for the
	// master's reply. Default: DefaultStallGrace.
	StallGrace time.Duration
	// Username, Password and TLS are how stall reaches the masters, as the
	// engine does. Default: plain TCP without AUTH.
	Username, Password string
	TLS                *tls.Config
}

// Injector runs one schedule against one set of masters.
type Injector struct {
	sched Schedule
	cfg   Config
}

// New checks the schedule against cfg: node indices, and that every fault
// has what it acts on (a process, a proxy). The errors are *ItemError, as
// from Validate.
func New(s Schedule, cfg Config) (*Injector, error) {
	n := len(cfg.Addrs)
	if n == 0 {
		return nil, errors.New("Config.Addrs is empty")
	}
	if cfg.Nodes != nil {
		if len(cfg.Nodes) != n {
			return nil, fmt.Errorf("Config.Nodes has %d entries for %d masters", len(cfg.Nodes), n)
		}
		if slices.Contains(cfg.Nodes, nil) {
			return nil, errors.New("Config.Nodes has a nil entry")
		}
	}
	if cfg.Proxies != nil && len(cfg.Proxies.Addrs()) != n {
		return nil, fmt.Errorf("Config.Proxies has %d proxies for %d masters", len(cfg.Proxies.Addrs()), n)
	}
	if err := s.Validate(n, cfg.Nodes != nil); err != nil {
		return nil, err
	}
	for i, f := range s {
		if (f.Action == Slow || f.Action == Cut) && cfg.Proxies == nil {
			return nil, &ItemError{Item: f.String(), Pos: i + 1, Err: ErrNeedsLocal,
				Msg: fmt.Sprintf("%s needs the proxy in front of the master, and none was set up", f.Action)}
		}
	}
	if cfg.RestartTimeout <= 0 {
		cfg.RestartTimeout = DefaultRestartTimeout
	}
	if cfg.StallGrace <= 0 {
		cfg.StallGrace = DefaultStallGrace
	}
	return &Injector{sched: slices.Clone(s), cfg: cfg}, nil
}

// Check asks every master that the schedule stalls whether it accepts
// DEBUG SLEEP or CLIENT PAUSE, so that a master which refuses both (an ACL,
// a renamed command) is reported before the run rather than in its log. It
// leaves the masters as they were, bar a pause of 1ms where DEBUG is
// refused. Errors are *ItemError naming the first stall that cannot work.
func (in *Injector) Check(ctx context.Context) error {
	for i, f := range in.sched {
		if f.Action != Stall {
			continue
		}
		if _, err := probeStall(ctx, &in.cfg, in.cfg.Addrs[f.Node]); err != nil {
			return &ItemError{Item: f.String(), Pos: i + 1, Err: ErrStallRefused,
				Msg: fmt.Sprintf("master %s cannot be stalled: %v", in.cfg.Addrs[f.Node], oneLine(err))}
		}
	}
	return nil
}

// oneLine keeps a server's reply from breaking an error across lines.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Run applies every fault at its time after start and lifts it after its
// length, then returns the log of the faults that were applied, ordered by
// when they were applied. Faults whose time had not come when ctx was
// cancelled are left out.
//
// When ctx is cancelled, Run stops waiting, lifts every fault in effect
// (resumes paused processes, heals cuts, removes latency; such events are
// marked Early) and returns. Two things are not cut short, so that Run never
// leaves a master half-way: a restart in progress completes, and a stall
// runs to its end, because neither DEBUG SLEEP nor CLIENT PAUSE can be
// interrupted; Run then returns at most the stall's remaining length later.
func (in *Injector) Run(ctx context.Context, start time.Time) []results.FaultEvent {
	type entry struct {
		pos int
		ev  results.FaultEvent
	}
	var (
		mu  sync.Mutex
		log []entry
		wg  sync.WaitGroup
	)
	for pos, f := range in.sched {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ev, ok := in.run(ctx, start, f); ok {
				mu.Lock()
				log = append(log, entry{pos, ev})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(log, func(a, b entry) int {
		if a.ev.AppliedS != b.ev.AppliedS {
			if a.ev.AppliedS < b.ev.AppliedS {
				return -1
			}
			return 1
		}
		return a.pos - b.pos
	})
	out := make([]results.FaultEvent, len(log))
	for i, e := range log {
		out[i] = e.ev
	}
	return out
}

// run applies one fault; ok is false when ctx ended before its time.
func (in *Injector) run(ctx context.Context, start time.Time, f Fault) (ev results.FaultEvent, ok bool) {
	if !waitUntil(ctx, start.Add(f.At)) {
		return results.FaultEvent{}, false
	}
	ev = results.FaultEvent{
		Fault:  f.String(),
		Action: string(f.Action),
		Node:   f.Node,
		AtS:    f.At.Seconds(),
		ForS:   f.For.Seconds(),
	}
	if f.Action == Slow {
		ev.Arg = f.Latency.String()
	}
	now := time.Now()
	ev.AppliedAt = now.UTC().Round(0)
	ev.AppliedS = now.Sub(start).Seconds()

	i := f.Node
	switch f.Action {
	case Kill:
		in.end(&ev, start, in.cfg.Nodes[i].Kill())
	case Restart:
		// Detached from ctx: a restart abandoned half-way would leave the
		// master down, which is a different fault from the one asked for.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), in.cfg.RestartTimeout)
		err := in.cfg.Nodes[i].Restart(rctx)
		cancel()
		in.end(&ev, start, err)
	case Pause:
		in.hold(ctx, &ev, start, f, in.cfg.Nodes[i].Pause, in.cfg.Nodes[i].Resume)
	case Slow:
		px := in.cfg.Proxies
		in.hold(ctx, &ev, start, f,
			func() error { return px.Slow(i, f.Latency) },
			func() error { return px.Slow(i, 0) })
	case Cut:
		px := in.cfg.Proxies
		in.hold(ctx, &ev, start, f,
			func() error { return px.Cut(i) },
			func() error { return px.Heal(i) })
	case Stall:
		via, err := stall(ctx, &in.cfg, in.cfg.Addrs[i], f.For, in.cfg.StallGrace, func(via string) {
			ev.Via = via
			in.notify(ev)
		})
		ev.Via = via
		in.end(&ev, start, err)
	}
	return ev, true
}

// hold applies a timed fault, waits out its length or ctx, and lifts it.
func (in *Injector) hold(ctx context.Context, ev *results.FaultEvent, start time.Time, f Fault, apply, lift func() error) {
	if err := apply(); err != nil {
		in.end(ev, start, err)
		return
	}
	in.notify(*ev)
	ev.Early = !waitUntil(ctx, start.Add(f.end()))
	in.end(ev, start, lift())
}

func (in *Injector) end(ev *results.FaultEvent, start time.Time, err error) {
	ev.EndedS = time.Since(start).Seconds()
	ev.Ended = true
	if err != nil {
		ev.Error = err.Error()
	}
	in.notify(*ev)
}

func (in *Injector) notify(ev results.FaultEvent) {
	if in.cfg.OnEvent != nil {
		in.cfg.OnEvent(ev)
	}
}

// waitUntil sleeps until t and reports whether it got there before ctx
// ended. A cancelled ctx wins a tie, so nothing starts after cancellation.
func waitUntil(ctx context.Context, t time.Time) bool {
	if d := time.Until(t); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	return ctx.Err() == nil
}
