package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/redlock-bench/redlock/results"
)

// Every command answers --version, before any other flag is looked at.
func TestVersionOnEveryCommand(t *testing.T) {
	for _, args := range [][]string{
		{"--version"}, {"version"}, {"run", "--version"}, {"run", "--workers", "0", "--version"}, {"scenario", "--version"},
		{"sweep", "--version"}, {"compare", "--version"}, {"chaos", "--version"}, {"report", "--version"}, {"merge", "--version"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, &stdout, &stderr)
		if code != 0 || !strings.HasPrefix(stdout.String(), "redlock-bench ") || !strings.Contains(stdout.String(), runtime.Version()) ||
			strings.Count(stdout.String(), "\n") != 1 || stderr.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
	// After "--" it is an argument, not a flag.
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"run", "--", "--version"}, &stdout, &stderr); code != 2 {
		t.Errorf("run -- --version: exit %d, %s", code, stderr.String())
	}
}

// The output flags are checked before anything runs, for run as for
// sweep and compare, which take them too; and a bad objective is bad
// input, named.
func TestOutputFlagsBad(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--slo", "p99<5"}, `--slo: slo "p99<5": limit "5" has no unit: want METRIC OP VALUE`},
		{[]string{"run", "--slo", "p99<5ms", "--slo", "errors<1"}, `--slo: slo "errors<1": errors take a percentage such as 0.1%`},
		{[]string{"run", "--slo", "p95<5ms"}, `unknown metric "p95"`},
		{[]string{"run", "--json", "-q"}, "--quiet: cannot be combined with --json"},
		{[]string{"compare", "-q", "--json"}, "--quiet: cannot be combined with --json"},
		{[]string{"sweep", "--workers", "1,2", "-q", "--json"}, "--quiet: cannot be combined with --json"},
		{[]string{"sweep", "--workers", "1,2", "--slo", "errors<1"}, `--slo: slo "errors<1": errors take a percentage such as 0.1%`},
		{[]string{"report", "x", "--slo", "throughput>fast"}, `--slo: slo "throughput>fast": "fast" is not a plain positive number`},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), c.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, %q, want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// summarySchema compiles the checked-in schema of summary.json.
func summarySchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(results.SummarySchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const id = "https://github.com/redlock-bench/redlock/results/summary.schema.json"
	if err := c.AddResource(id, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(id)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func validate(sch *jsonschema.Schema, b []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

// A real run against real masters with --json: stdout is summary.json and
// nothing else, it validates against the checked-in schema, and the
// objectives it meets keep the status 0. Then the same run directory
// through report with objectives it meets and misses.
func TestRunJSONMatchesSchemaAndReportGates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	cmd := command(t, "run", "--local-masters", "3", "--ops", "500", "--warmup", "0", "--workers", "4", "--out", dir,
		"--json", "--slo", "p99<3600s", "--slo", "errors<=100%", "--slo", "violations<1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %d\nstderr: %s", exitStatus(err), stderr.String())
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, results.SummaryJSON))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout.Bytes(), onDisk) {
		t.Errorf("stdout is not summary.json:\n%s", stdout.String())
	}
	var s map[string]any
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	if err := dec.Decode(&s); err != nil || dec.More() {
		t.Fatalf("stdout is not one JSON document (%v):\n%s", err, stdout.String())
	}
	tool, _ := s["tool"].(map[string]any)
	if s["schema_version"] != float64(results.SummarySchemaVersion) || tool["version"] == "" || tool["go_version"] != runtime.Version() ||
		s["acquired"].(float64) == 0 {
		t.Errorf("summary: schema_version %v, tool %v, acquired %v", s["schema_version"], s["tool"], s["acquired"])
	}
	for _, want := range []string{"redlock-bench: SLO met:    p99<3600s met: acquire p99 was ", "SLO met:    errors<=100% met: error rate was ",
		"SLO met:    violations<1 met: violations was 0, bound < 1", "redlock-bench: results: " + dir} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}

	sch := summarySchema(t)
	if err := validate(sch, stdout.Bytes()); err != nil {
		t.Errorf("summary.json of a real run does not validate against results/summary.schema.json: %#v", err)
	}
	// The validator is not vacuous: a wrong type and a missing field fail.
	for _, broken := range [][]byte{
		bytes.Replace(stdout.Bytes(), []byte(`"attempts": `), []byte(`"attempts": "many", "x": `), 1),
		bytes.Replace(stdout.Bytes(), []byte(`"acquire_latency_us"`), []byte(`"acquire_latency_us_renamed"`), 1),
		bytes.Replace(stdout.Bytes(), []byte(`"schema_version": 1`), []byte(`"schema_version": 2`), 1),
	} {
		if bytes.Equal(broken, stdout.Bytes()) {
			t.Fatal("the control did not change the document")
		}
		if err := validate(sch, broken); err == nil {
			t.Errorf("a broken summary validated:\n%.300s", broken)
		}
	}

	// report --slo: met is status 0, missed is status 3 with the miss named.
	var rout, rerr bytes.Buffer
	if code := run(context.Background(), []string{"report", dir, "--out", t.TempDir(), "--slo", "p99<3600s", "--slo", "throughput>=1/s"}, &rout, &rerr); code != 0 {
		t.Errorf("report with met objectives: exit %d\n%s", code, rerr.String())
	}
	rout.Reset()
	rerr.Reset()
	code := run(context.Background(), []string{"report", dir, "--out", t.TempDir(), "--slo", "p50<1us", "--slo", "errors<=100%"}, &rout, &rerr)
	if code != exitSLOMissed {
		t.Errorf("report with a missed objective: exit %d, want %d\n%s", code, exitSLOMissed, rerr.String())
	}
	lines := strings.Split(strings.TrimSpace(rerr.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "redlock-bench: report: SLO MISSED: "+dir+": p50<1µs missed: acquire p50 was ") ||
		!strings.HasSuffix(lines[0], ", bound < 1µs") ||
		lines[1] != "redlock-bench: report: the results do not meet every objective (p50<1us, errors<=100%)" {
		t.Errorf("report stderr:\n%s", rerr.String())
	}
	if !strings.Contains(rout.String(), "report:   ") {
		t.Errorf("the report was not written before the gate:\n%s", rout.String())
	}

	// A summary in a newer format is refused by report and merge, with
	// the reason; an older one (no schema_version) is read.
	newer := filepath.Join(t.TempDir(), "newer")
	older := filepath.Join(t.TempDir(), "older")
	for d, b := range map[string][]byte{
		newer: bytes.Replace(onDisk, []byte(`"schema_version": 1,`), []byte(`"schema_version": 7,`), 1),
		older: bytes.Replace(onDisk, []byte(`"schema_version": 1,`), nil, 1),
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, results.SummaryJSON), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"report", newer}, {"merge", dir, newer, "--out", filepath.Join(t.TempDir(), "m")}} {
		rerr.Reset()
		if code := run(context.Background(), args, &rout, &rerr); code == 0 || !strings.Contains(rerr.String(), "summary.json has schema_version 7, newer than the 1 this build reads") {
			t.Errorf("%s of a newer summary: exit %d, %s", args[0], code, rerr.String())
		}
	}
	rerr.Reset()
	if code := run(context.Background(), []string{"report", older, "--out", t.TempDir()}, &rout, &rerr); code != 0 {
		t.Errorf("report of a summary without schema_version: exit %d, %s", code, rerr.String())
	}
}

