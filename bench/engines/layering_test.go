package engines

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The bench builds engine.Config, opens Lockers and switches over lock
// kinds and engines here only (and in sim and scenario, which drive the
// engine itself): adding a lock kind touches engines, check and sim.
// Outside them, a package may name an outcome (engines.Contended) or test
// a setting, but not build the engine's configuration nor take a case
// per lock kind or engine. It failed on run and chaos before they used
// Client.
func TestOnlyEnginesBuildsTheEngineAndSwitchesOverKinds(t *testing.T) {
	kinds := map[string]bool{}
	for _, k := range []string{"LockMutex", "LockSemaphore", "LockRW", "LockMulti", "Redlock", "RedlockPerCommand",
		"RedlockSequential", "RedlockMutex", "Nolock", "RedsyncRueidis", "RedsyncGoredis", "Rueidislock", "BsmRedislock"} {
		kinds[k] = true
	}
	allowed := map[string]bool{"engines": true, "sim": true, "scenario": true}
	files := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel("..", path); allowed[rel] || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		engineName, enginesName := "", ""
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			name := p[strings.LastIndex(p, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			switch p {
			case "github.com/redlock-bench/redlock/engine":
				engineName = name
			case "github.com/redlock-bench/redlock/bench/engines":
				enginesName = name
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && engineName != "" && id.Name == engineName &&
					(n.Sel.Name == "DefaultConfig" || n.Sel.Name == "Config" || n.Sel.Name == "New") {
					t.Errorf("%s: engine.%s outside bench/engines", path, n.Sel.Name)
				}
			case *ast.CaseClause:
				for _, e := range n.List {
					if s, ok := e.(*ast.SelectorExpr); ok {
						if id, ok := s.X.(*ast.Ident); ok && enginesName != "" && id.Name == enginesName && kinds[s.Sel.Name] {
							t.Errorf("%s: a case per lock kind or engine (engines.%s) outside bench/engines", path, s.Sel.Name)
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil || files < 10 {
		t.Fatalf("%d files read: %v", files, err)
	}
}
