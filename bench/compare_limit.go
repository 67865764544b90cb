package bench

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/bench/masters"
	"github.com/redlock-bench/redlock/internal/enginelua"
	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/results"
)

// The ceiling (--limit) is what the masters can do at best for the two
// commands a lock cycle costs each of them: a SET to acquire and an EVALSHA
// of the release script. redis-benchmark measures each with 16-deep
// pipelines on 50 connections, on every master at the same time, as the
// masters share this machine's CPUs during a run as well. A master's
// cycles/s is 1/(1/SET + 1/EVALSHA), and the ceiling is the slowest
// master's, since every cycle runs on every master. No client library can
// beat it; how close an engine comes says how much of the masters it uses.
//
// The SET is "SET key v PX 10000" on random keys (-r): a successful
// acquire's write, with the expiry our keys carry. The EVALSHA runs the
// engine's release script on the same key space with the same value, so
// that it deletes the keys the SET test wrote and compares and returns for
// the others, as releases that lost their key do. Those keys carry no
// waiter's mark, so nothing is published: the uncontended release. Every key expires within 10s: the test leaves nothing behind.

// ceilingPipeline and ceilingClients are redis-benchmark's -P and -c.
const (
	ceilingPipeline = 16
	ceilingClients  = 50
	// ceilingKeyspace is -r: how many distinct keys the tests touch.
	ceilingKeyspace = 100000
)

// ceilingTool names the measurement in compare.txt.
const ceilingTool = "redis-benchmark -P 16 -c 50"

// releaseScript is the engine's release script: the ceiling loads it on
// the masters and measures the EVALSHA that every release costs them.
func releaseScript() string { return enginelua.Release }

func releaseScriptSHA() string {
	sum := sha1.Sum([]byte(releaseScript()))
	return hex.EncodeToString(sum[:])
}

// findRedisBenchmark finds the redis-benchmark binary, which comes with
// redis-server in Debian's redis-tools.
func findRedisBenchmark() (string, error) {
	p, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return "", &ConfigError{Flag: "limit", Value: "true",
			Reason: "needs redis-benchmark, which is not on PATH (Debian: apt-get install redis-tools)"}
	}
	return p, nil
}

// measureCeiling runs the SET test on every master at once, then the
// EVALSHA test, and returns each master's rates and the ceiling.
func measureCeiling(ctx context.Context, binary string, addrs []string, requests int, keyPrefix string) (*results.Ceiling, error) {
	sha := releaseScriptSHA()
	for _, a := range addrs {
		reply, err := redisproc.Do(ctx, a, masters.ProbeTimeout, "SCRIPT", "LOAD", releaseScript())
		if err != nil {
			return nil, fmt.Errorf("%s: SCRIPT LOAD: %w", a, err)
		}
		if reply != "$40" { // a bulk string of 40 hex digits: the SHA
			return nil, fmt.Errorf("%s: SCRIPT LOAD answered %q", a, reply)
		}
	}
	key := keyPrefix + "__rand_int__"
	set, err := benchmarkAll(ctx, binary, addrs, requests, "SET", key, "v", "PX", "10000")
	if err != nil {
		return nil, fmt.Errorf("SET: %w", err)
	}
	evalsha, err := benchmarkAll(ctx, binary, addrs, requests, "EVALSHA", sha, "1", key, "v")
	if err != nil {
		return nil, fmt.Errorf("EVALSHA: %w", err)
	}
	ms := make([]results.CeilingMaster, len(addrs))
	for i, a := range addrs {
		ms[i] = results.CeilingMaster{Addr: a, SetPerSec: set[i], EvalshaPerSec: evalsha[i]}
	}
	return results.NewCeiling(ceilingTool, requests, ms), nil
}

// benchmarkAll runs one redis-benchmark test on every master at once and
// returns the requests/s of each.
func benchmarkAll(ctx context.Context, binary string, masters []string, requests int, command ...string) ([]float64, error) {
	rates := make([]float64, len(masters))
	errs := make([]error, len(masters))
	var wg sync.WaitGroup
	for i, a := range masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rates[i], errs[i] = benchmarkOne(ctx, binary, a, requests, command)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", a, errs[i])
			}
		}()
	}
	wg.Wait()
	return rates, errors.Join(errs...)
}

// rpsLine finds the result in redis-benchmark -q output: "<test>: 95238.10
// requests per second, p50=1.671 msec" (older versions stop after
// "second").
var rpsLine = regexp.MustCompile(`([0-9]+(?:\.[0-9]+)?) requests per second`)

// ceilingTimeout bounds one test: it should take a few seconds at most.
const ceilingTimeout = 2 * time.Minute

func benchmarkOne(ctx context.Context, binary, addr string, requests int, command []string) (float64, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, ceilingTimeout)
	defer cancel()
	args := append([]string{"-h", host, "-p", port,
		"-P", strconv.Itoa(ceilingPipeline), "-c", strconv.Itoa(ceilingClients),
		"-n", strconv.Itoa(requests), "-r", strconv.Itoa(ceilingKeyspace), "-q"}, command...)
	cmd := exec.CommandContext(ctx, binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	m := rpsLine.FindAllSubmatch(stdout.Bytes(), -1)
	if runErr != nil || len(m) == 0 {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = fmt.Sprint(runErr)
		}
		return 0, fmt.Errorf("redis-benchmark %s: %s", strings.Join(args, " "), msg)
	}
	return strconv.ParseFloat(string(m[len(m)-1][1]), 64)
}
