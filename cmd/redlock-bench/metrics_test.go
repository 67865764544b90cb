package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A run with --metrics-addr serves the engine's metrics while it goes on,
// and stops serving when it ends. The run is stopped (Ctrl-C) once the
// scrapes have shown what they must: however slow the machine, it is
// still serving then.
func TestRunServesLiveMetrics(t *testing.T) {
	cmd := command(t, "run", "--local-masters", "3", "--workers", "4", "--resources", "2", "--duration", "1m", "--warmup", "0",
		"--metrics-addr", "127.0.0.1:0", "--out", t.TempDir()+"/run")
	lines := stderrLines(start(t, cmd))
	defer cmd.Process.Kill()
	m := awaitLines(t, cmd, lines, servingMetrics)
	drain(lines)
	url, addr := m[0][1], m[0][2]

	// Scrape until the run has acquired and been refused (two resources,
	// four workers: contention), during the run.
	body := scrapeUntil(t, cmd, url, func(body string) bool {
		return metricCount(acquiredSeries, body) > 0 && metricCount(contendedSeries, body) > 0
	})
	for _, name := range []string{"redlock_acquire_duration_seconds_bucket", "redlock_release_duration_seconds_count", `redlock_node_count{`, `redlock_node_quarantined{`} {
		if !strings.Contains(body, name) {
			t.Errorf("metrics lack %s", name)
		}
	}
	if up := regexp.MustCompile(`(?m)^redlock_node_count\{[^}]*redlock_node_state="up"[^}]*\} 1$`).FindAllString(body, -1); len(up) != 3 {
		t.Errorf("%d masters up in the gauges, want 3", len(up))
	}
	awaitStop(t, cmd, syscall.SIGINT)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("still serving at %s after the run", addr)
	}
}

// A taken address is refused before anything starts, naming it.
func TestMetricsAddrTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, sub := range []string{"run", "chaos"} {
		cmd := command(t, sub, "--duration", "1s", "--metrics-addr", ln.Addr().String())
		var stderr bytes.Buffer
		cmd.Stderr, cmd.Stdout = &stderr, io.Discard
		err := cmd.Run()
		if exitStatus(err) == 0 || !strings.Contains(stderr.String(), "--metrics-addr "+ln.Addr().String()) ||
			!strings.Contains(stderr.String(), "address already in use") {
			t.Errorf("%s: exit %d, stderr %q", sub, exitStatus(err), stderr.String())
		}
		if entries, _ := os.ReadDir(cmd.Dir); len(entries) != 0 {
			t.Errorf("%s: a refused address left files behind: %v", sub, entries)
		}
	}
}
