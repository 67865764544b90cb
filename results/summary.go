package results

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Summary is everything one run measured, and enough about how it ran to
// reproduce it. Its JSON form is summary.json; every field is documented in
// SUMMARY_FIELDS.md, and the JSON names are a contract: add fields, never
// rename them.
type Summary struct {
	// Engine is the lock implementation driven, e.g. "redlock" or "nolock".
	Engine string `json:"engine"`
	// Label names the run; it is also the suffix of the run directory.
	Label string `json:"label"`
	// Config holds every flag of the run by name (dashes become
	// underscores), with the value in effect, defaults included.
	Config map[string]any `json:"config"`
	// Machine describes where the run took place.
	Machine Machine `json:"machine"`
	// Masters are the Redis masters used (empty for engines without Redis).
	Masters []string `json:"masters"`
	// LocalMasters reports that the masters were started by the run itself.
	LocalMasters bool `json:"local_masters"`
	// StartedAt is when the run began, warm-up included, in UTC.
	StartedAt time.Time `json:"started_at"`
	// WarmupS is the warm-up that preceded the measured window, in seconds.
	// Nothing from it is in the counters or histograms, except violations.
	WarmupS float64 `json:"warmup_s"`
	// DurationS is the length of the measured window, in seconds.
	DurationS float64 `json:"duration_s"`
	// Interrupted reports that the run was stopped early (Ctrl-C, SIGTERM)
	// and these are partial results.
	Interrupted bool `json:"interrupted"`
	// Mode is "try" (one attempt per operation) or "wait" (block until
	// acquired or the wait timeout).
	Mode string `json:"mode"`
	// LoadModel is "closed" (workers go as fast as they can) or "open"
	// (a fixed arrival rate, latency from the intended start).
	LoadModel string `json:"load_model"`

	// Attempts counts acquire operations that completed in the window.
	Attempts int64 `json:"attempts"`
	// Acquired counts attempts that got the lock.
	Acquired int64 `json:"acquired"`
	// Contended counts attempts refused because another holder had the lock.
	Contended int64 `json:"contended"`
	// Errors counts failures by kind (see ErrorKinds); every kind is present.
	Errors map[string]int64 `json:"errors"`
	// ErrorExamples holds the first error message seen of each kind that
	// occurred, so that a failing run says why without a rerun.
	ErrorExamples map[string]string `json:"error_examples"`
	// LostLeases counts holds whose lease ran out before release began, or
	// whose release found the lock no longer held.
	LostLeases int64 `json:"lost_leases"`
	// AcquiredPerSec is Acquired divided by DurationS.
	AcquiredPerSec float64 `json:"acquired_per_sec"`
	// BacklogMax is the largest number of operations that were due but not
	// yet started, sampled once per second (open loop only).
	BacklogMax int64 `json:"backlog_max"`
	// BacklogEnd is the backlog when the run stopped (open loop only).
	BacklogEnd int64 `json:"backlog_end"`

	// Checked reports whether the safety oracle ran.
	Checked bool `json:"checked"`
	// Violations counts overlapping holds of one resource, over the whole
	// run: safety has no warm-up.
	Violations int64 `json:"violations"`
	// ViolationExamples are the first few violations found.
	ViolationExamples []Violation `json:"violation_examples"`

	// The latency histograms, in microseconds.
	AcquireLatencyUs     Stats `json:"acquire_latency_us"`
	AcquireFailLatencyUs Stats `json:"acquire_fail_latency_us"`
	WaitLatencyUs        Stats `json:"wait_latency_us"`
	ReleaseLatencyUs     Stats `json:"release_latency_us"`
	HoldUs               Stats `json:"hold_us"`
}

// Machine records the hardware and software a run used.
type Machine struct {
	Hostname     string `json:"hostname"`
	OS           string `json:"os"`
	Arch         string `json:"arch"`
	CPUs         int    `json:"cpus"`
	GOMAXPROCS   int    `json:"gomaxprocs"`
	GoVersion    string `json:"go_version"`
	RedisVersion string `json:"redis_version"`
}

// Violation is one pair of holds of the same resource that overlapped.
type Violation struct {
	Resource string `json:"resource"`
	// FirstHolder and SecondHolder are worker numbers; the first is the
	// hold that was in place, the second the one that began during it.
	FirstHolder  int `json:"first_holder"`
	SecondHolder int `json:"second_holder"`
	// AtS is when the second hold began, in seconds since the run started.
	AtS float64 `json:"at_s"`
	// FirstRemainingUs is how long the first hold still had to run when
	// the second began, in microseconds: until its release if that was
	// already known, else until its validity ended. The two overlapped for
	// at most this long.
	FirstRemainingUs int64 `json:"first_remaining_us"`
}

// ErrorKinds are the keys of Summary.Errors, in report order:
// no_quorum (too many masters failed or timed out), timeout (a deadline ran
// out, including --wait-timeout), other (anything else while acquiring), and
// release (a release that failed for a reason other than a lost lease).
func ErrorKinds() []string { return []string{"no_quorum", "timeout", "other", "release"} }

// SetLatencies fills the latency statistics from a histogram set.
func (s *Summary) SetLatencies(set *Set) {
	s.AcquireLatencyUs = StatsOf(set[Acquire])
	s.AcquireFailLatencyUs = StatsOf(set[AcquireFail])
	s.WaitLatencyUs = StatsOf(set[Wait])
	s.ReleaseLatencyUs = StatsOf(set[Release])
	s.HoldUs = StatsOf(set[Hold])
}

