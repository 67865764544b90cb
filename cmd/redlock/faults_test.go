package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The shipped commands carry no fault points: the engine's switches that
// undo a fix (internal/mutation) are compiled in only with the tests'
// redlock_faults tag, so neither command links them.
func TestShippedCommandsLinkNoFaultPoints(t *testing.T) {
	for _, tags := range []string{"", "redlock_faults"} {
		out, err := exec.Command("go", "list", "-tags", tags, "-deps", ".", "../redlock-bench").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps: %v\n%s", err, out)
		}
		linked := strings.Contains(string(out), "/internal/mutation\n")
		if want := tags != ""; linked != want {
			t.Errorf("go list -tags %q -deps ./cmd/redlock ./cmd/redlock-bench: internal/mutation linked = %v, want %v", tags, linked, want)
		}
	}
}
