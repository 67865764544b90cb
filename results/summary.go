package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/internal/version"
)

// SummarySchemaVersion is the version of summary.json's format that this
// package writes and the newest it reads. It rises only when a field
// changes meaning or goes away, not when one is added (readers ignore
// fields they do not know); summary.schema.json describes it.
const SummarySchemaVersion = 1

// Summary is everything one run measured, and enough about how it ran to
// reproduce it. Its JSON form is summary.json; every field is documented in
// SUMMARY_FIELDS.md, and the JSON names are a contract: add fields, never
// rename them.
type Summary struct {
	// SchemaVersion is the version of this format (SummarySchemaVersion when
	// written); summaries from before it was recorded have none (0).
	SchemaVersion int `json:"schema_version"`
	// Tool is the build of the tool that wrote the file.
	Tool version.Info `json:"tool"`
	// Engine is the lock implementation driven, e.g. "redlock" or "nolock".
	Engine string `json:"engine"`
	// Label names the run; it is also the suffix of the run directory.
	Label string `json:"label"`
	// Config holds every flag of the run by name (dashes become
	// underscores), with the value in effect, defaults included.
	Config RunConfig `json:"config"`
	// Machine describes where the run took place.
	Machine Machine `json:"machine"`
	// Masters are the Redis masters used (empty for engines without Redis).
	Masters []string `json:"masters"`
	// LocalMasters reports that the masters were started by the run itself.
	LocalMasters bool `json:"local_masters"`
	// Clusters are the votes that are Redis Clusters, after Masters: each
	// cluster's seed addresses (the local ones: its primaries). Absent
	// without clusters.
	Clusters [][]string `json:"clusters,omitempty"`
	// ClusterShards is the number of shards of each cluster the run
	// started (--cluster-shards); absent for given clusters (--clusters).
	ClusterShards int `json:"cluster_shards,omitempty"`
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
	// Lock is what each operation took (--lock): "mutex", "semaphore:P"
	// (a permit of the resource's semaphore of P), "multi:K" (one lease
	// on K distinct resources), "rw:F" (the resource's read/write lock,
	// for reading with probability F). Absent from summaries written
	// before it was recorded, which are all of mutexes: see LockKind.
	Lock string `json:"lock,omitempty"`
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
	// ErrorExamples holds the first error message seen in the measured
	// window of each kind that occurred there, so that a failing run says
	// why without a rerun.
	ErrorExamples map[string]string `json:"error_examples"`
	// WarmupErrorExamples holds the first error message of each kind seen
	// in the warm-up, which no counter counts; absent when there was
	// none. A run whose masters were not ready at first shows it here.
	WarmupErrorExamples map[string]string `json:"warmup_error_examples,omitempty"`
	// LostLeases counts holds whose lease ran out before release began,
	// whose lost-lock signal (Done) fired before release, or whose release
	// found the lock no longer held.
	LostLeases int64 `json:"lost_leases"`
	// Extensions counts the successful auto-extensions of every lease
	// acquired in the window (--extend).
	Extensions int64 `json:"extensions"`
	// WokenByNotification counts acquisitions in mode wait whose last wait
	// was ended by the holder's release notification.
	WokenByNotification int64 `json:"woken_by_notification"`
	// FallbackRetries counts the waits, summed over acquisitions in mode
	// wait, that were ended by the fallback timer while the resource was
	// held: notifications that did not come (an expiry, a lost message).
	FallbackRetries int64 `json:"fallback_retries"`
	// BackoffRetries counts the waits ended by a back-off after a split vote
	// or an outage.
	BackoffRetries int64 `json:"backoff_retries"`
	// Gated counts acquisitions in mode wait that queued behind another
	// worker of the same client at the engine's in-process gate.
	Gated int64 `json:"gated"`
	// Fairness is how evenly the acquisitions of the window were spread
	// over the workers.
	Fairness Fairness `json:"fairness"`
	// SubscriptionsPeak is the most release-notification subscriptions the
	// clients held at once, summed over clients, sampled once a second.
	SubscriptionsPeak int `json:"subscriptions_peak"`
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
	// TokensChecked counts the fencing tokens the oracle compared with the
	// previous holder's (--fencing), over the whole run.
	TokensChecked int64 `json:"tokens_checked"`
	// StaleTokens counts holds whose fencing token was not above the token
	// of the hold of the same resource that began before it. Must be 0.
	StaleTokens int64 `json:"stale_tokens"`
	// StaleTokenExamples are the first few stale tokens found.
	StaleTokenExamples []StaleToken `json:"stale_token_examples"`

	// Faults are the injected faults (--fault) as they happened, in the
	// order they were applied.
	Faults []FaultEvent `json:"faults"`
	// Nodes is each master's state at the end of the run, as the engine
	// saw it (client 0's view when there are several clients).
	Nodes []Node `json:"nodes"`
	// Server is the Redis nodes' own CPU time and commands over the
	// measured window, and the load generator's CPU time; absent when they
	// were not read (faults, a node refusing INFO, a merged summary).
	Server *ServerStats `json:"server,omitempty"`
	// NodeTimeoutMs is how long an attempt waited for the masters' answers
	// before it counted the silent ones as failed, in ms, as the engine
	// set it (--node-timeout, or the engine's default); absent for an
	// engine without one. A master slower than that, for whatever reason
	// (the network, its own load, a CPU the client or it waited for), is
	// an error of the attempt: no_quorum when too many were.
	NodeTimeoutMs float64 `json:"node_timeout_ms,omitempty"`
	// CPU is the CPU time of the measured window per acquisition, the
	// load generator's and the masters', and what ran out of CPU; absent
	// from summaries written before it was recorded, and from merged
	// ones.
	CPU *CPU `json:"cpu,omitempty"`

	// The latency histograms, in microseconds.
	AcquireLatencyUs     Stats `json:"acquire_latency_us"`
	AcquireFailLatencyUs Stats `json:"acquire_fail_latency_us"`
	WaitLatencyUs        Stats `json:"wait_latency_us"`
	ReleaseLatencyUs     Stats `json:"release_latency_us"`
	HoldUs               Stats `json:"hold_us"`
	// HandoffLatencyUs is the time from one holder's release to the next
	// holder's acquisition of the same resource, when that holder was
	// already waiting (mode wait).
	HandoffLatencyUs Stats `json:"handoff_latency_us"`
}

