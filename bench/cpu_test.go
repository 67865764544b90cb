package bench

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/results"
)

// The host's busy share is what is not idle (idle, iowait) of every tick
// from user to steal; guest time is in user already.
func TestParseHostTimes(t *testing.T) {
	a, ok := parseHostTimes("cpu  100 0 50 800 50 0 0 0 7 0\ncpu0 1 2 3 4\n")
	if !ok || a.total != 1000 || a.idle != 850 {
		t.Fatalf("parse: %+v %v", a, ok)
	}
	b, _ := parseHostTimes("cpu  400 0 150 900 50 0 0 0 9 0\n")
	if got := b.busySince(a); got != 0.8 {
		t.Errorf("busy since: %v, want 0.8 (400 of 500 ticks)", got)
	}
	if got := a.busySince(a); got >= 0 {
		t.Errorf("no ticks: %v, want unknown (< 0)", got)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 x 4"} {
		if _, ok := parseHostTimes(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// An error of the warm-up is not shown as the first of a kind the
// measured window counted: it is kept apart, and a kind the window did
// not count shows no example of its own.
func TestErrorExamplesOfTheWarmupApart(t *testing.T) {
	r := newRunner(shortConfig("nolock", nil), nil)
	r.noteError(errNoQuorum, errors.New("no quorum in the warm-up"), false)
	r.noteError(errTimeout, errors.New("a timeout after the window"), true)
	s := r.summary(nil)
	if len(s.ErrorExamples) != 0 || s.WarmupErrorExamples["no_quorum"] != "no quorum in the warm-up" || len(s.WarmupErrorExamples) != 1 {
		t.Errorf("examples %v, warm-up's %v", s.ErrorExamples, s.WarmupErrorExamples)
	}
	var b bytes.Buffer
	results.WriteText(&b, s)
	if text := b.String(); strings.Contains(text, "after the window") || !strings.Contains(text, "in the warm-up, which no counter counts:\n    first no_quorum: no quorum in the warm-up") {
		t.Errorf("summary.txt:\n%s", text)
	}
}

// Every lock kind's run records its CPU per acquisition, the client's and
// the masters', and the node timeout its engine used; an engine without
// Redis records the client's alone.
func TestRunRecordsCPUPerAcquisitionAndNodeTimeout(t *testing.T) {
	noLeaks(t)
	c := redistest.StartT(t, 3)
	for _, tc := range []struct {
		lock        engines.Lock
		nodeTimeout time.Duration
		wantMs      float64
	}{
		{engines.Lock{Kind: engines.LockMutex}, 0, 600}, // TTL/100 of a minute
		{engines.Lock{Kind: engines.LockSemaphore, Permits: 2}, 0, 600},
		{engines.Lock{Kind: engines.LockRW, ReadFraction: 0.5}, 0, 600},
		{engines.Lock{Kind: engines.LockMulti, K: 2}, 250 * time.Millisecond, 250},
	} {
		cfg := familyConfig("redlock", c.Addrs(), tc.lock)
		cfg.KeyPrefix = "cpu-" + strings.ReplaceAll(tc.lock.String(), ":", "") + ":"
		loadProof(&cfg)
		byCount(&cfg, 300)
		cfg.NodeTimeout = tc.nodeTimeout
		s := run(t, cfg).Summary
		requireLive(t, s, false)
		// The figures themselves may be 0: a short window on a kernel
		// that accounts CPU time by the tick can see none.
		cpu := s.CPU
		if cpu == nil || cpu.WindowS <= 0 || cpu.MastersS == nil || cpu.MastersUsPerOp == nil || cpu.BusiestMasterS == nil {
			t.Errorf("%s: cpu %+v", tc.lock, cpu)
			continue
		}
		if s.NodeTimeoutMs != tc.wantMs {
			t.Errorf("%s: node timeout %v ms, want %v", tc.lock, s.NodeTimeoutMs, tc.wantMs)
		}
		var b bytes.Buffer
		results.WriteText(&b, s)
		if !strings.Contains(b.String(), "cpu          per acquisition: ") {
			t.Errorf("%s: summary.txt:\n%s", tc.lock, b.String())
		}
		t.Logf("%s: client %.1f µs, masters %.1f µs per acquisition (%s)", tc.lock, cpu.ClientUsPerOp, *cpu.MastersUsPerOp, cpu.Busy(s.Machine))
	}

	cfg := shortConfig("nolock", nil)
	cfg.Workers, cfg.Duration, cfg.Warmup = 2, 100*time.Millisecond, 0
	s := run(t, cfg).Summary
	if s.CPU == nil || s.CPU.MastersS != nil || s.NodeTimeoutMs != 0 {
		t.Errorf("nolock: cpu %+v, node timeout %v ms", s.CPU, s.NodeTimeoutMs)
	}
}
