package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The package doc says the command reaches engines through bench and does
// not import engine or multiplex: hold it to that (run.go and metrics.go
// imported engine).
func TestImportsNeitherEngineNorMultiplex(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
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