// Fairness says how evenly acquisitions were spread over the workers.
type Fairness struct {
	// Jain is Jain's fairness index, (Σx)² / (n·Σx²) over the workers'
	// acquisition counts: 1 when every worker got the same share, 1/n when
	// one worker got everything; 0 when nothing was acquired.
	Jain float64 `json:"jain"`
	// Min and Max are the fewest and most acquisitions of one worker.
	Min int64 `json:"min"`
	Max int64 `json:"max"`
	// JainClients is Jain's index over the clients' (engine instances')
	// acquisition counts, with more than one client: whether one process
	// gets the hot keys at the others' expense, which Jain over workers
	// hides when each client's workers share alike.
	JainClients float64 `json:"jain_clients,omitempty"`
}

// FairnessOf computes Fairness from per-worker acquisition counts.
func FairnessOf(counts []int64) Fairness {
	if len(counts) == 0 {
		return Fairness{}
	}
	f := Fairness{Min: counts[0], Max: counts[0]}
	var sum, sq float64
	for _, c := range counts {
		f.Min, f.Max = min(f.Min, c), max(f.Max, c)
		sum += float64(c)
		sq += float64(c) * float64(c)
	}
	if sq > 0 {
		f.Jain = math.Round(sum*sum/(float64(len(counts))*sq)*1e4) / 1e4
	}
	return f
}

// StaleToken is a fencing token that did not increase.
type StaleToken struct {
	Resource string `json:"resource"`
	// Worker is the worker whose hold carried the stale token.
	Worker int `json:"worker"`
	// Token is the stale token; Previous is the token of the hold of the
	// same resource that began just before (or, if the stale hold began
	// first but registered later, just after) it.
	Token    int64 `json:"token"`
	Previous int64 `json:"previous"`
	// AtS is when the stale hold began, in seconds since the run started.
	AtS float64 `json:"at_s"`
}

