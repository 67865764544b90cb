package sim

import (
	"strings"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestCheckMutualExclusion(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grants []Grant
		want   int
	}{
		{"one after the other", []Grant{
			{ID: 0, Resource: "r", Granted: ms(0), End: ms(10)},
			{ID: 1, Resource: "r", Granted: ms(10), End: ms(20)}, // meets at one instant
		}, 0},
		{"different resources", []Grant{
			{ID: 0, Resource: "a", Granted: ms(0), End: ms(10)},
			{ID: 1, Resource: "b", Granted: ms(5), End: ms(15)},
		}, 0},
		{"overlap", []Grant{
			{ID: 0, Resource: "r", Granted: ms(0), End: ms(10)},
			{ID: 1, Resource: "r", Granted: ms(9), End: ms(20)},
		}, 1},
		{"inside another, listed first", []Grant{
			{ID: 0, Resource: "r", Granted: ms(5), End: ms(6)},
			{ID: 1, Resource: "r", Granted: ms(0), End: ms(10)},
		}, 1},
		{"three at once", []Grant{
			{ID: 0, Resource: "r", Granted: ms(0), End: ms(10)},
			{ID: 1, Resource: "r", Granted: ms(1), End: ms(10)},
			{ID: 2, Resource: "r", Granted: ms(2), End: ms(10)},
		}, 3},
		{"ended before it began", []Grant{
			{ID: 0, Resource: "r", Granted: ms(0), End: ms(10)},
			{ID: 1, Resource: "r", Granted: ms(5), End: ms(5)}, // never trusted
		}, 0},
	} {
		if got := CheckMutualExclusion(tc.grants); len(got) != tc.want {
			t.Errorf("%s: %d violations, want %d: %v", tc.name, len(got), tc.want, got)
		}
	}
}

// The checker is not vacuous: with two KeyPrefixes, one resource name is
// two locks, the real engine grants it twice, and the checker must say so.
func TestCheckerCatchesDoubleGrants(t *testing.T) {
	cfg := Config{Seed: 1, Duration: 5 * time.Second, Control: SplitPrefix}
	res := runSeed(t, cfg)
	if res == nil {
		t.FailNow()
	}
	var v *Violation
	for i := range res.Violations {
		if res.Violations[i].Checker == CheckerExclusion {
			v = &res.Violations[i]
			break
		}
	}
	if v == nil {
		t.Fatalf("no violation of mutual exclusion found in %d leases granted under two KeyPrefixes", len(res.History.Grants()))
	}
	a, b := v.Leases[0], v.Leases[1]
	if a.Resource != b.Resource || a.Client%2 == b.Client%2 {
		t.Fatalf("violation %v: want the same resource held by clients with different KeyPrefixes", v)
	}
	if !strings.Contains(v.String(), "mutual exclusion") {
		t.Fatalf("violation %q does not name its checker", v)
	}
	t.Logf("%d violations; the first:\n%s", len(res.Violations), v)
}