// Latency returns the statistics of one kind.
func (s *Summary) Latency(k Kind) Stats {
	switch k {
	case Acquire:
		return s.AcquireLatencyUs
	case AcquireFail:
		return s.AcquireFailLatencyUs
	case Wait:
		return s.WaitLatencyUs
	case Release:
		return s.ReleaseLatencyUs
	case Hold:
		return s.HoldUs
	}
	return Stats{}
}

// ErrorTotal is the sum of Errors.
func (s *Summary) ErrorTotal() int64 {
	var n int64
	for _, v := range s.Errors {
		n += v
	}
	return n
}

// WriteJSON writes the summary as indented JSON (summary.json).
func WriteJSON(w io.Writer, s *Summary) error {
	// Nil slices would print as null; readers should not have to care.
	c := *s
	if c.Masters == nil {
		c.Masters = []string{}
	}
	if c.ViolationExamples == nil {
		c.ViolationExamples = []Violation{}
	}
	if c.Errors == nil {
		c.Errors = map[string]int64{}
	}
	if c.ErrorExamples == nil {
		c.ErrorExamples = map[string]string{}
	}
	if c.Config == nil {
		c.Config = map[string]any{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(&c)
}

// ReadJSON reads a summary written by WriteJSON.
func ReadJSON(r io.Reader) (*Summary, error) {
	var s Summary
	if err := json.NewDecoder(r).Decode(&s); err != nil {
		return nil, fmt.Errorf("results: read summary: %w", err)
	}
	return &s, nil
}

// WriteText writes the summary for a person to read (summary.txt).
func WriteText(w io.Writer, s *Summary) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	p("redlock-bench run %q\n\n", s.Label)
	p("engine       %s\n", s.Engine)
	p("started      %s\n", s.StartedAt.UTC().Format(time.RFC3339))
	p("measured     %.2f s, after a warm-up of %.2f s that is excluded from every figure but violations\n", s.DurationS, s.WarmupS)
	if s.Interrupted {
		p("INTERRUPTED  the run was stopped early; these are partial results\n")
	}
	load := "closed loop (workers as fast as they can; measures capacity)"
	if s.LoadModel == "open" {
		load = fmt.Sprintf("open loop at %v acquisitions/s (latency from the intended start)", s.Config["rate"])
	}
	p("load         %s, mode %s\n", load, s.Mode)
	masters := "none (this engine uses no Redis)"
	if len(s.Masters) > 0 {
		masters = strings.Join(s.Masters, ", ")
		if s.LocalMasters {
			masters += " (started locally)"
		}
	}
	p("masters      %s\n", masters)
	m := s.Machine
	redis := m.RedisVersion
	if redis == "" {
		redis = "n/a"
	}
	p("machine      %s, %s/%s, %d CPUs, GOMAXPROCS %d, %s, redis %s\n",
		orNA(m.Hostname), m.OS, m.Arch, m.CPUs, m.GOMAXPROCS, m.GoVersion, redis)

	p("\nconfig\n")
	keys := make([]string, 0, len(s.Config))
	for k := range s.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p("  %-16s %v\n", k, s.Config[k])
	}

	p("\nthroughput   %.1f acquisitions/s\n", s.AcquiredPerSec)
	p("\ncounters\n")
	p("  attempts     %d\n", s.Attempts)
	p("  acquired     %d%s\n", s.Acquired, pct(s.Acquired, s.Attempts))
	p("  contended    %d%s\n", s.Contended, pct(s.Contended, s.Attempts))
	p("  lost leases  %d\n", s.LostLeases)
	var errs []string
	for _, k := range ErrorKinds() {
		errs = append(errs, fmt.Sprintf("%s %d", k, s.Errors[k]))
	}
	p("  errors       %s\n", strings.Join(errs, ", "))
	for _, k := range ErrorKinds() {
		if m, ok := s.ErrorExamples[k]; ok {
			p("    first %s: %s\n", k, m)
		}
	}
	if s.LoadModel == "open" {
		p("  backlog      max %d, at end %d\n", s.BacklogMax, s.BacklogEnd)
	}

	p("\nlatency (µs)      %10s %10s %10s %10s %10s %10s %12s\n", "count", "p50", "p90", "p99", "p99.9", "max", "mean")
	for _, row := range []struct {
		name string
		k    Kind
	}{
		{"acquire", Acquire},
		{"acquire failed", AcquireFail},
		{"wait", Wait},
		{"release", Release},
		{"hold", Hold},
	} {
		st := s.Latency(row.k)
		if st.Count == 0 {
			p("  %-15s %10d %10s %10s %10s %10s %10s %12s\n", row.name, 0, "-", "-", "-", "-", "-", "-")
			continue
		}
		p("  %-15s %10d %10d %10d %10d %10d %10d %12.1f\n", row.name, st.Count, st.P50, st.P90, st.P99, st.P999, st.Max, st.Mean)
	}
	if s.Mode == "wait" {
		p("  (mode wait: a successful Lock is counted under wait, not acquire)\n")
	}

	p("\nsafety       ")
	switch {
	case !s.Checked:
		p("not checked (--check=false)\n")
	case s.Violations == 0:
		p("OK: no two holds of one resource overlapped\n")
	default:
		p("VIOLATED: %d times two holds of one resource overlapped\n", s.Violations)
		for _, v := range s.ViolationExamples {
			p("  %s: worker %d acquired it at %.6f s while worker %d held it (for up to %d µs more)\n",
				v.Resource, v.SecondHolder, v.AtS, v.FirstHolder, v.FirstRemainingUs)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}

func pct(n, of int64) string {
	if of == 0 {
		return ""
	}
	return fmt.Sprintf(" (%.1f%%)", 100*float64(n)/float64(of))
}
