package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A run with --metrics-addr serves the engine's metrics while it goes on,
// and stops serving when it ends.
func TestRunServesLiveMetrics(t *testing.T) {
	cmd := command(t, "run", "--local-masters", "3", "--workers", "4", "--resources", "2", "--duration", "4s", "--warmup", "0",
		"--metrics-addr", "127.0.0.1:0", "--out", t.TempDir()+"/run")
	stderr := start(t, cmd)
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stderr)
	serving := regexp.MustCompile(`serving metrics at (http://(\S+)/metrics)`)
	var url, addr string
	var rest bytes.Buffer
	for lines.Scan() {
		if m := serving.FindStringSubmatch(lines.Text()); m != nil {
			url, addr = m[1], m[2]
			break
		}
	}
	if url == "" {
		t.Fatal("the run did not say where it serves metrics")
	}
	done := make(chan struct{})
	go func() { io.Copy(&rest, stderr); close(done) }()

	// Scrape until the run has acquired and been refused (two resources,
	// four workers: contention), during the run.
	acquired := regexp.MustCompile(`(?m)^redlock_acquisitions_total\{[^}]*redlock_outcome="acquired"[^}]*\} (\d+)`)
	contended := regexp.MustCompile(`(?m)^redlock_acquisitions_total\{[^}]*redlock_outcome="contended"[^}]*\} (\d+)`)
	count := func(re *regexp.Regexp, body string) int64 {
		var n int64
		for _, m := range re.FindAllStringSubmatch(body, -1) {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			n += v
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	var body string
	for {
		if res, err := http.Get(url); err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			body = string(b)
			if count(acquired, body) > 0 && count(contended, body) > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no acquired and contended counts served within 20s:\n%s", body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, name := range []string{"redlock_acquire_duration_seconds_bucket", "redlock_release_duration_seconds_count", `redlock_node_count{`, `redlock_node_quarantined{`} {
		if !strings.Contains(body, name) {
			t.Errorf("metrics lack %s", name)
		}
	}
	if up := regexp.MustCompile(`(?m)^redlock_node_count\{[^}]*redlock_node_state="up"[^}]*\} 1$`).FindAllString(body, -1); len(up) != 3 {
		t.Errorf("%d masters up in the gauges, want 3", len(up))
	}
	if err := cmd.Wait(); err != nil {
		<-done
		t.Fatalf("run: %v\n%s", err, rest.String())
	}
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
