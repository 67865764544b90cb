package results

import (
	"bytes"
	"strings"
	"testing"
)

// The window's CPU is divided by the acquisitions, the client's and the
// masters' apart, and what used CPUSaturated of its CPUs is named.
func TestNewCPUPerAcquisitionAndSaturation(t *testing.T) {
	m := Machine{CPUs: 2, GOMAXPROCS: 2}
	c := NewCPU(CPUReading{WindowS: 10, ClientS: 6.1, Masters: []float64{3, 9.2, 2}, HostBusy: 0.5}, 100000, m)
	if c.ClientUsPerOp != 61 || c.MastersUsPerOp == nil || *c.MastersUsPerOp != 142 || *c.BusiestMasterS != 9.2 {
		t.Errorf("per acquisition: client %v µs, masters %v µs, busiest %v s; want 61, 142, 9.2", c.ClientUsPerOp, deref(c.MastersUsPerOp), deref(c.BusiestMasterS))
	}
	// The busiest master used 0.92 of a core: a Redis main thread's all.
	if strings.Join(c.Saturated, ",") != "master" {
		t.Errorf("saturated %v, want [master]", c.Saturated)
	}
	for _, tc := range []struct {
		r    CPUReading
		want string
	}{
		{CPUReading{WindowS: 10, ClientS: 18, HostBusy: -1}, "client"}, // 1.8 of 2 CPUs
		{CPUReading{WindowS: 10, ClientS: 17, HostBusy: -1}, ""},       // 1.7: not yet
		{CPUReading{WindowS: 10, ClientS: 1, HostBusy: 0.95}, "host"},
		{CPUReading{WindowS: 10, ClientS: 18, Masters: []float64{9.5}, HostBusy: 1}, "host,client,master"},
		{CPUReading{WindowS: 0, ClientS: 18, HostBusy: 1}, "host"}, // no window: no rate
	} {
		c := NewCPU(tc.r, 10, m)
		if got := strings.Join(c.Saturated, ","); got != tc.want {
			t.Errorf("%+v: saturated %q, want %q", tc.r, got, tc.want)
		}
	}
	// Fewer CPUs than GOMAXPROCS: the CPUs bound the client.
	if c := NewCPU(CPUReading{WindowS: 10, ClientS: 9.5, HostBusy: -1}, 10, Machine{CPUs: 1, GOMAXPROCS: 4}); strings.Join(c.Saturated, ",") != "client" {
		t.Errorf("1 CPU, GOMAXPROCS 4, 0.95 CPUs used: saturated %v, want [client]", c.Saturated)
	}
	// Nothing acquired: no figure per acquisition; masters not read: none
	// of theirs.
	c = NewCPU(CPUReading{WindowS: 10, ClientS: 1, HostBusy: -1}, 0, m)
	if c.ClientUsPerOp != 0 || c.MastersS != nil || c.MastersUsPerOp != nil || c.HostBusy != nil {
		t.Errorf("nothing acquired, masters and host unread: %+v", c)
	}
}

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// summary.txt gives the CPU per acquisition, the node timeout, and beside
// a DEGRADED verdict what ran out of CPU; it shows the first error of a
// kind only under a count of that kind, and the warm-up's apart.
func TestSummaryTextCPUNodeTimeoutAndDegraded(t *testing.T) {
	s := fixedSummary()
	s.Violations, s.ViolationExamples, s.StaleTokens, s.StaleTokenExamples = 0, nil, 0, nil
	s.Errors = map[string]int64{"no_quorum": 0, "timeout": 3, "other": 0, "release": 0}
	// A measured example under a count of 0 (an operation that ended
	// after the window) is not shown.
	s.ErrorExamples = map[string]string{"no_quorum": "no quorum, after the window", "timeout": "timed out in the window"}
	var b bytes.Buffer
	WriteText(&b, s)
	text := b.String()
	for _, want := range []string{
		"cpu          per acquisition: client 1250.0 µs, masters 950.0 µs; client 1.25 CPUs, masters 0.95 (busiest node 0.45), host 97% of 2 CPUs; saturated: host\n",
		"node timeout 100 ms (the engine's default; --node-timeout sets it)",
		"  DEGRADED     errors or lost leases: the figures include the failed operations\n" +
			"               CPU-saturated: host (client 1.25 CPUs, masters 0.95 (busiest node 0.45), host 97% of 2 CPUs)\n",
		"    first timeout: timed out in the window\n",
		"  in the warm-up, which no counter counts:\n    first timeout: engine: acquire \"rlb:2\"",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("summary.txt lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "after the window") {
		t.Errorf("summary.txt shows a first no_quorum under a count of 0:\n%s", text)
	}

	// Set by the flag; no errors: no verdict.
	s.Config.NodeTimeout = "250ms"
	s.NodeTimeoutMs = 250
	s.Errors = map[string]int64{}
	s.LostLeases = 0
	b.Reset()
	WriteText(&b, s)
	if text := b.String(); !strings.Contains(text, "node timeout 250 ms (set by --node-timeout)") || strings.Contains(text, "DEGRADED") {
		t.Errorf("summary.txt:\n%s", text)
	}

	// Degraded with nothing saturated: the verdict alone.
	s.LostLeases = 1
	s.CPU = NewCPU(CPUReading{WindowS: 10, ClientS: 1, HostBusy: 0.3}, 10000, s.Machine)
	b.Reset()
	WriteText(&b, s)
	if text := b.String(); !strings.Contains(text, "DEGRADED") || strings.Contains(text, "CPU-saturated") {
		t.Errorf("summary.txt:\n%s", text)
	}
}

// summary.json carries the CPU and the node timeout, and reads them back.
func TestSummaryJSONCPURoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, fixedSummary()); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	c := back.CPU
	if c == nil || c.ClientUsPerOp != 1250 || c.MastersUsPerOp == nil || *c.MastersUsPerOp != 950 || back.NodeTimeoutMs != 100 ||
		strings.Join(c.Saturated, ",") != "host" || back.WarmupErrorExamples["timeout"] == "" {
		t.Errorf("read back: cpu %+v, node timeout %v ms, warm-up errors %v", c, back.NodeTimeoutMs, back.WarmupErrorExamples)
	}
}

// A merged summary has no CPU: each generator read its own process over
// its own window.
func TestMergeDropsCPU(t *testing.T) {
	s, o := fixedSummary(), fixedSummary()
	s.Merge(o)
	if s.CPU != nil || s.WarmupErrorExamples["timeout"] == "" {
		t.Errorf("merged: cpu %+v, warm-up errors %v", s.CPU, s.WarmupErrorExamples)
	}
}
