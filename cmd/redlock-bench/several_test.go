package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// compare and sweep take every flag of run, as their help says: --json,
// -q and (compare) --slo too, which they refused ("unknown flag: --json").
// --json prints compare.json or sweep.json and nothing else on stdout; -q
// a line per engine or step; compare --slo checks every run of the
// comparison, as report --slo does, and exits 3 on a miss.
func TestCompareAndSweepTakeRunsOutputFlags(t *testing.T) {
	nolock := []string{"--ops", "1000", "--warmup", "0", "--check=false", "--resources", "100000"}
	cmp := func(extra ...string) []string {
		return append(append([]string{"compare", "--engines", "nolock"}, nolock...), extra...)
	}
	sweep := func(extra ...string) []string {
		return append(append([]string{"sweep", "--engine", "nolock", "--workers", "1,2"}, nolock...), extra...)
	}
	do := func(args []string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	dir := t.TempDir()

	for _, c := range []struct {
		args []string
		kind string
	}{{cmp("--json", "--out", filepath.Join(dir, "cj")), "compare"}, {sweep("--json", "--out", filepath.Join(dir, "sj")), "sweep"}} {
		code, stdout, stderr := do(c.args)
		var v map[string]any
		if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil || v["kind"] != c.kind {
			t.Errorf("%q: exit %d, kind %v, %v\nstdout: %s\nstderr: %s", c.args, code, v["kind"], err, stdout, stderr)
		}
		if !strings.Contains(stderr, "redlock-bench: results: "+filepath.Join(dir, c.kind[:1]+"j")) {
			t.Errorf("%q: stderr does not say where the results are: %s", c.args, stderr)
		}
	}

	line := `[0-9]+\.[0-9] acquisitions/s, p50=[0-9]+\.[0-9]{2} ms p99=[0-9]+\.[0-9]{2} ms`
	code, stdout, stderr := do(cmp("-q", "--out", filepath.Join(dir, "cq")))
	if want := regexp.MustCompile(`^nolock: ` + line + `.* \(median of 3 runs\)\n$`); code != 0 || !want.MatchString(stdout) {
		t.Errorf("compare -q: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	code, stdout, stderr = do(sweep("-q", "--out", filepath.Join(dir, "sq")))
	want := regexp.MustCompile(`^step 1, 1 worker: ` + line + `.*\nstep 2, 2 workers: ` + line + `.*\nknee: .+\n$`)
	if code != 0 || !want.MatchString(stdout) {
		t.Errorf("sweep -q: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}

	code, _, stderr = do(cmp("--slo", "throughput<1/s", "--slo", "p99<3600s", "--out", filepath.Join(dir, "cs")))
	if code != exitSLOMissed || !strings.Contains(stderr, "redlock-bench: SLO MISSED: "+filepath.Join(dir, "cs", "1-nolock")+": throughput<1/s missed: throughput was ") ||
		strings.Contains(stderr, "p99<3600s missed") {
		t.Errorf("compare --slo: exit %d, stderr %s", code, stderr)
	}
	if last := lastLine(stderr); last != "redlock-bench: the comparison's runs do not meet every objective (throughput<1/s, p99<3600s)" {
		t.Errorf("compare --slo: last line %q", last)
	}
}

// The output flags are checked as run checks them, before anything starts.
func TestCompareAndSweepOutputFlagsBad(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", "--json", "-q"}, "--quiet: cannot be combined with --json"},
		{[]string{"sweep", "--workers", "1,2", "--json", "--quiet"}, "--quiet: cannot be combined with --json"},
		{[]string{"compare", "--slo", "wait.p99<1ms"}, "--slo: mode try measures no wait latency (--mode wait does), got wait.p99<1ms"},
		{[]string{"compare", "--slo", "p99<5"}, `--slo: slo "p99<5": limit "5" has no unit`},
	} {
		t.Chdir(t.TempDir())
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), c.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, %q, want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}