// FaultEvent is one injected fault as it happened: the record the fault
// injector (package bench/fault) logs, as it lands in summary.json. Every
// *_s field is in seconds since the run started, the origin of the
// intervals.
type FaultEvent struct {
	// Fault is the schedule item, e.g. "pause:3@10s+4s".
	Fault string `json:"fault"`
	// Action is kill, restart, pause, slow, cut or stall.
	Action string `json:"action"`
	// Node is the 0-based index of the master.
	Node int `json:"node"`
	// Arg is the added latency of slow; empty otherwise.
	Arg string `json:"arg,omitempty"`
	// AtS and ForS are the planned start and length.
	AtS  float64 `json:"at_s"`
	ForS float64 `json:"for_s"`
	// AppliedS is when the fault was applied; AppliedAt the same on the
	// wall clock.
	AppliedS  float64   `json:"applied_s"`
	AppliedAt time.Time `json:"applied_at"`
	// EndedS is when it was lifted (or, for kill and restart, completed).
	EndedS float64 `json:"ended_s"`
	Ended  bool    `json:"ended"`
	// Early: lifted before its planned end because the run stopped.
	Early bool `json:"early,omitempty"`
	// Via is the mechanism of a stall: "DEBUG SLEEP" or "CLIENT PAUSE".
	Via string `json:"via,omitempty"`
	// Error says what failed while applying or lifting it.
	Error string `json:"error,omitempty"`
}

// During reports whether the fault was in effect at some time in
// [fromS, toS); an instantaneous fault counts in the interval in which it
// was applied or completed.
func (e FaultEvent) During(fromS, toS float64) bool {
	end := e.EndedS
	if !e.Ended {
		end = toS
	}
	return e.AppliedS < toS && end >= fromS
}

// Node is one master's state at the end of a run, as the engine saw it.
type Node struct {
	// Addr is the master's address; Via is the proxy the engine dialled
	// instead, when faults needed one.
	Addr string `json:"addr"`
	Via  string `json:"via,omitempty"`
	// State is "up", "down" or "quarantined".
	State string `json:"state"`
	// QuarantinedUntil is when a quarantined master's votes count again.
	QuarantinedUntil time.Time `json:"quarantined_until,omitzero"`
	RunID            string    `json:"run_id,omitempty"`
	Version          string    `json:"version,omitempty"`
	// Restarts counts the restarts the engine noticed (run_id changes).
	Restarts int64 `json:"restarts"`
	// Error is the node's last connection error, if any.
	Error string `json:"error,omitempty"`
	// OK, Refused, Failed and TimedOut count the node's votes by outcome.
	OK       int64 `json:"ok"`
	Refused  int64 `json:"refused"`
	Failed   int64 `json:"failed"`
	TimedOut int64 `json:"timed_out"`
}

// Interval is one second of a run, as written to intervals.json: enough to
// see how throughput, latency and errors moved, and which faults were in
// effect when they did.
type Interval struct {
	// TS is the interval's start and LengthS its length, in seconds since
	// the run started (warm-up included): the origin of the faults' times.
	TS      float64 `json:"t_s"`
	LengthS float64 `json:"length_s"`
	// Warmup marks an interval of the warm-up, excluded from the summary.
	Warmup bool `json:"warmup"`
	// Acquired and AcquiredPerS count the interval's acquisitions.
	Acquired     int64   `json:"acquired"`
	AcquiredPerS float64 `json:"acquired_per_s"`
	// P99Us is the 99th percentile of the interval's acquire latency (wait
	// latency in mode wait).
	P99Us int64 `json:"p99_us"`
	// Contended, Errors and LostLeases count the interval's operations;
	// NoQuorum the errors of kind no_quorum among Errors.
	Contended  int64 `json:"contended"`
	Errors     int64 `json:"errors"`
	NoQuorum   int64 `json:"no_quorum"`
	LostLeases int64 `json:"lost_leases"`
	// MasterRTTUs is, per master (in Masters' order), the round trip in
	// µs of a PING answered in the interval, on a connection of its own;
	// -1 when none was answered (a paused, cut or stopped master). Absent
	// for engines without masters.
	MasterRTTUs []int64 `json:"master_rtt_us,omitempty"`
	// Violations is the oracle's count so far, over the whole run.
	Violations int64 `json:"violations"`
	// Subscriptions is the number of release-notification subscriptions
	// held at the end of the interval, summed over clients.
	Subscriptions int `json:"subscriptions"`
	// FaultsActive are the faults in effect at some time in the interval.
	FaultsActive []string `json:"faults_active"`
}

