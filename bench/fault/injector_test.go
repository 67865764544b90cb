package fault

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/results"
)

// fakeProc records the calls the injector makes, for tests of timing and
// ordering that need no server.
type fakeProc struct {
	mu       sync.Mutex
	calls    []string
	pauseErr error
}

func (p *fakeProc) record(call string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, call)
}

func (p *fakeProc) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

func (p *fakeProc) Kill() error { p.record("kill"); return nil }
func (p *fakeProc) Pause() error {
	p.record("pause")
	return p.pauseErr
}
func (p *fakeProc) Resume() error { p.record("resume"); return nil }
func (p *fakeProc) Restart(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	p.record("restart")
	return nil
}

func mustParse(t *testing.T, spec string) Schedule {
	t.Helper()
	s, err := Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRunOrderAndTimes(t *testing.T) {
	p0, p1 := &fakeProc{}, &fakeProc{pauseErr: errors.New("no such process")}
	var (
		mu    sync.Mutex
		calls []results.FaultEvent
	)
	in, err := New(mustParse(t, "restart:0@300ms,kill:0@100ms,pause:0@0s+200ms,pause:1@50ms+1s"), Config{
		Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"},
		Nodes: []Process{p0, p1},
		OnEvent: func(e results.FaultEvent) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, e)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	log := in.Run(context.Background(), start)

	var got []string
	for _, e := range log {
		got = append(got, e.Fault)
		if !e.Ended || e.AppliedS < e.AtS || e.EndedS < e.AppliedS {
			t.Errorf("%s: applied %.3fs ended %.3fs (ended=%v), planned at %.3fs", e.Fault, e.AppliedS, e.EndedS, e.Ended, e.AtS)
		}
		if e.AppliedAt.Before(start) {
			t.Errorf("%s: applied_at %s before the start %s", e.Fault, e.AppliedAt, start)
		}
	}
	want := []string{"pause:0@0s+200ms", "pause:1@50ms+1s", "kill:0@100ms", "restart:0@300ms"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("log order = %v, want %v", got, want)
	}
	if calls := p0.Calls(); !reflect.DeepEqual(calls, []string{"pause", "kill", "resume", "restart"}) {
		t.Errorf("node 0 saw %v", calls)
	}
	// A fault that failed to apply is not lifted and does not wait.
	if calls := p1.Calls(); !reflect.DeepEqual(calls, []string{"pause"}) {
		t.Errorf("node 1 saw %v, want only the failed pause", calls)
	}
	if e := log[1]; e.Error != "no such process" || e.EndedS-e.AppliedS > 0.5 {
		t.Errorf("failed pause logged as %+v", e)
	}
	if e := log[0]; e.EndedS < 0.2 || e.Early {
		t.Errorf("pause lifted at %.3fs (early=%v), want at or after 0.2s", e.EndedS, e.Early)
	}
	// A timed fault in effect reports twice; instantaneous and failed ones
	// only at their end.
	mu.Lock()
	defer mu.Unlock()
	var reports []string
	for _, e := range calls {
		reports = append(reports, e.Fault+map[bool]string{true: " ended", false: " applied"}[e.Ended])
	}
	want = []string{"pause:0@0s+200ms applied", "pause:1@50ms+1s ended", "kill:0@100ms ended", "pause:0@0s+200ms ended", "restart:0@300ms ended"}
	if !reflect.DeepEqual(reports, want) {
		t.Errorf("OnEvent reports = %v, want %v", reports, want)
	}
}

func TestRunCancelSkipsAndLifts(t *testing.T) {
	p := &fakeProc{}
	in, err := New(mustParse(t, "pause:0@0s+1h,kill:0@1h"), Config{
		Addrs: []string{"127.0.0.1:1"},
		Nodes: []Process{p},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	log := in.Run(ctx, time.Now())
	if len(log) != 1 || !log[0].Early || !log[0].Ended {
		t.Fatalf("log = %+v, want one early, ended pause", log)
	}
	if calls := p.Calls(); !reflect.DeepEqual(calls, []string{"pause", "resume"}) {
		t.Errorf("node saw %v, want pause then resume", calls)
	}
	// Nothing starts once ctx is done, even a fault due at once.
	if log := in.Run(ctx, time.Now().Add(-2*time.Hour)); len(log) != 0 {
		t.Errorf("Run on a cancelled ctx applied %+v", log)
	}
}

func TestNewRejects(t *testing.T) {
	addrs := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	nodes := []Process{&fakeProc{}, &fakeProc{}, &fakeProc{}}
	tests := []struct {
		spec string
		cfg  Config
		want string
	}{
		{"stall:0@0s+1s", Config{}, "Config.Addrs is empty"},
		{"stall:0@0s+1s", Config{Addrs: addrs, Nodes: nodes[:2]}, "Config.Nodes has 2 entries for 3 masters"},
		{"stall:0@0s+1s", Config{Addrs: addrs, Nodes: []Process{nodes[0], nil, nodes[2]}}, "nil entry"},
		{"pause:0@0s+1s", Config{Addrs: addrs}, "pause needs control of the master's process"},
		{"cut:3@0s+1s", Config{Addrs: addrs, Nodes: nodes}, "node 3 out of range: 3 masters (0-2)"},
		{"cut:2@0s+1s", Config{Addrs: addrs, Nodes: nodes}, "cut needs the proxy in front of the master, and none was set up"},
		{"slow:2=1ms@0s+1s", Config{Addrs: addrs, Nodes: nodes}, "slow needs the proxy"},
	}
	for _, tt := range tests {
		_, err := New(mustParse(t, tt.spec), tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%q) = %v, want an error containing %q", tt.spec, err, tt.want)
		}
	}
	if _, err := New(mustParse(t, "stall:2@0s+1s"), Config{Addrs: addrs}); err != nil {
		t.Errorf("stall on external masters: %v", err)
	}
}

func TestEventJSON(t *testing.T) {
	e := results.FaultEvent{
		Fault: "slow:1=20ms@0s+10s", Action: string(Slow), Node: 1, Arg: "20ms", ForS: 10,
		AppliedS: 0.001, AppliedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		EndedS: 10.002, Ended: true,
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"fault":"slow:1=20ms@0s+10s","action":"slow","node":1,"arg":"20ms","at_s":0,"for_s":10,` +
		`"applied_s":0.001,"applied_at":"2025-01-02T03:04:05Z","ended_s":10.002,"ended":true}`
	if string(b) != want {
		t.Errorf("JSON:\n got %s\nwant %s", b, want)
	}
	for _, tt := range []struct {
		from, to float64
		want     bool
	}{{0, 1, true}, {9, 10, true}, {10, 11, true}, {11, 12, false}} {
		if got := e.During(tt.from, tt.to); got != tt.want {
			t.Errorf("During(%v, %v) = %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
}
