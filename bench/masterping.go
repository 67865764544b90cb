package bench

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-bench/redlock/internal/redisproc"
)

// masterPings samples each master's round trip once an interval, for
// intervals.json's master_rtt_us: a PING on a client of its own per master,
// to the address the engine dials (the fault proxy when faults are on, so
// that an injected delay or cut shows), at most one in flight per master.
// The engine's votes carry no per-master timing; one command per master a
// second costs the masters nothing a run can see.
type masterPings struct {
	clients []rueidis.Client // nil for a master that could not be reached
	timeout time.Duration
	// ctx ends the PINGs in flight at close: a paused master must not
	// hold the run's end.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	rtt    []int64 // µs of the last reply since the last take; -1 for none
	busy   []bool
	wg     sync.WaitGroup
}

// newMasterPings opens a client to each address; a master it cannot reach
// now is never sampled.
func newMasterPings(conn redisproc.Conn, addrs []string, timeout time.Duration) *masterPings {
	m := &masterPings{clients: make([]rueidis.Client, len(addrs)), timeout: timeout,
		rtt: make([]int64, len(addrs)), busy: make([]bool, len(addrs))}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	for i, a := range addrs {
		m.rtt[i] = -1
		if c, err := conn.NewClient(a, timeout); err == nil {
			m.clients[i] = c
		}
	}
	return m
}

// sample sends a PING to each master that has none in flight.
func (m *masterPings) sample() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, c := range m.clients {
		if c == nil || m.busy[i] {
			continue
		}
		m.busy[i] = true
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			ctx, cancel := context.WithTimeout(m.ctx, m.timeout)
			defer cancel()
			sent := time.Now()
			err := c.Do(ctx, c.B().Ping().Build()).Error()
			rtt := time.Since(sent).Microseconds()
			m.mu.Lock()
			defer m.mu.Unlock()
			m.busy[i] = false
			if err == nil {
				m.rtt[i] = max(rtt, 1)
			}
		}()
	}
}

// take returns each master's round trip replied since the last take, in
// µs (-1 for none), and forgets them.
func (m *masterPings) take() []int64 {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := append([]int64(nil), m.rtt...)
	for i := range m.rtt {
		m.rtt[i] = -1
	}
	return out
}

// wait returns once no PING is in flight.
func (m *masterPings) wait() {
	if m != nil {
		m.wg.Wait()
	}
}

// close ends the PINGs in flight and closes the clients.
func (m *masterPings) close() {
	if m == nil {
		return
	}
	m.cancel()
	m.wait()
	for _, c := range m.clients {
		if c != nil {
			c.Close()
		}
	}
}
