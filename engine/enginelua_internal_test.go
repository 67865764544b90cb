package engine

import (
	"testing"

	"github.com/redlock-bench/redlock/internal/enginelua"
)

// The bench's ceiling loads enginelua.Release on the masters as the cost
// of every release: it must be the script a Release sends.
func TestEngineluaHoldsTheReleaseScript(t *testing.T) {
	if enginelua.Release == "" || enginelua.Release != releaseScript.Body {
		t.Fatalf("enginelua.Release is not the release script:\n%q", enginelua.Release)
	}
}
