package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain clears the variables by which git finds a repository, so that
// a run started from inside a git hook or another repository's tooling
// works on the test's own temporary repositories.
func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "GIT_") {
			os.Unsetenv(k)
		}
	}
	os.Exit(m.Run())
}

// fakeRepo is a repository laid out like ours, small enough to install
// offline: a library module, a tool module, and a cmd module whose hello
// uses the library only and whose big uses the tool module too.
func fakeRepo() map[string]string {
	return map[string]string{
		"LICENSE":           "the license\n",
		"go.mod":            "module example.com/lib\n\ngo 1.26.0\n",
		"lib.go":            "package lib\n\n// Hello greets.\nfunc Hello() string { return \"hello\" }\n",
		"tool/go.mod":       "module example.com/lib/tool\n\ngo 1.26.0\n\nrequire example.com/lib v0.1.0\n",
		"tool/tool.go":      "package tool\n\nimport \"example.com/lib\"\n\n// Name is the tool's.\nfunc Name() string { return lib.Hello() + \" tool\" }\n",
		"cmd/go.mod":        "module example.com/lib/cmd\n\ngo 1.26.0\n\nrequire (\n\texample.com/lib v0.1.0\n\texample.com/lib/tool v0.1.0\n)\n",
		"cmd/hello/main.go": versionMain("hello", "example.com/lib", "lib.Hello()"),
		"cmd/big/main.go":   versionMain("big", "example.com/lib/tool", "tool.Name()"),
		"go.work": "go 1.26.0\n\nuse (\n\t.\n\t./cmd\n\t./tool\n)\n\nreplace (\n" +
			"\texample.com/lib v0.1.0 => ./\n\texample.com/lib/tool v0.1.0 => ./tool\n)\n",
	}
}

// versionMain is a command that answers --version as ours do.
func versionMain(name, imp, call string) string {
	return `package main

import (
	"fmt"
	"runtime/debug"

	"` + imp + `"
)

func main() {
	bi, _ := debug.ReadBuildInfo()
	fmt.Println("` + name + ` " + bi.Main.Version + " " + ` + call + `)
}
`
}

// writeRepo writes files into a new git repository and commits them.
func writeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "init")
	return dir
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	c := exec.Command("git", args...)
	c.Dir = dir
	if o, err := c.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, o)
	}
}

func runIn(dir, rev string, args ...string) (string, error) {
	var out bytes.Buffer
	err := run(options{goCmd: "go", rev: rev, dir: dir, commands: []string{"hello", "big"}, lean: []string{"hello"}}, args, &out)
	return out.String(), err
}

func TestInstallAtRequiredVersion(t *testing.T) {
	dir := writeRepo(t, fakeRepo())
	out, err := runIn(dir, "HEAD", "install")
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	for _, want := range []string{
		"go install example.com/lib/cmd/hello@v0.1.0 (",
		"s): 1 modules built in: example.com/lib@v0.1.0\n",
		"hello --version: hello v0.1.0 hello\n",
		"big --version: big v0.1.0 hello tool\n",
		"the release tags for v0.1.0: v0.1.0 cmd/v0.1.0 tool/v0.1.0\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}
}

// TestRefused breaks one rule of the layout at a time.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(files map[string]string)
		rev     string
		command string
		want    string
	}{{
		name: "lean command needing the tool module",
		edit: func(f map[string]string) {
			f["cmd/hello/main.go"] = versionMain("hello", "example.com/lib/tool", "tool.Name()")
		},
		rev:     "HEAD",
		command: "install",
		want:    "hello built from example.com/lib/tool: it must build from the library and the cmd module alone",
	}, {
		name:    "replace in a go.mod",
		edit:    func(f map[string]string) { f["cmd/go.mod"] += "\nreplace example.com/lib => ../\n" },
		rev:     "HEAD",
		command: "install",
		want:    "cmd/go.mod has replace or exclude directives",
	}, {
		name: "two versions",
		edit: func(f map[string]string) {
			f["cmd/go.mod"] = strings.Replace(f["cmd/go.mod"], "tool v0.1.0", "tool v0.2.0", 1)
		},
		command: "check",
		want:    "released together",
	}, {
		name:    "go.work without replaces",
		edit:    func(f map[string]string) { f["go.work"] = "go 1.26.0\n\nuse (\n\t.\n\t./cmd\n\t./tool\n)\n" },
		command: "check",
		want:    "go.work lacks 'replace example.com/lib v0.1.0 => ./'",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			files := fakeRepo()
			tc.edit(files)
			dir := writeRepo(t, files)
			out, err := runIn(dir, tc.rev, tc.command)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: err = %v, want it to say %q\n%s", tc.command, err, tc.want, out)
			}
		})
	}
}

