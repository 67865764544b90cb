// Command schemagen writes summary.schema.json, the JSON Schema of
// summary.json, from the Go types of package results and their comments.
// It runs from the results directory, as go generate runs it:
//
//	cd results && go generate
//
// It is a program of its own so that the results package, which every
// tool links, does not import the reflector.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/invopop/jsonschema"

	"github.com/redlock-bench/redlock/results"
)

// SchemaFile is the file generate writes, in the results directory.
const SchemaFile = "summary.schema.json"

func main() {
	b, err := generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(SchemaFile, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}

// generate builds the schema; the working directory must be results/, whose
// sources hold the comments that become descriptions.
func generate() ([]byte, error) {
	r := &jsonschema.Reflector{
		// summary.json only ever gains fields (SUMMARY_FIELDS.md), and a
		// merged summary carries its sources' unknown fields and its own
		// merged_from and overlap_s: a consumer validating against this
		// schema must accept what a later minor version adds.
		AllowAdditionalProperties: true,
	}
	if err := r.AddGoComments("github.com/redlock-bench/redlock/results", "./"); err != nil {
		return nil, fmt.Errorf("read the comments of package results (run from results/): %w", err)
	}
	// Summary.Tool is a version.Info, which lives in the root module's
	// internal/version; "../internal/version" joins the base to its path.
	if err := r.AddGoComments("github.com/redlock-bench/redlock/results", "../internal/version"); err != nil {
		return nil, fmt.Errorf("read the comments of package internal/version (run from results/): %w", err)
	}
	s := r.Reflect(&results.Summary{})
	s.ID = "https://github.com/redlock-bench/redlock/results/summary.schema.json"
	s.Title = "redlock-bench summary.json"
	s.Description = fmt.Sprintf("One run of redlock-bench, schema_version %d. Generated from the Go types of package results by "+
		"results/internal/schemagen (go generate in results/); every field is explained in results/SUMMARY_FIELDS.md.",
		results.SummarySchemaVersion)

	summary, ok := s.Definitions["Summary"]
	if !ok {
		return nil, fmt.Errorf("no Summary definition in the reflected schema")
	}
	if p, ok := summary.Properties.Get("schema_version"); ok {
		p.Const = results.SummarySchemaVersion
	}
	// A merged summary cannot compute Jain's index and leaves it out
	// (Summary.Merge).
	if f, ok := s.Definitions["Fairness"]; ok {
		f.Required = slices.DeleteFunc(f.Required, func(n string) bool { return n == "jain" })
	}

	// Fields added to the config after files of schema_version 1 were
	// written: such files lack them and are still valid.
	if f, ok := s.Definitions["RunConfig"]; ok {
		f.Required = slices.DeleteFunc(f.Required, func(n string) bool {
			return slices.Contains([]string{"insecure", "sni", "tls", "user"}, n)
		})
	}

	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
