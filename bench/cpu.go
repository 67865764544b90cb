package bench

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/results"
)

// The measured window's CPU (summary.json's cpu): the process's own CPU
// time and the host's busy time are read at the window's start and end for
// every run, whatever the engine and the faults; the masters' CPU comes
// from the server readings when they were taken (serverstats.go).

// hostTimes is the host's CPU time so far, in clock ticks, from the first
// line of /proc/stat: all of it, and the idle part (idle and iowait).
type hostTimes struct{ total, idle uint64 }

// readHostTimes reads /proc/stat; false where the system has none.
func readHostTimes() (hostTimes, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostTimes{}, false
	}
	return parseHostTimes(string(b))
}

// parseHostTimes reads "cpu  user nice system idle iowait irq softirq
// steal guest guest_nice": guest time is counted in user already.
func parseHostTimes(stat string) (hostTimes, bool) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return hostTimes{}, false
	}
	var h hostTimes
	for i, v := range f[1:min(len(f), 9)] { // up to steal
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return hostTimes{}, false
		}
		h.total += n
		if i == 3 || i == 4 { // idle, iowait
			h.idle += n
		}
	}
	return h, true
}

// busySince is the share of the host's CPU time busy from a to h; negative
// when unknown.
func (h hostTimes) busySince(a hostTimes) float64 {
	total := float64(h.total) - float64(a.total)
	if total <= 0 {
		return -1
	}
	return max(0, 1-(float64(h.idle)-float64(a.idle))/total)
}

// cpuWindow reads the process's and the host's CPU over the measured
// window.
type cpuWindow struct {
	at            time.Time
	client        float64
	host          hostTimes
	hostOK, begun bool
	reading       results.CPUReading
	ended         bool
}

// begin reads the start of the window.
func (w *cpuWindow) begin() {
	w.at, w.client, w.begun = time.Now(), processCPU(), true
	w.host, w.hostOK = readHostTimes()
}

// end reads the end of the window; masters are the server readings,
// nil when the masters were not read.
func (w *cpuWindow) end(masters *results.ServerStats) {
	if !w.begun {
		return
	}
	at, client := time.Now(), processCPU()
	w.reading = results.CPUReading{WindowS: at.Sub(w.at).Seconds(), ClientS: max(0, client-w.client), HostBusy: -1}
	if h, ok := readHostTimes(); ok && w.hostOK {
		w.reading.HostBusy = h.busySince(w.host)
	}
	if masters != nil && len(masters.Nodes) > 0 {
		for _, n := range masters.Nodes {
			w.reading.Masters = append(w.reading.Masters, n.CPUS)
		}
	}
	w.ended = true
}

// cpu is the window's CPU per acquisition; nil when the window was not
// read (the run stopped in its warm-up).
func (w *cpuWindow) cpu(acquired int64, m results.Machine) *results.CPU {
	if !w.ended {
		return nil
	}
	return results.NewCPU(w.reading, acquired, m)
}