// IntervalsJSON is the name of the per-second intervals file in a run
// directory.
const IntervalsJSON = "intervals.json"

// WriteIntervals writes intervals.json: a JSON array, one interval per
// line.
func WriteIntervals(w io.Writer, ivs []Interval) error {
	var b strings.Builder
	b.WriteString("[")
	for i, iv := range ivs {
		if iv.FaultsActive == nil {
			iv.FaultsActive = []string{}
		}
		js, err := json.Marshal(iv)
		if err != nil {
			return fmt.Errorf("results: encode interval: %w", err)
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  ")
		b.Write(js)
	}
	b.WriteString("\n]\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// ReadIntervals reads intervals.json.
func ReadIntervals(r io.Reader) ([]Interval, error) {
	ivs, err := readJSON[[]Interval](r, "intervals")
	if err != nil {
		return nil, err
	}
	return *ivs, nil
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

// Violation is one pair of holds of the same resource that overlapped or,
// on a semaphore, more holds at once than permits.
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
	// Holders is, on a semaphore, how many held it at once at AtS (more
	// than its permits; AtS is then when the last of them began); 0 for a
	// pair of holds of a lock.
	Holders int `json:"holders,omitempty"`
	// Source is the run that found it, in a merged summary.
	Source string `json:"source,omitempty"`
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
	s.HandoffLatencyUs = StatsOf(set[Handoff])
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
	case Handoff:
		return s.HandoffLatencyUs
	}
	return Stats{}
}

// LockKind is Lock, "mutex" for a summary written before it was recorded.
func (s *Summary) LockKind() string {
	if s.Lock == "" {
		return "mutex"
	}
	return s.Lock
}

// SafetyRule says what the oracle found held on a run of lock (a
// Summary.Lock): "no two holds of one resource overlapped".
func SafetyRule(lock string) string {
	switch {
	case strings.HasPrefix(lock, "semaphore:"):
		return "never more holders of a semaphore at once than its " + strings.TrimPrefix(lock, "semaphore:") + " permits"
	case strings.HasPrefix(lock, "multi:"):
		return "no two holds of one resource overlapped (a lease on " + strings.TrimPrefix(lock, "multi:") + " resources holds each of them)"
	case strings.HasPrefix(lock, "rw:"):
		return "no writer held a resource beside another holder (readers share)"
	}
	return "no two holds of one resource overlapped"
}

// BrokenRule says what a violation on a run of lock was: "two holds of
// one resource overlapped".
func BrokenRule(lock string) string {
	switch {
	case strings.HasPrefix(lock, "semaphore:"):
		return "more holders of a semaphore at once than its " + strings.TrimPrefix(lock, "semaphore:") + " permits"
	case strings.HasPrefix(lock, "rw:"):
		return "a writer held a resource beside another holder"
	}
	return "two holds of one resource overlapped"
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
	if c.StaleTokenExamples == nil {
		c.StaleTokenExamples = []StaleToken{}
	}
	if c.Faults == nil {
		c.Faults = []FaultEvent{}
	}
	if c.Nodes == nil {
		c.Nodes = []Node{}
	}
	if c.Errors == nil {
		c.Errors = map[string]int64{}
	}
	if c.ErrorExamples == nil {
		c.ErrorExamples = map[string]string{}
	}
	// The file is in this package's format, whatever its source said; a
	// summary built without a tool was built by this binary.
	c.SchemaVersion = SummarySchemaVersion
	if c.Tool == (version.Info{}) {
		c.Tool = version.Get()
	}
	return writeJSON(w, &c)
}

// ReadJSON reads a summary written by WriteJSON. It refuses one in a
// newer format than this package knows, whose fields may mean something
// else; older ones, without schema_version, are read as they are.
func ReadJSON(r io.Reader) (*Summary, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("results: read summary: %w", err)
	}
	// The version first: a newer format may not even decode.
	var head struct {
		SchemaVersion int `json:"schema_version"`
	}
	if json.Unmarshal(b, &head) == nil {
		if err := CheckSchemaVersion(head.SchemaVersion); err != nil {
			return nil, err
		}
	}
	return readJSON[Summary](bytes.NewReader(b), "summary")
}

// CheckSchemaVersion refuses a summary's schema_version newer than
// SummarySchemaVersion.
func CheckSchemaVersion(v int) error {
	if v > SummarySchemaVersion {
		return fmt.Errorf("results: summary.json has schema_version %d, newer than the %d this build reads: use a newer redlock-bench (this one is %s)",
			v, SummarySchemaVersion, version.Get().Version)
	}
	return nil
}

// WriteText writes the summary for a person to read (summary.txt).
func WriteText(w io.Writer, s *Summary) error {
	var b strings.Builder
	p := printer(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) })
	p.header(s)
	p.config(s.Config.Map())
	p.counters(s)
	p.latency(s)
	p.safety(s)
	p.faults(s.Faults)
	p.nodes(s.Nodes)
	_, err := io.WriteString(w, b.String())
	return err
}

