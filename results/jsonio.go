package results

import (
	"encoding/json"
	"fmt"
	"io"
)

// writeJSON writes v as the indented JSON every results file uses.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// readJSON decodes one JSON document; what names it in the error.
func readJSON[T any](r io.Reader, what string) (*T, error) {
	var v T
	if err := json.NewDecoder(r).Decode(&v); err != nil {
		return nil, fmt.Errorf("results: read %s: %w", what, err)
	}
	return &v, nil
}
