package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The package doc says the command reaches engines through bench and does
// not import engine or multiplex: hold it to that (run.go and metrics.go
// imported engine), and its packages under cmd/internal alike (connflags
// did, for the lock CLI's sake). cmd/redlock, the lock CLI, is the one
// command built on the engine.
func TestImportsNeitherEngineNorMultiplex(t *testing.T) {
	var files []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path == filepath.Join("..", "redlock"):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			files = append(files, path)
		}
		return nil
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("%d files: %v", len(files), err)
	}
	for _, f := range files {
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range ast.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			for _, banned := range []string{"github.com/redlock-bench/redlock/engine", "github.com/redlock-bench/redlock/multiplex"} {
				if path == banned || strings.HasPrefix(path, banned+"/") {
					t.Errorf("%s imports %s", f, path)
				}
			}
		}
	}
}
