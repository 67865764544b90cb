package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/bench/scenario"
)

func TestScenarioList(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"scenario", "list"}, &stdout, &stderr); code != 0 {
		t.Fatalf("scenario list: exit %d, %s", code, stderr.String())
	}
	out := stdout.String()
	for _, s := range scenario.List() {
		if !strings.Contains(out, "\n"+s.Name+"\n") && !strings.HasPrefix(out, s.Name+"\n") {
			t.Errorf("scenario list lacks %s", s.Name)
		}
		if exp := s.Expected(scenario.Options{}); !strings.Contains(out, "  expects "+exp+"\n") {
			t.Errorf("scenario list lacks the expectation of %s", s.Name)
		}
	}
	for _, v := range []string{"with --quarantine off: ", "with --quarantine observed: ", "with --fencing: "} {
		if !strings.Contains(out, v) {
			t.Errorf("scenario list lacks the variant %q", v)
		}
	}

	stdout.Reset()
	if code := run(context.Background(), []string{"scenario", "list", "--names"}, &stdout, &stderr); code != 0 {
		t.Fatalf("scenario list --names: exit %d", code)
	}
	if got, want := stdout.String(), strings.Join(scenarioNames(), "\n")+"\n"; got != want {
		t.Errorf("--names:\n got %q\nwant %q", got, want)
	}
}

func TestScenarioBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"scenario"}, "scenario: want one scenario name or list, got 0 arguments (see redlock-bench scenario --help)"},
		{[]string{"scenario", "meteor-strike"}, `scenario: unknown scenario "meteor-strike" (known: restart-amnesia, minority-down, majority-down, slow-node, paused-holder, partition, oom-node, failover, clock-jump, cluster-failover, sentinel-failover)`},
		{[]string{"scenario", "restart-amnesia", "--quarantine", "maybe"}, "--quarantine: must be off, observed or always, got maybe"},
		{[]string{"scenario", "restart-amnesia", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"scenario", "restart-amnesia", "--names"}, "--names: applies to scenario list only"},
		{[]string{"scenario", "restart-amnesia", "--json", "-q"}, "--quiet: cannot be combined with --json, got true"},
	} {
		var stdout, stderr bytes.Buffer
		t.Chdir(t.TempDir())
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != 2 || stderr.String() != "redlock-bench: "+c.want+"\n" {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, code, stderr.String(), c.want)
		}
		if entries, _ := os.ReadDir("."); len(entries) != 0 {
			t.Errorf("%q: bad input left files behind: %v", c.args, entries)
		}
	}
}

// The quarantine off reproduces the double grant, which is the expected
// outcome of that variant: exit 0, verdict PASS, the files written.
func TestScenarioRestartAmnesiaShort(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sc")
	cmd := command(t, "scenario", "restart-amnesia", "--short", "--quarantine", "off", "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", exitStatus(err), stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "verdict: restart-amnesia: PASS\n") {
		t.Errorf("stdout lacks the verdict:\n%s", stdout.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "scenario.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r scenario.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if !r.Passed || r.Options.Quarantine != "off" || !r.Options.Short || r.Violations == 0 {
		t.Errorf("scenario.json: passed %v options %+v violations %d", r.Passed, r.Options, r.Violations)
	}
	if _, err := os.Stat(filepath.Join(out, "scenario.txt")); err != nil {
		t.Error(err)
	}
}

// --json prints scenario.json on stdout and nothing else, as run --json
// prints summary.json; where the results are goes to stderr.
func TestScenarioJSON(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sc")
	cmd := command(t, "scenario", "restart-amnesia", "--short", "--quarantine", "off", "--out", out, "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", exitStatus(err), stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "scenario.json"))
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != string(b) {
		t.Errorf("stdout is not scenario.json:\n%s", stdout.String())
	}
	var r scenario.Result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || !r.Passed {
		t.Errorf("stdout: %v, passed %v", err, r.Passed)
	}
	if !strings.Contains(stderr.String(), "results: "+out) {
		t.Errorf("stderr does not say where the results are:\n%s", stderr.String())
	}
}

// Ctrl-C in a scenario is an interruption, not a verdict: exit 130, and
// neither stdout nor scenario.txt nor scenario.json says FAIL.
func TestScenarioInterrupt(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sc")
	cmd := command(t, "scenario", "failover", "--out", out)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "waiting") {
	}
	go io.Copy(io.Discard, stderr)
	interruptAndWait(t, cmd)
	if !strings.Contains(stdout.String(), "verdict: failover: INTERRUPTED\n") || strings.Contains(stdout.String(), "FAIL") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	txt, err := os.ReadFile(filepath.Join(out, "scenario.txt"))
	if err != nil || !strings.Contains(string(txt), "verdict    INTERRUPTED\n") {
		t.Errorf("scenario.txt (%v):\n%s", err, txt)
	}
	b, err := os.ReadFile(filepath.Join(out, "scenario.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil || r["interrupted"] != true || r["passed"] != false {
		t.Errorf("scenario.json: interrupted %v, passed %v, %v", r["interrupted"], r["passed"], err)
	}
}
