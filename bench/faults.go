package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/bench/fault"
	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/results"
)

// faultRig is what a run with --fault owns: the injector and, when the
// schedule acts on the wire (slow, cut), the proxies the engine dials
// instead of the masters. It also keeps the state of every fault as the
// injector reports it, so that each interval can be marked with the faults
// that shaped it.
//
// Shutdown order, which Run keeps: the injector returns (every fault
// lifted), then the engine closes, then the proxies, then the masters stop.
type faultRig struct {
	inj     *fault.Injector
	proxies *fault.Proxies // nil without slow or cut

	mu   sync.Mutex
	seen []results.FaultEvent // the latest state of each fault, in the order first reported

	cancel context.CancelFunc
	done   chan struct{}
	events []results.FaultEvent // the injector's log, once done is closed
}

// needsProxies reports whether any fault of s acts on the wire.
func needsProxies(s fault.Schedule) bool {
	return slices.ContainsFunc(s, func(f fault.Fault) bool { return f.Action == fault.Slow || f.Action == fault.Cut })
}

// newFaultRig builds the injector for s on masters, reached with conn
// (stall speaks to them directly). cluster holds the masters' processes
// when this run started them, nil for --masters. It starts the proxies if
// s needs them: the caller must Close them after the engine, on every
// path. It checks that every stalled master can be stalled.
func newFaultRig(ctx context.Context, s fault.Schedule, masters []string, conn redisproc.Conn, cluster *redisproc.Cluster) (*faultRig, error) {
	rig := &faultRig{}
	cfg := fault.Config{Addrs: masters, OnEvent: rig.onEvent}
	cfg.Username, cfg.Password, cfg.TLS = conn.Username, conn.Password, conn.TLS
	if cluster != nil {
		cfg.Nodes = make([]fault.Process, len(cluster.Nodes))
		for i, n := range cluster.Nodes {
			cfg.Nodes[i] = n
		}
		if needsProxies(s) {
			px, err := fault.NewProxies(ctx, masters)
			if err != nil {
				return nil, fmt.Errorf("start fault proxies: %w", err)
			}
			rig.proxies, cfg.Proxies = px, px
		}
	}
	inj, err := fault.New(s, cfg)
	if err == nil {
		err = inj.Check(ctx)
	}
	if err != nil {
		if rig.proxies != nil {
			rig.proxies.Close()
		}
		reason := err.Error()
		var ie *fault.ItemError
		if errors.As(err, &ie) {
			reason = fmt.Sprintf("item %d %q: %s", ie.Pos, ie.Item, ie.Msg)
		}
		return nil, &ConfigError{Flag: "fault", Value: s.String(), Reason: reason}
	}
	rig.inj = inj
	return rig, nil
}

// dialAddrs are the addresses the engine dials: the proxies' when there
// are proxies, else the masters'.
func (rig *faultRig) dialAddrs(masters []string) []string {
	if rig == nil || rig.proxies == nil {
		return masters
	}
	return rig.proxies.Addrs()
}

// start runs the schedule in the background, times measured from start.
func (rig *faultRig) start(start time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	rig.cancel, rig.done = cancel, make(chan struct{})
	go func() {
		defer close(rig.done)
		rig.events = rig.inj.Run(ctx, start)
	}()
}

// stop lifts every fault still in effect, waits for the injector to
// return, and gives its log. Faults whose time had not come are left out.
func (rig *faultRig) stop() []results.FaultEvent {
	if rig.done == nil {
		return nil
	}
	rig.cancel()
	<-rig.done
	return rig.events
}

// onEvent is the injector's callback: a fault took effect or ended.
func (rig *faultRig) onEvent(e results.FaultEvent) {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	for i := range rig.seen {
		if rig.seen[i].Fault == e.Fault {
			rig.seen[i] = e
			return
		}
	}
	rig.seen = append(rig.seen, e)
}

// active names the faults in effect at some time in [fromS, toS), seconds
// since the injector's start.
func (rig *faultRig) active(fromS, toS float64) []string {
	if rig == nil {
		return nil
	}
	rig.mu.Lock()
	defer rig.mu.Unlock()
	var out []string
	for _, e := range rig.seen {
		if e.During(fromS, toS) {
			out = append(out, e.Fault)
		}
	}
	return out
}
