package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Result is a scenario's verdict and the figures behind it. It is written
// as scenario.json (this struct) and scenario.txt (the same, for people).
type Result struct {
	Name string `json:"name"`
	// Expected is what the scenario expects with these options, in words.
	Expected string `json:"expected"`
	// Observed is what happened, in words: the judge's reasoning.
	Observed string `json:"observed"`
	// Passed: the observed outcome matched Expected. With the quarantine
	// off (restart-amnesia) or fencing off (paused-holder), that outcome is
	// a safety violation, reproduced on purpose.
	Passed bool `json:"passed"`
	// Violations counts the safety violations seen: holds of one resource
	// that overlapped (the oracle), and stale writes a resource accepted.
	Violations int `json:"violations"`
	// Error is set when the scenario could not run to its end.
	Error string `json:"error,omitempty"`
	// Interrupted is set when a cancelled context (Ctrl-C) stopped it
	// before its end: there is no verdict then, and Passed is false.
	Interrupted bool       `json:"interrupted,omitempty"`
	Options     RunOptions `json:"options"`
	// Figures are the scenario's own measurements: the observation its
	// judge read. Their type depends on the scenario.
	Figures any `json:"figures,omitempty"`
	// Timeline is the script's steps as they happened.
	Timeline  []Step    `json:"timeline,omitempty"`
	Started   time.Time `json:"started"`
	DurationS float64   `json:"duration_s"`
	Machine   Machine   `json:"machine"`
}

// RunOptions are the Options that shaped a result.
type RunOptions struct {
	Quarantine string `json:"quarantine"`
	Fencing    bool   `json:"fencing"`
	Short      bool   `json:"short"`
}

// Step is one step of a scenario's script.
type Step struct {
	// AtMs is milliseconds since the scenario started.
	AtMs float64 `json:"at_ms"`
	What string  `json:"what"`
}

