package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests that interrupt a command wait for what they need to have
// happened (a line, an acquisition, a fault in effect), not for a time.
// awaitTimeout bounds each wait: it is reached only when the event cannot
// come.
const awaitTimeout = time.Minute

// runWithin runs cmd to its end and returns its error, as cmd.Run; it
// kills cmd and fails the test after awaitTimeout. For a command that
// must fail at once: how fast is not the test's to judge (the machine's
// load decides), only that it ends, and what it printed on the way.
func runWithin(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(awaitTimeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%q still running after %s", cmd.Args[1:], awaitTimeout)
		return nil
	}
}

// runRefused runs the command args in this process, for arguments it
// must refuse before it starts anything. Were it to start the work
// instead, the context ends it after awaitTimeout (status 130), rather
// than after the work's --duration.
func runRefused(args []string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
	defer cancel()
	return run(ctx, args, stdout, stderr)
}

// stderrLines sends the lines of r on the channel it returns, closed at
// EOF. The caller drains it (drain) once it has what it needs.
func stderrLines(r io.Reader) <-chan string {
	ch := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch
}

// drain reads what is left of lines in the background.
func drain(lines <-chan string) {
	go func() {
		for range lines {
		}
	}()
}

// awaitLines reads lines until each of res has matched one, and returns
// each one's submatches; it kills cmd and fails the test at EOF or after
// awaitTimeout.
func awaitLines(t *testing.T, cmd *exec.Cmd, lines <-chan string, res ...*regexp.Regexp) [][]string {
	t.Helper()
	got := make([][]string, len(res))
	left := len(res)
	timeout := time.After(awaitTimeout)
	var seen []string
	for left > 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the command ended before printing %v:\n%s", res, strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			for i, re := range res {
				if got[i] == nil {
					if m := re.FindStringSubmatch(l); m != nil {
						got[i] = m
						left--
					}
				}
			}
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("no line matching %v within %s:\n%s", res, awaitTimeout, strings.Join(seen, "\n"))
		}
	}
	return got
}

// measuredProgress matches a progress line of the measured window that
// counted acquisitions: the run has acquired.
var measuredProgress = regexp.MustCompile(`\[[^\]/]*/[^\]]*\] last [^:]*: acquired/s [1-9]`)

// servingMetrics matches the line that says where the metrics are served.
var servingMetrics = regexp.MustCompile(`serving metrics at (http://(\S+)/metrics)`)

// metricCount sums the samples of the series re matches (its value the
// first submatch) in a scrape.
func metricCount(re *regexp.Regexp, body string) int64 {
	var n int64
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		v, _ := strconv.ParseInt(m[1], 10, 64)
		n += v
	}
	return n
}

var (
	acquiredSeries  = regexp.MustCompile(`(?m)^redlock_acquisitions_total\{[^}]*redlock_outcome="acquired"[^}]*\} (\d+)`)
	contendedSeries = regexp.MustCompile(`(?m)^redlock_acquisitions_total\{[^}]*redlock_outcome="contended"[^}]*\} (\d+)`)
)

// scrapeUntil scrapes url until done(body) holds, and returns that body;
// it kills cmd and fails the test after awaitTimeout.
func scrapeUntil(t *testing.T, cmd *exec.Cmd, url string, done func(body string) bool) string {
	t.Helper()
	deadline := time.Now().Add(awaitTimeout)
	var body string
	for {
		if res, err := http.Get(url); err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			body = string(b)
			if done(body) {
				return body
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the scrapes of %s did not show what was awaited within %s:\n%s", url, awaitTimeout, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitFault waits until a fault is in effect on one of the servers at
// addrs: one stopped (SIGSTOP), or one no longer the process it was when
// called (killed, restarted). It kills cmd and fails the test after
// awaitTimeout.
func awaitFault(t *testing.T, cmd *exec.Cmd, addrs []string) {
	t.Helper()
	ports := make([]string, len(addrs))
	first := make([][]string, len(addrs))
	for i, a := range addrs {
		ports[i] = a[strings.LastIndexByte(a, ':')+1:]
		first[i] = serversOnPort(ports[i])
	}
	deadline := time.Now().Add(awaitTimeout)
	for {
		for i, port := range ports {
			pids := serversOnPort(port)
			if !slices.Equal(pids, first[i]) {
				return
			}
			for _, pid := range pids {
				if b, err := os.ReadFile(filepath.Join("/proc", pid, "stat")); err == nil {
					if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "T" {
						return
					}
				}
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no fault in effect on %v within %s", addrs, awaitTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
