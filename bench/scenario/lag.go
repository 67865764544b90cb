package scenario

import (
	"context"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
)

// lagTick is the lag probe's period: a timer of this length, and a PING
// before it, every round.
const lagTick = 10 * time.Millisecond

// lagProbe measures how late this host makes what a lock client does, the
// way paused-holder's plain timer does for one instant, over a span of a
// run: every round a PING to a master that stays up and a lagTick timer,
// and how much longer the two took than the timer alone. A loaded
// two-core host makes that hundreds of milliseconds, the master's own
// stalls included: time a bound on an attempt's length may not hold
// against the engine.
type lagProbe struct {
	stop  context.CancelFunc
	worst chan time.Duration
}

// startLagProbe starts probing through addr until stop.
func startLagProbe(addr string) *lagProbe {
	ctx, cancel := context.WithCancel(context.Background())
	p := &lagProbe{stop: cancel, worst: make(chan time.Duration, 1)}
	go func() {
		var worst time.Duration
		defer func() { p.worst <- worst }()
		c, err := redisproc.NewClient(addr, directTimeout)
		if err != nil {
			return // no probe: no lag excused
		}
		defer c.Close()
		for {
			t0 := time.Now()
			if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
				return // stopped, or the master failed: the worst so far
			}
			select {
			case <-time.After(lagTick):
			case <-ctx.Done():
				return
			}
			worst = max(worst, time.Since(t0)-lagTick)
		}
	}()
	return p
}

// end stops the probe and returns the worst lag it saw.
func (p *lagProbe) end() time.Duration {
	p.stop()
	return <-p.worst
}
