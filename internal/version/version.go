// Package version tells which build of the tools is running: the version
// and VCS revision the Go toolchain stamped into the binary, or those given
// at link time. It depends on the standard library only, so that every
// command (redlock-bench, redlock) and summary.json can share it cheaply.
//
// A release build sets them with the linker:
//
//	go build -ldflags "-X github.com/redlock-bench/redlock/internal/version.Version=v1.2.0 \
//	    -X github.com/redlock-bench/redlock/internal/version.Revision=$(git rev-parse HEAD)" ./cmd/redlock-bench
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version and Revision, when set with -ldflags -X, replace what the
// toolchain stamped.
var (
	Version  string
	Revision string
)

// Info is a build's identity.
type Info struct {
	// Version is the main module's version: a tag, a pseudo-version
	// derived from the VCS, or "(devel)" when the build had neither.
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from; empty when
	// unknown (go test, a build outside a checkout).
	Revision string `json:"revision,omitempty"`
	// Modified reports a build from a work tree with uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary, e.g. "go1.26.8".
	GoVersion string `json:"go_version"`
}

// Get reads the running binary's build information.
func Get() Info {
	i := Info{Version: "(devel)", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" {
			i.Version = v
		}
		i.GoVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if Version != "" {
		i.Version = Version
	}
	if Revision != "" {
		// A revision given at link time is a clean build of that commit.
		i.Revision, i.Modified = Revision, false
	}
	return i
}

// Line is the answer of a command's --version, one line, e.g.
// "redlock-bench v1.2.0 (revision 3f0410f1c2d3, modified) go1.26.8 linux/amd64".
func (i Info) Line(command string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", command, i.Version)
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		fmt.Fprintf(&b, " (revision %s", rev)
		if i.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " %s %s/%s", i.GoVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}