// Machine is where the scenario ran, so that its figures can be put in
// context and reproduced.
type Machine struct {
	Go         string `json:"go"`
	OS         string `json:"os"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Redis      string `json:"redis,omitempty"`
}

// Write writes scenario.json and scenario.txt into dir, creating it.
func (r *Result) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "scenario.json"), js.Bytes(), 0o644); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	var txt bytes.Buffer
	if err := r.WriteText(&txt); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "scenario.txt"), txt.Bytes(), 0o644); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	return nil
}

// WriteJSON writes the result as scenario.json holds it.
func (r *Result) WriteJSON(w io.Writer) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("scenario: encode %s: %w", r.Name, err)
	}
	_, err = w.Write(append(js, '\n'))
	return err
}

// Verdict is PASS, FAIL, or INTERRUPTED for a scenario stopped before its
// end by a cancelled context, which judged nothing.
func (r *Result) Verdict() string {
	switch {
	case r.Passed:
		return "PASS"
	case r.Interrupted:
		return "INTERRUPTED"
	}
	return "FAIL"
}

// WriteText writes the result for people: the verdict first, then what
// was expected and observed, the figures and the timeline.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario   %s\n", r.Name)
	fmt.Fprintf(&b, "verdict    %s\n", r.Verdict())
	fmt.Fprintf(&b, "violations %d\n", r.Violations)
	fmt.Fprintf(&b, "options    quarantine=%s fencing=%v short=%v\n", r.Options.Quarantine, r.Options.Fencing, r.Options.Short)
	fmt.Fprintf(&b, "started    %s, took %.1fs\n", r.Started.Format(time.RFC3339), r.DurationS)
	m := r.Machine
	fmt.Fprintf(&b, "machine    %s, %d CPUs, GOMAXPROCS %d, %s, redis %s\n", m.OS, m.CPUs, m.GOMAXPROCS, m.Go, orNone(m.Redis))
	if r.Error != "" {
		fmt.Fprintf(&b, "error      %s\n", r.Error)
	}
	b.WriteString("\nexpected\n")
	wrap(&b, r.Expected)
	b.WriteString("\nobserved\n")
	wrap(&b, r.Observed)
	if r.Figures != nil {
		b.WriteString("\nfigures\n")
		js, err := json.Marshal(r.Figures)
		if err != nil {
			return fmt.Errorf("scenario: encode figures of %s: %w", r.Name, err)
		}
		if err := outline(&b, js); err != nil {
			return fmt.Errorf("scenario: figures of %s: %w", r.Name, err)
		}
	}
	if len(r.Timeline) > 0 {
		b.WriteString("\ntimeline\n")
		for _, s := range r.Timeline {
			fmt.Fprintf(&b, "  %9.1f ms  %s\n", s.AtMs, s.What)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// wrap writes s indented, broken at spaces near 100 columns.
func wrap(b *strings.Builder, s string) {
	const width = 100
	line := 0
	b.WriteString("  ")
	for i, word := range strings.Fields(s) {
		if i > 0 && line+1+len(word) > width {
			b.WriteString("\n  ")
			line = 0
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	b.WriteByte('\n')
}

// outline renders JSON as an indented outline in the order of its fields,
// so that each scenario's figures read well without a text format of their
// own: objects become "key: value" lines, arrays of scalars stay on one
// line, arrays of objects become "- " items.
func outline(b *strings.Builder, js []byte) error {
	var v orderedValue
	if err := json.Unmarshal(js, &v); err != nil {
		return err
	}
	v.write(b, 1)
	return nil
}

// orderedValue is a JSON value that keeps the order of object keys.
type orderedValue struct {
	obj    []orderedField // set for an object
	arr    []orderedValue // set for an array
	isObj  bool
	isArr  bool
	scalar json.RawMessage
}

type orderedField struct {
	key string
	val orderedValue
}

func (v *orderedValue) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) > 0 && data[0] == '{':
		v.isObj = true
		dec := json.NewDecoder(bytes.NewReader(data))
		if _, err := dec.Token(); err != nil { // {
			return err
		}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return err
			}
			var f orderedField
			f.key, _ = t.(string)
			if err := dec.Decode(&f.val); err != nil {
				return err
			}
			v.obj = append(v.obj, f)
		}
		return nil
	case len(data) > 0 && data[0] == '[':
		v.isArr = true
		return json.Unmarshal(data, &v.arr)
	}
	v.scalar = append(json.RawMessage(nil), data...)
	return nil
}

func (v *orderedValue) simple() bool {
	if v.isObj {
		return false
	}
	if v.isArr {
		for i := range v.arr {
			if !v.arr[i].simple() || v.arr[i].isArr {
				return false
			}
		}
	}
	return true
}

func (v *orderedValue) inline() string {
	if v.isArr {
		parts := make([]string, len(v.arr))
		for i := range v.arr {
			parts[i] = v.arr[i].inline()
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	var s string
	if json.Unmarshal(v.scalar, &s) == nil && s != "" {
		return s
	}
	return string(v.scalar)
}

func (v *orderedValue) write(b *strings.Builder, depth int) {
	pad := strings.Repeat("  ", depth)
	switch {
	case v.isObj:
		for _, f := range v.obj {
			if f.val.simple() {
				fmt.Fprintf(b, "%s%s: %s\n", pad, f.key, f.val.inline())
				continue
			}
			fmt.Fprintf(b, "%s%s:\n", pad, f.key)
			f.val.write(b, depth+1)
		}
	case v.isArr:
		for i := range v.arr {
			item := &v.arr[i]
			if item.simple() {
				fmt.Fprintf(b, "%s- %s\n", pad, item.inline())
				continue
			}
			// The item's first line takes the dash in its indentation.
			var sub strings.Builder
			item.write(&sub, depth+1)
			b.WriteString(pad + "- " + strings.TrimPrefix(sub.String(), pad+"  "))
		}
	default:
		fmt.Fprintf(b, "%s%s\n", pad, v.inline())
	}
}