// printer writes one section of summary.txt.
type printer func(format string, a ...any)

func (p printer) header(s *Summary) {
	p("redlock-bench run %q\n\n", s.Label)
	p("engine       %s\n", s.Engine)
	p("lock         %s\n", s.LockKind())
	p("started      %s\n", s.StartedAt.UTC().Format(time.RFC3339))
	p("measured     %.2f s, after a warm-up of %.2f s that is excluded from every figure but violations\n", s.DurationS, s.WarmupS)
	if s.Interrupted {
		p("INTERRUPTED  the run was stopped early; these are partial results\n")
	}
	load := "closed loop (workers as fast as they can; measures capacity)"
	if s.LoadModel == "open" {
		load = fmt.Sprintf("open loop at %s acquisitions/s (latency from the intended start)", strconv.FormatFloat(s.RunConfig().Rate, 'f', -1, 64))
	}
	p("load         %s, mode %s\n", load, s.Mode)
	masters := "none (this engine uses no Redis)"
	switch {
	case len(s.Masters) > 0:
		masters = strings.Join(s.Masters, ", ")
		if s.LocalMasters {
			masters += " (started locally)"
		}
	case len(s.Clusters) > 0:
		masters = "none"
	}
	p("masters      %s\n", masters)
	if len(s.Clusters) > 0 {
		shape := fmt.Sprintf("%d: %d masters, %d Redis Clusters", len(s.Masters)+len(s.Clusters), len(s.Masters), len(s.Clusters))
		if s.ClusterShards > 0 {
			shape += fmt.Sprintf(" of %d shards each", s.ClusterShards)
		}
		if s.LocalMasters {
			shape += " (started locally)"
		}
		p("votes        %s\n", shape)
		for i, seeds := range s.Clusters {
			p("cluster %-4d %s\n", len(s.Masters)+i, strings.Join(seeds, ", "))
		}
	}
	for i, vote := range strings.Fields(s.Config.Sentinel) {
		p("sentinel %-3d %s\n", len(s.Masters)+len(s.Clusters)+i, vote)
	}
	if st := s.Server; st != nil && len(st.Nodes) > 0 && s.Acquired > 0 {
		a := float64(s.Acquired)
		cpu, calls := st.cpuS()
		busiest := 0.0
		for _, n := range st.Nodes {
			busiest = max(busiest, n.CPUS)
		}
		p("server       %s: %.1f µs of CPU (busiest node %.1f µs) and %.2f commands per acquisition; load generator %.1f µs\n",
			counted(len(st.Nodes), "node"), 1e6*cpu/a, 1e6*busiest/a, float64(calls)/a, 1e6*st.ClientCPUS/a)
	}
	if c := s.CPU; c != nil {
		p("cpu          %s\n", c.Text(s.Machine))
	}
	if s.NodeTimeoutMs > 0 {
		how := "set by --node-timeout"
		if s.RunConfig().NodeTimeout == "" {
			how = "the engine's default; --node-timeout sets it"
		}
		p("node timeout %s ms (%s): an attempt counts a master silent that long as failed\n",
			strconv.FormatFloat(s.NodeTimeoutMs, 'f', -1, 64), how)
	}
	m := s.Machine
	p("machine      %s, %s/%s, %d CPUs, GOMAXPROCS %d, %s, redis %s\n",
		orNA(m.Hostname), m.OS, m.Arch, m.CPUs, m.GOMAXPROCS, m.GoVersion, orNA(m.RedisVersion))
}

