package results

import _ "embed"

//go:generate go run ./internal/schemagen

// SummarySchema is the JSON Schema (draft 2020-12) of summary.json in
// format SummarySchemaVersion, generated from the Go types (see
// internal/schemagen) and checked in as summary.schema.json.
//
//go:embed summary.schema.json
var SummarySchema []byte