// -q prints one line, as redis-benchmark -q; a missed objective is status
// 3, and each verdict says what was measured against which bound.
func TestRunQuietAndMissedObjective(t *testing.T) {
	cmd := command(t, "run", "--local-masters", "3", "--ops", "500", "--warmup", "0", "--workers", "4", "--out", "r",
		"-q", "--slo", "p50<1us", "--slo", "throughput>=1/s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if exitStatus(err) != exitSLOMissed {
		t.Fatalf("exit %d, want %d\nstderr: %s", exitStatus(err), exitSLOMissed, stderr.String())
	}
	if !regexp.MustCompile(`^redlock: [0-9]+\.[0-9] acquisitions/s, p50=[0-9]+\.[0-9]{2} ms p99=[0-9]+\.[0-9]{2} ms, [0-9]+ errors( \([a-z_ 0-9,]+\))?, 0 violations(: DEGRADED(, CPU-saturated: .*)?)?\n$`).Match(stdout.Bytes()) {
		t.Errorf("-q: stdout %q", stdout.String())
	}
	if strings.Contains(stderr.String(), "acquired/s") {
		t.Errorf("-q on a non-terminal printed progress:\n%s", stderr.String())
	}
	for _, want := range []string{
		"redlock-bench: SLO MISSED: p50<1µs missed: acquire p50 was ",
		"redlock-bench: SLO met:    throughput>=1/s met: throughput was ",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if last := lastLine(stderr.String()); last != "redlock-bench: 1 of 2 objectives missed" {
		t.Errorf("last line %q", last)
	}
}

// Safety outranks speed: a run with violations that also misses an
// objective exits 1, the violations' status, not 3.
func TestViolationsOutrankAMissedObjective(t *testing.T) {
	cmd := command(t, "run", "--engine", "nolock", "--workers", "8", "--resources", "2", "--hold", "100us",
		"--ops", "2000", "--warmup", "0", "--slo", "throughput<1/s", "--out", "r")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if exitStatus(err) != 1 || !strings.Contains(stderr.String(), "SLO MISSED: throughput<1/s") ||
		!strings.Contains(lastLine(stderr.String()), "safety violations") {
		t.Errorf("exit %d, want 1\nstderr: %s", exitStatus(err), stderr.String())
	}
}

// An objective the run cannot measure, by its configuration, is bad input,
// as k6 refuses a threshold on a metric that does not exist: refused
// before the run, not missed "for want of evidence" after it.
func TestObjectiveTheRunCannotMeasure(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--slo", "wait.p99<5ms"}, "--slo: mode try measures no wait latency (--mode wait does), got wait.p99<5ms"},
		{[]string{"--slo", "handoff.max<1s"}, "--slo: hand-offs are measured in mode wait only (--mode wait), got handoff.max<1s"},
		{[]string{"--mode", "wait", "--check=false", "--slo", "handoff.p50<1s"}, "--slo: hand-offs are measured by the safety check (--check=false turned it off), got handoff.p50<1s"},
		{[]string{"--mode", "wait", "--slo", "p99<1s", "--slo", "acquire.p99<1s"}, "--slo: mode wait measures the wait latency, not acquire (wait.p99, or p99 alone, is the acquisition latency), got acquire.p99<1s"},
		{[]string{"--check=false", "--slo", "violations<1"}, "--slo: violations are counted by the safety check (--check=false turned it off), got violations<1"},
	} {
		cmd := command(t, append([]string{"run", "--engine", "nolock", "--duration", "300ms", "--warmup", "0", "--out", "r"}, c.args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if code := exitStatus(err); code != 2 || stderr.String() != "redlock-bench: "+c.want+"\n" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
		if entries, _ := os.ReadDir(cmd.Dir); stdout.Len() != 0 || len(entries) != 0 {
			t.Errorf("%q: a refused objective left %v and stdout %q", c.args, entries, stdout.String())
		}
	}
}