// config lists every setting in the summary, by name.
func (p printer) config(config map[string]any) {
	p("\nconfig\n")
	keys := make([]string, 0, len(config))
	for k := range config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p("  %-16s %v\n", k, config[k])
	}
}

func (p printer) counters(s *Summary) {
	cfg := s.RunConfig()
	p("\nthroughput   %.1f acquisitions/s\n", s.AcquiredPerSec)
	p("\ncounters\n")
	p("  attempts     %d\n", s.Attempts)
	p("  acquired     %d%s\n", s.Acquired, pct(s.Acquired, s.Attempts))
	p("  contended    %d%s\n", s.Contended, pct(s.Contended, s.Attempts))
	p("  lost leases  %d\n", s.LostLeases)
	if s.Extensions > 0 || cfg.Extend {
		p("  extensions   %d (auto-extension)\n", s.Extensions)
	}
	var errs []string
	for _, k := range ErrorKinds() {
		errs = append(errs, fmt.Sprintf("%s %d", k, s.Errors[k]))
	}
	p("  errors       %s\n", strings.Join(errs, ", "))
	for _, k := range ErrorKinds() {
		if m, ok := s.ErrorExamples[k]; ok && s.Errors[k] > 0 {
			p("    first %s: %s\n", k, m)
		}
	}
	if len(s.WarmupErrorExamples) > 0 {
		p("  in the warm-up, which no counter counts:\n")
		for _, k := range ErrorKinds() {
			if m, ok := s.WarmupErrorExamples[k]; ok {
				p("    first %s: %s\n", k, m)
			}
		}
	}
	if s.Violations == 0 && s.StaleTokens == 0 && (s.ErrorTotal() > 0 || s.LostLeases > 0) {
		p("  DEGRADED     errors or lost leases: the figures include the failed operations\n")
		if note := s.SaturationNote(); note != "" {
			p("               %s\n", note)
		}
	}
	if s.LoadModel == "open" {
		p("  backlog      max %d, at end %d\n", s.BacklogMax, s.BacklogEnd)
	}
	if s.Mode == "wait" {
		p("\nwaiting      %d acquisitions woken by a release notification, %d fallback retries, %d back-offs;\n",
			s.WokenByNotification, s.FallbackRetries, s.BackoffRetries)
		p("             %d queued behind a worker of the same client (in-process gate)\n", s.Gated)
		if s.SubscriptionsPeak > 0 {
			p("             at most %d release subscriptions at once\n", s.SubscriptionsPeak)
		}
	}
	if f := s.Fairness; f.Max > 0 {
		workers := ""
		if cfg.Workers > 0 {
			workers = fmt.Sprintf(" over %d workers", cfg.Workers)
		}
		jain := fmt.Sprintf("%.4f", f.Jain)
		if f.Jain == 0 {
			// Never measured: a run that acquired anything has an index of
			// at least 1/workers. A merged run cannot compute it.
			jain = "n/a"
		}
		p("fairness     Jain %s%s (fewest %d, most %d acquisitions per worker)\n", jain, workers, f.Min, f.Max)
		if f.JainClients > 0 {
			p("             Jain %.4f over %d clients\n", f.JainClients, cfg.Clients)
		}
	}
}

