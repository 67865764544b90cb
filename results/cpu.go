package results

import (
	"fmt"
	"math"
	"strings"
)

// CPU is what the measured window cost in CPU time, per operation: the
// load generator's process (the engine's client side, with the workers,
// recorder and oracle that drive it) and the masters (every primary of
// every vote), each divided by the acquisitions, every one an acquire and
// its release. It is recorded for every run and every lock kind; the
// masters' part when they were read (see Server), and the host's load
// where the system tells it.
type CPU struct {
	// WindowS is the span the times cover, in seconds.
	WindowS float64 `json:"window_s"`
	// ClientS is the load generator's CPU time (user + system), in
	// seconds; ClientUsPerOp the same per acquisition, in µs (absent when
	// nothing was acquired).
	ClientS       float64 `json:"client_s"`
	ClientUsPerOp float64 `json:"client_us_per_op,omitempty"`
	// MastersS is the masters' CPU time (used_cpu_user + used_cpu_sys of
	// INFO cpu), summed over every node read, in seconds; MastersUsPerOp
	// the same per acquisition, in µs; BusiestMasterS the busiest node's.
	// Absent when the masters were not read (no Redis, --fault, a node
	// refusing INFO).
	MastersS       *float64 `json:"masters_s,omitempty"`
	MastersUsPerOp *float64 `json:"masters_us_per_op,omitempty"`
	BusiestMasterS *float64 `json:"busiest_master_s,omitempty"`
	// HostBusy is the share of the host's CPUs that were busy over the
	// window, whatever the process (/proc/stat): 1 is every CPU busy all
	// the time. Absent where the system does not tell it.
	HostBusy *float64 `json:"host_busy,omitempty"`
	// Saturated names what ran out of CPU during the window: "client"
	// (the load generator used CPUSaturated of its GOMAXPROCS), "master"
	// (a master's node used CPUSaturated of a core, all a Redis main
	// thread has), "host" (the host's CPUs were CPUSaturated busy, by
	// this run or anything else). A run degraded then may have timed out
	// waiting for CPU rather than for the network or the masters' work.
	Saturated []string `json:"saturated,omitempty"`
}

// CPUSaturated is the share of its CPUs that a process, a node or the
// host must have used over the window to count as saturated.
const CPUSaturated = 0.9

// CPUReading is what a run read of CPU time over its measured window.
type CPUReading struct {
	WindowS, ClientS float64
	// Masters are each node's CPU time; nil when they were not read.
	Masters []float64
	// HostBusy is the host's busy share; negative when unknown.
	HostBusy float64
}

// NewCPU is the window's CPU cost per acquisition, and what ran out of
// CPU, of reading on machine m.
func NewCPU(r CPUReading, acquired int64, m Machine) *CPU {
	c := &CPU{WindowS: round3(r.WindowS), ClientS: round3(r.ClientS)}
	perOp := func(s float64) float64 { return math.Round(s*1e6/float64(acquired)*10) / 10 }
	if acquired > 0 {
		c.ClientUsPerOp = perOp(r.ClientS)
	}
	if r.Masters != nil {
		var sum, busiest float64
		for _, s := range r.Masters {
			sum += s
			busiest = max(busiest, s)
		}
		sum, busiest = round3(sum), round3(busiest)
		c.MastersS, c.BusiestMasterS = &sum, &busiest
		if acquired > 0 {
			us := perOp(sum)
			c.MastersUsPerOp = &us
		}
	}
	if r.HostBusy >= 0 {
		b := math.Round(r.HostBusy*1e3) / 1e3
		c.HostBusy = &b
	}
	if c.HostBusy != nil && *c.HostBusy >= CPUSaturated {
		c.Saturated = append(c.Saturated, "host")
	}
	if r.WindowS <= 0 {
		return c
	}
	procs := m.GOMAXPROCS
	if m.CPUs > 0 && (procs == 0 || m.CPUs < procs) {
		procs = m.CPUs
	}
	if procs > 0 && r.ClientS/r.WindowS >= CPUSaturated*float64(procs) {
		c.Saturated = append(c.Saturated, "client")
	}
	if c.BusiestMasterS != nil && *c.BusiestMasterS/r.WindowS >= CPUSaturated {
		c.Saturated = append(c.Saturated, "master")
	}
	return c
}

// Busy says in words how busy the CPUs were: "client 1.10 CPUs, masters
// 0.85 (busiest node 0.20), host 97% of 2 CPUs".
func (c *CPU) Busy(m Machine) string {
	if c.WindowS <= 0 {
		return ""
	}
	parts := []string{fmt.Sprintf("client %.2f CPUs", c.ClientS/c.WindowS)}
	if c.MastersS != nil {
		parts = append(parts, fmt.Sprintf("masters %.2f (busiest node %.2f)", *c.MastersS/c.WindowS, *c.BusiestMasterS/c.WindowS))
	}
	if c.HostBusy != nil {
		parts = append(parts, fmt.Sprintf("host %.0f%% of %d CPUs", 100**c.HostBusy, m.CPUs))
	}
	return strings.Join(parts, ", ")
}

// Text is the cpu line of summary.txt: "per acquisition: client 61.2 µs,
// masters 120.3 µs (busiest node 25.1 µs); client 1.10 CPUs, masters 0.85
// (busiest node 0.20), host 97% of 2 CPUs".
func (c *CPU) Text(m Machine) string {
	var per []string
	if c.ClientUsPerOp > 0 {
		per = append(per, fmt.Sprintf("client %.1f µs", c.ClientUsPerOp))
	}
	if c.MastersUsPerOp != nil {
		per = append(per, fmt.Sprintf("masters %.1f µs", *c.MastersUsPerOp))
	}
	out := c.Busy(m)
	if len(per) > 0 {
		out = strings.TrimSuffix("per acquisition: "+strings.Join(per, ", ")+"; "+out, "; ")
	}
	if len(c.Saturated) > 0 {
		out += "; saturated: " + strings.Join(c.Saturated, ", ")
	}
	return out
}

// SaturationNote says, when something ran out of CPU in the window, what:
// "CPU-saturated: host (client 1.10 CPUs, ..., host 97% of 2 CPUs)"; ""
// when nothing did or the CPU was not read. Beside a DEGRADED verdict it
// says that an attempt may have timed out waiting for a CPU rather than
// for the network or the masters' work.
func (s *Summary) SaturationNote() string {
	if s.CPU == nil || len(s.CPU.Saturated) == 0 {
		return ""
	}
	return fmt.Sprintf("CPU-saturated: %s (%s)", strings.Join(s.CPU.Saturated, ", "), s.CPU.Busy(s.Machine))
}
