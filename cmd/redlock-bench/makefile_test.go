package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// makeBench runs `make bench` of this repository with its results under a
// temporary directory, and returns its exit status and output.
func makeBench(t *testing.T, vars ...string) (int, string) {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", append([]string{"-s", "--no-print-directory", "bench", "RUNS=" + t.TempDir()}, vars...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	return exitStatus(err), string(out)
}

// make bench shows each run's line: p50, p99, the errors by kind, the
// violations, DEGRADED or UNSAFE. A degraded run is listed at the end
// (failing the target only with BENCH_STRICT=1); an unsafe one fails it.
// Before, it printed throughput and safety only, and exited 0 on a run
// with 24 no-quorum errors without a word.
func TestMakeBenchShowsEachRun(t *testing.T) {
	line := regexp.MustCompile(`(?m)^   [a-z]+: [0-9]+\.[0-9] acquisitions/s, p50=[0-9.]+ ms p99=[0-9.]+ ms, [0-9]+ errors`)
	// Three of five masters stalled for 300ms: no quorum for a while.
	stalled := "BENCH_FLAGS=--workers 4 --warmup 0 --fault stall:0@300ms+300ms,stall:1@300ms+300ms,stall:2@300ms+300ms"
	code, out := makeBench(t, "BENCH_DURATION=1s", stalled)
	if code != 0 || len(line.FindAllString(out, -1)) != 3 ||
		!regexp.MustCompile(`(?m)^   redlock: .*, [0-9]+ errors \((no_quorum|timeout) [0-9]+.*: DEGRADED(, CPU-saturated: .*)?$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^DEGRADED: uncontended.*: errors or leases lost`).MatchString(out) {
		t.Errorf("a degraded run: exit %d, want 0, three lines and the degraded named:\n%s", code, out)
	}
	if code, out := makeBench(t, "BENCH_DURATION=1s", stalled, "BENCH_STRICT=1"); code == 0 || !strings.Contains(out, "BENCH_STRICT is set") {
		t.Errorf("a degraded run with BENCH_STRICT=1: exit %d, want a failure:\n%s", code, out)
	}
	// The control engine grants every request: hot keys overlap.
	code, out = makeBench(t, "BENCH_DURATION=300ms", "BENCH_FLAGS=--engine nolock --workers 4 --warmup 0")
	if code == 0 || !regexp.MustCompile(`(?m)^   nolock: .* VIOLATIONS: UNSAFE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^FAILED:.* hotkeys`).MatchString(out) {
		t.Errorf("an unsafe run: exit %d, want a failure naming it:\n%s", code, out)
	}
}