func (p printer) latency(s *Summary) {
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
		{"handoff", Handoff},
	} {
		if row.k == Handoff && s.Mode != "wait" && s.HandoffLatencyUs.Count == 0 {
			continue
		}
		st := s.Latency(row.k)
		if st.Count == 0 {
			p("  %-15s %10d %10s %10s %10s %10s %10s %12s\n", row.name, 0, "-", "-", "-", "-", "-", "-")
			continue
		}
		p("  %-15s %10d %10d %10d %10d %10d %10d %12.1f\n", row.name, st.Count, st.P50, st.P90, st.P99, st.P999, st.Max, st.Mean)
	}
	if s.Mode == "wait" {
		p("  (mode wait: a successful Lock is counted under wait, not acquire; handoff is from a release\n")
		p("   to the next acquisition of that resource by a worker already waiting for it)\n")
	}
}

func (p printer) safety(s *Summary) {
	p("\nsafety       ")
	switch {
	case !s.Checked:
		p("not checked (--check=false)\n")
	case s.Violations == 0:
		p("OK: %s\n", SafetyRule(s.LockKind()))
	default:
		p("VIOLATED: %d times %s\n", s.Violations, BrokenRule(s.LockKind()))
		for _, v := range s.ViolationExamples {
			from := ""
			if v.Source != "" {
				from = " (run " + v.Source + ")" // a merged run's
			}
			if v.Holders > 0 {
				p("  %s%s: %d holders at %.6f s, worker %d the last to begin, worker %d among the others (for up to %d µs more)\n",
					v.Resource, from, v.Holders, v.AtS, v.SecondHolder, v.FirstHolder, v.FirstRemainingUs)
				continue
			}
			p("  %s%s: worker %d acquired it at %.6f s while worker %d held it (for up to %d µs more)\n",
				v.Resource, from, v.SecondHolder, v.AtS, v.FirstHolder, v.FirstRemainingUs)
		}
	}
	if s.TokensChecked > 0 || s.StaleTokens > 0 {
		p("fencing      ")
		if s.StaleTokens == 0 {
			p("OK: %d tokens checked, each above the previous holder's\n", s.TokensChecked)
		} else {
			p("VIOLATED: %d of %d tokens were not above the previous holder's\n", s.StaleTokens, s.TokensChecked)
			for _, t := range s.StaleTokenExamples {
				p("  %s: worker %d began at %.6f s with token %d, previous holder's token %d\n",
					t.Resource, t.Worker, t.AtS, t.Token, t.Previous)
			}
		}
	}
}

func (p printer) faults(faults []FaultEvent) {
	if len(faults) == 0 {
		return
	}
	p("\nfaults (seconds since the start of the run, warm-up included)\n")
	for _, f := range faults {
		line := fmt.Sprintf("  %-24s applied %8.3f", f.Fault, f.AppliedS)
		switch {
		case f.Error != "":
			line += fmt.Sprintf("  ended %8.3f  FAILED: %s", f.EndedS, f.Error)
		case f.ForS > 0 || f.EndedS > f.AppliedS:
			line += fmt.Sprintf("  ended %8.3f", f.EndedS)
		}
		if f.Early {
			line += "  (lifted early: the run stopped)"
		}
		if f.Via != "" {
			line += "  via " + f.Via
		}
		p("%s\n", line)
	}
}

