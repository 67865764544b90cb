package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/redlock-bench/redlock/results"
)

// The checked-in schema is what the Go types generate today: a field added
// to Summary (or a comment changed) without regenerating fails here.
func TestSchemaIsCurrent(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	got, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(SchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("results/%s is stale: regenerate it with\n\tcd results && go generate\nand commit it", SchemaFile)
	}
	if !bytes.Equal(results.SummarySchema, want) {
		t.Fatalf("results.SummarySchema is not results/%s", SchemaFile)
	}
}
