package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every size a flag sets is bounded before anything starts, with a message
// that names the flag and the limit. Before, `run --workers 100000000`
// started the masters, then ran out of memory, leaving a run directory and
// the masters' temporary directory; `--workers 1000000` took 7.7 GB.
func TestEverySizeIsBounded(t *testing.T) {
	long := strings.Repeat("k", 65)
	faults := strings.TrimSuffix(strings.Repeat("stall:0@1s+1s,", 101), ",")
	for _, c := range []struct {
		args []string
		want string // the whole message, after "redlock-bench: "
	}{
		{[]string{"run", "--workers", "100000000"}, "--workers: must be at most 100000 (each worker costs about 12 KiB and a goroutine: 100000 take about 1.2 GiB), got 100000000"},
		{[]string{"run", "--workers", "200000", "--clients", "300"}, "--workers: must be at most 100000 (each worker costs about 12 KiB and a goroutine: 100000 take about 1.2 GiB), got 200000"},
		{[]string{"run", "--workers", "1000", "--clients", "300"}, "--clients: must be at most 256 (each client is an engine with its own connections to every master, about 2.2 MiB), got 300"},
		{[]string{"run", "--resources", "5000001"}, "--resources: must be at most 5000000 (each resource costs about 130 bytes of names and oracle state: 5000000 take about 650 MiB), got 5000001"},
		{[]string{"run", "--rate", "1e8"}, "--rate: must be at most 10000000 acquisitions/s (ten times what the fastest engine does here), got 1e+08"},
		{[]string{"run", "--ops", "2000000000"}, "--ops: must be at most 1000000000, got 2000000000"},
		{[]string{"run", "--duration", "25h"}, "--duration: must be at most 24h0m0s, got 25h0m0s"},
		{[]string{"run", "--warmup", "25h"}, "--warmup: must be at most 24h0m0s, got 25h0m0s"},
		{[]string{"run", "--ttl", "25h"}, "--ttl: must be at most 24h0m0s, got 25h0m0s"},
		{[]string{"run", "--mode", "wait", "--wait-timeout", "25h"}, "--wait-timeout: must be at most 24h0m0s, got 25h0m0s"},
		{[]string{"run", "--hold", "25h"}, "--hold: must be at most 24h0m0s, got 25h"},
		{[]string{"run", "--hold", "exp:25h"}, "--hold: exp mean must be at most 24h0m0s, got exp:25h"},
		{[]string{"run", "--hold", "uniform:1ms-25h"}, "--hold: uniform bounds must be at most 24h0m0s, got uniform:1ms-25h"},
		{[]string{"run", "--key-prefix", long}, "--key-prefix: must be at most 64 bytes, got 65"},
		{[]string{"run", "--start-at", time.Now().Add(25 * time.Hour).UTC().Format(time.RFC3339)}, "--start-at: must be at most 24h0m0s ahead"},
		{[]string{"run", "--engine", "redsync-rueidis", "--local-masters", "64"}, "--local-masters: must be at most 63, got 64"},
		{[]string{"run", "--engine", "redsync-rueidis", "--masters", manyMasters()}, "--masters: must name at most 63 masters, got 64"},
		{[]string{"run", "--fault", faults}, "--fault: must have at most 100 items, got 101"},
		{[]string{"sweep", "--workers", "1:100000000:x10"}, "step 7 (1000000 workers): --workers: must be at most 100000 "},
		{[]string{"sweep", "--rate", "1000,1e8"}, "step 2 (100000000/s offered): --rate: must be at most 10000000 acquisitions/s"},
		{[]string{"sweep", "--workers", "1:1000:+1"}, "--workers: more than 100 values; use a larger step"},
		{[]string{"compare", "--rounds", "101"}, "--rounds: must be at most 100, got 101"},
		{[]string{"compare", "--limit", "--limit-requests", "20000000"}, "--limit-requests: must be at most 10000000, got 20000000"},
		{[]string{"compare", "--workers", "100001"}, "--workers: must be at most 100000"},
		{[]string{"chaos", "--duration", "25h"}, "--duration: must be in 1ns..24h0m0s, got 25h0m0s"},
		{[]string{"chaos", "--jump", "25h"}, "--jump: must be in 1ns..24h0m0s, got 25h0m0s"},
		{[]string{"chaos", "--masters", manyMasters()}, "--masters: must name at most 63 masters, got 64"},
		{[]string{"run", "--lock", "semaphore:1024", "--resources", "10000"}, "--lock: --resources × --clients × (P+4) must be at most 8000000"},
		{[]string{"chaos", "--lock", "semaphore:1024", "--resources", "1000", "--clients", "64"}, "--lock: --resources × --clients × (P+4) must be at most 8000000"},
	} {
		t.Chdir(t.TempDir())
		var stdout, stderr bytes.Buffer
		code := runRefused(c.args, &stdout, &stderr)
		// One line, the refusal: a command that started anything would
		// have said so on stderr ("started 5 local redis-server: ...").
		if code != 2 || !strings.HasPrefix(stderr.String(), "redlock-bench: ") || !strings.Contains(stderr.String(), c.want) ||
			strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q, want 2 and %q", c.args, code, stderr.String(), c.want)
		}
		if entries, _ := os.ReadDir("."); len(entries) != 0 || stdout.Len() != 0 {
			t.Errorf("%q: must fail before anything starts: left %v, stdout %q", c.args, entries, stdout.String())
		}
	}
}

// The run of the report: the command refuses at once, and leaves neither a
// run directory nor a master's temporary directory.
func TestHugeWorkerCountStartsNothing(t *testing.T) {
	tmp := t.TempDir()
	cmd := command(t, "run", "--workers", "100000000", "--duration", "1s")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := runWithin(t, cmd)
	// One line, the refusal: no "started 5 local redis-server" before it.
	if exitStatus(err) != 2 || !strings.HasPrefix(stderr.String(), "redlock-bench: --workers: must be at most 100000 ") ||
		strings.Count(stderr.String(), "\n") != 1 || stdout.Len() != 0 {
		t.Errorf("exit %d, stderr %q, stdout %q", exitStatus(err), stderr.String(), stdout.String())
	}
	for _, dir := range []string{cmd.Dir, tmp} {
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("left %v in %s", entries, filepath.Base(dir))
		}
	}
}

// manyMasters is 64 distinct master addresses, one more than any engine
// takes.
func manyMasters() string {
	addrs := make([]string, 64)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", 7000+i)
	}
	return strings.Join(addrs, ",")
}
