// Command modcheck checks the repository's modules as the module proxy
// will serve them once the release tags exist, without publishing anything.
//
// The modules listed in go.work require one another at the version the
// next (or last) release tags create, e.g. v0.1.0, and carry no replace
// directives, so that `go install .../cmd/redlock@v0.1.0` works. Those
// versions need not exist yet: modcheck zips each module from the tree,
// the way the go command zips a tagged subdirectory, into a file-based
// module proxy, and runs the go command with that proxy first, the module
// cache's downloads second and the configured GOPROXY last, in a new module
// cache of its own, so that the made-up versions never reach the real one.
//
// Usage:
//
//	modcheck [-go GO] [-rev REV] check     each module tidy and vetted on its own go.mod
//	modcheck [-go GO] tidy                 rewrite each module's go.mod and go.sum tidy
//	modcheck [-go GO] [-rev REV] install   go install both commands @version, run --version
//	modcheck [-go GO] [-rev REV] proxy DIR write the proxy to DIR, for trying by hand
//	modcheck [-go GO] require VERSION      require every in-repo module at VERSION
//
// Without -rev, the tree is the working tree as `git add -A` would commit
// it; with -rev, that commit. go.sum files carry no lines for the
// repository's own modules: the made-up versions' hashes change with
// every commit, and the go.work builds never read them.
//
// modcheck lives in the tools module (internal/tools), outside go.work, so
// that neither its dependencies nor staticcheck's reach the library.
package main