func (p printer) nodes(nodes []Node) {
	if len(nodes) == 0 {
		return
	}
	p("\nnodes at the end of the run\n")
	for i, n := range nodes {
		more := ""
		if !n.QuarantinedUntil.IsZero() {
			more += ", quarantined until " + n.QuarantinedUntil.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		if n.Via != "" {
			more += ", dialled via proxy " + n.Via
		}
		p("  %d %-21s %-11s restarts %d, votes ok %d, refused %d, failed %d, timed out %d%s\n",
			i, n.Addr, n.State, n.Restarts, n.OK, n.Refused, n.Failed, n.TimedOut, more)
		if n.Error != "" {
			p("    last error: %s\n", n.Error)
		}
	}
	// The node counters are the engine's, per command: read alone,
	// "failed 23" on a clean run looks like 23 errors.
	p("  votes count every command sent to a master (acquires, extensions, releases, undos; warm-up included),\n" +
		"  and a reply after its timeout counts twice; \"failed\" is not an error count: it also holds the sends\n" +
		"  skipped once a vote was decided and the yeses of a quarantined master; the run's errors are under counters\n")
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

// RunConfig is every setting of a run, as summary.json's config holds it:
// keyed by flag name with '-' as '_', valued as the flag would be typed.
// The JSON names are the contract of the config object; add, never
// rename. The fields are in the order of their names, as summary.json has
// always listed them.
//
// The connection is recorded as far as it shapes the figures and a rerun:
// user (--user), tls, sni and insecure; not the CA or certificate files,
// and never the password.
type RunConfig struct {
	Check            bool    `json:"check"`
	Clients          int     `json:"clients"`
	Distribution     string  `json:"distribution"`
	Duration         string  `json:"duration"`
	Engine           string  `json:"engine"`
	Extend           bool    `json:"extend"`
	Fault            string  `json:"fault"`
	Fencing          bool    `json:"fencing"`
	Gate             bool    `json:"gate"`
	Hold             string  `json:"hold"`
	Insecure         bool    `json:"insecure"`
	KeyPrefix        string  `json:"key_prefix"`
	Label            string  `json:"label"`
	LocalMasters     int     `json:"local_masters"`
	Clusters         string  `json:"clusters,omitempty"`
	ClusterShards    int     `json:"cluster_shards,omitempty"`
	Lock             string  `json:"lock,omitempty"`
	Masters          string  `json:"masters"`
	Mode             string  `json:"mode"`
	NoWaitQuarantine bool    `json:"no_wait_quarantine"`
	Notify           bool    `json:"notify"`
	Ops              int64   `json:"ops"`
	Quarantine       string  `json:"quarantine"`
	Rate             float64 `json:"rate"`
	Resources        int     `json:"resources"`
	Seed             uint64  `json:"seed"`
	// Sentinel is the votes that are Sentinel-managed masters (--sentinel,
	// repeatable), after masters and clusters: each as the flag takes it,
	// MASTER@HOST:PORT,HOST:PORT, the votes separated by spaces. Absent
	// without Sentinel votes.
	Sentinel    string `json:"sentinel,omitempty"`
	SNI         string `json:"sni"`
	StartAt     string `json:"start_at"`
	TLS         bool   `json:"tls"`
	TTL         string `json:"ttl"`
	NodeTimeout string `json:"node_timeout,omitempty"`
	User        string `json:"user"`
	WaitTimeout string `json:"wait_timeout"`
	Warmup      string `json:"warmup"`
	Workers     int    `json:"workers"`
}

// Map is the config as the map that sweep.json and compare.json hold
// (they replace a setting by the list of its values).
func (c RunConfig) Map() map[string]any {
	b, _ := json.Marshal(c)
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	d.Decode(&m)
	return m
}

// UnmarshalJSON reads a config leniently: a setting of another type (an
// older merge wrote differing settings as "a,b") is left at its zero value
// instead of failing the whole summary.
func (c *RunConfig) UnmarshalJSON(b []byte) error {
	type plain RunConfig
	var p plain
	err := json.Unmarshal(b, &p)
	var te *json.UnmarshalTypeError
	if err != nil && !errors.As(err, &te) {
		return fmt.Errorf("results: read config: %w", err)
	}
	*c = RunConfig(p)
	return nil
}

// RunConfig is the summary's config.
func (s *Summary) RunConfig() RunConfig { return s.Config }
