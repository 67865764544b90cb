package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestLinkerValuesWin(t *testing.T) {
	defer func(v, r string) { Version, Revision = v, r }(Version, Revision)
	Version, Revision = "", ""
	i := Get()
	if i.Version == "" || i.GoVersion != runtime.Version() {
		t.Errorf("stamped: %+v", i)
	}
	Version, Revision = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"
	i = Get()
	if i.Version != "v1.2.3" || i.Revision != Revision || i.Modified {
		t.Errorf("-X values: %+v", i)
	}
	want := "redlock-bench v1.2.3 (revision 0123456789ab) " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	if got := i.Line("redlock-bench"); got != want {
		t.Errorf("Line: %q, want %q", got, want)
	}
	i.Modified = true
	if got := i.Line("redlock"); !strings.HasPrefix(got, "redlock v1.2.3 (revision 0123456789ab, modified) go") {
		t.Errorf("Line: %q", got)
	}
}