func TestCheckAndTidy(t *testing.T) {
	files := fakeRepo()
	// big imports the tool module, which cmd/go.mod does not require.
	files["cmd/go.mod"] = "module example.com/lib/cmd\n\ngo 1.26.0\n\nrequire example.com/lib v0.1.0\n"
	files["go.work"] = strings.Replace(files["go.work"], "\texample.com/lib/tool v0.1.0 => ./tool\n", "", 1)
	dir := writeRepo(t, files)
	out, err := runIn(dir, "", "check")
	if err == nil || !strings.Contains(err.Error(), "cmd: go.mod is not tidy") || !strings.Contains(err.Error(), "+ \texample.com/lib/tool v0.1.0") {
		t.Fatalf("check with a require missing: err = %v, want cmd/go.mod found untidy\n%s", err, out)
	}
	if out, err := runIn(dir, "", "tidy"); err != nil {
		t.Fatalf("tidy: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "cmd", "go.sum")); !os.IsNotExist(err) {
		t.Errorf("tidy wrote cmd/go.sum (stat: %v); it must carry no lines for in-repo modules", err)
	}
	// tidy added the require; the workspace still needs its replace.
	if _, err := runIn(dir, "", "check"); err == nil || !strings.Contains(err.Error(), "go.work lacks 'replace example.com/lib/tool v0.1.0 => ./tool'") {
		t.Fatalf("check after tidy: err = %v, want the go.work replace asked for", err)
	}
	if out, err := runIn(dir, "", "require", "v0.1.0"); err != nil {
		t.Fatalf("require: %v\n%s", err, out)
	}
	if out, err := runIn(dir, "", "check"); err != nil {
		t.Fatalf("check after tidy and require: %v\n%s", err, out)
	}
}

func TestCheckSeesWorkingTree(t *testing.T) {
	dir := writeRepo(t, fakeRepo())
	// Uncommitted, and vet finds it: a Printf verb with no argument.
	writeFiles(t, dir, map[string]string{"lib2.go": "package lib\n\nimport \"fmt\"\n\n// P prints.\nfunc P() { fmt.Printf(\"%d\\n\") }\n"})
	if _, err := runIn(dir, "", "check"); err == nil || !strings.Contains(err.Error(), "go vet on its own go.mod") {
		t.Fatalf("check of the working tree: err = %v, want vet to fail on lib2.go", err)
	}
	if out, err := runIn(dir, "HEAD", "check"); err != nil {
		t.Fatalf("check of HEAD, without lib2.go: %v\n%s", err, out)
	}
}

// TestReadTreeSeesRacyRewrite rewrites a go.mod as require does, same
// size, within the second the index recorded it in: git then trusts the
// file's stat only if the index was written in a later second, so the
// index copy readTree stages into must keep the index's mtime.
// core.trustctime=false makes the ctime second, which a test cannot set,
// not matter.
func TestReadTreeSeesRacyRewrite(t *testing.T) {
	dir := writeRepo(t, fakeRepo())
	git(t, dir, "config", "core.trustctime", "false")
	// The index records tool/go.mod at a second well before this run's,
	// so that the index copy is written in a later second.
	name := filepath.Join(dir, "tool", "go.mod")
	mtime := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(name, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "update-index", "--refresh")
	writeFiles(t, dir, map[string]string{"tool/go.mod": strings.Replace(fakeRepo()["tool/go.mod"], "v0.1.0", "v0.2.0", 1)})
	// As if rewritten, and the index written, in the same second.
	for _, p := range []string{name, filepath.Join(dir, ".git", "index")} {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := readTree(dir, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := tr.data("tool/go.mod"); !strings.Contains(string(b), "example.com/lib v0.2.0") {
		t.Fatalf("readTree of the working tree: tool/go.mod is\n%s\nwant it to require v0.2.0 as on disk", b)
	}
}

func TestRequireBumpsEveryModule(t *testing.T) {
	dir := writeRepo(t, fakeRepo())
	if out, err := runIn(dir, "", "require", "v0.2.0"); err != nil {
		t.Fatalf("require v0.2.0: %v\n%s", err, out)
	}
	for name, want := range map[string]string{
		"cmd/go.mod":  "example.com/lib/tool v0.2.0",
		"tool/go.mod": "require example.com/lib v0.2.0",
		"go.work":     "replace (\n\texample.com/lib v0.2.0 => ./\n\texample.com/lib/tool v0.2.0 => ./tool\n)\n",
	} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s after require v0.2.0 lacks %q (err %v):\n%s", name, want, err, b)
		}
	}
	out, err := runIn(dir, "", "install")
	if err != nil || !strings.Contains(out, "hello --version: hello v0.2.0 hello\n") {
		t.Fatalf("install after require v0.2.0: err = %v, want hello v0.2.0\n%s", err, out)
	}
	if _, err := runIn(dir, "", "require", "0.3"); err == nil {
		t.Error("require 0.3: no error, want it refused as no semantic version")
	}
}