import (
	"archive/zip"
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

const usage = `usage: modcheck [-go GO] [-rev REV] check | tidy | install | proxy DIR | require VERSION

  check            each module of go.work is tidy and passes go vet on its own go.mod
  tidy             rewrite each module's go.mod and go.sum as go mod tidy would
  install          go install cmd/redlock and cmd/redlock-bench at the required
                   version into a temporary GOBIN and run each with --version
  proxy DIR        write the file-based module proxy to DIR and print its settings
  require VERSION  require every in-repo module at VERSION (go.mod files and go.work)
`

// options are the flags.
type options struct {
	goCmd string // the go command
	rev   string // a git revision, or "" for the working tree
	dir   string // a directory in the repository
	// commands are the cmd module's commands that install checks, and
	// lean those of them that must build from the library module and the
	// cmd module alone, without the tool modules' code.
	commands, lean []string
}

func main() {
	o := options{dir: "."}
	flag.StringVar(&o.goCmd, "go", "go", "the go command to run")
	flag.StringVar(&o.rev, "rev", "", "check this git revision instead of the working tree")
	commands := flag.String("commands", "redlock,redlock-bench", "install: the commands of the cmd module to install")
	lean := flag.String("lean", "redlock", "install: the commands that must build from the library and cmd modules alone")
	flag.Usage = func() { fmt.Fprint(os.Stderr, usage); flag.PrintDefaults() }
	flag.Parse()
	o.commands, o.lean = strings.Split(*commands, ","), strings.Split(*lean, ",")
	if err := run(o, flag.Args(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "modcheck:", err)
		os.Exit(1)
	}
}

func run(o options, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("no subcommand (want check, tidy, install, proxy DIR or require VERSION)")
	}
	goCmd, rev := o.goCmd, o.rev
	root, err := gitOutput(o.dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("not in a git work tree: %v", err)
	}
	root = strings.TrimSpace(root)
	switch args[0] {
	case "require":
		if len(args) != 2 {
			return errors.New("require wants one VERSION, e.g. require v0.2.0")
		}
		return requireVersion(goCmd, root, args[1], out)
	case "tidy":
		if rev != "" {
			return errors.New("tidy rewrites the working tree; drop -rev")
		}
	case "check", "install":
	case "proxy":
		if len(args) != 2 {
			return errors.New("proxy wants one DIR")
		}
	default:
		return fmt.Errorf("unknown subcommand %q (want check, tidy, install, proxy or require)", args[0])
	}

	tmp, err := os.MkdirTemp("", "modcheck-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tree, err := readTree(root, rev, tmp)
	if err != nil {
		return err
	}
	repo, err := loadRepo(tree)
	if err != nil {
		return err
	}
	proxyDir := filepath.Join(tmp, "proxy")
	if args[0] == "proxy" {
		proxyDir, err = filepath.Abs(args[1])
		if err != nil {
			return err
		}
	}
	if err := writeProxy(proxyDir, tree, repo); err != nil {
		return err
	}
	// A module cache of its own: the user's must never hold the made-up
	// versions, and one kept between runs would hold stale ones. proxy's
	// is beside the proxy, which outlives this run; no module path starts
	// with "modcache", which has no dot.
	modCache := filepath.Join(tmp, "mod")
	if args[0] == "proxy" {
		modCache = filepath.Join(proxyDir, "modcache")
	}
	env, err := goEnv(goCmd, proxyDir, modCache, repo)
	if err != nil {
		return err
	}
	switch args[0] {
	case "proxy":
		fmt.Fprintf(out, "# %s: the in-repo modules at %s; use it with\n", proxyDir, repo.version)
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			fmt.Fprintf(out, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
		}
		return nil
	case "check":
		return check(goCmd, root, env, tmp, tree, repo, false, out)
	case "tidy":
		return check(goCmd, root, env, tmp, tree, repo, true, out)
	default:
		return install(o, env, tmp, repo, out)
	}
}

// A repoModule is one module of go.work.
type repoModule struct {
	dir   string // slash path relative to the repository root; "." for the root
	path  string // module path
	gomod []byte
	file  *modfile.File
}

// tag is the git tag that publishes the module at version v.
func (m repoModule) tag(v string) string {
	if m.dir == "." {
		return v
	}
	return m.dir + "/" + v
}

// repo is what go.work and the modules' go.mod files say.
type repo struct {
	modules []repoModule
	version string // the one version every in-repo require names
}

// prefix is the longest module path prefix, by elements, that the in-repo
// modules share.
func (r *repo) prefix() string {
	p := strings.Split(r.modules[0].path, "/")
	for _, m := range r.modules[1:] {
		q := strings.Split(m.path, "/")
		n := 0
		for n < len(p) && n < len(q) && p[n] == q[n] {
			n++
		}
		p = p[:n]
	}
	return strings.Join(p, "/")
}

func (r *repo) isOwn(modPath string) bool {
	return slices.ContainsFunc(r.modules, func(m repoModule) bool { return m.path == modPath })
}

// loadRepo reads go.work and each module's go.mod from the tree and checks
// what the release depends on: no replace or exclude directives (go install
// pkg@version refuses them, and consumers ignore them), one version for
// every in-repo require, and go.work replacing exactly those versions by
// the directories, since a workspace still reads the go.mod of every
// version in the module graph.
func loadRepo(tree *tree) (*repo, error) {
	workData, ok := tree.data("go.work")
	if !ok {
		return nil, errors.New("no go.work at the repository root: it lists the modules to check")
	}
	work, err := modfile.ParseWork("go.work", workData, nil)
	if err != nil {
		return nil, err
	}
	r := &repo{}
	var problems []string
	for _, u := range work.Use {
		dir := path.Clean(strings.TrimPrefix(filepath.ToSlash(u.Path), "./"))
		name := path.Join(dir, "go.mod")
		data, ok := tree.data(name)
		if !ok {
			return nil, fmt.Errorf("go.work uses %s, but %s is not in the tree", u.Path, name)
		}
		f, err := modfile.Parse(name, data, nil)
		if err != nil {
			return nil, err
		}
		if f.Module == nil {
			return nil, fmt.Errorf("%s has no module line", name)
		}
		if len(f.Replace) > 0 || len(f.Exclude) > 0 {
			problems = append(problems, fmt.Sprintf("%s has replace or exclude directives: go install refuses them; tie modules together in go.work instead", name))
		}
		r.modules = append(r.modules, repoModule{dir: dir, path: f.Module.Mod.Path, gomod: data, file: f})
	}
	required := map[string][]string{} // version -> "go.mod: module"
	for _, m := range r.modules {
		for _, req := range m.file.Require {
			if r.isOwn(req.Mod.Path) {
				required[req.Mod.Version] = append(required[req.Mod.Version], path.Join(m.dir, "go.mod")+" requires "+req.Mod.Path)
			}
		}
	}
	switch len(required) {
	case 0:
		return nil, errors.New("no module requires another in-repo module, so there is no release version to check")
	case 1:
		for v := range required {
			r.version = v
		}
	default:
		for v, who := range required {
			problems = append(problems, fmt.Sprintf("%s at %s", strings.Join(who, ", "), v))
		}
		problems = append(problems, "the in-repo modules are released together: require them all at one version (make release-requires VERSION=...)")
	}
	if r.version != "" && !semver.IsValid(r.version) {
		problems = append(problems, fmt.Sprintf("in-repo modules are required at %s, which is no release version", r.version))
	}
	if r.version != "" {
		for _, m := range r.modules {
			want := "./" + m.dir
			if m.dir == "." {
				want = "./"
			}
			found := false
			for _, rep := range work.Replace {
				if rep.Old.Path == m.path && rep.Old.Version == r.version && path.Clean(rep.New.Path) == path.Clean(want) {
					found = true
				}
			}
			if !found && m.requiredBy(r) {
				problems = append(problems, fmt.Sprintf("go.work lacks 'replace %s %s => %s': the workspace cannot resolve an unpublished version without it", m.path, r.version, want))
			}
		}
		for _, rep := range work.Replace {
			if r.isOwn(rep.Old.Path) && rep.Old.Version != r.version {
				problems = append(problems, fmt.Sprintf("go.work replaces %s at %q, but the modules require %s", rep.Old.Path, rep.Old.Version, r.version))
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n  "))
	}
	return r, nil
}

// requiredBy reports whether another module of r requires m.
func (m repoModule) requiredBy(r *repo) bool {
	for _, o := range r.modules {
		for _, req := range o.file.Require {
			if req.Mod.Path == m.path {
				return true
			}
		}
	}
	return false
}

// tree is the repository's content: the working tree as `git add -A` would
// commit it, or one revision, read through git archive as the go command
// reads a tagged module.
type tree struct {
	files map[string]*zip.File
	time  time.Time
}

func (t *tree) data(name string) ([]byte, bool) {
	f, ok := t.files[name]
	if !ok {
		return nil, false
	}
	rc, err := f.Open()
	if err != nil {
		return nil, false
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return b, err == nil
}

func readTree(root, rev, tmp string) (*tree, error) {
	treeish, when := rev, time.Now().UTC().Truncate(time.Second)
	if rev == "" {
		// A copy of the index, so that staging everything leaves the real
		// one alone; write-tree stores the blobs, as git stash does.
		index, err := gitOutput(root, nil, "rev-parse", "--path-format=absolute", "--git-path", "index")
		if err != nil {
			return nil, err
		}
		index = strings.TrimSpace(index)
		tmpIndex := filepath.Join(tmp, "index")
		if err := copyIndex(index, tmpIndex); err != nil {
			return nil, err
		}
		env := []string{"GIT_INDEX_FILE=" + tmpIndex}
		if _, err := gitOutput(root, env, "add", "-A"); err != nil {
			return nil, err
		}
		out, err := gitOutput(root, env, "write-tree")
		if err != nil {
			return nil, err
		}
		treeish = strings.TrimSpace(out)
	} else {
		out, err := gitOutput(root, nil, "log", "-1", "--format=%cI", rev)
		if err != nil {
			return nil, fmt.Errorf("revision %q: %v", rev, err)
		}
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(out)); err == nil {
			when = t.UTC()
		}
	}
	// The go command's own flags for git archive (codehost/git.go).
	out, err := gitOutput(root, nil, "-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=zip", treeish)
	if err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(strings.NewReader(out), int64(len(out)))
	if err != nil {
		return nil, fmt.Errorf("reading git archive: %v", err)
	}
	t := &tree{files: map[string]*zip.File{}, time: when}
	for _, f := range zr.File {
		if !strings.HasSuffix(f.Name, "/") {
			t.files[f.Name] = f
		}
	}
	return t, nil
}

// copyIndex copies the git index at from, if there is one, to to, keeping
// its mtime: git trusts an entry's stat (to the second, in some builds)
// only if the index was written after the file, so a copy written now
// would hide a same-size rewrite made in the second the index was, as
// require's rewrites of a just-committed tree are.
func copyIndex(from, to string) error {
	f, err := os.Open(from)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	// The open file's stat: git replaces the index by renaming a new one
	// over it, so these are the bytes this mtime belongs to.
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		return err
	}
	return os.Chtimes(to, fi.ModTime(), fi.ModTime())
}

// extract writes the tree's files under dir.
func (t *tree) extract(dir string) error {
	for name, f := range t.files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		if f.Mode()&fs.ModeSymlink != 0 {
			err = os.Symlink(string(data), p)
		} else {
			err = os.WriteFile(p, data, f.Mode().Perm()|0o200)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// treeFile is one file of a module zip.
type treeFile struct {
	name string
	f    *zip.File
}

func (f treeFile) Path() string                 { return f.name }
func (f treeFile) Lstat() (fs.FileInfo, error)  { return f.f.FileInfo(), nil }
func (f treeFile) Open() (io.ReadCloser, error) { return f.f.Open() }

// writeProxy lays out dir as a GOPROXY serving every module of r at
// r.version (see 'go help goproxy').
func writeProxy(dir string, t *tree, r *repo) error {
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{r.version, t.time})
	for _, m := range r.modules {
		var files []modzip.File
		haveLicense := false
		prefix := m.dir + "/"
		if m.dir == "." {
			prefix = ""
		}
		for name, f := range t.files {
			if rel, ok := strings.CutPrefix(name, prefix); ok {
				files = append(files, treeFile{rel, f})
				haveLicense = haveLicense || rel == "LICENSE"
			}
		}
		// The go command adds the repository's LICENSE to a module in a
		// subdirectory that has none of its own (modfetch/coderepo.go).
		if lic, ok := t.files["LICENSE"]; ok && !haveLicense {
			files = append(files, treeFile{"LICENSE", lic})
		}
		escaped, err := module.EscapePath(m.path)
		if err != nil {
			return err
		}
		vdir := filepath.Join(dir, filepath.FromSlash(escaped), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		var z bytes.Buffer
		if err := modzip.Create(&z, module.Version{Path: m.path, Version: r.version}, files); err != nil {
			return fmt.Errorf("zipping %s: %v", m.path, err)
		}
		for name, data := range map[string][]byte{
			"list":              []byte(r.version + "\n"),
			r.version + ".info": info,
			r.version + ".mod":  m.gomod,
			r.version + ".zip":  z.Bytes(),
		} {
			if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// goEnv is the environment that resolves the in-repo modules from the
// proxy at proxyDir: outside any workspace, in a private module cache, the
// rest from the module cache's downloads or else the configured proxy,
// and no checksum database for the made-up versions.
func goEnv(goCmd, proxyDir, modCache string, r *repo) ([]string, error) {
	out, err := exec.Command(goCmd, "env", "-json", "GOPROXY", "GOMODCACHE", "GONOSUMDB", "GOFLAGS").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %v", err)
	}
	var e map[string]string
	if err := json.Unmarshal(out, &e); err != nil {
		return nil, err
	}
	proxies := []string{"file://" + filepath.ToSlash(proxyDir)}
	if e["GOMODCACHE"] != "" {
		proxies = append(proxies, "file://"+filepath.ToSlash(filepath.Join(e["GOMODCACHE"], "cache", "download")))
	}
	if e["GOPROXY"] != "" {
		proxies = append(proxies, e["GOPROXY"])
	}
	nosum := r.prefix()
	if e["GONOSUMDB"] != "" {
		nosum = e["GONOSUMDB"] + "," + nosum
	}
	return []string{
		"GOWORK=off",
		"GOPROXY=" + strings.Join(proxies, ","),
		"GOMODCACHE=" + modCache,
		"GONOSUMDB=" + nosum,
		// -trimpath keys the build cache by module@version rather than by
		// directory, so that a second run in new temporary directories
		// compiles only what changed; -modcacherw lets them be removed.
		"GOFLAGS=" + strings.TrimSpace(e["GOFLAGS"]+" -mod=mod -modcacherw -trimpath"),
	}, nil
}

// check runs go mod tidy on a copy of each module's go.mod and go.sum and
// compares, then go vet, in a copy of the tree; with write, it copies the
// tidy files back to the working tree instead.
func check(goCmd, root string, env []string, tmp string, t *tree, r *repo, write bool, out io.Writer) error {
	src := filepath.Join(tmp, "src")
	if err := t.extract(src); err != nil {
		return err
	}
	var failed []string
	for i, m := range r.modules {
		start := time.Now()
		dir := filepath.Join(src, filepath.FromSlash(m.dir))
		work := filepath.Join(tmp, fmt.Sprintf("mod%d", i))
		if err := os.MkdirAll(work, 0o755); err != nil {
			return err
		}
		modFile := filepath.Join(work, "go.mod")
		sumFile := filepath.Join(work, "go.sum")
		if err := os.WriteFile(modFile, m.gomod, 0o644); err != nil {
			return err
		}
		haveSum, _ := os.ReadFile(filepath.Join(dir, "go.sum"))
		if err := os.WriteFile(sumFile, haveSum, 0o644); err != nil {
			return err
		}
		if o, err := goRun(goCmd, dir, env, "mod", "tidy", "-modfile="+modFile); err != nil {
			failed = append(failed, fmt.Sprintf("%s: go mod tidy: %v\n%s", m.dir, err, o))
			continue
		}
		tidyMod, _ := os.ReadFile(modFile)
		tidySum, _ := os.ReadFile(sumFile)
		tidySum = dropOwnSums(tidySum, r)
		if write {
			wdir := filepath.Join(root, filepath.FromSlash(m.dir))
			if err := writeIfChanged(filepath.Join(wdir, "go.mod"), m.gomod, tidyMod); err != nil {
				return err
			}
			if len(tidySum) > 0 || len(haveSum) > 0 {
				if err := writeIfChanged(filepath.Join(wdir, "go.sum"), haveSum, tidySum); err != nil {
					return err
				}
			}
			fmt.Fprintf(out, "%-20s tidy (%.1fs)\n", m.dir, time.Since(start).Seconds())
			continue
		}
		var problems []string
		if d := lineDiff(m.gomod, tidyMod); d != "" {
			problems = append(problems, "go.mod is not tidy:\n"+d)
		}
		if d := lineDiff(haveSum, tidySum); d != "" {
			problems = append(problems, "go.sum is not tidy (it carries no lines for in-repo modules):\n"+d)
		}
		if o, err := goRun(goCmd, dir, env, "vet", "-modfile="+modFile, "./..."); err != nil {
			problems = append(problems, fmt.Sprintf("go vet on its own go.mod: %v\n%s", err, o))
		}
		if len(problems) > 0 {
			failed = append(failed, m.dir+": "+strings.Join(problems, "\n"))
			continue
		}
		fmt.Fprintf(out, "%-20s tidy, vet ok on its own go.mod (%.1fs)\n", m.dir, time.Since(start).Seconds())
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s\nrun 'make tidy' to make go.mod and go.sum tidy", strings.Join(failed, "\n"))
	}
	return nil
}

func writeIfChanged(name string, old, data []byte) error {
	if bytes.Equal(old, data) {
		return nil
	}
	return os.WriteFile(name, data, 0o644)
}

// dropOwnSums removes the go.sum lines of in-repo modules.
func dropOwnSums(sum []byte, r *repo) []byte {
	var b bytes.Buffer
	for line := range strings.Lines(string(sum)) {
		if f := strings.Fields(line); len(f) > 0 && r.isOwn(f[0]) {
			continue
		}
		b.WriteString(line)
	}
	return b.Bytes()
}

// lineDiff lists the lines only in have (-) and only in want (+), or
// says that only their order or spacing differs; "" when equal.
func lineDiff(have, want []byte) string {
	if bytes.Equal(have, want) {
		return ""
	}
	count := map[string]int{}
	for l := range strings.Lines(string(have)) {
		count[strings.TrimRight(l, "\n")]++
	}
	for l := range strings.Lines(string(want)) {
		count[strings.TrimRight(l, "\n")]--
	}
	var b strings.Builder
	for l := range strings.Lines(string(have)) {
		if l = strings.TrimRight(l, "\n"); count[l] > 0 {
			count[l]--
			fmt.Fprintf(&b, "\t- %s\n", l)
		}
	}
	for l := range strings.Lines(string(want)) {
		if l = strings.TrimRight(l, "\n"); count[l] < 0 {
			count[l]++
			fmt.Fprintf(&b, "\t+ %s\n", l)
		}
	}
	if b.Len() == 0 {
		return "\tsame lines, in another order or spacing\n"
	}
	return b.String()
}

// install runs what a user runs, go install of both commands at the
// version the tags would create, from an empty directory outside the
// repository, and checks that cmd/redlock needs no tool module's code and
// that each binary's --version names the version.
func install(o options, env []string, tmp string, r *repo, out io.Writer) error {
	var cmdMod, libMod *repoModule
	for i, m := range r.modules {
		switch m.dir {
		case "cmd":
			cmdMod = &r.modules[i]
		case ".":
			libMod = &r.modules[i]
		}
	}
	if cmdMod == nil || libMod == nil {
		return errors.New("go.work uses no cmd module or no root module")
	}
	gobin := filepath.Join(tmp, "bin")
	work := filepath.Join(tmp, "outside")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	env = append(env, "GOBIN="+gobin)
	for _, name := range o.commands {
		start := time.Now()
		pkg := cmdMod.path + "/" + name + "@" + r.version
		if o, err := goRun(o.goCmd, work, env, "install", pkg); err != nil {
			return fmt.Errorf("go install %s: %v\n%s", pkg, err, o)
		}
		bi, err := buildinfo.ReadFile(filepath.Join(gobin, name))
		if err != nil {
			return err
		}
		var deps []string
		for _, d := range bi.Deps {
			deps = append(deps, d.Path+"@"+d.Version)
			if slices.Contains(o.lean, name) && r.isOwn(d.Path) && d.Path != libMod.path {
				return fmt.Errorf("%s built from %s: it must build from the library and the cmd module alone", name, d.Path)
			}
		}
		fmt.Fprintf(out, "go install %s (%.1fs): %d modules built in", pkg, time.Since(start).Seconds(), len(deps))
		if slices.Contains(o.lean, name) {
			fmt.Fprintf(out, ": %s", strings.Join(deps, " "))
		}
		fmt.Fprintln(out)
		version, err := exec.Command(filepath.Join(gobin, name), "--version").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s --version: %v\n%s", name, err, version)
		}
		line := strings.TrimSpace(string(version))
		if !strings.HasPrefix(line, name+" "+r.version+" ") {
			return fmt.Errorf("%s --version printed %q, want it to start with %q", name, line, name+" "+r.version+" ")
		}
		fmt.Fprintf(out, "%s --version: %s\n", name, line)
	}
	var tags []string
	for _, m := range r.modules {
		tags = append(tags, m.tag(r.version))
	}
	fmt.Fprintf(out, "the release tags for %s: %s\n", r.version, strings.Join(tags, " "))
	return nil
}

// requireVersion points every in-repo require, and go.work's replaces,
// at version v.
func requireVersion(goCmd, root, v string, out io.Writer) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v {
		return fmt.Errorf("%q is no canonical semantic version (e.g. v0.2.0)", v)
	}
	workData, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return err
	}
	work, err := modfile.ParseWork("go.work", workData, nil)
	if err != nil {
		return err
	}
	var mods []*modfile.File
	dirs := map[string]string{} // module path -> directory, as go.work says
	for _, u := range work.Use {
		name := filepath.Join(root, u.Path, "go.mod")
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		f, err := modfile.Parse(name, data, nil)
		if err != nil {
			return err
		}
		if f.Module == nil {
			return fmt.Errorf("%s has no module line", name)
		}
		mods = append(mods, f)
		dirs[f.Module.Mod.Path] = u.Path
	}
	required := map[string]bool{}
	for _, f := range mods {
		var edits []string
		for _, req := range f.Require {
			if _, own := dirs[req.Mod.Path]; own {
				required[req.Mod.Path] = true
				if req.Mod.Version != v {
					edits = append(edits, "-require="+req.Mod.Path+"@"+v)
				}
			}
		}
		if len(edits) == 0 {
			continue
		}
		dir := dirs[f.Module.Mod.Path]
		if o, err := goRun(goCmd, filepath.Join(root, dir), []string{"GOWORK=off"}, append([]string{"mod", "edit"}, edits...)...); err != nil {
			return fmt.Errorf("go mod edit in %s: %v\n%s", dir, err, o)
		}
		fmt.Fprintf(out, "%s: %s\n", filepath.Join(dir, "go.mod"), strings.Join(edits, " "))
	}
	// go.work is edited in place, keeping its layout: go work edit would
	// drop the replace block and add a line for each.
	replaced := map[string]bool{}
	for _, rep := range work.Replace {
		if _, own := dirs[rep.Old.Path]; !own || !required[rep.Old.Path] {
			continue
		}
		replaced[rep.Old.Path] = true
		if i := slices.Index(rep.Syntax.Token, rep.Old.Version); rep.Old.Version != "" && i >= 0 {
			rep.Syntax.Token[i] = v
		} else {
			return fmt.Errorf("go.work replaces %s at all versions: replace %s %s => %s instead", rep.Old.Path, rep.Old.Path, v, rep.New.Path)
		}
	}
	var missing []string
	for p := range required {
		if !replaced[p] {
			missing = append(missing, p)
		}
	}
	slices.Sort(missing)
	for _, p := range missing {
		dir := dirs[p]
		if dir == "." {
			dir = "./"
		}
		if err := work.AddReplace(p, v, dir, ""); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "go.work"), modfile.Format(work.Syntax), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "go.work: replaces the in-repo modules at %s by their directories\n", v)
	return nil
}

func goRun(goCmd, dir string, env []string, args ...string) (string, error) {
	c := exec.Command(goCmd, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	o, err := c.CombinedOutput()
	return string(o), err
}

func gitOutput(dir string, env []string, args ...string) (string, error) {
	c := exec.Command("git", args...)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	o, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(o), nil
}
